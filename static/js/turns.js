/* The user's messages on the page: the bubble, its versions ‹ 1 / 2 › and the
 * Edit button, which turns the bubble into a box to change the text and send it
 * again (a new version: the old one and its replies stay reachable). */
(function (ns) {
  "use strict";

  const { footButton, versionNav } = ns.ui;

  /* A user message's article; `message` may be null for one not sent yet. */
  function userArticle(content, message) {
    const article = document.createElement("article");
    article.className = "msg msg-user";
    article.setAttribute("aria-label", "You said");
    const bubble = document.createElement("div");
    bubble.className = "bubble";
    bubble.dataset.role = "body";
    bubble.textContent = content;
    const foot = document.createElement("div");
    foot.className = "msg-foot";
    foot.dataset.role = "foot";
    article.append(bubble, foot);
    if (message) article.dataset.messageId = message.id;
    return article;
  }

  /* Versions and Edit under a sent message. hooks: onPick(id, otherId), onEdit(article, message, text). */
  function renderUserFoot(article, message, hooks) {
    const foot = article.querySelector("[data-role=foot]");
    foot.replaceChildren();
    if (!message) return;
    const busy = ns.busy ? ns.busy() : false;
    const nav = versionNav(message.id, message.versions, (id) => hooks.onPick(message.id, id), busy);
    if (nav) foot.append(nav);
    const edit = footButton("edit", "Edit this message", "edit");
    edit.disabled = busy;
    edit.addEventListener("click", () => startEdit(article, message, hooks));
    foot.append(edit);
  }

  function startEdit(article, message, hooks) {
    if (article.querySelector(".edit-box")) return;
    const bubble = article.querySelector("[data-role=body]");
    const box = document.createElement("form");
    box.className = "edit-box";
    const label = document.createElement("label");
    label.className = "sr-only";
    label.textContent = "Edit your message";
    const area = document.createElement("textarea");
    area.value = message.content;
    area.rows = Math.min(10, Math.max(2, message.content.split("\n").length));
    area.id = "edit-" + message.id;
    label.htmlFor = area.id;
    const actions = document.createElement("div");
    actions.className = "edit-actions";
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.className = "btn btn-small";
    cancel.textContent = "Cancel";
    const send = document.createElement("button");
    send.type = "submit";
    send.className = "btn btn-small btn-primary";
    send.textContent = "Send";
    actions.append(cancel, send);
    box.append(label, area, actions);
    bubble.hidden = true;
    article.querySelector("[data-role=foot]").hidden = true;
    article.insertBefore(box, bubble);
    const close = () => {
      box.remove();
      bubble.hidden = false;
      article.querySelector("[data-role=foot]").hidden = false;
    };
    cancel.addEventListener("click", close);
    area.addEventListener("keydown", (e) => {
      if (e.key === "Escape") { e.preventDefault(); close(); }
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); box.requestSubmit(); }
    });
    box.addEventListener("submit", (e) => {
      e.preventDefault();
      if (!area.value.trim() || (ns.busy && ns.busy())) return;
      close();
      hooks.onEdit(article, message, area.value);
    });
    area.focus();
    area.setSelectionRange(area.value.length, area.value.length);
  }

  ns.turns = { userArticle, renderUserFoot, startEdit };
})(window.ChatUI = window.ChatUI || {});

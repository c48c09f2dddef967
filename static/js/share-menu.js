/* Share… in the chat's menu: make a read-only link to the chat (its token is shown once),
 * see the live links and when each was made, revoke one (it stops working at once). */
(function (ns) {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const dialog = $("share-dialog"), list = $("share-list"), error = $("share-error");
  const fresh = $("share-new"), urlInput = $("share-url");

  const chatId = () => ns.state && ns.state.chat && ns.state.chat.id;
  const sharesUrl = () => "/api/chats/" + chatId() + "/shares/";

  function fail(res, fallback) {
    error.textContent = (res && ns.api.describe(res).text) || fallback;
    error.hidden = false;
  }

  function row(share) {
    const li = document.createElement("li");
    li.dataset.shareId = share.id;
    const made = document.createElement("span");
    made.textContent = "Link made " + new Date(share.created_at).toLocaleString();
    const revoke = document.createElement("button");
    revoke.type = "button";
    revoke.className = "btn btn-small btn-danger-ghost";
    revoke.textContent = "Revoke";
    revoke.setAttribute("aria-label", "Revoke the link made " + new Date(share.created_at).toLocaleString());
    revoke.addEventListener("click", async () => {
      revoke.disabled = true;
      const res = await ns.api.del(sharesUrl() + share.id + "/");
      if (!res.ok) { revoke.disabled = false; fail(res, "Could not revoke the link."); return; }
      li.remove();
      if (fresh.dataset.shareId === String(share.id)) fresh.hidden = true;
      ns.announce("Link revoked: it no longer opens this chat");
    });
    li.append(made, revoke);
    return li;
  }

  async function load() {
    list.replaceChildren();
    const res = await ns.api.get(sharesUrl());
    if (!res.ok) { fail(res, "Could not list the links."); return; }
    list.append(...res.data.filter((s) => !s.revoked_at).map(row));
  }

  $("share-open").addEventListener("click", () => {
    if (!chatId()) return;
    $("chat-menu").open = false;
    error.hidden = true;
    fresh.hidden = true;
    dialog.showModal();
    load();
  });

  $("share-create").addEventListener("click", async () => {
    error.hidden = true;
    const res = await ns.api.post(sharesUrl(), {});
    if (!res.ok) { fail(res, "Could not make a link."); return; }
    urlInput.value = res.data.url;
    fresh.dataset.shareId = res.data.id;
    fresh.hidden = false;
    list.prepend(row(res.data));
    urlInput.select();
    ns.announce("Link made");
  });

  $("share-copy").addEventListener("click", async () => {
    try { await navigator.clipboard.writeText(urlInput.value); ns.announce("Copied to the clipboard"); }
    catch (e) { urlInput.select(); }
  });
})(window.ChatUI = window.ChatUI || {});

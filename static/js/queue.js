/* Messages sent while a reply is being written (POST .../messages/ with "queue": true):
 * they wait above the composer, each with edit, withdraw and send now, and start in
 * order as the reply before them ends. One refused when its turn came (a budget used up)
 * stays there, saying why, with edit, retry and withdraw. Every window of the user follows
 * the chat's queue: a change arrives as `chat.queue` on the user's event stream, and the
 * queue is read again from the API (GET .../queue/). */
(function (ns) {
  "use strict";

  const box = document.getElementById("queue");
  const url = (rest) => "/api/chats/" + ns.state.chat.id + "/queue/" + (rest || "");
  const fail = (what, res) => ns.toast("Could not " + what + ": " + ns.api.describe(res).title.toLowerCase() + ".");

  async function refresh() {
    if (!ns.state.chat) return render([]);
    const res = await ns.api.get(url());
    if (res.ok) render(res.data.results);
  }

  const told = new Set();  // refused messages this window has announced
  function render(items) {
    if (box.querySelector(".queued.editing")) return;  // not under the user's hands; the next change shows it
    box.replaceChildren(...items.map(row));
    box.hidden = !items.length;
    for (const item of items) {
      if (item.state !== "refused" || told.has(item.id)) continue;
      told.add(item.id);
      ns.announce("A queued message was not sent: " + item.error);
    }
  }

  function row(item) {
    const refused = item.state === "refused";
    const li = document.createElement("li");
    li.className = "queued" + (refused ? " refused" : "");
    li.dataset.queuedId = item.id;
    const body = document.createElement("div");
    body.className = "queued-body";
    const text = document.createElement("p");
    text.className = "queued-text";
    text.textContent = item.content;
    body.append(text);
    if (item.error) {  // refused: why; still waiting after its turn came: what it waits for
      const why = document.createElement("p");
      why.className = "queued-why";
      why.textContent = (refused ? "Not sent: " : "Waiting: ") + item.error;
      body.append(why);
    }
    const actions = document.createElement("div");
    actions.className = "queued-actions";
    actions.append(button("Edit", "edit", () => edit(item, li, text)),
                   button("Withdraw", "withdraw", () => withdraw(item)),
                   refused ? button("Retry", "retry", () => retry(item))
                           : button("Send now", "send-now", () => sendNow(item)));
    li.append(body, actions);
    return li;
  }

  function button(label, action, onClick) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "queued-btn";
    b.dataset.action = action;
    b.textContent = label;
    b.addEventListener("click", onClick);
    return b;
  }

  /* Queue a message. `started(data)`: the reply ended meanwhile and it was sent at once;
   * `back(content)`: it was refused, and goes back to the message box. One POST at a time:
   * two messages typed quickly are queued in the order they were typed, not the order their
   * requests happen to arrive in. */
  let posting = Promise.resolve();
  function add(content, how) {
    const done = posting.then(() => post(content, how));
    posting = done.catch(() => {});
    return done;
  }

  async function post(content, { started, back }) {
    const res = await ns.api.post("/api/chats/" + ns.state.chat.id + "/messages/",
                                  { content, queue: true, ...(ns.sendExtra || {}) },
                                  { "Idempotency-Key": ns.api.newKey() });
    if (res.ok && res.data.queued_message) { refresh(); ns.announce("Message queued."); }
    else if (res.ok) started(res.data);
    else { back(content); ns.toast(ns.api.describe(res).title + "."); }
  }

  function edit(item, li, text) {
    li.classList.add("editing");
    const field = document.createElement("textarea");
    field.className = "queued-field";
    field.value = item.content;
    field.setAttribute("aria-label", "Edit the queued message");
    const actions = li.querySelector(".queued-actions");
    const done = () => { li.classList.remove("editing"); refresh(); };
    const save = async () => {
      const res = await ns.api.patch(url(item.id + "/"), { content: field.value });
      if (!res.ok) {
        fail("save the message", res);
        if (res.status === 400) return;  // the text to mend: the field stays open
      }
      done();  // saved, or it started or left the queue meanwhile: the panel shows the queue as it is
    };
    field.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); save(); }
      else if (e.key === "Escape") { e.preventDefault(); done(); }
    });
    actions.replaceChildren(button("Save", "save", save), button("Cancel", "cancel", done));
    text.replaceWith(field);
    field.focus();
  }

  async function withdraw(item) {
    const res = await ns.api.del(url(item.id + "/"));
    if (!res.ok && res.status !== 404) fail("withdraw the message", res);
    refresh();
  }

  async function retry(item) {
    const res = await ns.api.post(url(item.id + "/retry"));
    if (!res.ok) fail("queue the message again", res);
    else ns.announce("Message queued again.");
    refresh();
  }

  async function sendNow(item) {
    const res = await ns.api.post(url(item.id + "/send-now"));
    if (!res.ok) fail("send the message now", res);
    else { interrupted(res.data.interrupted_run); ns.announce("Stopping the reply; your message is next."); }
    refresh();
  }

  /* The reply a "send now" stops says "Interrupted" when it ends, in every window. */
  function interrupted(runId) {
    const reply = runId != null && ns.replies[runId];
    if (reply) reply.interrupt();
  }

  /* A `chat.queue` event: the queue changed (`interrupted`: the run a "send now" stops). */
  function onEvent(ev) {
    interrupted(ev.interrupted);
    refresh();
  }

  ns.queue = { refresh, add, onEvent };
})(window.ChatUI = window.ChatUI || {});

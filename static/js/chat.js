/* The chat page: boots the server-rendered conversation, sends messages through
 * the REST API, follows replies, and shows stop, retry and connection states.
 *
 * Actions on a message (regenerate, edit, continue, another version) go through
 * the REST API too; what other windows of the same user do arrives on the user's
 * event stream (live.js) and is shown here and in the sidebar.
 *
 * For tests and power users: `ChatUI.sendExtra = {max_tokens: 500}` is merged into
 * every message posted; `ChatUI.replies[runId].text` is a reply's raw text. */
(function (ns) {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const page = JSON.parse($("page-data").textContent);
  const toast = (text) => ns.toast(text), setConn = (s) => ns.setConn(s);
  const state = { chat: page.chat, active: null, sending: false, pending: 0, queued: [], moreBefore: page.more_before };
  const thread = $("thread"), input = $("composer-input"), form = $("composer");
  const sendBtn = $("send-btn"), stopBtn = $("stop-btn"), conn = $("conn"), empty = $("empty");
  const modelSelect = $("model-select"), hint = $("composer-hint"), count = $("composer-count");
  const LIMIT = page.max_message_chars;
  const showCount = () => ns.limit.show(count, input.value, LIMIT);

  ns.state = state;
  ns.page = page;
  ns.sendExtra = null;
  ns.busy = () => !!state.active || state.sending;

  ns.announce = (text) => {
    const region = $("announcer");
    region.textContent = "";
    setTimeout(() => { region.textContent = text; }, 60);
  };

  const hooks = {
    onActive(reply, on) {
      if (on) state.active = reply;
      else if (state.active === reply) { state.active = null; setConn(""); }
      const hadFocus = document.activeElement === stopBtn || document.activeElement === sendBtn;
      syncComposer();
      ns.thread.refreshFeet(hooks);
      if (hadFocus) input.focus();
    },
    onState(reply, s) { if (reply === state.active) setConn(s); },
    onRegenerate: (reply) => act(() => regenerate(reply)),
    onContinue: (reply) => act(() => carryOn(reply)),
    onPick: (id, other) => act(() => pick(id, other)),
    onEdit: (article, message, text) => act(() => edit(article, message, text)),
  };

  /* ---- boot ------------------------------------------------------------ */

  function boot() {
    for (const m of page.messages) {
      const article = ns.thread.articleOf(m.id);
      if (article) ns.thread.mount(article, m, hooks);
    }
    ns.thread.watchTop(hooks);
    ns.scroll.toBottom();
    syncComposer();
    if (!matchMedia("(max-width: 820px)").matches) input.focus({ preventScroll: true });
    ns.live.start(page.events_after, onEvent);
    ns.queue.refresh();
  }

  /* ---- composer -------------------------------------------------------- */

  function syncComposer() {
    const busy = !!state.active;
    sendBtn.hidden = busy;
    stopBtn.hidden = !busy;
    stopBtn.disabled = busy && state.active.stopping === true;
    sendBtn.disabled = busy || state.sending || !input.value.trim() || showCount() > LIMIT;
    hint.replaceChildren(...(busy ? HINT_BUSY : HINT_IDLE).map((part) => {
      if (!part.startsWith("#")) return document.createTextNode(part);
      const key = document.createElement("kbd");
      key.textContent = part.slice(1);
      return key;
    }));
  }

  const HINT_IDLE = ["#Enter", " to send · ", "#Shift", "+", "#Enter", " for a new line"];
  const HINT_BUSY = ["Writing a reply… ", "#Enter", " to queue a message · ", "#Esc", " to stop"];

  function autosize() {
    input.style.height = "auto";
    input.style.height = Math.min(input.scrollHeight, window.innerHeight * 0.4) + "px";
  }

  input.addEventListener("input", () => { autosize(); syncComposer(); });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing && e.keyCode !== 229) {
      e.preventDefault();
      submit();
    } else if (e.key === "Escape" && state.active) {
      e.preventDefault();
      stop();
    }
  });
  form.addEventListener("submit", (e) => { e.preventDefault(); submit(); });
  stopBtn.addEventListener("click", () => stop());

  async function stop() {
    const reply = state.active;
    if (!reply || reply.stopping) return;
    reply.stopping = true;
    syncComposer();
    const res = await reply.stop();
    if (!res.ok) {
      reply.stopping = false;
      syncComposer();
      toast("Could not stop the reply: " + ns.api.describe(res).title.toLowerCase() + ".");
    }
  }

  /* ---- sending --------------------------------------------------------- */

  function submit() {
    const content = input.value;
    if (!content.trim() || state.sending || (state.active && !state.chat)) return;
    if (showCount() > LIMIT) {  // kept in the box, with how much to cut
      count.setAttribute("role", "alert");
      ns.announce(count.textContent);
      return;
    }
    count.removeAttribute("role");
    input.value = "";
    autosize();
    input.focus();
    if (state.active) ns.queue.add(content, { started: (data) => started(data, addUserBubble(content)), back });
    else post({ content, key: ns.api.newKey(), el: addUserBubble(content) });
  }

  /* A message not queued goes back to the message box (before a draft typed meanwhile). */
  function back(content) { input.value = content + (input.value ? "\n\n" + input.value : ""); syncComposer(); }

  function addUserBubble(content) {
    empty.hidden = true;
    const article = ns.turns.userArticle(content, null);
    thread.append(article);
    ns.scroll.toBottom();
    return article;
  }

  /* A turn's answer: mount the user's message and follow the new reply. */
  function started(data, userEl) {
    if (userEl) ns.thread.mount(userEl, data.user_message, hooks);
    const m = { ...data.assistant_message, run: data.run };
    const article = ns.Reply.article(m);
    thread.append(article);
    ns.thread.mount(article, m, hooks);
    ns.scroll.toBottom();
    ns.announce("Message sent. The assistant is writing.");
    refreshChat();
  }

  async function post(turn) {
    state.sending = true;
    state.pending++;
    syncComposer();
    if (turn.notice) { turn.notice.remove(); turn.notice = null; }
    const message = { content: turn.content, ...(ns.sendExtra || {}) };
    let res;
    if (state.chat) {
      res = await ns.api.post("/api/chats/" + state.chat.id + "/messages/", message, { "Idempotency-Key": turn.key });
    } else {  // the chat and its first message in one request: a refused message leaves no empty chat
      res = await ns.api.post("/api/chats/", { model: modelSelect.value, ...ns.settings.forNewChat(), message },
                              { "Idempotency-Key": turn.key });
      if (res.ok) {
        const { run, user_message, assistant_message, ...chat } = res.data;
        adoptChat(chat);
      }
    }
    state.sending = false;
    if (res.ok && res.data.queued_message) {  // messages were waiting in the chat's queue: it joined them
      turn.el.remove();
      ns.queue.refresh();
      ns.announce("Message queued behind the messages waiting.");
    } else if (res.ok) {
      turn.el.classList.remove("unsent");
      await ns.chatMenu.restoreIfArchived();  // before the chat is read again (started), which would list it archived
      started(res.data, turn.el);
    } else {
      turn.el.classList.add("unsent");
      turn.notice = ns.notice({ ...ns.api.describe(res), retry: true }, () => post(turn), () => editUnsent(turn));
      turn.el.after(turn.notice);
      ns.scroll.toBottom();
    }
    done();
  }

  /* A message that was not sent goes back to the message box, to change and send again
   * (a draft typed meanwhile stays, after it). */
  function editUnsent(turn) {
    if (turn.notice) turn.notice.remove();
    turn.el.remove();
    const draft = input.value.trim() ? "\n\n" + input.value : "";
    input.value = turn.content + draft;
    input.dispatchEvent(new Event("input"));
    input.focus();
    input.setSelectionRange(turn.content.length, turn.content.length);
    if (!ns.thread.articles().length && !thread.querySelector(".msg")) empty.hidden = false;
  }

  /* ---- actions on a message: regenerate, edit, continue, another version */

  async function act(fn) {
    if (ns.busy() || !state.chat) return;
    state.sending = true;
    state.pending++;
    syncComposer();
    ns.thread.refreshFeet(hooks);
    try {
      const res = await fn();
      if (res && !res.ok) toast(ns.api.describe(res).title + ".");
    } finally {
      state.sending = false;
      done();
    }
  }

  function done() {
    state.pending--;
    syncComposer();
    ns.thread.refreshFeet(hooks);
    const queued = state.queued.splice(0);
    for (const ev of queued) onChatPath(ev);
  }

  const msgUrl = (id, action) => "/api/chats/" + state.chat.id + "/messages/" + id + "/" + action;

  async function regenerate(reply) {
    const res = await ns.api.post(msgUrl(reply.message.id, "regenerate"), { ...pick_(ns.sendExtra, "max_tokens") },
                                  { "Idempotency-Key": ns.api.newKey() });
    if (!res.ok) return res;
    ns.thread.truncateFrom(reply.el);
    started(res.data, null);
    return res;
  }

  async function edit(article, message, text) {
    const res = await ns.api.post(msgUrl(message.id, "edit"), { content: text, ...(ns.sendExtra || {}) },
                                  { "Idempotency-Key": ns.api.newKey() });
    if (!res.ok) return res;
    ns.thread.truncateFrom(article);
    started(res.data, addUserBubble(text));
    return res;
  }

  async function carryOn(reply) {
    const res = await ns.api.post(msgUrl(reply.message.id, "continue"), pick_(ns.sendExtra, "max_tokens"),
                                  { "Idempotency-Key": ns.api.newKey() });
    if (!res.ok) return res;
    const m = res.data.assistant_message;
    ns.msgs.set(m.id, m);
    reply.setMessage(m);
    reply.setRun(res.data.run);
    reply.text = m.content;
    reply.feedback = null;  // a new run: its reply is rated anew
    ns.replies[res.data.run.id] = reply;
    reply.follow(null);
    ns.announce("Continuing the reply.");
    return res;
  }

  async function pick(id, other) {
    const res = await ns.api.post(msgUrl(other, "select"));
    if (!res.ok) return res;
    const article = ns.thread.articleOf(id);
    ns.thread.insert(res.data.results, hooks, article);
    ns.thread.truncateFrom(article);
    const shown = ns.thread.articleOf(other);
    if (shown) shown.scrollIntoView({ block: "nearest" });
    ns.announce("Showing version " + (res.data.results[0].versions.indexOf(other) + 1) + " of " +
                res.data.results[0].versions.length);
    return res;
  }

  function pick_(obj, ...names) {
    const out = {};
    for (const n of names) if (obj && obj[n] !== undefined) out[n] = obj[n];
    return out;
  }

  /* ---- what other windows do ------------------------------------------ */

  function onEvent(ev) {
    ns.sidebar.onEvent(ev);
    if (!state.chat || ev.chat !== state.chat.id) return;
    if (ev.type === "chat.deleted") { if (!state.leaving) location.assign("/"); return; }  // gone elsewhere
    if (ev.type === "chat.updated") { refreshChat(); return; }
    if (ev.type === "chat.queue") { ns.queue.onEvent(ev); return; }
    if (ev.type === "chat.path") onChatPath(ev);
  }

  function onChatPath(ev) {
    if (state.pending > 0) { state.queued.push(ev); return; }  // our own request's echo comes after its answer
    const last = ns.thread.articles().at(-1);
    if (last && Number(last.dataset.messageId) === ev.leaf) return;  // already shown
    ns.thread.refreshBelow(ev.anchor, ev.leaf, hooks);
  }

  function adoptChat(chat) {
    state.chat = chat;
    history.replaceState(null, "", "/c/" + chat.id + "/");
    ns.sidebar.adopt(chat);
  }

  async function refreshChat() {
    const res = await ns.api.get("/api/chats/" + state.chat.id + "/");
    if (res.ok) { state.chat = res.data; ns.sidebar.adopt(res.data); }
  }

  boot();
})(window.ChatUI = window.ChatUI || {});

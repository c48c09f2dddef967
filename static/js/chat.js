/* The chat page: boots the server-rendered conversation, sends messages through
 * the REST API, follows replies, and shows stop, retry and connection states.
 *
 * For tests and power users: `ChatUI.sendExtra = {max_tokens: 500}` is merged into
 * every message posted; `ChatUI.replies[runId].text` is a reply's raw text. */
(function (ns) {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const page = JSON.parse($("page-data").textContent);
  const state = { chat: page.chat, active: null, sending: false };
  const thread = $("thread"), input = $("composer-input"), form = $("composer");
  const sendBtn = $("send-btn"), stopBtn = $("stop-btn"), conn = $("conn"), empty = $("empty");
  const modelSelect = $("model-select"), modelState = $("model-state"), jump = $("jump"), hint = $("composer-hint");

  ns.state = state;
  ns.replies = {};
  ns.sendExtra = null;

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
      if (hadFocus) input.focus();
    },
    onState(reply, s) { if (reply === state.active) setConn(s); },
    onRetry(reply) { retryAfterFailure(reply); },
  };

  /* ---- boot ------------------------------------------------------------ */

  function boot() {
    for (const m of page.messages) {
      if (m.role !== "assistant") continue;
      const article = thread.querySelector('[data-message-id="' + m.id + '"]');
      const reply = new ns.Reply(article, { run: m.run, text: m.content, hooks });
      reply.render();
      if (!m.run) continue;
      ns.replies[m.run.id] = reply;
      if (reply.active) reply.follow(m.live); else reply.renderFoot();
    }
    ns.scroll.toBottom();
    syncComposer();
    if (!matchMedia("(max-width: 820px)").matches) input.focus({ preventScroll: true });
  }

  /* ---- composer -------------------------------------------------------- */

  function syncComposer() {
    const busy = !!state.active;
    sendBtn.hidden = busy;
    stopBtn.hidden = !busy;
    stopBtn.disabled = busy && state.active.stopping === true;
    sendBtn.disabled = busy || state.sending || !input.value.trim();
    hint.replaceChildren(...(busy ? HINT_BUSY : HINT_IDLE).map((part) => {
      if (!part.startsWith("#")) return document.createTextNode(part);
      const key = document.createElement("kbd");
      key.textContent = part.slice(1);
      return key;
    }));
  }

  const HINT_IDLE = ["#Enter", " to send · ", "#Shift", "+", "#Enter", " for a new line"];
  const HINT_BUSY = ["Writing a reply… ", "#Esc", " or the stop button to stop it"];

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
    if (!content.trim() || state.active || state.sending) return;
    input.value = "";
    autosize();
    input.focus();
    post({ content, key: ns.api.newKey(), el: addUserBubble(content) });
  }

  function addUserBubble(content, before) {
    empty.hidden = true;
    const article = document.createElement("article");
    article.className = "msg msg-user";
    article.setAttribute("aria-label", "You said");
    const bubble = document.createElement("div");
    bubble.className = "bubble";
    bubble.textContent = content;
    article.append(bubble);
    thread.insertBefore(article, before || null);
    ns.scroll.toBottom();
    return article;
  }

  async function post(turn) {
    state.sending = true;
    syncComposer();
    if (turn.notice) { turn.notice.remove(); turn.notice = null; }
    let res = state.chat ? null : await ns.api.post("/api/chats/", { model: modelSelect.value });
    if (res && res.ok) adoptChat({ ...res.data, title: res.data.title || turn.content.split(/\s+/).join(" ").trim().slice(0, 60) });
    if (state.chat) {
      res = await ns.api.post("/api/chats/" + state.chat.id + "/messages/",
                              { content: turn.content, ...(ns.sendExtra || {}) }, { "Idempotency-Key": turn.key });
    }
    state.sending = false;
    if (res.ok) {
      turn.el.classList.remove("unsent");
      const reply = ns.Reply.create(thread, res.data.run, hooks);
      ns.replies[res.data.run.id] = reply;
      reply.follow(null);
      ns.scroll.toBottom();
      ns.announce("Message sent. The assistant is writing.");
      refreshChat();
    } else {
      turn.el.classList.add("unsent");
      turn.notice = ns.notice(ns.api.describe(res), () => post(turn));
      turn.el.after(turn.notice);
      ns.scroll.toBottom();
      if (res.status === 409) attachRunning(turn.el);
    }
    syncComposer();
  }

  /* A failed reply's Retry: ask again with the same words (a new turn). */
  function retryAfterFailure(reply) {
    let node = reply.el.previousElementSibling;
    while (node && !node.classList.contains("msg-user")) node = node.previousElementSibling;
    if (!node || state.active || state.sending) return;
    const notice = reply.el.querySelector(".notice");
    if (notice) notice.remove();
    const content = node.querySelector(".bubble").textContent;
    post({ content, key: ns.api.newKey(), el: addUserBubble(content) });
  }

  /* A 409: another window started a reply here. Show it and follow it. */
  async function attachRunning(beforeEl) {
    const base = "/api/chats/" + state.chat.id + "/messages/";
    const head = await ns.api.get(base + "?limit=1");
    if (!head.ok) return;
    const res = await ns.api.get(base + "?limit=2&offset=" + Math.max(0, head.data.count - 2));
    if (!res.ok) return;
    const [userMsg, botMsg] = res.data.results;
    if (!botMsg || !botMsg.run || ns.replies[botMsg.run.id] || ["completed", "failed", "cancelled"].includes(botMsg.run.status)) return;
    if (userMsg && userMsg.role === "user") addUserBubble(userMsg.content, beforeEl);
    const reply = ns.Reply.create(thread, botMsg.run, hooks);
    thread.insertBefore(reply.el, beforeEl);
    ns.replies[botMsg.run.id] = reply;
    reply.follow(null);
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

  /* ---- model picker ---------------------------------------------------- */

  function showModelState() {
    const option = modelSelect.selectedOptions[0];
    const up = option && option.dataset.up === "1";
    modelState.dataset.up = up ? "1" : "0";
    modelState.textContent = up ? "Available" : "Unavailable";
  }

  modelSelect.addEventListener("change", async () => {
    showModelState();
    if (!state.chat) return;
    const previous = state.chat.model;
    const res = await ns.api.patch("/api/chats/" + state.chat.id + "/", { model: modelSelect.value });
    if (res.ok) { state.chat = res.data; return; }
    modelSelect.value = previous;
    showModelState();
    toast(ns.api.describe(res).title + ".");
  });

  /* ---- connection state, scrolling, copying, suggestions -------------- */

  function setConn(s) {
    conn.replaceChildren();
    if (s !== "reconnecting" && s !== "offline") return;
    const pill = document.createElement("span");
    pill.className = "conn-pill";
    pill.dataset.state = s;
    const spin = document.createElement("span");
    spin.className = "spinner";
    spin.setAttribute("aria-hidden", "true");
    pill.append(spin, document.createTextNode(
      s === "offline" ? "You’re offline. The reply keeps going; it will catch up." : "Reconnecting…"));
    conn.append(pill);
  }

  function toast(text) {
    const box = document.createElement("div");
    box.className = "toasts";
    box.setAttribute("role", "alert");
    const p = document.createElement("p");
    p.className = "toast toast-error";
    p.textContent = text;
    box.append(p);
    $("main").append(box);
    setTimeout(() => box.remove(), 6000);
  }

  $("scroller").addEventListener("scroll", () => { jump.hidden = ns.scroll.atBottom(); }, { passive: true });
  jump.addEventListener("click", () => {
    // An instant jump: a smooth one aims at the height of the moment it starts, and text
    // streaming in meanwhile would leave the reader short of the bottom, no longer followed.
    ns.scroll.toBottom();
    input.focus({ preventScroll: true });
  });

  async function copyText(text) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch (e) {
      const area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.append(area);
      area.select();
      const ok = document.execCommand("copy");
      area.remove();
      return ok;
    }
  }

  thread.addEventListener("click", async (e) => {
    const btn = e.target.closest("[data-copy]");
    if (btn) {
      const text = btn.dataset.copy === "code"
        ? btn.closest(".code-block").querySelector("code").textContent
        : ns.replies[btn.closest("[data-run-id]").dataset.runId].text;
      const ok = await copyText(text);
      ns.announce(ok ? "Copied to the clipboard" : "Could not copy");
      btn.classList.add(ok ? "copied" : "copy-failed");
      setTimeout(() => btn.classList.remove("copied", "copy-failed"), 1600);
      return;
    }
    const suggestion = e.target.closest("[data-suggest]");
    if (suggestion) {
      input.value = suggestion.dataset.suggest;
      autosize();
      syncComposer();
      input.focus();
    }
  });

  ns.toast = toast;
  boot();
})(window.ChatUI = window.ChatUI || {});

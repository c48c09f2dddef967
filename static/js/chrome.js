/* The chat page's furniture: the model picker, the connection pill, toasts, the
 * jump-to-latest button, copying (a code block or a whole reply) and the
 * suggestions of an empty chat. Loaded before chat.js, which reads ns.toast and ns.setConn. */
(function (ns) {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const thread = $("thread"), input = $("composer-input"), conn = $("conn"), jump = $("jump");
  const modelSelect = $("model-select"), modelState = $("model-state");

  /* ---- model picker ---------------------------------------------------- */

  function showModelState() {
    const option = modelSelect.selectedOptions[0];
    const up = option && option.dataset.up === "1";
    modelState.dataset.up = up ? "1" : "0";
    modelState.textContent = up ? "Available" : "Unavailable";
  }

  modelSelect.addEventListener("change", async () => {
    showModelState();
    if (!ns.state.chat) return;
    const previous = ns.state.chat.model;
    const res = await ns.api.patch("/api/chats/" + ns.state.chat.id + "/", { model: modelSelect.value });
    if (res.ok) { ns.state.chat = res.data; return; }
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

  /* A short message over the conversation: an error, or with tone "info" a plain note. */
  function toast(text, tone) {
    const box = document.createElement("div");
    box.className = "toasts";
    box.setAttribute("role", tone === "info" ? "status" : "alert");
    const p = document.createElement("p");
    p.className = tone === "info" ? "toast" : "toast toast-error";
    p.textContent = text;
    box.append(p);
    $("main").append(box);
    setTimeout(() => box.remove(), 6000);
  }

  const showJump = () => { jump.hidden = ns.scroll.atBottom(); };
  $("scroller").addEventListener("scroll", showJump, { passive: true });
  // An edit or another version can shorten the thread to the bottom with no scroll event at all.
  new ResizeObserver(showJump).observe(thread);
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
      input.dispatchEvent(new Event("input"));  // the composer sizes itself and enables Send
      input.focus();
    }
  });

  ns.toast = toast;
  ns.setConn = setConn;
})(window.ChatUI = window.ChatUI || {});

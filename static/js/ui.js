/* Small pieces the chat page shares: scrolling, error notices, icons, the
 * ‹ 1 / 2 › version switcher and the footer buttons under a message. */
(function (ns) {
  "use strict";

  /* Stick to the bottom only when the reader is already there. */
  const scroll = {
    el: () => document.getElementById("scroller"),
    atBottom() { const s = this.el(); return s.scrollHeight - s.scrollTop - s.clientHeight < 72; },
    toBottom() { const s = this.el(); s.scrollTop = s.scrollHeight; },
  };

  const ICONS = {
    alert: '<svg viewBox="0 0 24 24" width="18" height="18" aria-hidden="true"><circle cx="12" cy="12" r="9" fill="none" stroke="currentColor" stroke-width="2"/><path d="M12 7.5v5.5M12 16.5v.01" stroke="currentColor" stroke-width="2.2" stroke-linecap="round"/></svg>',
    copy: '<svg viewBox="0 0 24 24" width="15" height="15" aria-hidden="true"><rect x="8" y="8" width="12" height="12" rx="2.5" fill="none" stroke="currentColor" stroke-width="1.8"/><path d="M16 8V6.5A2.5 2.5 0 0 0 13.5 4h-7A2.5 2.5 0 0 0 4 6.5v7A2.5 2.5 0 0 0 6.5 16H8" fill="none" stroke="currentColor" stroke-width="1.8"/></svg>',
    regenerate: '<svg viewBox="0 0 24 24" width="15" height="15" aria-hidden="true"><path d="M20 11a8 8 0 1 0-2.3 5.7M20 5v6h-6" fill="none" stroke="currentColor" stroke-width="1.9" stroke-linecap="round" stroke-linejoin="round"/></svg>',
    edit: '<svg viewBox="0 0 24 24" width="15" height="15" aria-hidden="true"><path d="M4 20h4L19 9l-4-4L4 16v4zM13.5 6.5l4 4" fill="none" stroke="currentColor" stroke-width="1.8" stroke-linejoin="round"/></svg>',
    up: '<svg viewBox="0 0 24 24" width="15" height="15" aria-hidden="true"><path d="M7 10v10M7 10l4-7a2 2 0 0 1 2.8 1.9L13 9h5.3a2 2 0 0 1 2 2.4l-1.4 7A2 2 0 0 1 17 20H7H4V10h3z" fill="none" stroke="currentColor" stroke-width="1.8" stroke-linejoin="round"/></svg>',
    down: '<svg viewBox="0 0 24 24" width="15" height="15" aria-hidden="true"><path d="M17 14V4M17 14l-4 7a2 2 0 0 1-2.8-1.9L11 15H5.7a2 2 0 0 1-2-2.4l1.4-7A2 2 0 0 1 7 4h10h3v10h-3z" fill="none" stroke="currentColor" stroke-width="1.8" stroke-linejoin="round"/></svg>',
    continue: '<svg viewBox="0 0 24 24" width="15" height="15" aria-hidden="true"><path d="M5 12h12M13 7l5 5-5 5" fill="none" stroke="currentColor" stroke-width="1.9" stroke-linecap="round" stroke-linejoin="round"/></svg>',
  };

  function span(className, text) {
    const s = document.createElement("span");
    if (className) s.className = className;
    s.textContent = text;
    return s;
  }

  /* A footer button: an icon (a constant, never data) and a label for screen readers. */
  function footButton(action, label, icon, text) {
    const btn = document.createElement("button");
    btn.type = "button";
    btn.className = "foot-btn";
    btn.dataset.action = action;
    btn.setAttribute("aria-label", label);
    btn.title = label;
    btn.innerHTML = ICONS[icon];
    if (text) btn.append(span("foot-btn-text", text));
    return btn;
  }

  /* ‹ i / n ›: `versions` are the ids of a turn's versions, `id` the one shown;
   * onPick(otherId) shows another. Nothing when there is only one version. */
  function versionNav(id, versions, onPick, disabled) {
    if (!versions || versions.length < 2) return null;
    const at = versions.indexOf(id);
    const nav = document.createElement("div");
    nav.className = "versions";
    nav.setAttribute("role", "group");
    nav.setAttribute("aria-label", "Version " + (at + 1) + " of " + versions.length);
    const arrow = (dir, label, text) => {
      const btn = document.createElement("button");
      btn.type = "button";
      btn.className = "version-btn";
      btn.dataset.version = dir;
      btn.setAttribute("aria-label", label);
      btn.textContent = text;
      const target = versions[at + (dir === "prev" ? -1 : 1)];
      btn.disabled = disabled || target === undefined;
      btn.addEventListener("click", () => { if (!btn.disabled) onPick(target); });
      return btn;
    };
    nav.append(arrow("prev", "Previous version", "‹"), span("version-count", (at + 1) + " / " + versions.length),
               arrow("next", "Next version", "›"));
    return nav;
  }

  /* An error in words, with a Retry button (counting down Retry-After when given) and,
   * with `onEdit`, an Edit button. */
  function notice(info, onRetry, onEdit) {
    const box = document.createElement("div");
    box.className = "notice" + (info.tone === "warn" ? " warn" : "");
    box.setAttribute("role", "alert");
    const icon = document.createElement("span");
    icon.className = "notice-icon";
    icon.innerHTML = ICONS.alert;
    const body = document.createElement("div");
    body.className = "notice-body";
    const title = document.createElement("p");
    title.className = "notice-title";
    title.textContent = info.title;
    const text = document.createElement("p");
    text.className = "notice-text";
    text.textContent = info.text || "";
    body.append(title, text);
    box.append(icon, body);
    const actions = document.createElement("div");
    actions.className = "notice-actions";
    if (info.signIn) {
      const a = document.createElement("a");
      a.className = "btn btn-small";
      a.href = "/login/?next=" + encodeURIComponent(location.pathname);
      a.textContent = "Sign in";
      actions.append(a);
    }
    if (onEdit) {
      const btn = document.createElement("button");
      btn.type = "button";
      btn.className = "btn btn-small";
      btn.dataset.action = "edit";
      btn.textContent = "Edit";
      btn.setAttribute("aria-label", "Edit this message");
      btn.addEventListener("click", onEdit);
      actions.append(btn);
    }
    if (info.retry && onRetry) {
      const btn = document.createElement("button");
      btn.type = "button";
      btn.className = "btn btn-small";
      btn.dataset.action = "retry";
      btn.addEventListener("click", () => { if (!btn.disabled) onRetry(); });
      actions.append(btn);
      countdown(btn, info.retryAfter || 0);
    }
    if (actions.childElementCount) box.append(actions);
    return box;
  }

  function countdown(btn, seconds) {
    let left = seconds;
    const tick = () => {
      btn.disabled = left > 0;
      btn.textContent = left > 0 ? "Retry in " + left + " s" : "Retry";
      btn.setAttribute("aria-label", left > 0 ? "Retry possible in " + left + " seconds" : "Retry");
      if (left > 0) {
        left--;
        setTimeout(() => { if (btn.isConnected) tick(); }, 1000);
      }
    };
    tick();
  }

  ns.scroll = scroll;
  ns.notice = notice;
  ns.ui = { span, footButton, versionNav, ICONS };
})(window.ChatUI = window.ChatUI || {});

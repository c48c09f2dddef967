/* One assistant reply on the page: its raw text, its Markdown rendering (at most
 * once per frame while tokens stream in), its stream, its footer (model, tokens,
 * time to first token, tokens per second) and its error notice. */
(function (ns) {
  "use strict";

  const TERMINAL = ["completed", "failed", "cancelled"];
  const FINISH_BADGES = { length: "Reached the length limit", budget: "Stopped: budget used up" };
  const STATS_POLL_MS = [80, 200, 400, 800, 1500, 3000];

  /* Stick to the bottom only when the reader is already there. */
  const scroll = {
    el: () => document.getElementById("scroller"),
    atBottom() { const s = this.el(); return s.scrollHeight - s.scrollTop - s.clientHeight < 72; },
    toBottom() { const s = this.el(); s.scrollTop = s.scrollHeight; },
  };

  function formatMs(ms) {
    if (ms == null) return null;
    return ms < 1000 ? Math.round(ms) + " ms" : (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
  }

  function span(className, text) {
    const s = document.createElement("span");
    if (className) s.className = className;
    s.textContent = text;
    return s;
  }

  function statsNode(run, completionTokens) {
    const box = document.createElement("span");
    box.className = "stats";
    box.append(span("stat-model", run.model));
    const tokens = run.completion_tokens || completionTokens || 0;
    box.append(span("stat-tokens", tokens + (tokens === 1 ? " token" : " tokens")));
    if (run.ttft_ms != null) box.append(span("stat-ttft", formatMs(run.ttft_ms) + " to first token"));
    if (run.tokens_per_second != null) box.append(span("stat-tps", run.tokens_per_second.toFixed(1) + " tok/s"));
    return box;
  }

  const ICON_ALERT = '<svg viewBox="0 0 24 24" width="18" height="18" aria-hidden="true"><circle cx="12" cy="12" r="9" fill="none" stroke="currentColor" stroke-width="2"/><path d="M12 7.5v5.5M12 16.5v.01" stroke="currentColor" stroke-width="2.2" stroke-linecap="round"/></svg>';

  const ICON_COPY = '<svg viewBox="0 0 24 24" width="15" height="15" aria-hidden="true"><rect x="8" y="8" width="12" height="12" rx="2.5" fill="none" stroke="currentColor" stroke-width="1.8"/><path d="M16 8V6.5A2.5 2.5 0 0 0 13.5 4h-7A2.5 2.5 0 0 0 4 6.5v7A2.5 2.5 0 0 0 6.5 16H8" fill="none" stroke="currentColor" stroke-width="1.8"/></svg>';

  /* An error in words, with a Retry button (counting down Retry-After when given). */
  function notice(info, onRetry) {
    const box = document.createElement("div");
    box.className = "notice" + (info.tone === "warn" ? " warn" : "");
    box.setAttribute("role", "alert");
    const icon = document.createElement("span");
    icon.className = "notice-icon";
    icon.innerHTML = ICON_ALERT;  // a constant, never data
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

  class Reply {
    /* `article` is a server-rendered or new .msg-assistant; `hooks` are the page's:
     * onActive(reply, bool), onState(reply, state), onRetry(reply). */
    constructor(article, { run, text, hooks }) {
      this.el = article;
      this.body = article.querySelector("[data-role=body]");
      this.foot = article.querySelector("[data-role=foot]");
      this.run = run;
      this.text = text || "";
      this.hooks = hooks;
      this.stream = null;
      this.frame = 0;
      this.renders = 0;
      this.tokenEvents = 0;
      this.completionTokens = 0;
    }

    static create(thread, run, hooks) {
      const article = document.createElement("article");
      article.className = "msg msg-assistant";
      article.setAttribute("aria-label", "Assistant replied");
      const body = document.createElement("div");
      body.className = "prose";
      body.dataset.role = "body";
      const foot = document.createElement("div");
      foot.className = "msg-foot";
      foot.dataset.role = "foot";
      article.append(body, foot);
      thread.append(article);
      const reply = new Reply(article, { run, text: "", hooks });
      reply.setRun(run);
      return reply;
    }

    get active() { return !!this.run && !TERMINAL.includes(this.run.status); }

    setRun(run) {
      this.run = run;
      this.el.dataset.runId = run.id;
      this.el.dataset.status = run.status;
    }

    /* Follow the run's events from `live` ({have, last_event_id}) or from the start. */
    follow(live) {
      this.completionTokens = live ? live.have : 0;
      this.body.classList.toggle("pending", !this.text);
      // A model starting from zero: say why nothing comes yet (the first token replaces it).
      if (this.run.waiting_for_worker && !this.text) this.body.textContent = "Waiting for a worker of " + this.run.model + " to start…";
      this.body.classList.add("streaming");
      this.el.setAttribute("aria-busy", "true");
      this.hooks.onActive(this, true);
      this.stream = new ns.RunStream({
        eventsUrl: this.run.events_url, runUrl: "/api/runs/" + this.run.id + "/",
        have: live ? live.have : 0, lastEventId: live ? live.last_event_id : null,
        handlers: {
          onToken: (text) => this._token(text),
          onSnapshot: (text, n) => { this.text = text; this.completionTokens = n; this._schedule(); },
          onDone: (d) => this._done(d),
          onFail: (err) => this._failed(err),
          onState: (state) => this.hooks.onState(this, state),
        },
      }).start();
    }

    stop() {
      return ns.api.post("/api/runs/" + this.run.id + "/cancel");
    }

    _token(text) {
      if (ns.metrics.firstLiveTokenMs == null) ns.metrics.firstLiveTokenMs = performance.now();
      this.tokenEvents++;
      this.completionTokens = this.stream.have;
      this.text += text;
      this._schedule();
    }

    _schedule() {
      if (!this.frame) this.frame = requestAnimationFrame(() => { this.frame = 0; this.render(); });
    }

    render() {
      const stick = scroll.atBottom();
      this.body.classList.remove("raw");
      this.body.classList.toggle("pending", !this.text && this.active);
      ns.markdown.renderInto(this.body, this.text);
      this.renders++;
      if (stick) scroll.toBottom();
    }

    _settle(status) {
      if (this.frame) { cancelAnimationFrame(this.frame); this.frame = 0; }
      this.setRun({ ...this.run, status });
      this.body.classList.remove("streaming", "pending");
      this.el.removeAttribute("aria-busy");
      this.render();
      this.hooks.onActive(this, false);
    }

    _done(d) {
      const status = d.finish_reason === "cancelled" ? "cancelled" : "completed";
      this.completionTokens = (d.usage && d.usage.completion_tokens) || this.completionTokens;
      this._settle(status);
      this.renderFoot();
      ns.announce("Reply " + (status === "cancelled" ? "stopped" : "finished") + ": " + this.body.textContent.slice(0, 600));
      this._pollStats(0);
    }

    _failed(err) {
      if (err.status) {  // not the run failing: this page may no longer read it (signed out, deleted)
        this._settle(this.run.status);
        this.el.append(notice(ns.api.describe({ status: err.status, error: err }), null));
        return;
      }
      this._settle("failed");
      this.run.error = (err.code || "error") + ": " + (err.message || "");
      this.renderFoot();
      this._pollStats(0);
    }

    /* The run's figures are saved just after its terminal event; fetch them then. */
    async _pollStats(attempt) {
      if (attempt >= STATS_POLL_MS.length) return;
      await new Promise((r) => setTimeout(r, STATS_POLL_MS[attempt]));
      const res = await ns.api.get("/api/runs/" + this.run.id + "/");
      if (res.ok && TERMINAL.includes(res.data.status)) {
        this.setRun(res.data);
        this.renderFoot();
        return;
      }
      this._pollStats(attempt + 1);
    }

    renderFoot() {
      const run = this.run;
      this.foot.replaceChildren();
      const old = this.el.querySelector(".notice");
      if (old) old.remove();
      if (!run || !TERMINAL.includes(run.status)) return;
      if (this.text) {
        const copy = document.createElement("button");
        copy.type = "button";
        copy.className = "foot-btn";
        copy.dataset.copy = "reply";
        copy.setAttribute("aria-label", "Copy this reply");
        copy.title = "Copy";
        copy.innerHTML = ICON_COPY;  // a constant, never data
        this.foot.append(copy);
      }
      const badge = run.status === "cancelled" ? "Stopped" : FINISH_BADGES[run.finish_reason];
      if (badge) this.foot.append(span("badge", badge));
      this.foot.append(statsNode(run, this.completionTokens));
      if (run.status === "failed") {
        const code = (run.error || "").split(": ")[0];
        const message = (run.error || "").slice(code.length + 2);
        const info = ns.api.describeRunError({ code, message });
        const isLast = this.el === this.el.parentNode.lastElementChild;
        if (!isLast) info.retry = false;
        this.el.append(notice(info, () => this.hooks.onRetry(this)));
      }
    }
  }

  ns.metrics = ns.metrics || { firstLiveTokenMs: null };
  ns.scroll = scroll;
  ns.notice = notice;
  ns.Reply = Reply;
})(window.ChatUI = window.ChatUI || {});

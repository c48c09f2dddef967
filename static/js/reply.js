/* One assistant reply on the page: its raw text, its Markdown (finished blocks
 * rendered once, only the growing last block per frame), its stream, and its
 * footer: versions ‹ 1 / 2 ›, copy, regenerate, continue (after the length
 * limit), the model, tokens, time to first token, tokens per second; and its
 * error notice. While it streams the article carries aria-busy="true". */
(function (ns) {
  "use strict";

  const TERMINAL = ["completed", "failed", "cancelled"];
  const FINISH_BADGES = { length: "Reached the length limit", budget: "Stopped: budget used up",
                          interrupted: "Interrupted: a queued message was sent now" };
  const STATS_POLL_MS = [80, 200, 400, 800, 1500, 3000];
  const { span, footButton, versionNav } = ns.ui;

  function formatMs(ms) {
    if (ms == null) return null;
    return ms < 1000 ? Math.round(ms) + " ms" : (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
  }

  /* A model's name for people, as the picker names it (a run names its pool). */
  function modelName(id) {
    const model = ((ns.page && ns.page.models) || []).find((m) => m.id === id);
    return model ? model.display_name : id;
  }

  /* Microseconds since the epoch of an ISO 8601 time with up to 6 decimals (as the API writes them). */
  function isoMicros(iso) {
    const m = /^(.*?)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(iso || "");
    if (!m) return Date.parse(iso) * 1000;
    return Date.parse(m[1] + m[3]) * 1000 + Number(((m[2] || "") + "000000").slice(0, 6));
  }

  function statsNode(run, completionTokens) {
    const box = document.createElement("span");
    box.className = "stats";
    box.append(span("stat-model", modelName(run.model)));
    const tokens = run.completion_tokens || completionTokens || 0;
    box.append(span("stat-tokens", tokens + (tokens === 1 ? " token" : " tokens")));
    if (run.ttft_ms != null) box.append(span("stat-ttft", formatMs(run.ttft_ms) + " to first token"));
    // Decode speed from the mean gap between tokens, the figure the worker measures on the stream.
    const tps = run.itl_ms > 0 ? 1000 / run.itl_ms : run.tokens_per_second;
    if (tps != null) box.append(span("stat-tps", tps.toFixed(1) + " tok/s"));
    return box;
  }

  class Reply {
    /* `article` is a server-rendered or new .msg-assistant; `message` its data
     * ({id, versions, ...}); `hooks` are the page's: onActive(reply, bool),
     * onState(reply, state), onRegenerate(reply), onContinue(reply), onPick(messageId, otherId). */
    constructor(article, { run, text, message, hooks }) {
      this.el = article;
      this.body = article.querySelector("[data-role=body]");
      this.foot = article.querySelector("[data-role=foot]");
      this.message = message || { id: Number(article.dataset.messageId), versions: null };
      this.feedback = (message && message.feedback) || null;  // {rating, comment} its asker gave
      this.run = run;
      this.text = text || "";
      this.hooks = hooks;
      this.stream = null;
      this.frame = 0;
      this.renders = 0;
      this.tokenEvents = 0;
      this.completionTokens = 0;
      this.view = new ns.markdown.Streamer(this.body);
      this.raw = this.body.classList.contains("raw");  // server-rendered text, replaced on the first render
    }

    /* A new, empty .msg-assistant article (not yet in the page). */
    static article(message) {
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
      if (message) article.dataset.messageId = message.id;
      return article;
    }

    static create(thread, { run, message }, hooks, before) {
      const article = Reply.article(message);
      thread.insertBefore(article, before || null);
      const reply = new Reply(article, { run, text: message ? message.content : "", message, hooks });
      reply.setRun(run);
      return reply;
    }

    get active() { return !!this.run && !TERMINAL.includes(this.run.status); }

    setMessage(message) {
      if (!message) return;
      this.message = message;
      this.el.dataset.messageId = message.id;
    }

    /* The run as the API gives it (saved): a stopped one's reason is known from here on. */
    setRun(run) {
      this.run = run;
      this.reasonUnsaved = false;
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
      this.renderFoot();
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
      if (!this.frame) this.frame = requestAnimationFrame(() => { this.frame = 0; this.render(false); });
    }

    render(final) {
      const stick = ns.scroll.atBottom();
      this.body.classList.remove("raw");
      this.body.classList.toggle("pending", !this.text && this.active);
      if (this.raw) { this.view.reset(); this.raw = false; }
      this.view.update(this.text, final !== false && !this.active);
      this.renders++;
      if (stick) ns.scroll.toBottom();
    }

    /* The stream ended: the reply settles with the status its end says (the saved run, with
     * its reason, comes later through setRun). */
    _settle(status) {
      if (this.frame) { cancelAnimationFrame(this.frame); this.frame = 0; }
      this.run = { ...this.run, status };
      this.el.dataset.status = status;
      this.body.classList.remove("streaming", "pending");
      this.el.removeAttribute("aria-busy");
      this.render(true);
      this.hooks.onActive(this, false);
    }

    /* A stopped reply's stream says "cancelled"; its saved run says whether a queued message's
     * "send now" stopped it ("interrupted"). Until this page knows which (the chat.queue event
     * naming it, or the saved run), the reply carries no label, so none shows "Stopped" for
     * an interrupted reply, however the stream, the event and the saved run arrive. */
    _done(d) {
      const status = d.finish_reason === "cancelled" ? "cancelled" : "completed";
      const reason = d.finish_reason === "cancelled" && this.interrupted ? "interrupted" : d.finish_reason;
      this.completionTokens = (d.usage && d.usage.completion_tokens) || this.completionTokens;
      this.run = { ...this.run, ...this._measured(), finish_reason: reason };
      this.reasonUnsaved = reason === "cancelled" && !this.stopping;  // stopped here: this page knows why
      this._settle(status);
      this.renderFoot();
      const how = { cancelled: "stopped", interrupted: "interrupted" }[reason] || "finished";
      ns.announce("Reply " + how + ": " + this.body.textContent.slice(0, 600));
      this._pollStats(0);
    }

    /* A queued message's "send now" is stopping this reply (chat.queue names it). */
    interrupt() {
      this.interrupted = true;
      if (this.run.finish_reason !== "cancelled") return;  // still streaming, or saved already
      this.run = { ...this.run, finish_reason: "interrupted" };
      this.reasonUnsaved = false;
      this.renderFoot();
    }

    _failed(err) {
      if (err.status) {  // not the run failing: this page may no longer read it (signed out, deleted)
        this._settle(this.run.status);
        this.el.append(ns.notice(ns.api.describe({ status: err.status, error: err }), null));
        return;
      }
      this._settle("failed");
      this.run.error = (err.code || "error") + ": " + (err.message || "");
      this.renderFoot();
      this._pollStats(0);
    }

    /* The run's time to first token and gap between tokens, measured as the worker measures
     * them (on the stream entries' times), when this page saw the stream from its start: the
     * stats line then comes with the reply's end, and the saved figures fetched after agree. */
    _measured() {
      const s = this.stream;
      if (!s || s.firstTokenMs == null || this.run.ttft_ms != null || !this.run.queued_at) return {};
      const out = { ttft_ms: Math.max(0, Math.floor((s.firstTokenMs * 1000 - isoMicros(this.run.queued_at)) / 1000)) };
      if (this.completionTokens > 1) out.itl_ms = (s.lastTokenMs - s.firstTokenMs) / (this.completionTokens - 1);
      return out;
    }

    /* The run's figures are saved just after its terminal event; fetch them then.
       A reply continued meanwhile follows its new run: the old run's figures are dropped. */
    async _pollStats(attempt, runId = this.run.id) {
      if (attempt >= STATS_POLL_MS.length) return;
      await new Promise((r) => setTimeout(r, STATS_POLL_MS[attempt]));
      if (this.run.id !== runId) return;
      const res = await ns.api.get("/api/runs/" + runId + "/");
      if (this.run.id !== runId) return;
      if (res.ok && TERMINAL.includes(res.data.status)) {
        this.setRun(res.data);
        this.renderFoot();
        return;
      }
      this._pollStats(attempt + 1, runId);
    }

    get isLast() { return this.el === this.el.parentNode.lastElementChild; }

    /* Edit the question this reply answers (its article is just above), to send it anew. */
    _editQuestion() {
      const asked = this.el.previousElementSibling;
      const message = asked && asked.classList.contains("msg-user") && ns.msgs.get(Number(asked.dataset.messageId));
      return message ? () => ns.turns.startEdit(asked, message, this.hooks) : null;
    }

    renderFoot() {
      const run = this.run;
      this.foot.replaceChildren();
      const old = this.el.querySelector(".notice");
      if (old) old.remove();
      const busy = ns.busy ? ns.busy() : false;
      const nav = versionNav(this.message.id, this.message.versions, (id) => this.hooks.onPick(this.message.id, id), busy);
      if (nav) this.foot.append(nav);
      if (!run || !TERMINAL.includes(run.status)) return;
      if (this.text) {
        const copy = footButton("copy", "Copy this reply", "copy");
        copy.dataset.copy = "reply";
        this.foot.append(copy);
      }
      const regen = footButton("regenerate", "Regenerate this reply", "regenerate");
      regen.disabled = busy;
      regen.addEventListener("click", () => this.hooks.onRegenerate(this));
      this.foot.append(regen);
      if (run.finish_reason === "length" && this.isLast) {
        const more = footButton("continue", "Continue this reply", "continue", "Continue");
        more.disabled = busy;
        more.addEventListener("click", () => this.hooks.onContinue(this));
        this.foot.append(more);
      }
      if (run.status !== "failed") this.foot.append(...ns.feedback.buttons(this));
      const stopped = run.status === "cancelled" && !this.reasonUnsaved;
      const badge = FINISH_BADGES[run.finish_reason] || (stopped ? "Stopped" : undefined);
      if (badge) this.foot.append(span("badge", badge));
      this.foot.append(statsNode(run, this.completionTokens));
      if (run.status === "failed") {
        const code = (run.error || "").split(": ")[0];
        const message = (run.error || "").slice(code.length + 2);
        const info = ns.api.describeRunError({ code, message });
        if (!this.isLast) info.retry = false;
        this.el.append(ns.notice(info, () => this.hooks.onRegenerate(this), this.isLast ? this._editQuestion() : null));
      }
    }
  }

  ns.metrics = ns.metrics || { firstLiveTokenMs: null };
  ns.Reply = Reply;
})(window.ChatUI = window.ChatUI || {});

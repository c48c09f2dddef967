/* Following one run's events (SSE) until its terminal event, whatever the network does.
 *
 * - Every event carries an `id:`, so the browser's own EventSource reconnects with
 *   Last-Event-ID; when it gives up (or the page goes offline) we reopen with
 *   `?last_event_id=` ourselves, with backoff, after checking the run still exists.
 * - Text is never doubled or lost: `have` counts the tokens shown, and a token event
 *   whose `seq + n <= have` is a replay and is skipped. A gap (which a correct stream
 *   never has) restarts the replay from the start, where the same rule applies.
 * - A `snapshot` (a finished run whose stream expired) replaces the text.
 */
(function (ns) {
  "use strict";

  const MAX_BACKOFF_MS = 8000;

  class RunStream {
    /* handlers: onToken(text), onSnapshot(text, n), onDone(data), onFail(err), onState(state)
     * where state is "connecting" | "live" | "reconnecting" | "offline" | "closed". */
    constructor({ eventsUrl, runUrl, have = 0, lastEventId = null, handlers }) {
      this.eventsUrl = eventsUrl;
      this.runUrl = runUrl;
      this.have = have;
      this.lastEventId = lastEventId;
      this.h = handlers;
      this.es = null;
      this.closed = false;
      this.failures = 0;
      this.connects = 0;
      this.restarts = 0;
      this.timer = 0;
      this.state = "";
      this.firstTokenMs = null;  // when the run's first token was written, if this stream saw it
      this.lastTokenMs = null;
      this._online = () => this._reopenSoon(0);
      this._offline = () => this._goOffline();
    }

    start() {
      window.addEventListener("online", this._online);
      window.addEventListener("offline", this._offline);
      this._setState("connecting");
      if (navigator.onLine === false) this._goOffline(); else this._open();
      return this;
    }

    close() {
      this.closed = true;
      clearTimeout(this.timer);
      window.removeEventListener("online", this._online);
      window.removeEventListener("offline", this._offline);
      if (this.es) { this.es.close(); this.es = null; }
      this._setState("closed");
    }

    _open() {
      if (this.closed) return;
      const url = new URL(this.eventsUrl, location.href);
      if (this.lastEventId) url.searchParams.set("last_event_id", this.lastEventId);
      const es = this.es = new EventSource(url.toString());
      this.connects++;
      es.onopen = () => { this.failures = 0; this._setState("live"); };
      es.addEventListener("token", (e) => this._token(e));
      es.addEventListener("snapshot", (e) => {
        const d = JSON.parse(e.data);
        this.have = d.n;
        this.h.onSnapshot(d.text, d.n);
      });
      es.addEventListener("done", (e) => { const d = JSON.parse(e.data); this.close(); this.h.onDone(d); });
      es.addEventListener("error", (e) => {
        if (e instanceof MessageEvent && e.data) {  // the run's own `error` event
          const d = JSON.parse(e.data);
          this.close();
          this.h.onFail(d);
        } else {
          this._connectionError(es);
        }
      });
    }

    _token(e) {
      if (e.lastEventId) this.lastEventId = e.lastEventId;
      const d = JSON.parse(e.data);
      if (d.seq + d.n <= this.have) return;
      if (d.seq > this.have && this.restarts < 2) { this.restarts++; this._restart(); return; }
      this.have = d.seq + d.n;
      // A stream entry's id starts with the time Redis wrote it (ms): the run's figures are measured
      // on those times, so the page can show them the moment the reply ends.
      const ms = parseInt(e.lastEventId, 10);
      if (d.seq === 0) this.firstTokenMs = ms;
      this.lastTokenMs = ms;
      this.h.onToken(d.text);
    }

    _restart() {
      this.lastEventId = null;
      if (this.es) { this.es.close(); this.es = null; }
      this._open();
    }

    _connectionError(es) {
      if (this.closed || es !== this.es) return;
      if (es.readyState === EventSource.CONNECTING) {  // the browser retries by itself
        this._setState(navigator.onLine === false ? "offline" : "reconnecting");
        return;
      }
      es.close();
      this.es = null;
      this.failures++;
      this._setState(navigator.onLine === false ? "offline" : "reconnecting");
      this._reopenSoon(Math.min(MAX_BACKOFF_MS, 500 * 2 ** (this.failures - 1)));
    }

    _goOffline() {
      if (this.closed) return;
      if (this.es) { this.es.close(); this.es = null; }
      clearTimeout(this.timer);
      this._setState("offline");
    }

    _reopenSoon(delayMs) {
      if (this.closed) return;
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this._recheck(), delayMs);
    }

    /* Before reopening by hand: is the run still there and ours to read? */
    async _recheck() {
      if (this.closed || this.es) return;
      if (navigator.onLine === false) { this._setState("offline"); return; }
      this._setState("reconnecting");
      const res = await ns.api.get(this.runUrl);
      if (this.closed || this.es) return;
      if (res.status === 0 || res.status >= 500) {
        this.failures++;
        this._reopenSoon(Math.min(MAX_BACKOFF_MS, 500 * 2 ** this.failures));
        return;
      }
      if (!res.ok) { this.close(); this.h.onFail({ code: res.error.code, message: res.error.message, status: res.status }); return; }
      this._open();
    }

    _setState(state) {
      if (state === this.state) return;
      this.state = state;
      if (this.h.onState) this.h.onState(state);
    }
  }

  ns.RunStream = RunStream;
})(window.ChatUI = window.ChatUI || {});

/* The signed-in user's events (GET /events, Server-Sent Events): what their other
 * windows do. The browser's EventSource reconnects by itself with Last-Event-ID;
 * if it gives up, we reopen after the last event seen, with backoff. */
(function (ns) {
  "use strict";

  const TYPES = ["chat.created", "chat.updated", "chat.deleted", "chat.path", "chat.queue"];

  function start(after, onEvent) {
    let last = after || "";
    let failures = 0;
    let es = null;
    const open = () => {
      es = new EventSource("/events" + (last ? "?after=" + encodeURIComponent(last) : ""));
      es.onopen = () => { failures = 0; };
      for (const type of TYPES) {
        es.addEventListener(type, (e) => {
          last = e.lastEventId || last;
          let ev;
          try { ev = JSON.parse(e.data); } catch (err) { return; }
          onEvent(ev);
        });
      }
      es.onerror = () => {
        if (es.readyState !== EventSource.CLOSED) return;  // the browser retries by itself
        failures++;
        setTimeout(open, Math.min(15000, 1000 * 2 ** failures));
      };
    };
    open();
    ns.liveStream = { close: () => es && es.close(), get last() { return last; } };
  }

  ns.live = { start };
})(window.ChatUI = window.ChatUI || {});

/* The shared chat page (/s/{token}): render the thread, and follow a reply in progress
 * through its events (as the link) until it ends, or until the link is revoked. Read-only:
 * nothing here writes. `ChatUI.shared.replies[runId]` holds each followed reply's text and
 * state ("live", "done", "failed", "ended"), for the page's tests. */
(function (ns) {
  "use strict";

  const page = JSON.parse(document.getElementById("page-data").textContent);
  const byId = new Map(page.messages.map((m) => [m.id, m]));
  const replies = {};

  function notice(article, text) {
    const p = document.createElement("p");
    p.className = "shared-ended";
    p.setAttribute("role", "status");
    p.textContent = text;
    article.append(p);
  }

  function follow(article, body, message) {
    const run = message.run;
    const reply = replies[run.id] = { text: message.content, state: "live" };
    const view = new ns.markdown.Streamer(body);
    let frame = 0;
    const render = (final) => { frame = 0; view.update(reply.text, final); };
    const schedule = () => { if (!frame) frame = requestAnimationFrame(() => render(false)); };
    const settle = (state, status) => {
      if (frame) { cancelAnimationFrame(frame); frame = 0; }
      reply.state = state;
      article.dataset.status = status;
      article.removeAttribute("aria-busy");
      body.classList.remove("streaming");
      render(true);
    };
    body.replaceChildren();
    body.classList.remove("raw");
    body.classList.add("streaming");
    render(false);
    new ns.RunStream({
      eventsUrl: run.events_url, runUrl: page.api_url,
      have: message.live ? message.live.have : 0, lastEventId: message.live ? message.live.last_event_id : null,
      handlers: {
        onToken: (text) => { reply.text += text; schedule(); },
        onSnapshot: (text) => { reply.text = text; schedule(); },
        onDone: (d) => settle("done", d.finish_reason === "cancelled" ? "cancelled" : "completed"),
        onFail: (err) => {
          if (err.status) {  // the link no longer opens (revoked, or the chat deleted)
            settle("ended", run.status);
            notice(article, "This chat is no longer shared.");
          } else {
            settle("failed", "failed");
            notice(article, "The reply stopped: " + (err.message || "an error"));
          }
        },
      },
    }).start();
  }

  document.querySelectorAll("#thread .msg-assistant").forEach((article) => {
    const message = byId.get(Number(article.dataset.messageId));
    const body = article.querySelector("[data-role=body]");
    if (!message) return;
    if (message.run && message.run.events_url) { follow(article, body, message); return; }
    body.classList.remove("raw");
    ns.markdown.renderInto(body, message.content);
  });

  ns.shared = { replies };
})(window.ChatUI = window.ChatUI || {});

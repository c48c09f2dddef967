/* The conversation on the page: the chosen path of messages, in order. Mounts
 * server-rendered and fetched messages, replaces the path below a message when
 * another version is shown (here or in another window), and loads older messages
 * when the reader scrolls up. */
(function (ns) {
  "use strict";

  const thread = document.getElementById("thread");
  const scroller = document.getElementById("scroller");
  const TERMINAL = ["completed", "failed", "cancelled"];
  const OLDER_PAGE = 40;
  ns.msgs = new Map();  // message id -> the API's message data
  ns.replies = ns.replies || {};  // run id -> Reply

  const articles = () => [...thread.querySelectorAll(".msg[data-message-id]")];  // not a message still unsent
  const unsent = () => thread.querySelector(".msg:not([data-message-id])");
  const articleOf = (id) => thread.querySelector('.msg[data-message-id="' + id + '"]');
  const base = () => "/api/chats/" + ns.state.chat.id + "/messages/";

  /* Attach behaviour to an article showing `m` (server-rendered or new). */
  function mount(article, m, hooks) {
    ns.msgs.set(m.id, m);
    if (m.role === "user") {
      article.dataset.messageId = m.id;
      ns.turns.renderUserFoot(article, m, hooks);
      return null;
    }
    const reply = new ns.Reply(article, { run: m.run, text: m.content, message: m, hooks });
    article.reply = reply;
    reply.render(!m.run || TERMINAL.includes(m.run.status));
    if (!m.run) return reply;
    reply.setRun(m.run);
    ns.replies[m.run.id] = reply;
    if (reply.active) reply.follow(m.live || null); else reply.renderFoot();
    return reply;
  }

  /* New articles for `messages` (oldest first), before `before` or at the end. */
  function insert(messages, hooks, before) {
    document.getElementById("empty").hidden = true;
    for (const m of messages) {
      if (m.role === "system") continue;
      if (m.role === "user") {
        const article = ns.turns.userArticle(m.content, m);
        thread.insertBefore(article, before || null);
        mount(article, m, hooks);
      } else {
        const article = ns.Reply.article(m);
        thread.insertBefore(article, before || null);
        mount(article, m, hooks);
      }
    }
  }

  /* Remove `article` and everything after it. */
  function truncateFrom(article) {
    const all = articles();
    for (const el of all.slice(all.indexOf(article))) el.remove();
  }

  function truncateAfter(article) {
    const all = articles();
    for (const el of all.slice(all.indexOf(article) + 1)) el.remove();
  }

  /* Every footer again (their buttons are disabled while a reply is written). */
  function refreshFeet(hooks) {
    for (const el of articles()) {
      const m = ns.msgs.get(Number(el.dataset.messageId));
      if (!m) continue;
      if (m.role === "user") ns.turns.renderUserFoot(el, m, hooks);
      else if (el.dataset.runId && ns.replies[el.dataset.runId]) ns.replies[el.dataset.runId].renderFoot();
    }
  }

  /* The path changed below `anchor` (null: from the first message) and now ends at `leaf`. */
  async function refreshBelow(anchor, leaf, hooks) {
    if (anchor != null && articleOf(anchor)) {
      const res = await ns.api.get(base() + "?after=" + anchor + "&limit=200");
      if (!res.ok) return false;
      truncateAfter(articleOf(anchor));
      insert(res.data.results, hooks, unsent());
    } else {  // the change is above what is shown: show the newest page again
      const older = await ns.api.get(base() + "?before=" + leaf + "&limit=" + (OLDER_PAGE - 1));
      if (!older.ok) return false;
      const rest = older.data.results.length ? "?after=" + older.data.results.at(-1).id : "?offset=0";
      const tail = await ns.api.get(base() + rest + "&limit=" + OLDER_PAGE);
      if (!tail.ok) return false;
      for (const el of articles()) el.remove();
      insert(older.data.results.concat(tail.data.results), hooks, unsent());
      ns.state.moreBefore = !!older.data.previous;
    }
    ns.scroll.toBottom();
    return true;
  }

  async function loadOlder(hooks) {
    const first = articles().find((el) => el.dataset.messageId);
    if (!ns.state.moreBefore || ns.state.loadingOlder || !first || !ns.state.chat) return;
    ns.state.loadingOlder = true;
    const res = await ns.api.get(base() + "?before=" + first.dataset.messageId + "&limit=" + OLDER_PAGE);
    ns.state.loadingOlder = false;
    if (!res.ok) return;
    const height = scroller.scrollHeight;
    insert(res.data.results, hooks, first);
    scroller.scrollTop += scroller.scrollHeight - height;  // the reader stays where they were
    ns.state.moreBefore = !!res.data.previous;
  }

  /* KaTeX arrives after the first reply with math was rendered: render those again. */
  document.addEventListener("chatui:math-ready", () => {
    for (const el of thread.querySelectorAll(".msg-assistant")) {
      if (!el.reply || !el.querySelector(".math-pending")) continue;
      el.reply.view.reset();
      el.reply.render(!el.reply.active);
    }
  });

  function watchTop(hooks) {
    scroller.addEventListener("scroll", () => { if (scroller.scrollTop < 300) loadOlder(hooks); }, { passive: true });
  }

  ns.thread = { mount, insert, truncateFrom, truncateAfter, refreshFeet, refreshBelow, loadOlder, watchTop, articleOf,
                articles };
})(window.ChatUI = window.ChatUI || {});

/* The chat list (a drawer at phone width): pinned chats first, search, older chats on
 * scroll, what other windows change. The chat menu's actions are in chat-menu.js. */
(function (ns) {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const app = $("app"), sidebar = $("sidebar"), openBtn = $("sidebar-open"), scrim = app.querySelector(".scrim");
  const list = $("chat-list"), menu = $("chat-menu"), renameForm = $("rename-form"), renameInput = $("rename-input");
  const deleteForm = $("delete-form"), pinToggle = $("pin-toggle"), archiveToggle = $("archive-toggle");
  const searchBox = $("chat-search"), results = $("search-results"), more = $("chats-more");
  const narrow = matchMedia("(max-width: 820px)");

  /* ---- the drawer ------------------------------------------------------ */

  function openDrawer() {
    app.classList.add("sidebar-open");
    openBtn.setAttribute("aria-expanded", "true");
    scrim.hidden = false;
    const current = sidebar.querySelector('[aria-current="page"]') || $("new-chat");
    setTimeout(() => current.focus(), 30);
  }

  function closeDrawer(returnFocus) {
    if (!app.classList.contains("sidebar-open")) return;
    app.classList.remove("sidebar-open");
    openBtn.setAttribute("aria-expanded", "false");
    scrim.hidden = true;
    if (returnFocus) openBtn.focus();
  }

  openBtn.addEventListener("click", openDrawer);
  document.querySelectorAll("[data-sidebar-close]").forEach((el) => el.addEventListener("click", () => closeDrawer(true)));
  narrow.addEventListener("change", () => closeDrawer(false));
  document.addEventListener("keydown", (e) => {
    if (e.key !== "Escape") return;
    if (app.classList.contains("sidebar-open")) closeDrawer(true);
    if (menu.open) { menu.open = false; menu.querySelector("summary").focus(); }
  });

  /* ---- the list -------------------------------------------------------- */

  /* The date group of a chat last changed at `iso` (the same bounds as chatsite/web/selectors.py). */
  function groupLabel(iso) {
    const when = new Date(iso), today = new Date();
    today.setHours(0, 0, 0, 0);
    const day = 86400000;
    for (const [name, start] of [["Today", today], ["Yesterday", today - day], ["Previous 7 days", today - 7 * day],
                                 ["Previous 30 days", today - 30 * day]]) {
      if (when >= start) return name;
    }
    return "Older";
  }

  const GROUPS = ["Pinned", "Today", "Yesterday", "Previous 7 days", "Previous 30 days", "Older"];

  /* The list of a group, made in its place (Pinned first, then the dates, newest first) when missing. */
  function groupList(label) {
    let group = list.querySelector('[data-group="' + label + '"]');
    if (!group) {
      group = document.createElement("section");
      group.className = "chat-group";
      group.dataset.group = label;
      const heading = document.createElement("h2");
      heading.className = "group-label";
      heading.textContent = label;
      group.append(heading, document.createElement("ul"));
      const after = [...list.querySelectorAll("[data-group]")]
        .find((g) => GROUPS.indexOf(g.dataset.group) > GROUPS.indexOf(label));
      list.insertBefore(group, after || more);
      const none = $("chat-list-empty");
      if (none) none.remove();
    }
    return group.querySelector("ul");
  }

  const todayList = () => groupList("Today");

  function unlist(li) {
    const ul = li.parentNode;
    li.remove();
    if (ul && !ul.childElementCount) ul.parentNode.remove();
  }

  /* Where a chat belongs in the list after it was pinned, unpinned, archived or restored. */
  function place(chat) {
    const link = linkFor(chat), li = link.parentNode;
    if (chat.archived_at) { unlist(li); return; }
    const ul = chat.pinned_at ? groupList("Pinned") : groupList(groupLabel(chat.updated_at));
    if (li.parentNode === ul) return;
    const from = li.parentNode;
    ul.prepend(li);
    if (from && !from.childElementCount) from.parentNode.remove();
  }

  function linkFor(chat) {
    let link = list.querySelector('[data-chat-link="' + chat.id + '"]');
    if (!link) {
      link = document.createElement("a");
      link.href = "/c/" + chat.id + "/";
      link.dataset.chatLink = chat.id;
      link.textContent = chat.title || "Chat " + chat.id;
      const li = document.createElement("li");
      li.append(link);
      todayList().prepend(li);
    }
    return link;
  }

  /* Move a chat to the top of "Today" (it just changed); a pinned one stays where it is. */
  function bump(link) {
    const li = link.parentNode, from = li.parentNode;
    if (li.closest('[data-group="Pinned"]')) return;
    todayList().prepend(li);
    if (!from.childElementCount) from.parentNode.remove();
  }

  function setTitle(chat) {
    const title = chat.title || "Chat " + chat.id;
    if (!chat.archived_at) linkFor(chat).textContent = title;
    $("chat-title").textContent = title;
    $("chat-title").toggleAttribute("data-archived", !!chat.archived_at);
    pinToggle.textContent = chat.pinned_at ? "Unpin chat" : "Pin chat";
    archiveToggle.textContent = chat.archived_at ? "Restore from the archive" : "Archive chat";
    renameInput.value = chat.title || "";
    document.title = title + " · chatsite";
  }

  /* A chat created on this page: list it first, point the menu at it. */
  function adopt(chat) {
    list.querySelectorAll('[aria-current="page"]').forEach((a) => a.removeAttribute("aria-current"));
    const link = linkFor(chat);
    link.setAttribute("aria-current", "page");
    if (chat.archived_at || chat.pinned_at) place(chat); else bump(link);
    renameForm.action = "/c/" + chat.id + "/rename";
    deleteForm.action = "/c/" + chat.id + "/delete";
    $("export-md").href = "/api/chats/" + chat.id + "/export.md";
    $("export-json").href = "/api/chats/" + chat.id + "/export.json";
    menu.hidden = false;
    setTitle(chat);
  }

  /* What another window did: a chat made, renamed, deleted, or a new turn in it. */
  function onEvent(ev) {
    const existing = list.querySelector('[data-chat-link="' + ev.chat + '"]');
    if (ev.type === "chat.deleted") {
      if (existing) {
        const ul = existing.parentNode.parentNode;
        existing.parentNode.remove();
        if (!ul.childElementCount) ul.parentNode.remove();
      }
      return;
    }
    if (ev.pinned !== undefined) { refiled(ev.chat); return; }  // pinned, archived or restored elsewhere
    const link = existing || linkFor({ id: ev.chat, title: ev.title });
    if (ev.title) link.textContent = ev.title;
    if (ev.type !== "chat.updated") bump(link);
    const mine = ns.state && ns.state.chat && ns.state.chat.id === ev.chat;
    if (mine && ev.title) { $("chat-title").textContent = ev.title; document.title = ev.title + " · chatsite"; }
  }

  async function refiled(id) {
    const res = await ns.api.get("/api/chats/" + id + "/");
    if (!res.ok) return;
    place(res.data);
    if (ns.state && ns.state.chat && ns.state.chat.id === id) { ns.state.chat = res.data; setTitle(res.data); }
  }

  /* ---- older chats, on scroll ------------------------------------------ */

  let nextUrl = JSON.parse($("page-data").textContent).chats_next, loading = false;

  async function loadMore() {
    if (!nextUrl || loading) return;
    loading = true;
    const res = await ns.api.get(nextUrl);
    loading = false;
    if (!res.ok) return;
    for (const chat of res.data.results) {
      if (list.querySelector('[data-chat-link="' + chat.id + '"]')) continue;
      const link = document.createElement("a");
      link.href = "/c/" + chat.id + "/";
      link.dataset.chatLink = chat.id;
      link.textContent = chat.title || "Chat " + chat.id;
      const li = document.createElement("li");
      li.append(link);
      groupList(groupLabel(chat.updated_at)).append(li);
    }
    nextUrl = res.data.next;
  }

  new IntersectionObserver((entries) => { if (entries.some((e) => e.isIntersecting)) loadMore(); },
                           { root: list, rootMargin: "200px" }).observe(more);

  /* ---- search ------------------------------------------------------------ */

  let searchTimer = 0, searchSeq = 0;
  const MARK = /\u2063\[(.*?)\]\u2063/g;

  function snippetNode(text) {
    const p = document.createElement("span");
    p.className = "search-snippet";
    let at = 0;
    for (const m of text.matchAll(MARK)) {
      p.append(document.createTextNode(text.slice(at, m.index)));
      const mark = document.createElement("mark");
      mark.textContent = m[1];
      p.append(mark);
      at = m.index + m[0].length;
    }
    p.append(document.createTextNode(text.slice(at)));
    return p;
  }

  async function search(q) {
    const seq = ++searchSeq;
    const res = await ns.api.get("/api/chats/search/?q=" + encodeURIComponent(q));
    if (seq !== searchSeq || !res.ok) return;
    results.replaceChildren();
    const heading = document.createElement("h2");
    heading.className = "group-label";
    heading.textContent = res.data.results.length ? "Results" : "No chats match “" + q + "”";
    const ul = document.createElement("ul");
    for (const chat of res.data.results) {
      const a = document.createElement("a");
      a.href = "/c/" + chat.id + "/";
      a.dataset.searchResult = chat.id;
      const title = document.createElement("span");
      title.className = "search-title";
      title.textContent = chat.title || "Chat " + chat.id;
      a.append(title);
      if (chat.snippet) a.append(snippetNode(chat.snippet));
      const li = document.createElement("li");
      li.append(a);
      ul.append(li);
    }
    results.append(heading, ul);
  }

  searchBox.addEventListener("input", () => {
    clearTimeout(searchTimer);
    const q = searchBox.value.trim();
    results.hidden = !q;
    list.hidden = !!q;
    if (!q) { searchSeq++; results.replaceChildren(); return; }
    searchTimer = setTimeout(() => search(q), 180);
  });
  searchBox.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && searchBox.value) { e.stopPropagation(); searchBox.value = ""; searchBox.dispatchEvent(new Event("input")); }
  });

  ns.sidebar = { adopt, setTitle, onEvent, loadMore, place, linkFor, close: closeDrawer };
})(window.ChatUI = window.ChatUI || {});

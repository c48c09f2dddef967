/* The chat list (a drawer at phone width) and the chat menu: rename, delete. */
(function (ns) {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const app = $("app"), sidebar = $("sidebar"), openBtn = $("sidebar-open"), scrim = app.querySelector(".scrim");
  const list = $("chat-list"), menu = $("chat-menu"), renameForm = $("rename-form"), renameInput = $("rename-input");
  const deleteForm = $("delete-form"), dialog = $("delete-dialog");
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

  function todayList() {
    let group = list.querySelector('[data-group="Today"]');
    if (!group) {
      group = document.createElement("section");
      group.className = "chat-group";
      group.dataset.group = "Today";
      const label = document.createElement("h2");
      label.className = "group-label";
      label.textContent = "Today";
      group.append(label, document.createElement("ul"));
      list.prepend(group);
      const none = $("chat-list-empty");
      if (none) none.remove();
    }
    return group.querySelector("ul");
  }

  function linkFor(chat) {
    let link = list.querySelector('[data-chat-link="' + chat.id + '"]');
    if (!link) {
      link = document.createElement("a");
      link.href = "/c/" + chat.id + "/";
      link.dataset.chatLink = chat.id;
      const li = document.createElement("li");
      li.append(link);
      todayList().prepend(li);
    }
    return link;
  }

  function setTitle(chat) {
    const title = chat.title || "Chat " + chat.id;
    linkFor(chat).textContent = title;
    $("chat-title").textContent = title;
    renameInput.value = chat.title || "";
    document.title = title + " · chatsite";
  }

  /* A chat created on this page: list it first, point the menu at it. */
  function adopt(chat) {
    list.querySelectorAll('[aria-current="page"]').forEach((a) => a.removeAttribute("aria-current"));
    const link = linkFor(chat);
    link.setAttribute("aria-current", "page");
    todayList().prepend(link.parentNode);
    renameForm.action = "/c/" + chat.id + "/rename";
    deleteForm.action = "/c/" + chat.id + "/delete";
    menu.hidden = false;
    setTitle(chat);
  }

  /* ---- rename and delete ---------------------------------------------- */

  document.addEventListener("click", (e) => {
    if (menu.open && !menu.contains(e.target)) menu.open = false;
  });
  menu.addEventListener("toggle", () => { if (menu.open) setTimeout(() => renameInput.focus(), 0); });

  renameForm.addEventListener("submit", async (e) => {
    const chat = ns.state && ns.state.chat;
    if (!chat) return;
    e.preventDefault();
    const res = await ns.api.patch("/api/chats/" + chat.id + "/", { title: renameInput.value });
    if (!res.ok) { ns.toast(ns.api.describe(res).text || "Could not rename the chat."); return; }
    ns.state.chat = res.data;
    setTitle(res.data);
    menu.open = false;
    menu.querySelector("summary").focus();
    ns.announce("Chat renamed");
  });

  deleteForm.addEventListener("submit", (e) => {
    if (!dialog.showModal) return;  // no <dialog>: the plain form posts
    e.preventDefault();
    menu.open = false;
    dialog.returnValue = "";
    dialog.showModal();
  });
  dialog.addEventListener("close", () => {
    if (dialog.returnValue === "delete") deleteForm.submit();
    else menu.querySelector("summary").focus();
  });

  ns.sidebar = { adopt, setTitle, close: closeDrawer };
})(window.ChatUI = window.ChatUI || {});

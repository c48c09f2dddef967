/* The chat's menu (⋯ in the top bar): rename, pin, archive or restore, export, delete. */
(function (ns) {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const menu = $("chat-menu"), renameForm = $("rename-form"), renameInput = $("rename-input"), list = $("chat-list");
  const deleteForm = $("delete-form"), dialog = $("delete-dialog");
  const pinToggle = $("pin-toggle"), archiveToggle = $("archive-toggle");
  const narrow = matchMedia("(max-width: 820px)");

  /* ---- rename and delete ---------------------------------------------- */

  document.addEventListener("click", (e) => {
    if (menu.open && !menu.contains(e.target)) menu.open = false;
  });
  menu.querySelectorAll(".menu-link").forEach((a) => a.addEventListener("click", () => { menu.open = false; }));
  // Ready to rename on a desktop; on a phone the keyboard it would open covers Export and Delete.
  const touch = matchMedia("(pointer: coarse)");
  menu.addEventListener("toggle", () => {
    if (menu.open && !narrow.matches && !touch.matches) setTimeout(() => renameInput.focus(), 0);
  });

  renameForm.addEventListener("submit", async (e) => {
    const chat = ns.state && ns.state.chat;
    if (!chat) return;
    e.preventDefault();
    const res = await ns.api.patch("/api/chats/" + chat.id + "/", { title: renameInput.value });
    if (!res.ok) { ns.toast(ns.api.describe(res).text || "Could not rename the chat."); return; }
    ns.state.chat = res.data;
    ns.sidebar.setTitle(res.data);
    menu.open = false;
    menu.querySelector("summary").focus();
    ns.announce("Chat renamed");
  });

  /* ---- pin and archive ------------------------------------------------- */

  async function file(change, done, fromMenu = true) {
    const chat = ns.state && ns.state.chat;
    if (!chat) return;
    menu.open = false;
    const res = await ns.api.patch("/api/chats/" + chat.id + "/", change);
    if (!res.ok) { ns.toast(ns.api.describe(res).text || "That did not work; try again."); return; }
    ns.state.chat = res.data;
    ns.sidebar.place(res.data);
    ns.sidebar.setTitle(res.data);
    if (res.data.archived_at) list.querySelectorAll('[aria-current="page"]').forEach((a) => a.removeAttribute("aria-current"));
    else ns.sidebar.linkFor(res.data).setAttribute("aria-current", "page");
    ns.toast(done + ".", "info");
    if (fromMenu) menu.querySelector("summary").focus();
  }

  pinToggle.addEventListener("click", () => {
    const pinned = !!(ns.state.chat && ns.state.chat.pinned_at);
    file({ pinned: !pinned }, pinned ? "Chat unpinned" : "Chat pinned to the top of the list");
  });
  archiveToggle.addEventListener("click", () => {
    const archived = !!(ns.state.chat && ns.state.chat.archived_at);
    file({ archived: !archived }, archived ? "Chat restored to the list"
      : "Chat archived: it left the list; search finds it, and Settings lists it to restore");
  });

  deleteForm.addEventListener("submit", (e) => {
    if (!dialog.showModal) return;  // no <dialog>: the plain form posts
    e.preventDefault();
    menu.open = false;
    dialog.returnValue = "";
    dialog.showModal();
  });
  dialog.addEventListener("close", () => {
    if (dialog.returnValue === "delete") { if (ns.state) ns.state.leaving = true; deleteForm.submit(); }
    else menu.querySelector("summary").focus();
  });

  // A new message in an archived chat brings it back to the list.
  ns.chatMenu = { restoreIfArchived: () => ns.state.chat && ns.state.chat.archived_at &&
                                           file({ archived: false }, "Chat restored to the list", false) };
})(window.ChatUI = window.ChatUI || {});

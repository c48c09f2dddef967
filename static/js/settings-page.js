/* The settings page: API keys (create, shown once, revoke) and archived chats (restore),
 * through the REST API. The theme and default instructions are a plain form. */
(function (ns) {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const announce = (text) => { $("announcer").textContent = text; };
  const keys = $("keys").querySelector("tbody"), error = $("key-error");

  function cell(text, code) {
    const td = document.createElement("td");
    if (code) { const c = document.createElement("code"); c.textContent = text; td.append(c); } else td.textContent = text;
    return td;
  }

  function revokeButton(key) {
    const btn = document.createElement("button");
    btn.type = "button";
    btn.className = "btn btn-small btn-danger-ghost";
    btn.dataset.revoke = key.id;
    btn.textContent = "Revoke";
    btn.setAttribute("aria-label", "Revoke " + key.name);
    return btn;
  }

  $("key-create").addEventListener("submit", async (e) => {
    e.preventDefault();
    const name = $("key-name");
    const res = await ns.api.post("/api/keys/", { name: name.value });
    if (!res.ok) {
      error.textContent = ns.api.describe(res).text || "The key could not be made.";
      error.hidden = false;
      return;
    }
    error.hidden = true;
    const key = res.data;
    $("key-secret-value").textContent = key.secret;
    $("key-secret").hidden = false;
    const row = document.createElement("tr");
    row.dataset.keyId = key.id;
    const actions = document.createElement("td");
    actions.append(revokeButton(key));
    row.append(cell(key.name), cell("csk_" + key.prefix + "_…", true), cell("just now"), cell("never"), actions);
    const none = keys.querySelector(".empty-row");
    if (none) none.remove();
    keys.prepend(row);
    name.value = "";
    $("key-copy").focus();
    announce("Key " + key.name + " made. Copy it now: it will not be shown again.");
  });

  $("key-copy").addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText($("key-secret-value").textContent);
      $("key-copy").textContent = "Copied";
    } catch (err) {
      window.getSelection().selectAllChildren($("key-secret-value"));  // the person copies it by hand
    }
  });

  /* Revoke asks once more in place: "Revoke" becomes "Really revoke?" for a few seconds. */
  keys.addEventListener("click", async (e) => {
    const btn = e.target.closest("[data-revoke]");
    if (!btn) return;
    if (!btn.dataset.armed) {
      btn.dataset.armed = "1";
      btn.textContent = "Really revoke?";
      setTimeout(() => { if (btn.isConnected) { delete btn.dataset.armed; btn.textContent = "Revoke"; } }, 5000);
      return;
    }
    const res = await ns.api.request("DELETE", "/api/keys/" + btn.dataset.revoke + "/");
    if (!res.ok) { error.textContent = ns.api.describe(res).text || "The key could not be revoked."; error.hidden = false; return; }
    const row = btn.closest("tr");
    row.classList.add("revoked");
    btn.parentNode.textContent = "Revoked just now";
    announce("Key " + res.data.name + " revoked: it no longer works.");
  });

  const archived = $("archived");
  archived.addEventListener("click", async (e) => {
    const btn = e.target.closest("[data-restore]");
    if (!btn) return;
    const res = await ns.api.patch("/api/chats/" + btn.dataset.restore + "/", { archived: false });
    if (!res.ok) { btn.textContent = "Try again"; return; }
    btn.closest("li").remove();
    announce("“" + (res.data.title || "Chat " + res.data.id) + "” is back in your chat list.");
  });
})(window.ChatUI = window.ChatUI || {});

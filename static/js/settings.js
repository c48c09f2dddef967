/* The chat's settings: a system prompt, a temperature and a reply length, saved
 * with the chat (PATCH /api/chats/{id}/) and used by its next runs. For a chat not
 * started yet they are kept here and sent when the first message creates it. */
(function (ns) {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const dialog = $("settings-dialog"), form = $("settings-form"), error = $("settings-error");
  const system = $("setting-system"), temperature = $("setting-temperature"), maxTokens = $("setting-max-tokens");
  const page = JSON.parse($("page-data").textContent);
  // A new chat's, starting from the person's default instructions (the settings page).
  let draft = { system_prompt: page.default_instructions || "", temperature: null, max_tokens: null };

  const current = () => (ns.state.chat ? ns.state.chat : draft);

  function show() {
    const c = current();
    system.value = c.system_prompt || "";
    temperature.value = c.temperature == null ? "" : c.temperature;
    maxTokens.value = c.max_tokens == null ? "" : c.max_tokens;
    error.hidden = true;
    dialog.returnValue = "";
    dialog.showModal();
    system.focus();
  }

  function read() {
    const t = temperature.value.trim(), m = maxTokens.value.trim();
    return { system_prompt: system.value, temperature: t === "" ? null : Number(t),
             max_tokens: m === "" ? null : Number(m) };
  }

  form.addEventListener("submit", async (e) => {
    if (e.submitter && e.submitter.value === "cancel") return;  // the dialog closes
    e.preventDefault();
    const values = read();
    if (!ns.state.chat) { draft = values; dialog.close("save"); ns.announce("Settings saved for this chat"); return; }
    const res = await ns.api.patch("/api/chats/" + ns.state.chat.id + "/", values);
    if (!res.ok) {
      error.textContent = ns.api.describe(res).text || "These settings could not be saved.";
      error.hidden = false;
      return;
    }
    ns.state.chat = res.data;
    dialog.close("save");
    ns.announce("Settings saved");
  });

  $("settings-open").addEventListener("click", show);

  ns.settings = { forNewChat: () => ({ ...draft }), show };
})(window.ChatUI = window.ChatUI || {});

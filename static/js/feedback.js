/* Feedback on a reply: thumbs up or down under it (pressed again: withdrawn), then an
 * optional comment; kept with its run (PUT/DELETE /api/runs/{id}/feedback). A Reply holds
 * what its asker gave as `reply.feedback` ({rating, comment} or null). */
(function (ns) {
  "use strict";

  const url = (reply) => "/api/runs/" + reply.run.id + "/feedback";

  /* The two buttons for a reply's footer. */
  function buttons(reply) {
    return ["up", "down"].map((rating) => {
      const btn = ns.ui.footButton("rate-" + rating, rating === "up" ? "Good reply" : "Bad reply", rating);
      const on = !!reply.feedback && reply.feedback.rating === rating;
      btn.setAttribute("aria-pressed", on ? "true" : "false");
      btn.addEventListener("click", () => rate(reply, rating, on));
      return btn;
    });
  }

  async function rate(reply, rating, withdraw) {
    const res = withdraw ? await ns.api.request("DELETE", url(reply)) : await ns.api.request("PUT", url(reply), { rating });
    if (!res.ok) { ns.toast("Your feedback could not be saved: " + ns.api.describe(res).title.toLowerCase() + "."); return; }
    reply.feedback = withdraw ? null : res.data;
    reply.renderFoot();
    const open = reply.el.querySelector(".feedback-form");
    if (open) open.remove();
    if (withdraw) { ns.announce("Feedback withdrawn"); return; }
    askComment(reply);
    reply.foot.querySelector('[data-action="rate-' + rating + '"]').focus({ preventScroll: true });
  }

  function button(type, className, text) {
    const btn = document.createElement("button");
    btn.type = type;
    btn.className = className;
    btn.textContent = text;
    return btn;
  }

  /* "What was good / wrong about it?" under the footer, with Skip and Send. */
  function askComment(reply) {
    const form = document.createElement("form");
    form.className = "feedback-form";
    const label = document.createElement("label");
    label.htmlFor = "feedback-" + reply.run.id;
    label.textContent = reply.feedback.rating === "up" ? "Thanks! What was good about it? (optional)"
      : "Thanks. What was wrong with it? (optional)";
    const area = document.createElement("textarea");
    area.id = "feedback-" + reply.run.id;
    area.rows = 2;
    area.maxLength = 2000;
    const actions = document.createElement("div");
    actions.className = "edit-actions";
    const skip = button("button", "btn btn-small", "Skip");
    actions.append(skip, button("submit", "btn btn-small btn-primary", "Send feedback"));
    form.append(label, area, actions);
    reply.foot.after(form);
    skip.addEventListener("click", () => form.remove());
    area.addEventListener("keydown", (e) => { if (e.key === "Escape") { e.preventDefault(); form.remove(); } });
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const res = await ns.api.request("PUT", url(reply), { rating: reply.feedback.rating, comment: area.value });
      if (!res.ok) { ns.toast(ns.api.describe(res).text || "Your comment could not be saved."); return; }
      reply.feedback = res.data;
      form.remove();
      ns.toast("Thanks for the feedback.", "info");
    });
  }

  ns.feedback = { buttons };
})(window.ChatUI = window.ChatUI || {});

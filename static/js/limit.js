/* A message's length against the limit the server keeps (settings MAX_MESSAGE_CHARS, in
 * the page's data): counted before sending, shown as the limit approaches. */
(function (ns) {
  "use strict";

  /* Characters as the server counts them (code points, not UTF-16 units). */
  function chars(text) {
    const pairs = text.match(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g);
    return text.length - (pairs ? pairs.length : 0);
  }

  /* `text`'s length against `limit` in the element `count`, shown from 90% of it; returns the length. */
  function show(count, text, limit) {
    const n = chars(text);
    const over = n > limit;
    count.hidden = n < limit * 0.9;
    count.classList.toggle("over", over);
    count.textContent = over
      ? "Too long to send: " + n.toLocaleString() + " characters, " + (n - limit).toLocaleString() +
        " over the limit of " + limit.toLocaleString() + ". Shorten it, or send it in parts."
      : n.toLocaleString() + " / " + limit.toLocaleString() + " characters";
    return n;
  }

  ns.limit = { chars, show };
})(window.ChatUI = window.ChatUI || {});

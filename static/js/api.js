/* The REST API from the page: session cookie + CSRF header, one result shape,
 * and the words a person reads for each error the platform can answer with. */
(function (ns) {
  "use strict";

  function csrfToken() {
    const field = document.querySelector("input[name=csrfmiddlewaretoken]");
    if (field) return field.value;
    const m = /(?:^|;\s*)csrftoken=([^;]+)/.exec(document.cookie);
    return m ? decodeURIComponent(m[1]) : "";
  }

  /* Resolves (never rejects) to {ok, status, data, error: {code, message, field}, retryAfter}. */
  async function request(method, url, body, headers) {
    const init = { method, credentials: "same-origin", headers: { Accept: "application/json", ...(headers || {}) } };
    if (method !== "GET") init.headers["X-CSRFToken"] = csrfToken();
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(url, init);
    } catch (e) {
      return { ok: false, status: 0, data: null, retryAfter: null,
               error: { code: "network", message: "The server could not be reached." } };
    }
    let data = null;
    if (resp.status !== 204) {
      try { data = await resp.json(); } catch (e) { data = null; }
    }
    const retry = parseInt(resp.headers.get("Retry-After") || "", 10);
    const result = { ok: resp.ok, status: resp.status, data, retryAfter: Number.isFinite(retry) ? retry : null, error: null };
    if (!resp.ok) {
      result.error = (data && data.error) || { code: "http_" + resp.status, message: resp.statusText || "Request failed" };
    }
    return result;
  }

  /* A failed request or run, in words: {title, text, retryAfter, retry, tone}.
   * `retry` says whether trying the same thing again can help. */
  function describe(result) {
    const err = result.error || {};
    const text = err.message || "";
    const retryAfter = result.retryAfter;
    switch (true) {
      case result.status === 0:
        return { title: "You seem to be offline", text: "The message was not sent. Check your connection, then retry.", retry: true, tone: "warn" };
      case err.code === "model_unavailable" || err.code === "model_disabled":
        return { title: "This model is unavailable right now", text: "It may be switched off or restarting. Pick another model above, or retry in a moment.", retry: true, retryAfter };
      case err.code === "overloaded":
        return { title: "The server is busy", text: "Lots of people are asking at once. Your message was not sent; it will be ready to retry shortly.", retry: true, retryAfter: retryAfter || 5, tone: "warn" };
      case result.status === 429:
        return { title: /budget/i.test(text) ? "Your team’s budget is used up" : "You’ve hit a limit", text: withPeriod(text), retry: true, retryAfter, tone: "warn" };
      case err.code === "queue_waiting":
        return { title: "Messages are waiting in this chat’s queue", text: "They go first: wait for them to start, or withdraw them.", retry: true, tone: "warn" };
      case result.status === 409:
        return { title: "A reply is already being written", text: "Wait for it to finish or stop it, then send again.", retry: true, tone: "warn" };
      case err.code === "model_not_found":
        return { title: "This model isn’t available to you", text: "Pick another model above.", retry: false };
      case err.code === "context_length_exceeded":
        return { title: "That message is too long for this model", text: contextText(text), retry: false };
      case /content$/.test(err.field || "") && / is (\d+) characters; the limit is (\d+)/.test(text): {
        const [, n, limit] = / is (\d+) characters; the limit is (\d+)/.exec(text);
        return { title: "Your message is too long to send",
                 text: "It is " + Number(n).toLocaleString() + " characters; one message can hold " +
                       Number(limit).toLocaleString() + ". Shorten it, or send it in parts.", retry: false };
      }
      case result.status === 401 || result.status === 403:
        return { title: "You’ve been signed out", text: "Sign in again to keep chatting.", retry: false, signIn: true };
      case result.status === 404:
        return { title: "This chat no longer exists", text: "It may have been deleted in another window.", retry: false };
      case result.status >= 500:
        return { title: "Something went wrong on our side", text: "It has been logged. Please retry.", retry: true };
      default:
        return { title: "That didn’t work", text: withPeriod(text), retry: false };
    }
  }

  /* A run that ended with an error event, or a failed run, in words. */
  function describeRunError(err) {
    const text = (err && err.message) || "The model stopped unexpectedly.";
    return { title: "The reply could not be finished", text: withPeriod(capitalise(text)) + " What was written so far is kept.", retry: true };
  }

  /* "... is N tokens ..., but model 'x' has room for R prompt tokens when replying with up to M tokens; ..." */
  function contextText(text) {
    const m = /is (\d+) tokens.*room for (\d+) prompt tokens when replying with up to (\d+) tokens/.exec(text);
    if (!m) return withPeriod(text);
    return "It is about " + Number(m[1]).toLocaleString() + " tokens; with a reply of up to " +
           Number(m[3]).toLocaleString() + " tokens this model can read " + Number(m[2]).toLocaleString() +
           ". Shorten the message, or pick a shorter reply length in the chat's settings.";
  }

  function withPeriod(text) {
    text = (text || "").trim();
    return text && !/[.!?]$/.test(text) ? text + "." : text;
  }

  function capitalise(text) {
    return text ? text[0].toUpperCase() + text.slice(1) : text;
  }

  function newKey() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    return "k" + Date.now().toString(36) + Math.random().toString(36).slice(2);
  }

  ns.api = { request, describe, describeRunError, csrfToken, newKey,
             get: (url) => request("GET", url), post: (url, body, headers) => request("POST", url, body, headers),
             patch: (url, body) => request("PATCH", url, body), del: (url) => request("DELETE", url) };
})(window.ChatUI = window.ChatUI || {});

/* Safe Markdown, inline spans: emphasis, strong, strike, code spans, links and
 * bare http(s) URLs, line breaks. Text nodes only, never HTML (see markdown.js). */
(function (ns) {
  "use strict";

  const ESCAPABLE = /[\\`*_{}[\]()#+\-.!~|<>"']/;
  const MAX_DEPTH = 12;

  function el(tag) {
    return document.createElement(tag);
  }

  const DELIMS = [["**", "strong"], ["__", "strong"], ["~~", "del"], ["*", "em"], ["_", "em"]];
  const WORD = /[\p{L}\p{N}]/u;

  function inline(text, parent, depth, noLinks) {
    let buf = "";
    let i = 0;
    const flush = () => { if (buf) { parent.append(document.createTextNode(buf)); buf = ""; } };
    while (i < text.length) {
      const c = text[i];
      if (c === "\\" && i + 1 < text.length && ESCAPABLE.test(text[i + 1])) { buf += text[i + 1]; i += 2; continue; }
      if (c === "\n") { flush(); parent.append(el("br")); i++; continue; }
      if (c === "`") {
        const run = /^`+/.exec(text.slice(i))[0];
        const end = findRun(text, run, i + run.length);
        if (end < 0) { buf += run; i += run.length; continue; }
        let body = text.slice(i + run.length, end).replace(/\n/g, " ");
        if (body.length > 2 && body[0] === " " && body[body.length - 1] === " ") body = body.slice(1, -1);
        flush();
        const code = el("code");
        code.textContent = body;
        parent.append(code);
        i = end + run.length;
        continue;
      }
      if ((c === "*" || c === "_" || c === "~") && depth < MAX_DEPTH) {
        const used = emphasis(text, i, parent, depth, noLinks, flush);
        if (used) { i = used; continue; }
      }
      if (c === "[" && !noLinks) {
        const used = link(text, i, parent, depth, flush);
        if (used) { i = used; continue; }
      }
      if (c === "h" && !noLinks && (i === 0 || /[\s(]/.test(text[i - 1]))) {
        const m = /^https?:\/\/[^\s<>"]+/i.exec(text.slice(i));
        if (m) {
          const url = m[0].replace(/[.,;:!?'")\]]+$/, "");
          if (url.length > 8 && safeUrl(url)) {
            flush();
            parent.append(anchor(url, document.createTextNode(url)));
            i += url.length;
            continue;
          }
        }
      }
      buf += c;
      i++;
    }
    flush();
  }

  function findRun(text, run, from) {
    const re = new RegExp("(^|[^`])" + run + "(?!`)", "g");
    re.lastIndex = Math.max(0, from - 1);
    let m;
    while ((m = re.exec(text))) {
      const at = m.index + m[1].length;
      if (at >= from) return at;
      re.lastIndex = at + 1;
    }
    return -1;
  }

  function emphasis(text, i, parent, depth, noLinks, flush) {
    for (const [delim, tag] of DELIMS) {
      if (!text.startsWith(delim, i)) continue;
      const after = text[i + delim.length];
      if (!after || /\s/.test(after) || after === delim[0]) continue;
      if (delim[0] === "_" && i > 0 && WORD.test(text[i - 1])) continue;
      const end = findCloser(text, delim, i + delim.length);
      if (end < 0) continue;
      flush();
      const node = el(tag);
      inline(text.slice(i + delim.length, end), node, depth + 1, noLinks);
      parent.append(node);
      return end + delim.length;
    }
    return 0;
  }

  /* The closing run for `delim`: a run of exactly its length (or a `***` that
   * closes both an inner and an outer one) not preceded by a space. */
  function findCloser(text, delim, from) {
    const ch = delim[0], size = delim.length;
    let j = from;
    while (j < text.length) {
      const c = text[j];
      if (c === "\\") { j += 2; continue; }
      if (c === "`") {
        const run = /^`+/.exec(text.slice(j))[0];
        const end = findRun(text, run, j + run.length);
        j = end < 0 ? j + run.length : end + run.length;
        continue;
      }
      if (c === ch) {
        let run = 1;
        while (text[j + run] === ch) run++;
        const next = text[j + run];
        const closable = !/\s/.test(text[j - 1]) && !(ch === "_" && next && WORD.test(next));
        if (closable && run === size) return j;
        if (closable && run === 3 && size < 3) return j + 3 - size;
        j += run;
        continue;
      }
      j++;
    }
    return -1;
  }

  function link(text, i, parent, depth, flush) {
    const close = text.indexOf("](", i + 1);
    if (close < 0 || /[\n[\]]/.test(text.slice(i + 1, close))) return 0;
    const end = text.indexOf(")", close + 2);
    if (end < 0) return 0;
    const target = text.slice(close + 2, end).trim().split(/\s+/)[0] || "";
    if (!safeUrl(target)) return 0;
    flush();
    const a = anchor(target, null);
    inline(text.slice(i + 1, close), a, depth + 1, true);
    parent.append(a);
    return end + 1;
  }

  function safeUrl(value) {
    if (!/^https?:\/\//i.test(value)) return false;
    try {
      const url = new URL(value);
      return url.protocol === "http:" || url.protocol === "https:";
    } catch (e) {
      return false;
    }
  }

  function anchor(href, child) {
    const a = el("a");
    a.href = href;
    a.target = "_blank";
    a.rel = "noopener noreferrer nofollow";
    if (child) a.append(child);
    return a;
  }

  ns.markdownInline = { inline, safeUrl };
})(window.ChatUI = window.ChatUI || {});

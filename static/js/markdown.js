/* Safe Markdown for chat text: a string in, DOM nodes out.
 *
 * Nothing here ever parses HTML. Every piece of source text becomes a Text node
 * (so `<script>` or `<img onerror>` in a reply or a message is shown as the
 * characters it is), and only these elements are ever created: p, h1-h6, strong,
 * em, del, code, pre, ul, ol, li, blockquote, hr, br, a, and the code block's
 * frame and copy button. Links are made only for http(s) URLs; anything else
 * stays plain text. Built for streaming: an unclosed code fence renders as a
 * code block, an unclosed `**` as the characters themselves.
 */
(function (ns) {
  "use strict";

  /* Blocks here; inline spans (emphasis, code, links) in markdown-inline.js. */
  const FENCE = /^( {0,3})(`{3,}|~{3,})(.*)$/;
  const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
  const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
  const QUOTE = /^ {0,3}> ?(.*)$/;
  const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?$/;
  const MAX_DEPTH = 12;
  const inline = (text, parent, depth) => ns.markdownInline.inline(text, parent, depth);

  function el(tag, className) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    return node;
  }

  function indentOf(line) {
    return line.length - line.replace(/^ +/, "").length;
  }

  function startsBlock(line) {
    return FENCE.test(line) && !isBacktickInfoInvalid(line) || HEADING.test(line) || RULE.test(line) ||
      QUOTE.test(line) || ITEM.test(line);
  }

  function isBacktickInfoInvalid(line) {
    const m = FENCE.exec(line);
    return m && m[2][0] === "`" && m[3].includes("`");
  }

  /* ---- blocks ---------------------------------------------------------- */

  function blocks(lines, parent, depth) {
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if (!line.trim()) { i++; continue; }
      if ((m = FENCE.exec(line)) && !isBacktickInfoInvalid(line)) { i = fence(lines, i, m, parent); continue; }
      if ((m = HEADING.exec(line))) {
        const h = el("h" + m[1].length);
        inline(m[2] || "", h, depth);
        parent.append(h);
        i++;
        continue;
      }
      if (RULE.test(line)) { parent.append(el("hr")); i++; continue; }
      if (QUOTE.test(line) && depth < MAX_DEPTH) {
        const inner = [];
        while (i < lines.length && (m = QUOTE.exec(lines[i]))) { inner.push(m[1]); i++; }
        const quote = el("blockquote");
        blocks(inner, quote, depth + 1);
        parent.append(quote);
        continue;
      }
      if (ITEM.test(line) && depth < MAX_DEPTH) { i = list(lines, i, parent, depth); continue; }
      const para = [];
      while (i < lines.length && lines[i].trim() && (para.length === 0 || !startsBlock(lines[i]))) {
        para.push(lines[i].trim());
        i++;
      }
      const p = el("p");
      inline(para.join("\n"), p, depth);
      parent.append(p);
    }
  }

  function fence(lines, start, m, parent) {
    const indent = m[1].length, marker = m[2];
    const lang = m[3].trim().split(/\s+/)[0] || "";
    const close = new RegExp("^ {0,3}" + (marker[0] === "`" ? "`" : "~") + "{" + marker.length + ",}[ \\t]*$");
    const body = [];
    let i = start + 1;
    while (i < lines.length && !close.test(lines[i])) {
      body.push(lines[i].slice(Math.min(indent, indentOf(lines[i]))));
      i++;
    }
    parent.append(codeBlock(body.join("\n"), lang));
    return i < lines.length ? i + 1 : i;
  }

  function codeBlock(text, lang) {
    const frame = el("div", "code-block");
    const head = el("div", "code-head");
    const label = el("span", "code-lang");
    label.textContent = lang || "code";
    const copy = el("button", "code-copy");
    copy.type = "button";
    copy.dataset.copy = "code";
    copy.setAttribute("aria-label", lang ? "Copy " + lang + " code" : "Copy code");
    const word = el("span", "code-copy-label");
    word.textContent = "Copy";
    copy.append(copyIcon(), word);
    head.append(label, copy);
    const pre = el("pre");
    const code = el("code");
    if (lang) code.dataset.lang = lang;
    code.textContent = text;
    pre.append(code);
    frame.append(head, pre);
    return frame;
  }

  function copyIcon() {
    const SVG = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("width", "14");
    svg.setAttribute("height", "14");
    svg.setAttribute("aria-hidden", "true");
    const rect = document.createElementNS(SVG, "rect");
    for (const [k, v] of [["x", 8], ["y", 8], ["width", 12], ["height", 12], ["rx", 2.5]]) rect.setAttribute(k, v);
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", "M16 8V6.5A2.5 2.5 0 0 0 13.5 4h-7A2.5 2.5 0 0 0 4 6.5v7A2.5 2.5 0 0 0 6.5 16H8");
    for (const node of [rect, path]) {
      node.setAttribute("fill", "none");
      node.setAttribute("stroke", "currentColor");
      node.setAttribute("stroke-width", "1.8");
      svg.append(node);
    }
    return svg;
  }

  function list(lines, start, parent, depth) {
    const first = ITEM.exec(lines[start]);
    const base = first[1].length;
    const ordered = /\d/.test(first[2]);
    const listEl = el(ordered ? "ol" : "ul");
    if (ordered && parseInt(first[2], 10) !== 1) listEl.start = parseInt(first[2], 10);
    let i = start;
    while (i < lines.length) {
      const m = ITEM.exec(lines[i]);
      if (!m || m[1].length > base + 1 || m[1].length < base || /\d/.test(m[2]) !== ordered) break;
      const body = [m[3] || ""];
      i++;
      while (i < lines.length) {
        const line = lines[i];
        if (!line.trim()) {
          let j = i;
          while (j < lines.length && !lines[j].trim()) j++;
          if (j < lines.length && indentOf(lines[j]) > base && !sameLevelItem(lines[j], base)) {
            while (i < j) { body.push(""); i++; }
            continue;
          }
          break;
        }
        if (indentOf(line) > base + 1) { body.push(line.slice(Math.min(indentOf(line), base + m[2].length + 1))); i++; continue; }
        if (startsBlock(line)) break;
        body.push(line.trim());
        i++;
      }
      const li = el("li");
      blocks(body, li, depth + 1);
      unwrapTight(li);
      listEl.append(li);
      let j = i;
      while (j < lines.length && !lines[j].trim()) j++;
      if (j > i && j < lines.length && sameLevelItem(lines[j], base)) i = j;
    }
    parent.append(listEl);
    return i;
  }

  function sameLevelItem(line, base) {
    const m = ITEM.exec(line);
    return m && m[1].length >= base && m[1].length <= base + 1;
  }

  function unwrapTight(li) {
    const only = li.firstChild;
    if (only && only.nodeName === "P" && (!only.nextSibling || only.nextSibling.nodeName === "UL" ||
        only.nextSibling.nodeName === "OL")) {
      li.replaceChild(fragmentOf(only), only);
    }
  }

  function fragmentOf(node) {
    const frag = document.createDocumentFragment();
    while (node.firstChild) frag.append(node.firstChild);
    return frag;
  }

  /* ---- entry points ---------------------------------------------------- */

  function render(text) {
    const frag = document.createDocumentFragment();
    const lines = String(text).replace(/\r\n?/g, "\n").split("\n")
      .map((line) => line.replace(/^\t+/, (tabs) => "    ".repeat(tabs.length)));
    blocks(lines, frag, 0);
    return frag;
  }

  function renderInto(target, text) {
    target.replaceChildren(render(text));
  }

  ns.markdown = { render, renderInto, safeUrl: ns.markdownInline.safeUrl };
})(window.ChatUI = window.ChatUI || {});

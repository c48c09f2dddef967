/* Markdown for chat text: markdown-it (raw HTML off) renders, DOMPurify cleans the
 * result as a second line of defence, highlight.js colours finished code blocks,
 * KaTeX (loaded the first time a reply has math) writes formulas as MathML.
 *
 * Links are made only for http(s) URLs (anything else stays text) and open in a new
 * tab; images are not rendered. Nothing in a reply ever becomes a script, a style or
 * an event handler: markdown-it escapes every `<`, and DOMPurify would drop them anyway.
 *
 * Streaming: `new Streamer(el).update(text)` renders each finished top-level block
 * once and re-renders only the last (still growing) block per call, without syntax
 * colours until it is finished, so a frame costs the same at token 4,000 as at token 40.
 */
(function (ns) {
  "use strict";

  const PURIFY = {
    USE_PROFILES: { html: true, mathMl: true }, ADD_TAGS: ["semantics", "annotation"], ADD_ATTR: ["target"],
    FORBID_ATTR: ["style"],
    FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "img", "svg"], RETURN_DOM_FRAGMENT: true,
  };
  window.DOMPurify.setConfig(PURIFY);  // once: parsing the config on every call took half its time
  const KATEX_URL = "/static/vendor/katex/katex.min.js";
  let colour = true;  // highlight code while rendering (off for a block still being written)

  function highlight(code, lang) {
    if (!colour || !lang || !window.hljs || !hljs.getLanguage(lang)) return "";
    try { return hljs.highlight(code, { language: lang, ignoreIllegals: true }).value; } catch (e) { return ""; }
  }

  const md = window.markdownit({ html: false, linkify: true, typographer: false, breaks: true, highlight });
  md.linkify.set({ fuzzyLink: false, fuzzyEmail: false });
  md.disable(["image"]);
  md.validateLink = (url) => /^https?:\/\//i.test(url.trim());

  const rules = md.renderer.rules;
  const baseLink = rules.link_open || ((tokens, i, opts, env, self) => self.renderToken(tokens, i, opts));
  rules.link_open = (tokens, i, opts, env, self) => {
    tokens[i].attrSet("target", "_blank");
    tokens[i].attrSet("rel", "noopener noreferrer nofollow");
    return baseLink(tokens, i, opts, env, self);
  };
  rules.fence = (tokens, i) => {
    const token = tokens[i];
    const lang = token.info.trim().split(/\s+/)[0].toLowerCase().replace(/[^a-z0-9+#_-]/g, "");
    const code = token.content.replace(/\n$/, "");  // the copy button copies exactly the code
    const body = highlight(code, lang) || md.utils.escapeHtml(code);
    const cls = lang ? ' class="hljs language-' + lang + '"' : "";
    return "<pre" + (lang ? ' data-lang="' + lang + '"' : "") + "><code" + cls + ">" + body + "</code></pre>\n";
  };
  rules.code_block = (tokens, i) => "<pre><code>" + md.utils.escapeHtml(tokens[i].content.replace(/\n$/, "")) +
    "</code></pre>\n";
  rules.table_open = () => '<div class="table-wrap"><table>\n';
  rules.table_close = () => "</table></div>\n";
  ns.mathPlugin(md, { render: renderMath });

  /* ---- math: KaTeX as MathML (no inline styles, no fonts), loaded on first use */

  let katexState = window.katex ? "ready" : "none";

  function renderMath(tex, display) {
    if (katexState === "ready") {
      try {
        return katex.renderToString(tex, { displayMode: display, output: "mathml", throwOnError: false });
      } catch (e) { /* fall through: shown as code */ }
    } else if (katexState === "none") {
      katexState = "loading";
      const script = document.createElement("script");
      script.src = KATEX_URL;
      script.onload = () => { katexState = "ready"; document.dispatchEvent(new CustomEvent("chatui:math-ready")); };
      script.onerror = () => { katexState = "failed"; };
      document.head.append(script);
    }
    return '<code class="math-pending">' + md.utils.escapeHtml(tex) + "</code>";  // until KaTeX is here
  }

  /* ---- HTML -> safe DOM ------------------------------------------------- */

  function copyIcon() {
    const SVG = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(SVG, "svg");
    for (const [k, v] of [["viewBox", "0 0 24 24"], ["width", 14], ["height", 14], ["aria-hidden", "true"]]) svg.setAttribute(k, v);
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

  /* A code block's frame: the language and a copy button, built here (never from the text). */
  function frame(pre) {
    const lang = pre.dataset.lang || "";
    const box = document.createElement("div");
    box.className = "code-block";
    const head = document.createElement("div");
    head.className = "code-head";
    const label = document.createElement("span");
    label.className = "code-lang";
    label.textContent = lang || "code";
    const copy = document.createElement("button");
    copy.type = "button";
    copy.className = "code-copy";
    copy.dataset.copy = "code";
    copy.setAttribute("aria-label", lang ? "Copy " + lang + " code" : "Copy code");
    const word = document.createElement("span");
    word.className = "code-copy-label";
    word.textContent = "Copy";
    copy.append(copyIcon(), word);
    head.append(label, copy);
    pre.replaceWith(box);
    box.append(head, pre);
  }

  function toDom(html) {
    const frag = window.DOMPurify.sanitize(html);
    frag.querySelectorAll("pre").forEach(frame);
    return frag;
  }

  function normalise(text) {
    return String(text).replace(/\r\n?/g, "\n");
  }

  /* The whole text at once, finished (with colours). */
  function render(text) {
    colour = true;
    return toDom(md.render(normalise(text)));
  }

  function renderInto(target, text) {
    target.replaceChildren(render(text));
  }

  /* ---- streaming -------------------------------------------------------- */

  function lineOffset(text, line) {
    let at = 0;
    for (let i = 0; i < line && at >= 0; i++) at = text.indexOf("\n", at) + 1 || -1;
    return at < 0 ? text.length : at;
  }

  class Streamer {
    constructor(target) {
      this.target = target;
      this.source = "";  // text rendered so far
      this.done = 0;  // chars of it in finished blocks, rendered for good
      this.live = [];  // the nodes of the last block, replaced on every update
    }

    reset() {
      this.target.replaceChildren();
      this.source = "";
      this.done = 0;
      this.live = [];
    }

    /* Show `text` (the reply so far; `final` once it is complete: the last block
     * gets its colours too). The last block stays replaceable, so a reply that is
     * continued later carries on inside it. */
    update(text, final) {
      text = normalise(text);
      if (text.slice(0, this.done) !== this.source.slice(0, this.done)) this.reset();
      this.source = text;
      const tail = text.slice(this.done);
      const env = {};
      const tokens = md.parse(tail, env);
      let cut = 0;  // everything before the last top-level block is finished
      for (let i = tokens.length - 1; i > 0; i--) {
        const t = tokens[i];
        if (t.level === 0 && t.map && t.nesting >= 0) { cut = i; break; }
      }
      if (cut > 0) {
        colour = true;
        const finished = toDom(md.renderer.render(tokens.slice(0, cut), md.options, env));
        this.target.insertBefore(finished, this.live[0] || null);
        this.done += lineOffset(tail, tokens[cut].map[0]);
      }
      colour = !!final;
      const last = toDom(md.renderer.render(tokens.slice(cut), md.options, env));
      colour = true;
      for (const node of this.live) node.remove();
      this.live = [...last.childNodes];
      this.target.append(last);
    }
  }

  ns.markdown = { render, renderInto, Streamer, safeUrl: md.validateLink };
})(window.ChatUI = window.ChatUI || {});

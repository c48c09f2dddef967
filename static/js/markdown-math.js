/* A markdown-it plugin for TeX math: $…$ and \(…\) inline, $$…$$ and \[…\] as blocks
 * (\[…\] inside a line too, shown as a display formula).
 * `render(tex, display)` returns the HTML (see markdown.js: KaTeX's MathML). A `$`
 * opens math only when a non-space follows it, and closes only after a non-space when
 * no digit follows, so "costs $5 and $10" stays text. */
(function (ns) {
  "use strict";

  function inlineRule(render) {
    return (state, silent) => {
      const src = state.src, start = state.pos;
      let open, close;
      if (src.startsWith("\\(", start)) { open = "\\("; close = "\\)"; }
      else if (src.startsWith("\\[", start)) { open = "\\["; close = "\\]"; }
      else if (src[start] === "$" && src[start + 1] !== "$") { open = "$"; close = "$"; }
      else return false;
      const from = start + open.length;
      if (open === "$" && (!src[from] || /\s/.test(src[from]))) return false;
      let end = src.indexOf(close, from);
      while (end > 0 && open === "$" && (/\s/.test(src[end - 1]) || /\d/.test(src[end + 1] || "") || src[end - 1] === "\\")) {
        end = src.indexOf(close, end + 1);
      }
      if (end < 0 || end === from) return false;
      if (!silent) {
        const token = state.push("math_inline", "math", 0);
        token.content = src.slice(from, end);
        token.markup = open;
        token.meta = { display: open === "\\[" };
      }
      state.pos = end + close.length;
      return true;
    };
  }

  function blockRule(state, startLine, endLine, silent) {
    const lineText = (n) => state.src.slice(state.bMarks[n] + state.tShift[n], state.eMarks[n]);
    const first = lineText(startLine);
    const open = first.startsWith("$$") ? "$$" : first.startsWith("\\[") ? "\\[" : null;
    if (!open || state.sCount[startLine] - state.blkIndent >= 4) return false;
    const close = open === "$$" ? "$$" : "\\]";
    let body = first.slice(2), line = startLine, found = false;
    if (body.trimEnd().endsWith(close) && body.trim().length >= close.length) {
      body = body.trimEnd().slice(0, -close.length);
      found = true;
    }
    while (!found && ++line < endLine) {
      const text = lineText(line);
      if (text.trimEnd().endsWith(close)) { body += "\n" + text.trimEnd().slice(0, -close.length); found = true; }
      else body += "\n" + text;
    }
    if (silent) return true;
    const next = found ? line + 1 : endLine;  // an unclosed block (still streaming) runs to the end
    const token = state.push("math_block", "math", 0);
    token.block = true;
    token.content = body.trim();
    token.map = [startLine, next];
    state.line = next;
    return true;
  }

  ns.mathPlugin = (md, { render }) => {
    md.inline.ruler.before("escape", "math_inline", inlineRule(render));
    md.block.ruler.before("fence", "math_block", blockRule, { alt: ["paragraph", "reference", "blockquote", "list"] });
    md.renderer.rules.math_inline = (tokens, i) => render(tokens[i].content, !!(tokens[i].meta && tokens[i].meta.display));
    md.renderer.rules.math_block = (tokens, i) => "<div class=\"math-block\">" + render(tokens[i].content, true) + "</div>\n";
  };
})(window.ChatUI = window.ChatUI || {});

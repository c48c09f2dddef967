"""What a regular expression in a JSON Schema (`pattern`, `patternProperties`) may ask
of the engine's grammar, checked in pure Python before the request is admitted.

vLLM's grammar engine (xgrammar) turns a counted repetition `X{m,n}` into copies of X:
a repetition inside another's multiplies the copies, and its compilation time grows
with that product and with how ambiguous the repeated part is (`(\\w{1,9}\\s?){1,9}`
took 5-12 s to compile on the CPU build, `(\\w{1,20}\\s?){1,50}` over a minute). Past
128 it keeps a count instead, which it cannot compile alone (`\\w{1,129}` fails) and
checks at every token when nested: `^(\\w{1,99}\\s?){1,999}$` took 10 s per token,
and every request on the engine waited for it (issue 44). Loops (`*`, `+`) cost
neither. So a count is at most MAX_PATTERN_REPEAT, and counts nested in one another
multiply to at most MAX_PATTERN_NESTED; backreferences and word boundaries, which the
engine refuses, are refused here by name.

The pattern is read by Python's own regular-expression parser (`re._parser`, the one
`re.compile` uses): jsonschema already requires a pattern to compile with `re`."""
import re
from re import _constants as sre, _parser as sre_parse

MAX_PATTERN_CHARS = 1000
MAX_PATTERN_GROUP_DEPTH = 16  # groups inside groups: also bounds the parser's recursion
MAX_PATTERN_REPEAT = 100  # one counted repetition's copies (`{m,n}`: n, or m when unbounded)
MAX_PATTERN_NESTED = 32  # the product of the copies of repetitions nested in one another

_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT}
_BOUNDARIES = {sre.AT_BOUNDARY, sre.AT_NON_BOUNDARY, sre.AT_UNI_BOUNDARY, sre.AT_UNI_NON_BOUNDARY,
               sre.AT_LOC_BOUNDARY, sre.AT_LOC_NON_BOUNDARY}


def pattern_problem(pattern: str) -> str | None:
    """Why the engine should not be given `pattern`, in words for the client; None if it may."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"is {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}"
    if _group_depth(pattern) > MAX_PATTERN_GROUP_DEPTH:
        return f"nests groups more than {MAX_PATTERN_GROUP_DEPTH} deep"
    try:
        tree = sre_parse.parse(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        return f"is not a valid regular expression: {exc}"
    return _tree_problem(tree)


def _group_depth(pattern: str) -> int:
    """How deep `(` nest, outside character classes and escapes (an estimate the parser
    then makes exact: it only has to be read before the parser recurses into them)."""
    depth = deepest = 0
    escaped = in_class = False
    for c in pattern:
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif c == ")":
            depth = max(0, depth - 1)
    return deepest


def _copies(low: int, high) -> int:
    """How many copies of its body a repetition costs: loops (`*`, `+`, `?`) one."""
    if high is sre.MAXREPEAT or high == sre.MAXREPEAT:
        return max(1, low)
    return max(1, high) if high > 1 else 1


def _tree_problem(tree) -> str | None:
    stack = [(tree, 1)]  # (a parsed sequence, the product of the copies of the repetitions around it)
    while stack:
        items, around = stack.pop()
        for op, arg in items:
            if op in (sre.GROUPREF, sre.GROUPREF_EXISTS):
                return "uses a backreference, which the engine cannot constrain output to"
            if op is sre.AT and arg in _BOUNDARIES:
                return "uses a word boundary (\\b or \\B), which the engine cannot constrain output to"
            if op in _REPEATS:
                low, high, body = arg
                copies = _copies(low, high)
                if copies > MAX_PATTERN_REPEAT:
                    return (f"repeats a part {copies} times; a count may be at most {MAX_PATTERN_REPEAT} "
                            "(use * or + for a longer run)")
                if around * copies > MAX_PATTERN_NESTED and around > 1:
                    return (f"nests counted repetitions whose counts multiply to {around * copies}; the limit is "
                            f"{MAX_PATTERN_NESTED} (write the inner part with * or +, or lower the counts)")
                stack.append((body, around * copies))
            elif op is sre.SUBPATTERN:
                stack.append((arg[-1], around))
            elif op is sre.BRANCH:
                stack.extend((branch, around) for branch in arg[1])
            elif op in (sre.ASSERT, sre.ASSERT_NOT):
                stack.append((arg[1], around))
    return None

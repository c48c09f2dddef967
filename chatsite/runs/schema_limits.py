"""Limits on JSON a client sends to be stored (a Responses call's metadata, tool
definitions) or to constrain a reply (a JSON Schema: response_format, a tool's
parameters), checked before anything walks it recursively.

Every walk here keeps its own stack: a schema nested 150 levels deep made jsonschema's
recursive check raise RecursionError, a 500 (issue 44). Strings and keys must be text
Postgres can store in a jsonb column (no NUL, no lone surrogate). A schema may nest
objects and arrays at most MAX_SCHEMA_DEPTH deep (vLLM refuses past 64: a tool's
parameters go 5 levels down in the schema that makes a reply call it), name at most
MAX_ENUM_VALUES enum values in all (OpenAI's limit), point `$ref` only at a part of
itself that exists (`#/$defs/Name`), and its patterns must pass pattern_limits."""
from chatsite.errors import InvalidInput
from chatsite.runs.pattern_limits import pattern_problem
from chatsite.text import has_surrogates

# The error a run ends with when the engine itself cannot take its schema (the worker
# asks it before submitting: inference/constraint_check.py): the client's to fix, a 400.
CONSTRAINT_REFUSED = "structured_output_refused"

MAX_SCHEMA_DEPTH = 48
MAX_JSON_DEPTH = 64  # any other stored JSON
MAX_ENUM_VALUES = 1000

# JSON Schema (2020-12, and draft-07's spellings) keywords whose values are subschemas.
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_SCHEMA_ONE = ("items", "additionalItems", "additionalProperties", "unevaluatedProperties", "unevaluatedItems",
               "contains", "propertyNames", "not", "if", "then", "else")


def _path(field: str, keys: tuple) -> str:
    out = field
    for key in keys:
        out += f"[{key}]" if isinstance(key, int) else f".{key}"
    return out


def check_json(value, *, field: str, max_depth: int = MAX_JSON_DEPTH) -> None:
    """`value` (decoded JSON) nests objects and arrays at most `max_depth` deep, and all
    its strings and keys are storable text. Raises InvalidInput naming the part."""
    stack = [(value, (), 1)]
    while stack:
        node, keys, depth = stack.pop()
        if isinstance(node, str):
            _check_text(node, field=_path(field, keys))
            continue
        if not isinstance(node, (dict, list)):
            continue
        if depth > max_depth:
            raise InvalidInput(f"{field} nests objects and arrays more than {max_depth} levels deep", field=field)
        if isinstance(node, dict):
            for key, child in node.items():
                _check_text(key, field=_path(field, keys), what="a key")
                stack.append((child, (*keys, key), depth + 1))
        else:
            stack.extend((child, (*keys, i), depth + 1) for i, child in enumerate(node))


def _check_text(text: str, *, field: str, what: str = "text") -> None:
    if "\x00" in text:
        raise InvalidInput(f"{field}: {what} contains a NUL character (\\u0000), which is not allowed", field=field)
    if has_surrogates(text):
        raise InvalidInput(f"{field}: {what} has an unpaired surrogate escape (\\ud800-\\udfff), which is not "
                           "valid Unicode", field=field)


def subschemas(schema: dict):
    """(subschema, keys from the root) for `schema` and every schema inside it, found
    by keyword (so an enum or const value is never taken for one); no recursion."""
    stack = [(schema, ())]
    while stack:
        node, keys = stack.pop()
        if not isinstance(node, dict):
            continue
        yield node, keys
        for keyword in _SCHEMA_MAPS:
            if isinstance(node.get(keyword), dict):
                stack.extend((sub, (*keys, keyword, name)) for name, sub in node[keyword].items())
        for keyword in _SCHEMA_LISTS:
            if isinstance(node.get(keyword), list):
                stack.extend((sub, (*keys, keyword, i)) for i, sub in enumerate(node[keyword]))
        stack.extend((node[keyword], (*keys, keyword)) for keyword in _SCHEMA_ONE if isinstance(node.get(keyword), dict))


def check_schema_cost(schema: dict, *, field: str) -> None:
    """`schema` may be given to the engine as a constraint: storable, not too deep, its
    patterns, enums and references within bounds. Raises InvalidInput naming the part."""
    check_json(schema, field=field, max_depth=MAX_SCHEMA_DEPTH)
    enum_values = 0
    for node, keys in subschemas(schema):
        where = _path(field, keys)
        if isinstance(node.get("pattern"), str):
            _check_pattern(node["pattern"], field=f"{where}.pattern")
        if isinstance(node.get("patternProperties"), dict):
            for pattern in node["patternProperties"]:
                _check_pattern(pattern, field=f"{where}.patternProperties")
        if isinstance(node.get("$ref"), str):
            _check_ref(schema, node["$ref"], field=f"{where}.$ref")
        if isinstance(node.get("enum"), list):
            enum_values += len(node["enum"])
            if enum_values > MAX_ENUM_VALUES:
                raise InvalidInput(f"{field} lists more than {MAX_ENUM_VALUES} enum values in all",
                                   field=f"{where}.enum")


def _check_pattern(pattern: str, *, field: str) -> None:
    problem = pattern_problem(pattern)
    if problem is not None:
        raise InvalidInput(f"{field} {problem}", field=field)


def _check_ref(root: dict, ref: str, *, field: str) -> None:
    """A `$ref` is "#" or a JSON pointer "#/..." through object members of the schema
    itself (the engine resolves no other: no remote documents, anchors or list positions)."""
    if ref != "#" and not ref.startswith("#/"):
        raise InvalidInput(f"{field} {ref[:80]!r}: only references within the schema (\"#/$defs/Name\") are "
                           "supported", field=field)
    node = root
    for part in ref[2:].split("/") if ref != "#" else ():
        name = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or name not in node:
            raise InvalidInput(f"{field} {ref[:80]!r} points at nothing in the schema: it must name a member of an "
                               "object in it, such as a definition under \"$defs\"", field=field)
        node = node[name]

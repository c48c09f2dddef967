"""What the fake engine writes when a JSON Schema constrains its reply: a value that
matches the schema, chosen by a seeded random generator (so the same request gets the
same value). It covers the schemas tools and response formats use (objects, arrays,
strings, numbers, booleans, null, enum, const, anyOf/oneOf, allOf, local $ref); a
real engine's grammar covers the rest."""
import random

_WORDS = ("paris", "loop", "value", "item", "list", "code", "order", "blue", "seven", "north")


def instance(schema, rng: random.Random, *, root=None, depth: int = 0):
    """A value valid under `schema` (a dict, or a boolean schema)."""
    root = schema if root is None else root
    if schema is True or not isinstance(schema, dict) or depth > 8:
        return None if depth > 8 else rng.choice(_WORDS)
    if "$ref" in schema:
        return instance(_resolve(root, schema["$ref"]), rng, root=root, depth=depth + 1)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return instance(schema[key][0], rng, root=root, depth=depth + 1)
    if schema.get("allOf"):
        merged = {}
        for part in schema["allOf"]:
            merged = {**merged, **part, "properties": {**merged.get("properties", {}), **part.get("properties", {})}}
        return instance(merged, rng, root=root, depth=depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    return _typed(kind, schema, rng, root, depth)


def _typed(kind: str, schema: dict, rng: random.Random, root, depth: int):
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: instance(sub, rng, root=root, depth=depth + 1) for name, sub in props.items()}
    if kind == "array":
        low = schema.get("minItems", 1)
        count = max(low, min(schema.get("maxItems", low + 1), low + 1))
        items = schema.get("items", {})
        return [instance(items, rng, root=root, depth=depth + 1) for _ in range(count)]
    if kind == "integer":
        low, high = schema.get("minimum", 0), schema.get("maximum", 100)
        return rng.randint(int(low), int(high))
    if kind == "number":
        low, high = schema.get("minimum", 0), schema.get("maximum", 100)
        return round(rng.uniform(low, high), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    text = rng.choice(_WORDS)
    return (text * (1 + schema.get("minLength", 0) // len(text)))[:schema.get("maxLength", 64)]


def _resolve(root: dict, ref: str):
    node = root
    for part in ref.removeprefix("#/").split("/") if ref.startswith("#/") else []:
        node = node.get(part, {}) if isinstance(node, dict) else {}
    return node

"""The limits on what a constrained reply may ask of the engine, in pure Python: which
patterns and schemas pass, which are refused, and the part each refusal names."""
import pytest

from chatsite.errors import InvalidInput
from chatsite.runs.pattern_limits import pattern_problem
from chatsite.runs.schema_limits import check_json, check_schema_cost


@pytest.mark.parametrize("pattern", [
    r"^\d{3}-\d{3}-\d{4}$", r"^(\d{1,3}\.){3}\d{1,3}$", r"^([a-z0-9]+-)*[a-z0-9]+$", r"^[\w.+-]+@([\w-]+\.)+\w+$",
    r"^(\+\d{1,3}\s)?\(?\d{3}\)?[\s.-]\d{3}[\s.-]\d{4}$", r"^[a-z]{1,100}$", r"^(\w{1,5}\s?){1,5}$", r"^(\w+)*$",
    r"^(?=a)\w+$", r"^[(]{2}\\\($",
])
def test_ordinary_patterns_pass(pattern):
    assert pattern_problem(pattern) is None


@pytest.mark.parametrize("pattern,words", [
    (r"^(\w{1,99}\s?){1,999}$", "repeats a part 999 times"),  # issue 44's: 10-20 s a token
    (r"^\w{1,129}$", "repeats a part 129 times"),
    (r"^a{101,}$", "repeats a part 101 times"),
    (r"^(\w{1,9}\s?){1,9}$", "multiply to 81"),
    (r"^((a{1,4}){1,4}){1,4}$", "multiply to 64"),
    (r"^(a)\1$", "backreference"),
    (r"\bword\b", "word boundary"),
    (r"(" * 17 + "a" + ")" * 17, "nests groups more than 16 deep"),
    ("a" * 1001, "is 1001 characters"),
    (r"\p{L}", "not a valid regular expression"),
])
def test_costly_or_unsupported_patterns_are_refused(pattern, words):
    problem = pattern_problem(pattern)
    assert problem is not None and words in problem, problem


def test_a_schema_nested_150_deep_is_refused_without_recursion():
    schema = {"type": "string"}
    for _ in range(150):
        schema = {"type": "object", "properties": {"a": schema}}
    with pytest.raises(InvalidInput) as info:
        check_schema_cost(schema, field="s")
    assert info.value.field == "s" and "more than 48 levels" in info.value.message


@pytest.mark.parametrize("schema,field", [
    ({"properties": {"a": {"pattern": r"(a)\1"}}}, "s.properties.a.pattern"),
    ({"items": [{"type": "string"}, {"pattern": r"\b"}]}, "s.items[1].pattern"),
    ({"patternProperties": {r"^\w{1,200}$": {}}}, "s.patternProperties"),
    ({"$defs": {"A": {"$ref": "#/$defs/B"}}}, "s.$defs.A.$ref"),
    ({"anyOf": [{"$ref": "#/anyOf/1"}, {}]}, "s.anyOf[0].$ref"),  # a list position: the engine resolves none
    ({"$ref": "other.json#/x"}, "s.$ref"),
    ({"enum": list(range(600)), "anyOf": [{"enum": list(range(401))}]}, "s.anyOf[0].enum"),
    ({"properties": {"a": {"const": "x\x00"}}}, "s.properties.a.const"),
    ({"description": "\ud800"}, "s.description"),
])
def test_each_refusal_names_the_part(schema, field):
    with pytest.raises(InvalidInput) as info:
        check_schema_cost(schema, field="s")
    assert info.value.field == field, info.value.message


def test_data_is_not_read_as_schema():
    # an enum value or a property named like a keyword is not a pattern or a reference
    check_schema_cost({"enum": [{"pattern": r"(a)\1", "$ref": "#/nowhere"}],
                       "properties": {"pattern": {"type": "string"}, "$ref": {"type": "string"}},
                       "$defs": {"A": {}}, "items": {"$ref": "#/$defs/A"}}, field="s")


def test_stored_json_is_text_postgres_takes():
    check_json({"k": ["v", 1, None, {"x": "y"}]}, field="metadata")
    for bad in ({"k": "v\x00"}, {"k\x00": "v"}, {"k": ["\udc00"]}):
        with pytest.raises(InvalidInput):
            check_json(bad, field="metadata")

"""The demo evaluation's scorer on fixed texts: each check passes what it should and fails the rest."""
import pytest

from bench.eval_demo.checks import Prompt, judge, load_prompts, most_repeated_line, table_rows

TABLE = "Here it is:\n\n| Country | Capital |\n|---|---|\n| France | Paris |\n| Japan | Tokyo |\n| Italy | Rome |\n"


def prompt(**checks) -> Prompt:
    return Prompt("p", "test", "a question", checks)


def test_the_shipped_prompts_load_each_with_a_check():
    prompts = load_prompts()
    assert 30 <= len(prompts) <= 50
    assert len({p.id for p in prompts}) == len(prompts)
    assert "capital-france" in {p.id for p in prompts}
    assert {"fact", "arithmetic", "code", "list", "table", "definition"} <= {p.kind for p in prompts}


def test_an_unknown_check_is_refused(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[[prompt]]\nid = "x"\nkind = "fact"\ntext = "q"\ncontians = ["Paris"]\n')
    with pytest.raises(ValueError, match="'x'"):
        load_prompts(path)


def test_a_right_reply_that_ended_passes_and_one_cut_at_the_limit_does_not():
    p = prompt(any=["Paris"])
    assert judge(p, "The capital of France is Paris.", "stop").passed
    cut = judge(p, "The capital of France is Paris, a city", "length")
    assert cut.correct and not cut.ended and not cut.passed
    wrong = judge(p, "The capital of France is Ladle.", "stop")
    assert not wrong.correct and not wrong.passed


def test_a_line_repeated_more_than_three_times_is_a_loop():
    looped = "Once upon a time.\n" + "He loved King Alcazar.\n" * 4
    assert most_repeated_line(looped) == 4
    assert not judge(prompt(any=["King"]), looped, "stop").no_loop
    assert judge(prompt(any=["King"]), "He loved King Alcazar.\n" * 3, "stop").no_loop
    # fences, blank lines and a table's rule rows are not lines of text
    assert most_repeated_line("```\nx = 1\n```\n\n```\ny = 2\n```\n\n```\nz\n```\n\n|---|\n|---|\n|---|\n|---|") == 1


def test_a_table_counts_only_outside_a_code_fence():
    assert table_rows(TABLE) == 3
    assert judge(prompt(table=3), TABLE, "stop").passed
    fenced = "```\n" + TABLE + "```\n"
    assert table_rows(fenced) == 0
    assert not judge(prompt(table=3), fenced, "stop").correct
    assert not judge(prompt(table=4), TABLE, "stop").correct


def test_a_list_counts_numbered_and_bulleted_items():
    reply = "Tips:\n1. Keep a schedule.\n2) No coffee late.\n- A dark room.\n* Less screen time.\n"
    assert judge(prompt(items=4), reply, "stop").correct
    assert not judge(prompt(items=5), reply, "stop").correct


def test_code_must_be_in_a_fenced_block_holding_every_part():
    reply = "Sure:\n```python\ndef reverse(xs):\n    return xs[::-1]\n```\n"
    assert judge(prompt(code=["def ", "return"]), reply, "stop").correct
    assert not judge(prompt(code=["def ", "return"]), "def reverse(xs): return xs[::-1]", "stop").correct
    assert not judge(prompt(code=["def ", "% 2"]), reply, "stop").correct


def test_regex_all_and_max_words():
    assert judge(prompt(regex=r"\b(4|four)\b"), "2 + 2 = 4.", "stop").correct
    assert not judge(prompt(regex=r"\b(4|four)\b"), "2 + 2 = 42.", "stop").correct
    assert judge(prompt(all=["monday", "Sunday"]), "Monday ... sunday", "stop").correct
    assert not judge(prompt(all=["Monday", "Sunday"]), "Monday only", "stop").correct
    assert not judge(prompt(any=["Paris"], none=["London"]), "London. Paris is also a hub.", "stop").correct
    assert not judge(prompt(any=["hi"], max_words=3), "hi there my friend", "stop").correct

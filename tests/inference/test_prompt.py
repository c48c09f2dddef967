"""Prompt assembly keeps the system message and the newest turns that fit."""
import pytest

from inference.fake_backend import CharTokenizer
from inference.prompt import PromptTooLong, assemble

TOK = CharTokenizer()


def turns(n):
    out = [{"role": "system", "content": "Be brief."}]
    for i in range(n):
        out += [{"role": "user", "content": f"question {i} " + "x" * 40},
                {"role": "assistant", "content": f"answer {i} " + "y" * 40}]
    out.append({"role": "user", "content": "last question"})
    return out


def test_everything_kept_when_it_fits():
    plan = assemble(TOK, turns(2), max_prompt_tokens=10_000)
    text = TOK.decode(plan.token_ids)
    assert plan.num_messages_dropped == 0 and text.startswith("<|system|>\nBe brief.")
    assert text.endswith("<|user|>\nlast question<|end|>\n<|assistant|>\n")


def test_oldest_turns_dropped_first_and_system_kept():
    msgs = turns(10)
    full = len(assemble(TOK, msgs, max_prompt_tokens=10_000).token_ids)
    plan = assemble(TOK, msgs, max_prompt_tokens=full // 2)
    text = TOK.decode(plan.token_ids)
    assert len(plan.token_ids) <= full // 2
    assert plan.num_messages_dropped > 0 and "Be brief." in text
    assert "question 0" not in text and "answer 9" in text and "last question" in text
    # the fewest drops: keeping one more turn would not fit
    one_more = msgs[:1] + msgs[plan.num_messages_dropped:]
    assert len(assemble(TOK, one_more, max_prompt_tokens=10_000).token_ids) > full // 2


def test_continuation_is_appended_after_the_generation_prompt():
    plan = assemble(TOK, turns(0), max_prompt_tokens=10_000, continuation="partial ans")
    assert TOK.decode(plan.token_ids).endswith("<|assistant|>\npartial ans")


def test_last_message_too_long_raises():
    with pytest.raises(PromptTooLong):
        assemble(TOK, [{"role": "user", "content": "z" * 500}], max_prompt_tokens=100)

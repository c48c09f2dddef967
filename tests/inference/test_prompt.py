"""Prompt assembly keeps the system message and the newest turns that fit."""
import pytest

from inference.fake_backend import CharTokenizer
from inference.prompt import REFILL, PromptTooLong, assemble

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
    room = full // 2
    plan = assemble(TOK, msgs, max_prompt_tokens=room)
    text = TOK.decode(plan.token_ids)
    assert plan.num_messages_dropped > 0 and "Be brief." in text
    assert "question 0" not in text and "answer 9" in text and "last question" in text
    # down to REFILL of the room, the fewest drops that do: keeping one more turn would be more
    assert len(plan.token_ids) <= int(room * REFILL)
    one_more = msgs[:1] + msgs[plan.num_messages_dropped:]
    assert len(assemble(TOK, one_more, max_prompt_tokens=10_000).token_ids) > int(room * REFILL)
    # refill=1: just enough to fit
    tight = assemble(TOK, msgs, max_prompt_tokens=room, refill=1.0)
    assert int(room * REFILL) < len(tight.token_ids) <= room and tight.num_messages_dropped < plan.num_messages_dropped


def test_a_last_turn_longer_than_the_refill_is_kept_alone_if_it_fits():
    msgs = [{"role": "user", "content": "a" * 30}, {"role": "assistant", "content": "b" * 30},
            {"role": "user", "content": "q" * 200}]
    alone = len(assemble(TOK, msgs[-1:], max_prompt_tokens=10_000).token_ids)
    room = alone + 5  # the last turn fits the room, not REFILL of it
    assert alone > room * REFILL
    plan = assemble(TOK, msgs, max_prompt_tokens=room)
    assert plan.num_messages_dropped == 2 and len(plan.token_ids) == alone


def test_continuation_is_appended_after_the_generation_prompt():
    plan = assemble(TOK, turns(0), max_prompt_tokens=10_000, continuation="partial ans")
    assert TOK.decode(plan.token_ids).endswith("<|assistant|>\npartial ans")
    assert plan.num_carried_tokens == 0  # a reply carried on is this run's prompt


def test_what_earlier_attempts_streamed_follows_and_is_counted_apart():
    alone = assemble(TOK, turns(0), max_prompt_tokens=10_000, continuation="partial ")
    plan = assemble(TOK, turns(0), max_prompt_tokens=10_000, continuation="partial ", carried="answer so far")
    assert TOK.decode(plan.token_ids).endswith("<|assistant|>\npartial answer so far")
    both, reply = (len(TOK.encode(t, add_special_tokens=False)) for t in ("partial answer so far", "partial "))
    assert plan.num_carried_tokens == both - reply  # encoded as one text, as the engine reads it
    assert len(plan.token_ids) - plan.num_carried_tokens == len(alone.token_ids)  # the prompt billed


def test_a_system_message_alone_is_a_prompt_the_model_answers():
    plan = assemble(TOK, [{"role": "system", "content": "Greet the user."}], max_prompt_tokens=100)
    assert TOK.decode(plan.token_ids) == "<|system|>\nGreet the user.<|end|>\n<|assistant|>\n"


def test_without_the_generation_prompt_the_last_turn_is_left_as_it_is():
    plan = assemble(TOK, turns(0), max_prompt_tokens=10_000, add_generation_prompt=False)
    assert TOK.decode(plan.token_ids).endswith("<|user|>\nlast question<|end|>\n")


def test_token_ids_are_a_raw_prompt_as_they_are():
    from inference.prompt import encode_raw

    plan = encode_raw(TOK, "", max_prompt_tokens=100, carried="more", token_ids=[7, 8, 9])
    assert plan.token_ids[:3] == [7, 8, 9] and TOK.decode(plan.token_ids[3:]) == "more"


def test_last_message_too_long_raises():
    with pytest.raises(PromptTooLong):
        assemble(TOK, [{"role": "user", "content": "z" * 500}], max_prompt_tokens=100)


def test_a_raw_prompt_is_the_text_as_it_is_then_the_continuation():
    from inference.prompt import encode_raw

    plan = encode_raw(TOK, "Once upon a time", max_prompt_tokens=100, carried=" there was")
    assert TOK.decode(plan.token_ids) == "Once upon a time there was"
    assert (plan.num_messages_kept, plan.num_messages_dropped, plan.num_carried_tokens) == (1, 0, len(TOK.encode(" there was")))
    with pytest.raises(PromptTooLong):
        encode_raw(TOK, "x" * 31, max_prompt_tokens=10)


def test_a_raw_prompt_on_the_real_tokenizer_gets_no_chat_template():
    from django.conf import settings

    from inference.prompt import encode_raw

    folder = settings.CHATSITE["DEMO_MODELS_DIR"] / "smollm2-135m-instruct"
    if not (folder / "tokenizer.json").is_file():
        pytest.skip("the real model is not built here")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder))
    ids = encode_raw(tok, "def add(a, b):", max_prompt_tokens=100).token_ids
    assert tok.decode(ids) == "def add(a, b):" and "<|im_start|>" not in tok.decode(ids)

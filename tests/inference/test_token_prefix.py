"""Prompts built from stored token ids (inference.token_prefix) against a fresh rendering
of the same messages, over many generated conversations: next turns, regenerates, edits
and continues, as the worker builds them.

What the engine gets is the stored ids: its own prompt of the turn before, then the ids
it generated, then the new part's ids. They spell exactly the fresh rendering's text;
they differ from its ids only at joins and inside replies: (a) inside a generated reply,
where the model chose a split the tokenizer would not (a fresh rendering re-tokenizes it,
and the engine's prefix cache misses from there on); (b) at a reply's start, where the
generation prompt's last token and the reply's first would merge in one text (ChatML's
"assistant\n" and a reply that begins with a newline: "\n\n" is one token); (c) at the
join of the stored ids and the new part, where the tokenizer would have merged across the
boundary (never with ChatML, whose new part begins with the special <|im_end|>; often with
the fake engine's three-bytes-a-token tokenizer). The engine gets the stored ids because
they are the ids it computed (its prefix cache holds them) and spell the same text. The
summary is printed (pytest -s) and its figures asserted."""
import random

import pytest
from django.conf import settings

from inference import chat_templates, token_prefix
from inference.fake_backend import CharTokenizer
from inference.prompt import assemble

CONVERSATIONS = 40
ROOM = 8000
WORDS = ("the", "loop", "returns", "value", "naïve", "café", "x=1", "2+2", "(a)", "ok.", "ünïcødé", "🙂", "\n",
         "  ", "don't", "--", "https://example.org", "123456", "foo_bar", "»", "—", "Hello,", "world!")


@pytest.fixture(scope="module")
def smollm2():
    folder = settings.CHATSITE["DEMO_MODELS_DIR"] / "smollm2-135m-instruct"
    if not (folder / "tokenizer.json").is_file():
        pytest.skip("the real model is not built here (scripts/setup.sh builds it)")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def text(rng: random.Random, n: int) -> str:
    out = "".join(rng.choice(WORDS) + rng.choice(("", " ", " ", " ", ", ")) for _ in range(n))
    return out.strip(" ") or "hi"


def generated_ids(tokenizer, reply: str, rng: random.Random) -> list[int]:
    """Ids a model could have produced for `reply`: the tokenizer's own split of it, or
    (half the time) a split of its own choice (pieces tokenized apart, as a sampler can
    pick a shorter token where the tokenizer would merge), then the end of turn."""
    if rng.random() < 0.5:
        ids = tokenizer.encode(reply, add_special_tokens=False)
    else:
        cuts = sorted(rng.sample(range(1, len(reply)), min(3, len(reply) - 1))) if len(reply) > 1 else []
        pieces = [reply[a:b] for a, b in zip([0] + cuts, cuts + [len(reply)])]
        ids = [i for piece in pieces for i in tokenizer.encode(piece, add_special_tokens=False)]
    eos = getattr(tokenizer, "eos_token_id", None)
    return ids + ([eos] if eos is not None else [])


def boundaries(tokenizer, text: str) -> set[int]:
    """The character offsets where a fresh tokenization of `text` puts a token boundary."""
    if isinstance(tokenizer, CharTokenizer):  # three bytes a token
        data, out, at = text.encode(), set(), 0
        for i, ch in enumerate(text):
            at += len(ch.encode())
            if at % 3 == 0:
                out.add(i + 1)
        return out | {len(text)} if data else {0}
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    return {end for _, end in offsets}


class Tally:
    def __init__(self):
        self.prompts = self.same = self.fell_back = 0
        self.in_reply = self.at_join = self.at_reply_start = self.elsewhere = 0
        self.joins_split = 0  # joins of the stored ids and the new part where one text has no token boundary
        self.cache_kept: list[float] = []  # of the stored prefix, the share a fresh rendering still matches

    def compare(self, tokenizer, plan, fresh, known, spans):
        """`plan` (stored ids) against `fresh` (assemble's): same text; where they differ."""
        self.prompts += 1
        assert tokenizer.decode(plan.token_ids) == tokenizer.decode(fresh.token_ids) == plan.text
        head = len(tokenizer.decode(known.token_ids))  # where the stored ids end and the new part begins
        self.joins_split += head not in boundaries(tokenizer, plan.text)
        assert plan.token_ids[:len(known.token_ids)] == known.token_ids  # the engine's own ids, as they were
        if plan.token_ids == fresh.token_ids:
            self.same += 1
            self.cache_kept.append(1.0)
            return
        first = next((i for i, (a, b) in enumerate(zip(plan.token_ids, fresh.token_ids)) if a != b),
                     min(len(plan.token_ids), len(fresh.token_ids)))
        self.cache_kept.append(min(first, len(known.token_ids)) / len(known.token_ids))
        if first >= len(known.token_ids):
            self.at_join += 1
        elif any(first == a - 1 for a, _ in spans):  # the prompt's last token would merge with the reply's first
            self.at_reply_start += 1
        elif any(a <= first < b for a, b in spans):
            self.in_reply += 1
        else:
            self.elsewhere += 1

    def line(self, name: str) -> str:
        kept = sum(self.cache_kept) / len(self.cache_kept)
        return (f"{name}: {self.prompts} prompts from stored ids ({self.fell_back} fell back), {self.same} equal to "
                f"a fresh rendering; first difference inside a generated reply {self.in_reply}, at a reply's start "
                f"{self.at_reply_start}, at the join of the stored ids and the new part {self.at_join}, elsewhere "
                f"{self.elsewhere}; joins a fresh tokenization would not split at {self.joins_split}; a fresh "
                f"rendering's ids match the stored prefix for {kept:.3f} of it on average")


def walk(tokenizer, rng: random.Random, tally: Tally, template: str | None) -> None:
    """One conversation, turn by turn as the worker builds prompts, with a regenerate,
    an edit and a continue along the way; each prompt compared with a fresh rendering."""
    salt = token_prefix.salt(tokenizer, template)
    messages = ([{"role": "system", "content": text(rng, 5)}] if rng.random() < 0.5 else [])
    known, spans = None, []

    def prompt(msgs, continuation=""):
        fresh = assemble(tokenizer, msgs, max_prompt_tokens=ROOM, continuation=continuation, chat_template=template)
        if known is None:
            return fresh
        plan = token_prefix.extend(tokenizer, msgs, known, max_prompt_tokens=ROOM, salt=salt,
                                   continuation=continuation, chat_template=template)
        if plan is None:
            tally.fell_back += 1
            return fresh
        tally.compare(tokenizer, plan, fresh, known, spans)
        return plan

    def generate(plan, reply):
        nonlocal known
        output = generated_ids(tokenizer, reply, rng)
        spans.append((len(plan.token_ids), len(plan.token_ids) + len(output)))
        known = token_prefix.record(tokenizer, prompt_ids=plan.token_ids, prompt_text=plan.text, output_ids=output,
                                    salt=salt)

    for turn in range(rng.randint(3, 6)):
        messages.append({"role": "user", "content": text(rng, rng.randint(1, 12))})
        before = known
        plan = prompt(messages)
        if turn and rng.random() < 0.3:  # a regenerate: the same prompt again, from the same record
            assert prompt(messages).token_ids == plan.token_ids
        if turn and rng.random() < 0.3:  # an edit of the question: the same record, another question
            messages[-1] = {"role": "user", "content": text(rng, rng.randint(1, 12))}
            known = before
            plan = prompt(messages)
        reply = text(rng, rng.randint(1, 20))
        if rng.random() < 0.3:  # cut at its length limit, then continued
            head, tail = reply[:len(reply) // 2] or reply, reply[len(reply) // 2:]
            generate(plan, head)
            plan = prompt(messages, continuation=head)
            reply = head + tail
            messages.append({"role": "assistant", "content": reply})
            generate(plan, tail)
        else:
            messages.append({"role": "assistant", "content": reply})
            generate(plan, reply)


@pytest.mark.parametrize("kind", ["smollm2", "smollm2-tools-template", "fake"])
def test_stored_ids_spell_the_fresh_rendering_and_differ_only_in_replies_and_at_joins(kind, request):
    if kind == "fake":
        tokenizer, template = CharTokenizer(), None
    else:
        tokenizer = request.getfixturevalue("smollm2")
        template = chat_templates.read(chat_templates.SMOLLM2_TOOLS) if kind.endswith("template") else None
    rng, tally = random.Random(f"joins-{kind}"), Tally()
    for _ in range(CONVERSATIONS):
        walk(tokenizer, rng, tally, template)
    print("\n" + tally.line(kind))
    assert tally.fell_back == 0  # every turn after the first was built from the stored ids
    assert tally.elsewhere == 0  # the new part's ids are the tokenizer's, the history's the engine's
    assert tally.prompts > CONVERSATIONS * 2
    if kind == "fake":
        assert tally.joins_split > 0  # three bytes a token: the join splits where one text would not
    else:
        assert tally.at_join == tally.joins_split == 0  # the new part starts with a special token
        assert tally.in_reply > 0  # the replies generated with splits of their own
        assert tally.at_reply_start > 0  # a reply that begins with a newline


def test_a_record_of_another_history_template_or_reply_is_not_used(smollm2):
    salt = token_prefix.salt(smollm2, None)
    messages = [{"role": "user", "content": "Hi"}]
    plan = assemble(smollm2, messages, max_prompt_tokens=ROOM)
    output = smollm2.encode("Hello there.", add_special_tokens=False) + [smollm2.eos_token_id]
    known = token_prefix.record(smollm2, prompt_ids=plan.token_ids, prompt_text=plan.text, output_ids=output,
                                salt=salt)
    turn = messages + [{"role": "assistant", "content": "Hello there."}, {"role": "user", "content": "Bye"}]
    built = token_prefix.extend(smollm2, turn, known, max_prompt_tokens=ROOM, salt=salt)
    assert built is not None and built.from_ids == len(known.token_ids)
    assert built.token_ids == assemble(smollm2, turn, max_prompt_tokens=ROOM).token_ids
    other_reply = [*messages, {"role": "assistant", "content": "Hello there!"}, {"role": "user", "content": "Bye"}]
    assert token_prefix.extend(smollm2, other_reply, known, max_prompt_tokens=ROOM, salt=salt) is None
    system_added = [{"role": "system", "content": "Be brief."}, *turn]
    assert token_prefix.extend(smollm2, system_added, known, max_prompt_tokens=ROOM, salt=salt) is None
    template = chat_templates.read(chat_templates.SMOLLM2_TOOLS)
    other_salt = token_prefix.salt(smollm2, template)
    assert other_salt != salt
    assert token_prefix.extend(smollm2, turn, known, max_prompt_tokens=ROOM, salt=other_salt,
                               chat_template=template) is None
    # Too long whole: None, and assemble drops the oldest turns instead.
    assert token_prefix.extend(smollm2, turn, known, max_prompt_tokens=len(built.token_ids) - 1, salt=salt) is None


@pytest.mark.parametrize("kind", ["smollm2", "fake"])
def test_a_conversation_past_its_room_keeps_its_start_and_its_ids(kind, request):
    """Turn after turn past the room, as the worker builds prompts (the last reply's record,
    else a fresh assembly): a prompt that drops turns drops down to REFILL of the room, and
    the turns after it start with the record's ids (its dropped turns left out) until they
    fill the room again. Just enough drops each time (refill=1, as before) would start
    nearly every turn past the room with a new first message: cold, and tokenized whole."""
    tokenizer = CharTokenizer() if kind == "fake" else request.getfixturevalue("smollm2")
    salt, rng, room = token_prefix.salt(tokenizer, None), random.Random(f"past-{kind}"), 600
    starts = {}
    for arm, refill in (("after", None), ("before", 1.0)):
        messages, known, built = [{"role": "system", "content": "Be brief."}], None, []
        for turn in range(60):
            messages.append({"role": "user", "content": text(rng, rng.randint(3, 12))})
            plan = None
            if arm == "after" and known is not None:
                plan = token_prefix.extend(tokenizer, messages, known, max_prompt_tokens=room, salt=salt)
            if plan is None:
                plan = assemble(tokenizer, messages, max_prompt_tokens=room,
                                **({} if refill is None else {"refill": refill}))
            assert len(plan.token_ids) <= room
            if plan.from_ids:  # the record's ids, then the new part: the text of the same drops, rendered
                assert plan.token_ids[:plan.from_ids] == known.token_ids
                kept = messages[:1] + messages[1 + plan.num_messages_dropped:]
                assert tokenizer.decode(plan.token_ids) == assemble(tokenizer, kept, max_prompt_tokens=10 ** 6).text
            built.append(plan)
            reply = text(rng, rng.randint(3, 15))
            known = token_prefix.record(tokenizer, prompt_ids=plan.token_ids, prompt_text=plan.text,
                                        output_ids=generated_ids(tokenizer, reply, rng), salt=salt,
                                        dropped=plan.num_messages_dropped)
            messages.append({"role": "assistant", "content": reply})
        past = [p for p in built if p.num_messages_dropped]
        # A turn starts cold (a new first message) when it drops more than the turn before.
        cold = sum(1 for a, b in zip(built, built[1:]) if b.num_messages_dropped != a.num_messages_dropped)
        starts[arm] = (len(past), cold, sum(1 for p in past if p.from_ids))
    print(f"\n{kind}: past the room of {room} tokens, turns (cold starts, from the record's ids): "
          f"after {starts['after']}, before {starts['before']}")
    past, cold, from_ids = starts["after"]
    assert past > 20 and cold <= past // 2  # most start as the turn before did (~3 turns a drop here)
    assert from_ids == past - cold  # and those start with the record's ids
    assert starts["before"][1] >= starts["before"][0] * 9 // 10  # dropping just enough: nearly every one starts cold

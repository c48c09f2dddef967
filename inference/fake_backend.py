"""A deterministic stand-in engine for fast platform tests (never the default).

The reply is a pure function of (prompt token ids, seed, max_tokens): a
sequence of words from a fixed vocabulary, one token per word, emitted at a
chosen pace. A prompt containing FAIL_MARKER fails mid-stream, to test the
path of an engine error; a JSON Schema containing REFUSE_MARKER is one the engine
cannot compile. A reply constrained by a JSON Schema is a value that
matches it (inference.fake_json); a prompt that offers tools, answering a user's
turn, calls one in the Hermes format the shipped tool template teaches; both come
out three characters a token, so markup and JSON are split across steps. Asked for
log probabilities, each position gets a distribution over the vocabulary that is a
pure function of the same inputs and the position, in which the word emitted is
usually, not always, the most likely.

Its outputs come as vLLM's do: a request asked for one output per `stream_interval`
steps (the worker asks for about one per its coalescing window) gets its first token
at once, then one output of the next `interval` tokens every `interval` steps, and
the last with whatever remains (vLLM's DELTA outputs), and an abort's at once, as it is asked. A benchmark on it then sees
the hand-offs per token a worker sees on the real engine, not one per token.
"""
import asyncio
import dataclasses
import hashlib
import json
import math
import random
import struct

from inference.fake_json import instance
from inference.stream_interval import stream_interval
from inference.fake_details import PrefixCache, named_by_id, prompt_logprobs, word_token_id
from inference.types import Chunk, DetailChunk, EngineStats, GenerationRequest, TokenLogprob

FAIL_MARKER = "[[engine-fail]]"
REFUSE_MARKER = "[[engine-refuses]]"  # in a JSON Schema: refused as the real engine refuses what it cannot compile
TOOLS_OPEN = "<|tools|>\n"
ASSISTANT_OPEN = "<|assistant|>\n"  # the generation prompt CharTokenizer's template ends with
PIECE_CHARS = 3  # a JSON or tool-call reply's characters per token
MAX_LAG_SECONDS = 0.1  # how far the step clock may fall behind (see _steps)
_WORDS = ("the", "loop", "returns", "a", "value", "when", "each", "item", "is", "read",
          "from", "list", "and", "code", "runs", "in", "order", "with", "**bold**", "`x`")


class CharTokenizer:
    """A tokenizer with a chat template for the fake engine: each token is 3 bytes
    of UTF-8 packed into one id, so token counts match the web tier's estimate
    for a model whose tokenizer it cannot read (one token per 3 bytes)."""

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=False, tools=None,
                            chat_template=None):
        """Each turn as `<|role|>\ncontent<|end|>`; tools first, as JSON, and an
        assistant's calls as `<tool_call>` blocks (the pool's `chat_template` is not read)."""
        text = f"{TOOLS_OPEN}{json.dumps(tools)}<|end|>\n" if tools else ""
        for m in messages:
            calls = "".join(f"<tool_call>{json.dumps(c.get('function'))}</tool_call>"
                            for c in m.get("tool_calls") or ())
            text += f"<|{m['role']}|>\n{m['content']}{calls}<|end|>\n"
        return text + (ASSISTANT_OPEN if add_generation_prompt else "")

    def encode(self, text, add_special_tokens=False):
        data = text.encode()
        return [int.from_bytes(data[i:i + 3], "big") | (len(data[i:i + 3]) << 24) for i in range(0, len(data), 3)]

    def decode(self, ids):
        """Text of ids made by encode(); ids it did not make decode to nothing."""
        head = ids[:-1]
        if head and min(head) >= 3 << 24 and max(head) < 4 << 24:
            # What encode() makes: 3-byte ids but the last. Packed as 4 big-endian bytes each (the first
            # the length), the length bytes dropped: in C, where the loop below costs a benchmark's
            # fake worker ~150 Python lines a prompt.
            data = bytearray(struct.pack(f">{len(head)}I", *head))
            del data[::4]
            return (bytes(data) + self._bytes(ids[-1:])).decode(errors="replace")
        return self._bytes(ids).decode(errors="replace")

    @staticmethod
    def _bytes(ids) -> bytes:
        return b"".join((i & 0xFFFFFF).to_bytes(i >> 24, "big") for i in ids
                        if 1 <= i >> 24 <= 3 and (i & 0xFFFFFF) < 1 << (8 * (i >> 24)))


_TOKENIZER = CharTokenizer()


class _Active:
    __slots__ = ("words", "emit", "fail_at", "next", "prompt_tokens", "reason", "details", "interval", "sent",
                 "cached", "output_ids")

    def __init__(self, words, emit, fail_at, prompt_tokens, reason, details=None, interval=1, cached=0,
                 output_ids=()):
        self.output_ids = output_ids  # the whole reply's ids as the fake tokenizer spells its text
        self.words, self.emit, self.fail_at, self.prompt_tokens, self.reason = words, emit, fail_at, prompt_tokens, reason
        self.details = details  # a detailed request's: (logprobs or None, token ids or None, prompt logprobs or None)
        self.interval = interval  # steps per output (vLLM's stream_interval)
        self.cached = cached  # prompt tokens its prefix cache served
        self.next = 0  # words generated
        self.sent = 0  # words handed out


def word_logprobs(request: GenerationRequest, words: list[str]) -> list[TokenLogprob]:
    """Each emitted word's logprob and the request's `logprobs` most likely words at
    its position (with the emitted word's leading space), from a softmax over the
    vocabulary whose weights depend only on the prompt, the seed and the position."""
    digest = hashlib.sha256(repr(request.prompt_token_ids).encode()).hexdigest()
    out = []
    for i, emitted in enumerate(words):
        if i > 0 and emitted.startswith(" ") and emitted[1:] in _WORDS:
            space, word = " ", emitted[1:]
        else:  # the first word, or a piece of a JSON or tool-call reply
            space, word = "", emitted
        vocab = _WORDS if word in _WORDS else (*_WORDS, word)
        rng = random.Random(f"{digest}:{request.seed or 0}:{i}")
        weights = {w: rng.random() * 3.0 + (2.5 if w == word else 0.0) for w in vocab}
        norm = math.log(sum(math.exp(v) for v in weights.values()))
        ranked = sorted(vocab, key=lambda w: -weights[w])[:request.logprobs]
        out.append(TokenLogprob(emitted, weights[word] - norm,
                                tuple((space + w, weights[w] - norm) for w in ranked)))
    return out


def _hand_out(req: _Active, finish_reason: str | None) -> None:
    """One output: the words made since the request's last one (the last output when
    `finish_reason` is set)."""
    start, req.sent = req.sent, req.next
    text, n, last = "".join(req.words[start:req.next]), req.next - start, finish_reason is not None
    cached = req.cached if last else 0
    # The reply's ids: what the record of a reply keeps (a stopped one's: the ids of what it wrote).
    if finish_reason in ("stop", "length"):
        output = req.output_ids
    else:
        output = _TOKENIZER.encode("".join(req.words[:req.next])) if finish_reason == "abort" else ()
    if req.details is None:
        req.emit(Chunk(text, n, last, finish_reason, req.prompt_tokens, None, cached, output))
        return
    logprobs, ids, prompt = req.details
    req.emit(DetailChunk(text, n, last, finish_reason, req.prompt_tokens, None, cached, output,
                         logprobs=None if logprobs is None else tuple(logprobs[start:req.next]),
                         token_ids=() if ids is None else tuple(ids[start:req.next]),
                         prompt_logprobs=prompt if start == 0 else None))


class FakeBackend:
    """One step loop for all requests, as an engine steps its whole batch: every step
    each active request gets its next word (one token). It costs next to nothing per
    token, so what a benchmark measures around it is the platform's own cost.
    `step_seconds` paces the steps (0: as fast as the loop turns); `output_window`
    (seconds, or a callable read at each request's submission) sets how often a request
    gets an output, as VllmBackend's does."""

    def __init__(self, *, step_seconds: float = 0.01, startup_seconds: float = 0.0, output_window=0.0):
        self.tokenizer = CharTokenizer()
        self.step_seconds = step_seconds
        self.output_window = output_window
        self.startup_seconds = startup_seconds
        self._active: dict[str, _Active] = {}
        self._stepper: asyncio.Task | None = None
        self._generated = 0
        self._prefix_cache = PrefixCache()
        self._decoded: tuple = (None, "")  # (the last prompt's ids object, its text): _prompt

    async def start(self) -> None:
        await asyncio.sleep(self.startup_seconds)

    def reply_words(self, request: GenerationRequest) -> list[str]:
        """The reply's words (a constrained reply's pieces). A prompt that carries on a
        reply this engine began (earlier attempts' text after the generation prompt: a
        worker that died) gets the rest of that reply, as a model would write it; a
        constrained one only if its `carried_ids` are that text (the grammar is carried on)."""
        begun = self._begun(request)
        if begun is not None and request.constrained and self.tokenizer.decode(request.carried_ids) != begun[1]:
            begun = None  # vLLM's grammar starts afresh unless told what was written: a second value follows
        if begun is not None:
            base_ids, text = begun
            whole = self._fresh_words(dataclasses.replace(request, prompt_token_ids=base_ids,
                                                          max_tokens=request.max_tokens + len(text)))
            written = ""
            for k in range(len(whole) + 1):  # the whole reply carried: nothing more to write
                if written == text:
                    return whole[k:k + request.max_tokens]
                written += whole[k] if k < len(whole) else ""
        return self._fresh_words(request)

    def _prompt(self, request: GenerationRequest) -> str:
        """The prompt's text, decoded once per request (its ids are read three times per add:
        the fake engine's own cost shows in a benchmark's worker figure)."""
        ids = request.prompt_token_ids
        if self._decoded[0] is not ids:
            self._decoded = (ids, self.tokenizer.decode(ids))
        return self._decoded[1]

    def _begun(self, request: GenerationRequest) -> tuple[list[int], str] | None:
        """(the prompt's ids up to the assistant's turn, the text after it), or None."""
        prompt = self._prompt(request)
        start = prompt.rfind(ASSISTANT_OPEN)
        if start < 0 or start + len(ASSISTANT_OPEN) == len(prompt):
            return None
        cut = start + len(ASSISTANT_OPEN)
        return self.tokenizer.encode(prompt[:cut]), prompt[cut:]

    def _fresh_words(self, request: GenerationRequest) -> list[str]:
        digest = hashlib.sha256(repr(request.prompt_token_ids).encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big") ^ (request.seed or 0))
        text = self._structured(request, rng)
        if text is not None:
            return [text[i:i + PIECE_CHARS] for i in range(0, len(text), PIECE_CHARS)][:request.max_tokens]
        length = request.max_tokens if request.ignore_eos else min(request.max_tokens, rng.randint(12, 60))
        length = max(length, min(request.min_tokens, request.max_tokens))
        words = [rng.choice(_WORDS) for _ in range(length)]
        return [("" if i == 0 else " ") + w for i, w in enumerate(words)]

    def _structured(self, request: GenerationRequest, rng: random.Random) -> str | None:
        """A constrained reply's text, a tool call's, or None for a reply of words."""
        if request.json_schema is not None:
            return json.dumps(instance(json.loads(request.json_schema), rng))
        if request.json_object:
            return json.dumps({"answer": rng.choice(_WORDS)})
        if request.guide is not None and request.guide[0] == "choice":
            return rng.choice(json.loads(request.guide[1]))
        prompt = self._prompt(request)
        if not prompt.startswith(TOOLS_OPEN) or prompt.rfind("<|tool|>") > prompt.rfind("<|user|>"):
            return None  # no tools offered, or a tool's result to answer: words
        tools = json.loads(prompt[len(TOOLS_OPEN):prompt.index("<|end|>")])
        asked = prompt[prompt.rfind("<|user|>"):]
        tool = next((t for t in tools if t["function"]["name"] in asked), tools[0])["function"]
        arguments = instance(tool.get("parameters") or {"type": "object"}, rng)
        call = json.dumps({"name": tool["name"], "arguments": arguments})
        return f"Calling {tool['name']}.\n<tool_call>\n{call}\n</tool_call>"

    async def add(self, request: GenerationRequest, emit) -> None:
        words = self.reply_words(request)
        if not words:  # earlier attempts wrote the whole reply: it ends here, as the model's end of text ends it
            emit(Chunk("", 0, True, "stop", len(request.prompt_token_ids)))
            return
        fail_at = len(words) // 2 if FAIL_MARKER in self._prompt(request) else -1
        reason = "length" if len(words) == request.max_tokens else "stop"
        window = self.output_window() if callable(self.output_window) else self.output_window
        output_ids = self.tokenizer.encode("".join(words))
        self._active[request.request_id] = _Active(words, emit, fail_at, len(request.prompt_token_ids), reason,
                                                   self._details(request, words),
                                                   stream_interval(window, self.step_seconds),
                                                   self._prefix_cache.hits(request.prompt_token_ids),
                                                   tuple(output_ids))
        # The reply is known from the start: its blocks are cached as the engine's would be once computed.
        self._prefix_cache.remember(list(request.prompt_token_ids) + output_ids)
        if self._stepper is None or self._stepper.done():
            self._stepper = asyncio.get_running_loop().create_task(self._steps())

    def _details(self, request: GenerationRequest, words: list[str]) -> tuple | None:
        """A detailed request's (logprobs, token ids, prompt logprobs), each None when not asked for."""
        if not request.detailed:
            return None
        ids = [word_token_id(w) for w in words]
        logprobs = word_logprobs(request, words) if request.logprobs is not None else None
        if logprobs is not None and request.tokens_as_ids:
            logprobs = named_by_id(logprobs, ids)
        prompt = prompt_logprobs(self.tokenizer, request) if request.prompt_logprobs is not None else None
        return logprobs, ids if request.token_ids else None, prompt

    async def _steps(self) -> None:
        # Steps keep to a clock (start + k * step_seconds), so the time a step's
        # hand-off takes does not slow the pace: the offered rate is the rate asked for,
        # as long as the process keeps up (then steps run back to back). The clock lags
        # at most MAX_LAG_SECONDS: after a stall (a paused process) a real engine goes
        # on at its pace, it does not make up the steps it missed in one burst.
        loop = asyncio.get_running_loop()
        due = loop.time()
        while self._active:
            due = max(due + self.step_seconds, loop.time() - MAX_LAG_SECONDS)
            await asyncio.sleep(max(0.0, due - loop.time()))
            for rid, req in list(self._active.items()):
                i = req.next
                if i == req.fail_at:  # the words not handed out yet are lost with the engine, as in vLLM
                    del self._active[rid]
                    req.emit(Chunk("", 0, True, error="RuntimeError: injected engine failure"))
                    continue
                req.next = i + 1
                self._generated += 1
                if req.next == len(req.words):
                    del self._active[rid]
                    _hand_out(req, req.reason)
                elif not req.sent or req.next - req.sent >= req.interval:  # the first token never waits
                    _hand_out(req, None)

    def constraint_problem(self, json_schema: str, *, budget_seconds: float) -> str | None:
        return f"the engine refuses it: {REFUSE_MARKER}" if REFUSE_MARKER in json_schema else None

    async def abort(self, request_id: str) -> None:
        # At once, with the words made since its last output, as vLLM 0.32 does: AsyncLLM.abort's
        # OutputProcessor.abort_requests puts the request's last output on its queue before it
        # tells the engine core (not at the engine's next step).
        req = self._active.pop(request_id, None)
        if req is not None:
            _hand_out(req, "abort")

    def stats(self) -> EngineStats:
        return EngineStats(running=len(self._active), generated_tokens=self._generated)

    async def shutdown(self) -> None:
        if self._stepper is not None:
            self._stepper.cancel()

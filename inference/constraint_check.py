"""Whether vLLM can take a JSON Schema constraint, asked before the request reaches
the engine, in the caller's thread (a worker's run thread: never the engine's loop).

The platform's own limits (chatsite.runs.schema_limits) bound what a schema may cost;
this asks the engine's structured-output code itself, with a time budget: vLLM's own
validation (what `add_request` would raise, and its choice of xgrammar or its
fallback), then, for xgrammar, the grammar's compilation for this tokenizer. A
schema the engine refuses or whose grammar fails to compile (which vLLM reports as
a request finished with no tokens) is the client's to fix, so the caller answers it
as such. A compilation past the budget is refused as too costly, and goes on in the
background: its result is kept, so the same schema asked again gets the real answer.
xgrammar releases the GIL while it compiles, so the wait costs the engine nothing."""
import threading
from collections import OrderedDict

VERDICTS_KEPT = 512
COMPILER_CACHE_BYTES = 64 * 1024 * 1024


class ConstraintCheck:
    def __init__(self, tokenizer, vocab_size: int, *, backend: str = "auto", any_whitespace: bool = True):
        """`backend` and `any_whitespace` as the engine's structured_outputs_config has them."""
        self._tokenizer = tokenizer
        self._vocab_size = vocab_size
        self._backend = backend
        self._any_whitespace = any_whitespace
        self._compiler = None
        self._lock = threading.Lock()
        self._compiler_lock = threading.Lock()
        self._verdicts: OrderedDict[str, str | None] = OrderedDict()  # schema text -> problem (None: fine)
        self._compiling: dict[str, threading.Event] = {}

    def problem(self, schema_text: str, *, budget_seconds: float) -> str | None:
        """None if the engine can constrain a reply to this JSON Schema, else why not (words
        for the client). Blocks up to `budget_seconds`."""
        with self._lock:
            if schema_text in self._verdicts:
                self._verdicts.move_to_end(schema_text)
                return self._verdicts[schema_text]
            done = self._compiling.get(schema_text)
            if done is None:
                done = self._compiling[schema_text] = threading.Event()
                threading.Thread(target=self._judge, args=(schema_text, done), name="constraint-check",
                                 daemon=True).start()
        if not done.wait(budget_seconds):
            return (f"compiling its grammar took longer than {budget_seconds:g} s; make the schema simpler "
                    "(fewer or smaller length bounds, counted repetitions and optional properties)")
        with self._lock:
            return self._verdicts.get(schema_text)

    def _judge(self, schema_text: str, done: threading.Event) -> None:
        try:
            verdict = self._problem(schema_text)
        except Exception as exc:  # whatever the engine's code raised: it would fail the request the same way
            verdict = f"the engine cannot compile it: {exc}"
        with self._lock:
            self._verdicts[schema_text] = verdict
            while len(self._verdicts) > VERDICTS_KEPT:
                self._verdicts.popitem(last=False)
            self._compiling.pop(schema_text, None)
        done.set()

    def _problem(self, schema_text: str) -> str | None:
        from vllm.exceptions import VLLMValidationError
        from vllm.sampling_params import SamplingParams, StructuredOutputsParams, check_json_nesting
        from vllm.v1.structured_output.backend_guidance import validate_guidance_grammar
        from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

        params = SamplingParams(structured_outputs=StructuredOutputsParams(json=schema_text))
        try:  # vLLM's "auto" backend: xgrammar, else guidance (sampling_params._validate_structured_outputs)
            check_json_nesting(schema_text)
            if self._backend == "guidance":
                validate_guidance_grammar(params, tokenizer=None)
                return None  # guidance compiles lazily, token by token: nothing costly up front
            try:
                validate_xgrammar_grammar(params)
            except VLLMValidationError:
                if self._backend == "xgrammar":
                    raise
                validate_guidance_grammar(params, tokenizer=None)
                return None
        except (VLLMValidationError, ValueError) as exc:
            return f"the engine refuses it: {exc}"
        separators = None if self._any_whitespace else (",", ":")  # as vLLM's XgrammarBackend compiles it
        self._xgrammar().compile_json_schema(schema_text, any_whitespace=self._any_whitespace, separators=separators)
        return None

    def _xgrammar(self):
        """xgrammar's compiler for this tokenizer, as vLLM's XgrammarBackend makes it."""
        with self._compiler_lock:
            if self._compiler is None:
                import xgrammar

                info = xgrammar.TokenizerInfo.from_huggingface(self._tokenizer, vocab_size=self._vocab_size)
                # Cached as the engine's is (xgrammar 0.2.8 compiles some grammars without its cache that it
                # cannot with it: `\w{1,129}`), within a bound: only the verdicts need keeping here.
                self._compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=True,
                                                          cache_limit_bytes=COMPILER_CACHE_BYTES)
            return self._compiler


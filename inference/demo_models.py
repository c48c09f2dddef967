"""Tiny, deterministic demo LLMs trained on the Python docs bundled with CPython.

The platform needs real models to serve, but the machine has no GPU and no
Hugging Face Hub access.  This module trains two small Llama-shaped causal LMs
on ``pydoc_data.topics`` (about 465k characters of Python reference docs) and
saves them as ordinary Hugging Face model directories that vLLM loads offline.
Both models share one tokenizer, so the small one can act as a draft model for
the flagship (speculative decoding).

Deliberately free of django/celery/redis imports; torch and transformers are
imported lazily so that importing ``DEMO_MODELS`` stays cheap.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable

from inference import model_cache

# Bump whenever a change here alters the produced files: it invalidates builds.
CODE_VERSION = "1"
VOCAB_SIZE = 2048
BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
SYSTEM, USER, ASSISTANT, END = "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"
SPECIAL_TOKENS = [BOS, EOS, PAD, SYSTEM, USER, ASSISTANT, END]
# Each turn is "<|role|>\n{content}<|end|>\n"; generation stops at <|end|>.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
ANSWER_CHARS = 600  # length of the "Explain {key}." answers
CHUNK_CHARS = 1000  # length of the continuation chunks
QA_REPEATS = 3  # the short Q/A samples are upweighted: they teach prompt following
MARKER = "build.json"  # written last: its presence means the build is complete


@dataclass(frozen=True)
class DemoModelConfig:
    """Architecture and training hyper-parameters of one demo model."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int  # hidden_size / heads must be 32 or 64 (vLLM CPU attention)
    num_key_value_heads: int
    max_position_embeddings: int
    train_steps: int
    batch_size: int
    seq_len: int
    learning_rate: float
    seed: int


DEMO_MODELS: dict[str, DemoModelConfig] = {
    # ~1.9M parameters, ~2 min on 2 CPU cores.
    "flagship": DemoModelConfig(128, 768, 4, 4, 2, 1024, train_steps=650, batch_size=16,
                                seq_len=128, learning_rate=3e-3, seed=1234),
    # ~0.4M parameters, under a minute; same tokenizer, usable as a draft model.
    "small": DemoModelConfig(64, 256, 2, 2, 1, 1024, train_steps=600, batch_size=16,
                             seq_len=128, learning_rate=5e-3, seed=4321),
}
"""Demo model name -> configuration."""


def model_path(root: Path, name: str) -> Path:
    """Directory holding the built model ``name`` under ``root``."""
    return Path(root) / name


_UNDERLINE = re.compile(r"^[*=~^-]{3,}[ \t]*$", re.M)


def _split_topics() -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """(train, heldout) lists of (key, title, normalised text); every 33rd key is held out."""
    from pydoc_data.topics import topics

    keys = sorted(topics)
    held = set(keys[32::33])  # the 33rd, 66th, ... key: ~3% of topics and of the text
    # Drop reST-style title underlines ("*****"): pure noise for a tiny model.
    items = [(k, topics[k].split("\n", 1)[0].strip(), " ".join(_UNDERLINE.sub("", topics[k]).split()))
             for k in keys]
    return [t for t in items if t[0] not in held], [t for t in items if t[0] in held]


def _chat(user: str, answer: str) -> str:
    return f"{BOS}{USER}\n{user}{END}\n{ASSISTANT}\n{answer}{END}\n"


def _training_samples(train: list[tuple[str, str, str]]) -> list[str]:
    """Chat-shaped samples, so the models learn to answer inside assistant turns."""
    samples = []
    for key, title, text in train:
        topic = key.replace("-", " ")
        # Most topics open with a title such as 'The "for" statement'; asking for it too
        # ("Explain the for statement.") strengthens the prompt -> answer mapping.
        title = title.replace('"', "")
        title = title[:1].lower() + title[1:]
        for question in dict.fromkeys([f"Explain {topic}.", f"Explain {title}."]):
            samples += [_chat(question, text[:ANSWER_CHARS])] * QA_REPEATS
        for i in range(0, len(text), CHUNK_CHARS):
            samples.append(_chat(f"Tell me more about {topic}.", text[i:i + CHUNK_CHARS]))
    # Shuffle (deterministically) so that a training window rarely holds two copies
    # of the same text, which would teach copying from context instead of recall.
    random.Random(0).shuffle(samples)
    return samples


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_marker(path: Path) -> dict:
    try:
        return json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return {}


def _swap(tmp: Path, final: Path) -> None:
    """Put the finished build in `tmp` in the place of `final`."""
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)


def _publish(tmp: Path, final: Path, marker: dict) -> None:
    """Write the completion marker last, then swap the finished build into place."""
    (tmp / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
    _swap(tmp, final)


def _from_cache(entry: str, fingerprint: str, tmp: Path, final: Path) -> bool:
    """The build `entry` with this fingerprint copied from the machine's model cache into
    `final`; False when the cache does not hold it."""
    if not model_cache.restore(entry, fingerprint, tmp):
        return False
    _swap(tmp, final)
    return True


def _build_tokenizer(root: Path, train: list[tuple[str, str, str]], data_sha: str,
                     log: Callable) -> Path:
    """Train the shared byte-level BPE tokenizer into root/tokenizer (skipped if up to date)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    final, tmp = root / "tokenizer", root / ".tokenizer.tmp"
    fingerprint = _sha256(f"{CODE_VERSION}/{VOCAB_SIZE}/{SPECIAL_TOKENS}/{data_sha}/"
                          f"{json.dumps(model_cache.converters('tokenizers', 'transformers'))}".encode())
    if _read_marker(final).get("fingerprint") == fingerprint:
        model_cache.save("demo-tokenizer", fingerprint, final)  # a checkout built before the cache seeds it
        return final
    if _from_cache("demo-tokenizer", fingerprint, tmp, final):
        log("[tokenizer] copied from the model cache")
        return final
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    prompts = [f"Explain {k}. Tell me more about {k}." for k, _, _ in train]
    bpe.train_from_iterator([t for _, _, t in train] + prompts, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=BOS, eos_token=END, pad_token=PAD,
                                  additional_special_tokens=[EOS, SYSTEM, USER, ASSISTANT])
    tok.chat_template = CHAT_TEMPLATE
    # save_jinja_files=False keeps chat_template inside tokenizer_config.json.
    tok.save_pretrained(str(tmp), save_jinja_files=False)
    # transformers 5 no longer writes special_tokens_map.json; older readers expect it.
    special = {"bos_token": BOS, "eos_token": END, "pad_token": PAD,
               "additional_special_tokens": [EOS, SYSTEM, USER, ASSISTANT]}
    (tmp / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")
    _publish(tmp, final, {"fingerprint": fingerprint,
                          "tokenizer_sha256": _sha256((tmp / "tokenizer.json").read_bytes())})
    model_cache.save("demo-tokenizer", fingerprint, final)
    log(f"[tokenizer] trained byte-level BPE, vocab {VOCAB_SIZE}")
    return final


def _train_model(name: str, cfg: DemoModelConfig, tok_dir: Path, out: Path,
                 samples: list[str], log: Callable) -> None:
    """Train one model deterministically and save it (float32 safetensors) into ``out``."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(tok_dir))
    ids = [i for enc in tok(samples, add_special_tokens=False)["input_ids"] for i in enc]
    n = len(ids) // cfg.seq_len
    windows = torch.tensor(ids[: n * cfg.seq_len]).view(n, cfg.seq_len)
    bos, pad, end = (tok.convert_tokens_to_ids(t) for t in (BOS, PAD, END))

    # Global torch state is process-wide: set it for the run, restore it afterwards.
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)
    try:
        torch.manual_seed(cfg.seed)
        config = LlamaConfig(
            vocab_size=VOCAB_SIZE, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
            num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
            num_key_value_heads=cfg.num_key_value_heads,
            max_position_embeddings=cfg.max_position_embeddings, rope_theta=10000.0,
            tie_word_embeddings=False, bos_token_id=bos, eos_token_id=end, pad_token_id=pad,
            torch_dtype="float32", attn_implementation="sdpa")
        model = LlamaForCausalLM(config).float()
        n_params = sum(p.numel() for p in model.parameters())
        log(f"[{name}] {n_params / 1e6:.2f}M params, {len(ids)} tokens, {n} windows of {cfg.seq_len}")

        opt = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, betas=(0.9, 0.95),
                                weight_decay=0.1)
        warmup = max(1, cfg.train_steps // 20)

        def lr_factor(step: int) -> float:  # linear warmup, cosine decay to 10%
            if step < warmup:
                return (step + 1) / warmup
            progress = (step - warmup) / max(1, cfg.train_steps - warmup)
            return 0.1 + 0.45 * (1 + math.cos(math.pi * progress))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
        gen = torch.Generator().manual_seed(cfg.seed)
        order, pos = torch.randperm(n, generator=gen), 0
        every, running, start = max(1, cfg.train_steps // 10), 0.0, time.monotonic()
        model.train()
        for step in range(1, cfg.train_steps + 1):
            if pos + cfg.batch_size > n:  # new epoch, new deterministic shuffle
                order, pos = torch.randperm(n, generator=gen), 0
            batch = windows[order[pos:pos + cfg.batch_size]]
            pos += cfg.batch_size
            loss = model(input_ids=batch, labels=batch).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            running += loss.item()
            if step % every == 0 or step == cfg.train_steps:
                k = step % every or every
                log(f"[{name}] step {step}/{cfg.train_steps} loss {running / k:.3f} "
                    f"elapsed {time.monotonic() - start:.1f}s")
                running = 0.0
        model.eval()
        model.generation_config = GenerationConfig(bos_token_id=bos, eos_token_id=end, pad_token_id=pad)
        model.save_pretrained(str(out))  # transformers 5 always writes model.safetensors
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)


def write_heldout(root: Path) -> Path:
    """root/heldout.txt: the docs text no demo model trained on (the quality gate's perplexity
    text); rewritten only when it changed. Needs no training."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    heldout_text = "\n\n".join(text for _, _, text in _split_topics()[1]) + "\n"
    heldout_file = root / "heldout.txt"
    if not heldout_file.exists() or heldout_file.read_text() != heldout_text:
        (root / ".heldout.txt.tmp").write_text(heldout_text)
        (root / ".heldout.txt.tmp").replace(heldout_file)
    return heldout_file


def build_demo_models(root: Path, names: Iterable[str] = ("flagship", "small"),
                      log: Callable[[str], None] = print) -> dict[str, Path]:
    """Build (or reuse) the demo models under ``root`` and return name -> model directory.

    The shared tokenizer lives in root/tokenizer and held-out docs text (for
    perplexity) in root/heldout.txt.  A model directory is reused when its
    ``build.json`` fingerprint (config + tokenizer + CODE_VERSION + the torch and
    transformers versions) matches;
    otherwise it is copied from the machine's model cache (inference.model_cache) when that
    holds the same fingerprint, else rebuilt in root/.{name}.tmp and renamed into place
    (and saved to the cache).
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    train, _ = _split_topics()
    write_heldout(root)
    # pydoc_data.topics differs between Python versions: fingerprint the data too.
    data_sha = _sha256(json.dumps(train).encode())
    tok_dir = _build_tokenizer(root, train, data_sha, log)
    tok_sha = _read_marker(tok_dir)["tokenizer_sha256"]

    samples, paths = None, {}
    for name in names:
        cfg = DEMO_MODELS[name]
        final, tmp = model_path(root, name), root / f".{name}.tmp"
        fingerprint = _sha256(json.dumps([asdict(cfg), tok_sha, data_sha, CODE_VERSION,
                                          model_cache.converters("torch", "transformers")]).encode())
        if _read_marker(final).get("fingerprint") == fingerprint:
            model_cache.save(f"demo-{name}", fingerprint, final)  # a checkout built before the cache seeds it
            log(f"[{name}] up to date at {final}")
        elif _from_cache(f"demo-{name}", fingerprint, tmp, final):
            log(f"[{name}] copied from the model cache ({model_cache.cache_root()}) to {final}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            samples = samples or _training_samples(train)
            start = time.monotonic()
            _train_model(name, cfg, tok_dir, tmp, samples, log)
            for f in TOKENIZER_FILES:  # identical tokenizer files in every model dir
                shutil.copyfile(tok_dir / f, tmp / f)
            _publish(tmp, final, {"name": name, "config": asdict(cfg), "fingerprint": fingerprint,
                                  "tokenizer_sha256": tok_sha, "code_version": CODE_VERSION})
            model_cache.save(f"demo-{name}", fingerprint, final)
            log(f"[{name}] built in {time.monotonic() - start:.1f}s at {final}")
        paths[name] = final
    return paths


def sample(path: Path, prompt: str, max_new_tokens: int = 60) -> str:
    """Greedy reply of the model at ``path`` to one user message (sanity check only)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                   add_generation_prompt=True)
    inputs = tok(text, add_special_tokens=False, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
    return tok.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)

"""Token counting in the web tier, with the pool's own tokenizer when it is local.

Only the Rust `tokenizers` package is used here (no torch, no vLLM): enough to
count a message's tokens at admission and to keep the prompt snapshot in budget.
"""
import json
from functools import lru_cache
from pathlib import Path

from inference import chat_templates

# The chat template adds role markers around each message.
TEMPLATE_TOKENS_PER_MESSAGE = 4
TEMPLATE_TOKENS_PER_PROMPT = 4


@lru_cache(maxsize=16)
def _tokenizer(model: str):
    path = Path(model) / "tokenizer.json"
    if not path.is_file():
        return None
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


def count_tokens(model: str, text: str) -> int:
    """Tokens `text` takes for `model`; an upper-bound estimate (one per 3 bytes,
    rounded up) when the tokenizer is not on local disk."""
    tokenizer = _tokenizer(model)
    if tokenizer is None:
        return -(-len(text.encode()) // 3)
    return len(tokenizer.encode(text, add_special_tokens=False).ids)


@lru_cache(maxsize=16)
def chat_template(model: str) -> str | None:
    """The model's chat template (Jinja text) from its local tokenizer files, or None
    when it has none there (a model not on local disk, or a tokenizer without one)."""
    folder = Path(model)
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text()
    config = folder / "tokenizer_config.json"
    if not config.is_file():
        return None
    template = json.loads(config.read_text()).get("chat_template")
    if isinstance(template, list):  # named templates: [{"name": "default", "template": ...}, ...]
        template = next((t.get("template") for t in template if t.get("name") == "default"), None)
    return template if isinstance(template, str) else None


def chat_template_has_tools(model: str) -> bool:
    """Whether the model's chat template renders tool definitions (reads `tools`)."""
    template = chat_template(model)
    return template is not None and "tools" in template


@lru_cache(maxsize=16)
def _shipped_template(name: str) -> str | None:
    try:
        return chat_templates.read(name)
    except chat_templates.ChatTemplateError:
        return None


def pool_chat_template(pool) -> str | None:
    """The template the pool's prompts are rendered with: its own `chat_template` file
    when it names one, else the model's (None when neither can be read here)."""
    return _shipped_template(pool.chat_template) if pool.chat_template else chat_template(pool.model)


def pool_takes_tools(pool) -> bool:
    """Whether the pool's chat template renders tool definitions (it reads `tools`):
    only then may a request give it tools."""
    template = pool_chat_template(pool)
    return template is not None and "tools" in template


def vocab_size(model: str) -> int | None:
    """How many token ids `model`'s tokenizer has (its added tokens too), when it is on
    local disk; None otherwise."""
    tokenizer = _tokenizer(model)
    return None if tokenizer is None else tokenizer.get_vocab_size(with_added_tokens=True)


def decode_tokens(model: str, token_ids: list[int]) -> str | None:
    """The text of `token_ids` for `model`, when its tokenizer is on local disk; None otherwise."""
    tokenizer = _tokenizer(model)
    return None if tokenizer is None else tokenizer.decode(token_ids, skip_special_tokens=False)

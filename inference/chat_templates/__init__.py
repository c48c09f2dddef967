"""Chat templates the repo ships, for pools whose model's own template lacks something.

A pool's `chat_template` names one: a file in this folder (`smollm2-tools.jinja`), or
an absolute path to an operator's own. The worker renders prompts with it and the
web tier reads it to tell whether the pool takes tools; both call `read`.
"""
from pathlib import Path

FOLDER = Path(__file__).resolve().parent
# SmolLM2-Instruct's ChatML, plus the tool format its family was trained with
# (Hermes-style `<tool_call>` blocks). Without tools it renders exactly as the model's own.
SMOLLM2_TOOLS = "smollm2-tools.jinja"


class ChatTemplateError(ValueError):
    """The named template is not a readable file."""


def path_of(name: str) -> Path:
    """Where the template `name` is: an absolute path as it is, else a file of this folder."""
    path = Path(name)
    return path if path.is_absolute() else FOLDER / path


def read(name: str) -> str:
    """The Jinja text of template `name`; raises ChatTemplateError when it cannot be read."""
    path = path_of(name)
    if path.suffix != ".jinja":
        raise ChatTemplateError(f"chat template {name!r} is not a .jinja file")
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ChatTemplateError(f"chat template {name!r} cannot be read ({path}): {exc.strerror or exc}") from None

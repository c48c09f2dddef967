"""Text a client sends (a message, a title, a name): the one check, for every app."""
import re

from chatsite.errors import InvalidInput

MAX_SYSTEM_PROMPT_CHARS = 8000  # a chat's system prompt, and the default instructions a new chat starts with
# One regex scan in C, where a generator over each character ran Python for every one of a message's characters.
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_surrogates(value: str) -> bool:
    """Whether `value` holds a lone UTF-16 surrogate (a JSON "\\ud800" escape): not
    text, and refused by Postgres."""
    return _SURROGATE.search(value) is not None


def clean_text(value, *, field: str, max_chars: int, allow_empty: bool = False) -> str:
    """A message body: a string of valid Unicode without NUL bytes, at most
    `max_chars`, and not blank unless `allow_empty`."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string", field=field)
    if "\x00" in value:
        raise InvalidInput(f"{field} contains a NUL byte, which is not allowed", field=field)
    if has_surrogates(value):
        raise InvalidInput(f"{field} is not valid UTF-8 text (it has an unpaired surrogate escape)", field=field)
    if not allow_empty and not value.strip():
        raise InvalidInput(f"{field} must not be empty", field=field)
    if len(value) > max_chars:
        raise InvalidInput(f"{field} is {len(value)} characters; the limit is {max_chars}", field=field)
    return value

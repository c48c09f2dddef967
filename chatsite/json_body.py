"""Strict JSON bodies: one decoder for the REST API and the OpenAI-compatible API.

Python's json module accepts NaN/Infinity literals, and DRF's parser reports
encoding problems with a parser's wording; this module refuses both with a
message a person can act on, and enforces the body size limit itself (DRF reads
the request stream directly, bypassing Django's DATA_UPLOAD_MAX_MEMORY_SIZE check).
"""
import json

from django.conf import settings
from django.core.exceptions import RequestDataTooBig


class BodyError(ValueError):
    """The body is not one JSON document in UTF-8; the message says why."""


def max_body_bytes() -> int:
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 256 * 1024


def _refuse_constant(name: str):
    raise BodyError(f"{name} is not a valid JSON number; send a finite number")


def decode_json(raw: bytes):
    """The JSON document in `raw`. Raises BodyError for invalid UTF-8, a NaN or
    Infinity literal, or malformed JSON; RequestDataTooBig past the size limit."""
    if len(raw) > max_body_bytes():
        raise RequestDataTooBig(f"the body is {len(raw)} bytes; the limit is {max_body_bytes()}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(f"the body is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                        "send JSON encoded as UTF-8") from None
    if not text.strip():
        raise BodyError("the body is empty; send a JSON object")
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise BodyError(f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise BodyError("the body is not valid JSON: it is nested too deeply") from None


def too_large_message() -> str:
    limit = max_body_bytes()
    return f"the request body is too large; the limit is {limit} bytes ({limit // 1024} KiB)"

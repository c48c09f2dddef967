"""Keep secrets out of logs: API keys, bearer tokens, session and CSRF cookies, share links."""
import logging
import re

_PATTERNS = [
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"), r"\1[redacted]"),
    (re.compile(r"csk_[0-9a-f]{12}_[A-Za-z0-9_-]+"), "csk_[redacted]"),
    (re.compile(r"(?i)((?:sessionid|csrftoken)=)[^;\s'\"]+"), r"\1[redacted]"),
    # an events URL's token (and any other credential in a query string)
    (re.compile(r"(?i)([?&](?:token|access_token|api_key|key)=)[^&#\s'\"]+"), r"\1[redacted]"),
    # a share link's token, in its page's path or its API read's (chatsite.chats.sharing)
    (re.compile(r"(/s/|/api/shared/)[^/?#\s'\"]+"), r"\1[redacted]"),
]


def redact(text: str) -> str:
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


class RedactSecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


class RedactArgs(logging.Filter):
    """For a log whose formatter reads its record's arguments one by one (uvicorn's access
    log: client, method, path with query string, version, status): each text argument
    redacted in place, the arguments' shape kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact(arg) if isinstance(arg, str) else arg for arg in record.args)
        return True

"""A new chat's title, from its first message."""
import textwrap

AUTO_TITLE_CHARS = 60


def auto_title(text: str, width: int = AUTO_TITLE_CHARS) -> str:
    """The message on one line, cut at the last whole word that fits in `width` characters
    with an ellipsis after it; a first word longer than that is cut inside, ellipsis included."""
    line = " ".join(text.split())
    if len(line) <= width:
        return line
    short = textwrap.shorten(line, width=width, placeholder="…")
    return short if short != "…" else line[:width - 1] + "…"

"""A new chat's title, from its first message."""

AUTO_TITLE_CHARS = 60


def auto_title(text: str, width: int = AUTO_TITLE_CHARS) -> str:
    """The message on one line, cut at the last whole word that fits in `width` characters
    with an ellipsis after it; a first word longer than that is cut inside, ellipsis included."""
    line = " ".join(text.split())
    if len(line) <= width:
        return line
    # Every /v1 call and chat names its chat here: a cut at a space, not textwrap.shorten
    # (~100 Python calls a title, whose chunks also split at hyphens).
    cut = line.rfind(" ", 0, width)  # the words before it and the ellipsis fit in `width`
    return (line[:cut] if cut > 0 else line[:width - 1]) + "…"

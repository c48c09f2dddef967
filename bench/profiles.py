"""Hotspots from py-spy's collapsed stacks (`py-spy record -f raw`)."""
import re
import sys
from collections import Counter

from bench import common

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")
_SITE = ("site-packages/", "lib/python3.11/")


def _short(frame: str) -> str:
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    path = m["file"]
    for marker in _SITE:
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    else:
        path = path.replace(str(common.ROOT) + "/", "")
    return f"{m['func']} ({path})"


def hotspots(path, top: int = 12) -> tuple[int, list, list]:
    """(samples, [(self share, frame)], [(inclusive share, frame)])."""
    own, incl, total = Counter(), Counter(), 0
    for line in open(path):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_short(f) for f in stack.split(";")]
        frames = [f for f in frames if not f.startswith(("process ", "thread "))] or frames
        total += n
        own[frames[-1]] += n
        for f in set(frames):
            incl[f] += n
    share = lambda c: [(100 * v / total, k) for k, v in c.most_common(top)] if total else []  # noqa: E731
    return total, share(own), share(incl)


def summary(paths: dict, top: int = 12) -> str:
    out = []
    for key, path in sorted(paths.items()):
        if not key.endswith("_raw"):
            continue
        total, own, _ = hotspots(common.ROOT / path, top)
        _, _, incl = hotspots(common.ROOT / path, 10_000)
        out.append(f"py-spy {key[:-4]} ({total} samples at 100 Hz with the GIL held, {path}); "
                   f"flame graph {paths.get(key[:-4] + '_flamegraph')}")
        out.append("  by area (leaf frame):")
        out += [f"    {s:5.1f}%  {a}" for s, a in by_area(common.ROOT / path)]
        out.append("  self time:")
        out += [f"    {s:5.1f}%  {f}" for s, f in own]
        out.append("  inclusive (platform frames and their callees):")
        mine = [(s, f) for s, f in incl if f.split("(")[-1].startswith(("chatsite/", "workers/", "inference/"))]
        out += [f"    {s:5.1f}%  {f}" for s, f in mine[:top]]
    return "\n".join(out)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        total, own, incl = hotspots(p)
        print(p, total)
        for s, f in own:
            print(f"  {s:5.1f}%  {f}")


AREAS = (  # first match wins; matched against the leaf frame's file
    ("redis client (RESP parsing, commands)", ("redis/",)),
    ("Postgres driver + connect", ("psycopg",)),
    ("Django ORM / request handling", ("django/", "rest_framework/", "drf_spectacular")),
    ("asgiref sync<->async threads", ("asgiref/", "concurrent/futures", "threading.py", "queue.py")),
    ("daphne / twisted / channels (HTTP, SSE send)", ("twisted/", "daphne/", "channels/", "autobahn/")),
    ("asyncio event loop", ("asyncio/", "selectors.py", "uvloop")),
    ("vLLM frontend (detokenize, output processing)", ("vllm/", "transformers/", "tokenizers")),
    ("celery / kombu", ("celery/", "kombu/", "billiard/")),
    ("platform code", ("chatsite/", "workers/", "inference/")),
    ("json / other stdlib", ("json/", "lib/python3.11/")),
)


def by_area(path) -> list[tuple[float, str]]:
    """Share of GIL-holding samples by the area of the leaf frame."""
    counts, total = Counter(), 0
    for line in open(path):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        leaf = stack.split(";")[-1]
        area = next((name for name, keys in AREAS if any(k in leaf for k in keys)), "other")
        counts[area] += int(count)
        total += int(count)
    return [(100 * v / total, k) for k, v in counts.most_common()]

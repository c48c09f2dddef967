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

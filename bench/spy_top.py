"""Summarize a py-spy raw profile: the functions with the most inclusive and self samples.

    .venv/bin/python -m bench.spy_top bench/out/profile_x.txt [--top 40]"""
import argparse
from collections import Counter


def summarize(path: str, top: int = 40) -> str:
    total, inclusive, own = 0, Counter(), Counter()
    for line in open(path):
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        for f in set(frames):
            inclusive[f] += n
        own[frames[-1]] += n
    out = [f"{total} samples"]
    out += [f"{100 * v / total:5.1f}% {k[:160]}" for k, v in inclusive.most_common(top)]
    out.append("--- self")
    out += [f"{100 * v / total:5.1f}% {k[:160]}" for k, v in own.most_common(top // 2)]
    return "\n".join(out)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    print(summarize(a.path, a.top))

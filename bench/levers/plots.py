"""PNG plots of the lever benchmarks (matplotlib, no display); each takes the JSON a
bench wrote and returns the PNG path. Every run is drawn, so the noise shows."""
import json
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = ["tab:gray", "tab:blue", "tab:orange", "tab:green", "tab:red"]


def plot_speculation(path: Path) -> Path:
    """Top: tokens/s of each arm; bottom: each arm over no speculation, paired run by run
    (the arms took turns, so a ratio within one run cancels most of the machine's load)."""
    data = json.loads(Path(path).read_text())
    levels, runs = data["concurrency"], data["runs"]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), sharex=True)
    for col, workload in enumerate(("fresh", "repeat")):
        for color, arm in zip(COLORS, runs[0]):
            rate = [[run[arm][f"{workload}@{c}"]["tokens_per_s"] for run in runs] for c in levels]
            ratio = [[run[arm][f"{workload}@{c}"]["tokens_per_s"] / run["none"][f"{workload}@{c}"]["tokens_per_s"]
                      for run in runs] for c in levels]
            acc = runs[0][arm][f"{workload}@{levels[0]}"]["acceptance"]
            label = arm + (f" (accepts {acc:.0%})" if acc is not None else "")
            for ax, values in ((axes[0][col], rate), (axes[1][col], ratio)):
                med = [statistics.median(v) for v in values]
                ax.errorbar(levels, med, yerr=[[m - min(v) for m, v in zip(med, values)],
                                               [max(v) - m for m, v in zip(med, values)]],
                            fmt="o-", color=color, capsize=3, label=label)
        axes[0][col].set_yscale("log")
        axes[0][col].set_title(f"{workload}: " + ("new questions" if workload == "fresh" else "question asked again"))
        axes[1][col].axhline(1.0, color="k", linestyle=":")
        axes[1][col].set_xscale("log", base=2)
        axes[1][col].set_xticks(levels, [str(c) for c in levels])
        axes[1][col].set_xlabel("concurrent requests")
        for ax in (axes[0][col], axes[1][col]):
            ax.grid(alpha=0.3)
        axes[0][col].legend(fontsize=8)
    axes[0][0].set_ylabel(f"tokens/s, all streams\n(median of {len(runs)} runs, range)")
    axes[1][0].set_ylabel("x tokens/s without speculation\n(same run)")
    fig.suptitle("Speculative decoding on the demo flagship (CPU, greedy, 96 tokens)")
    return _save(fig, path.with_suffix(".png"))


def plot_kv_capacity(path: Path) -> Path:
    data = json.loads(Path(path).read_text())
    capacity, runs = data["capacity"], data["runs"]
    arms = list(capacity)
    x = list(range(len(arms)))
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    axes[0].bar(x, [capacity[a]["kv_tokens"] / 1e6 for a in arms], color=COLORS[1:])
    axes[0].plot(x, [capacity[a]["planned_tokens"] / 1e6 for a in arms], "k_", markersize=30, label="planner")
    axes[0].set_ylabel("KV capacity of 1 GiB (million tokens)")
    axes[0].legend()
    for ax, key, label in ((axes[1], "peak_running", "requests running at once (8 MiB of KV)"),
                           (axes[2], "tokens_per_s", f"tokens/s, 64 requests (median of {len(runs)}, range)")):
        values = [[run[a][key] for run in runs] for a in arms]
        med = [statistics.median(v) for v in values]
        ax.bar(x, med, color=COLORS[1:], yerr=[[m - min(v) for m, v in zip(med, values)],
                                              [max(v) - m for m, v in zip(med, values)]], capsize=4)
        ax.set_ylabel(label)
    axes[1].plot(x, [runs[0][a]["admissible"] for a in arms], "k_", markersize=30, label="KV tokens / request")
    axes[1].legend()
    for ax in axes:
        ax.set_xticks(x, arms, rotation=20, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("FP8 KV cache: tokens the same memory holds, and the batch it admits")
    return _save(fig, path.with_suffix(".png"))


def plot_chunked_prefill(path: Path) -> Path:
    runs = json.loads(Path(path).read_text())["runs"]
    arms = list(runs[0])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for color, arm in zip(COLORS, arms):
        t = runs[0][arm]["timeline"]
        axes[0].plot([a for a, _ in t], [b * 1e3 for _, b in t], ".-", color=color, label=arm, markersize=3)
    axes[0].axvline(0, color="k", linestyle=":", label="long prompts arrive")
    axes[0].set_xlim(-0.5, 3)
    axes[0].set_xlabel("seconds from arrival")
    axes[0].set_ylabel("gap before each token of one running stream (ms)")
    axes[0].legend(fontsize=8)
    x = list(range(len(arms)))
    width = 0.8 / len(runs)
    for i, run in enumerate(runs):
        off = (i - (len(runs) - 1) / 2) * width
        axes[1].bar([j + off for j in x], [run[a]["during_itl_max_ms"] for a in arms], width=width,
                    color=COLORS[:len(arms)], alpha=1 if i == 0 else 0.6)
        axes[1].plot([j + off for j in x], [run[a]["during_itl_p50_ms"] for a in arms], "k_", markersize=8)
    axes[1].set_xticks(x, arms, rotation=15, fontsize=8)
    axes[1].set_ylabel("running streams' ITL while prefilling (ms)\nbar: max, dash: p50; one bar per run")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle("Chunked prefill: running streams while four ~900-token prompts arrive")
    return _save(fig, path.with_suffix(".png"))


def _save(fig, out: Path) -> Path:
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out

"""Tables (plain text, also valid Markdown) and PNG plots from the arms' JSON."""
from bench import common


def fmt(x, digits=1):
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "NO"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def table(header: list[str], rows: list[list]) -> str:
    cells = [[fmt(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    line = lambda r: "| " + " | ".join(v.rjust(w) for v, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, cells)])


ARM_NAMES = {"a": "(a) vLLM AsyncLLM in process", "b": "(b) vLLM OpenAI server", "c": "(c) platform end to end",
             "d": "(d) platform, /v1 stream", "e": "(e) as (c), base code", "f": "(f) as (d), base code"}
ORDER = ("a", "b", "c", "d", "e", "f")
BASELINE = {"c": "b", "d": "b", "e": "b", "f": "b"}  # the server arm measured alongside the platform arms
PLATFORM_ARMS = tuple(BASELINE)


def comparison_table(arms: dict) -> str:
    rows = []
    for c in sorted({int(k) for d in arms.values() for k in d["levels"]}):
        for arm in ORDER:
            lv = arms.get(arm, {}).get("levels", {}).get(str(c))
            if lv is None:
                continue
            rows.append([c, arm, lv["tok_s"], lv["ttft_p50_ms"], lv["ttft_p95_ms"], lv["itl_p50_ms"], lv["itl_p95_ms"],
                         lv["itl_mean_ms"], lv["e2e_p50_ms"], lv["e2e_p95_ms"], lv["tokens_per_event"],
                         f"{lv['errors']}/{lv['requests']}" + (f" (+{lv['post_retries']} retried)"
                                                               if lv.get("post_retries") else "")
                         + (f" ({lv['snapshots']} as snapshot)" if lv.get("snapshots") else ""),
                         others_share(lv)])
    return table(["conc", "arm", "tok/s", "TTFT p50 ms", "TTFT p95 ms", "ITL p50 ms", "ITL p95 ms", "ITL mean ms",
                  "E2E p50 ms", "E2E p95 ms", "tok/event", "errors", "others' CPU %"], rows)


def others_share(lv: dict):
    """Percent of the machine's CPU that processes outside the arm used during the level
    (the machine is shared with other sessions' test runs)."""
    cpu = lv["cpu"]
    ours = cpu.get("ours_cpu_s", sum(v for v in cpu["proc_cpu_s"].values() if v is not None))
    capacity = cpu["wall_s"] * cpu["machine_cores"]
    return max(0.0, 100 * (cpu["machine_busy_s"] - ours) / capacity) if capacity else None


def ratio_table(arms: dict) -> str:
    rows = []
    div = lambda x, y: (x / y) if (x is not None and y) else None  # noqa: E731
    sub = lambda x, y: (x - y) if (x is not None and y is not None) else None  # noqa: E731
    for c in sorted({int(k) for d in arms.values() for k in d["levels"]}):
        for arm in PLATFORM_ARMS:
            get = lambda key: arms.get(key, {}).get("levels", {}).get(str(c))  # noqa: E731
            cc, a, b = get(arm), get("a"), get(BASELINE[arm])
            if cc is None:
                continue
            acc = cc.get("accounting", {})
            rows.append([c, arm, div(cc["tok_s"], a and a["tok_s"]), div(cc["tok_s"], b and b["tok_s"]),
                         sub(cc["ttft_p50_ms"], a and a["ttft_p50_ms"]), sub(cc["ttft_p50_ms"], b and b["ttft_p50_ms"]),
                         sub(cc["itl_p50_ms"], b and b["itl_p50_ms"]), cc.get("delivery_ms_p50"),
                         cc.get("delivery_ms_p99"), cc.get("pg_peak"), cc.get("pg_lock_waiters"),
                         f"{cc['tokens']}={acc.get('saved_tokens')}" + ("" if not acc.get("mismatches")
                                                                        else f" ({acc['mismatches']} mismatched)")])
    return table(["conc", "arm", "tok/s vs a", "tok/s vs its b", "TTFT p50 - a ms", "TTFT p50 - b ms",
                  "ITL p50 - b ms", "XADD->client p50 ms", "p99 ms", "PG conns peak", "PG lock waiters (mean)",
                  "tokens client=usage=saved"],
                 rows)


def cpu_table(arms: dict) -> str:
    """CPU microseconds per streamed token, per process, for the HTTP arms."""
    rows = []
    for arm in ORDER:
        for c, lv in sorted(arms.get(arm, {}).get("levels", {}).items(), key=lambda kv: int(kv[0])):
            per = {k: (1e6 * v / lv["tokens"] if v is not None and lv["tokens"] else None)
                   for k, v in lv["cpu"]["proc_cpu_s"].items()}
            engine = sum(v for k, v in per.items() if k.startswith("VLLM") and v)
            if arm == "a":
                front = per.get("engine_proc")
            elif arm == "b":
                front = per.get("api_server")
            else:
                front = sum(per.get(k) or 0 for k in ("web", "worker", "redis"))
            rows.append([arm, int(c), engine, front, per.get("web"), per.get("worker"), per.get("redis"),
                         per.get("postgres"), per.get("api_server"), per.get("client")])
    return table(["arm", "conc", "engine procs", "serving (a: AsyncLLM+client, b: api_server, c-f: web+worker+redis)",
                  "web", "worker (incl. AsyncLLM front)", "redis", "postgres (whole server)", "vLLM api_server",
                  "client"], rows)


def plot_compare(arms: dict, path, prompt_tokens: str = f"~{common.PROMPT_TOKENS}") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for arm in [k for k in ORDER if k in arms]:
        data = arms[arm]
        levels = sorted(data["levels"], key=int)
        xs = [int(c) for c in levels]
        axes[0].plot(xs, [data["levels"][c]["tok_s"] for c in levels], marker="o", label=ARM_NAMES[arm])
        axes[1].plot(xs, [data["levels"][c]["ttft_p50_ms"] for c in levels], marker="o", label=ARM_NAMES[arm] + " p50")
        axes[1].plot(xs, [data["levels"][c]["ttft_p95_ms"] for c in levels], marker="x", linestyle=":",
                     color=axes[1].lines[-1].get_color(), label=ARM_NAMES[arm] + " p95")
    axes[0].set(xscale="log", xlabel="concurrent requests", ylabel="output tokens / s", title="Throughput")
    axes[1].set(xscale="log", yscale="log", xlabel="concurrent requests", ylabel="ms", title="Time to first token")
    for ax in axes:
        ax.set_xticks([int(c) for c in common.LEVELS], [str(c) for c in common.LEVELS])
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"flagship demo model, {prompt_tokens}-token prompts, {common.OUTPUT_TOKENS} output tokens, greedy, "
                 "ignore_eos; 2-core CPU shared with other sessions", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

"""Run the evaluation: each demo pool's real engine, every setting, one table.

    .venv/bin/python -m bench.eval_demo [--models flagship,small] [--settings NAME,...] [--seed N]
                                        [--out bench/out/eval_demo.md] [--replies FILE.json]

One engine at a time (on one core, as a worker runs it); all of a model's asks are in flight
together, as a busy pool serves them. Both models took 24 minutes on 2 cores that other work
kept at a load average of 11-14 (bench/out/RESULTS.md).
"""
import argparse
import json
import os
import random
import secrets
import sys
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB, as a demo worker's engine gets

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.eval_demo", description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="flagship,small", help="demo pools (chatsite/pools/demo.py)")
    ap.add_argument("--settings", default="", help="settings of bench/eval_demo/sweep.py (default: all)")
    ap.add_argument("--seed", type=int, default=None, help="base seed of the fresh chats' seeds (default: fresh)")
    ap.add_argument("--out", default=str(ROOT / "bench/out/eval_demo.md"))
    ap.add_argument("--replies", default="", help="also write every reply to this JSON file")
    a = ap.parse_args(argv)

    import django

    django.setup()
    from django.conf import settings as django_settings

    from bench.eval_demo import report, sweep
    from bench.eval_demo.checks import load_prompts
    from bench.eval_demo.engine import PoolEngine
    from chatsite.pools.demo import DEMO_POOLS
    from inference.chat_templates import SMOLLM2_TOOLS

    prompts = load_prompts()
    settings = sweep.settings_for_run([s for s in a.settings.split(",") if s] or None)
    base_seed = a.seed if a.seed is not None else secrets.randbelow(2**31)
    models_dir = Path(django_settings.CHATSITE["DEMO_MODELS_DIR"])
    results, seconds = {}, {}
    for pool in [m for m in a.models.split(",") if m]:
        spec = DEMO_POOLS[pool]
        model_dir = str(models_dir / spec["folder"])
        rng = random.Random(f"{base_seed}-{pool}")
        asks = {name: sweep.asks_for(pool, model_dir, s, prompts, rng) for name, s in settings.items()}
        engine = PoolEngine(pool=pool, model_dir=model_dir, chat_template=SMOLLM2_TOOLS)
        started = time.monotonic()
        engine.start()
        print(f"[{pool}] engine up in {time.monotonic() - started:.0f} s; "
              f"{sum(map(len, asks.values()))} asks", flush=True)
        try:
            t = time.monotonic()
            flat = engine.run([ask for batch in asks.values() for ask in batch])
            seconds[pool] = time.monotonic() - t
        finally:
            engine.shutdown()
        results[pool], i = {}, 0
        for name, batch in asks.items():
            results[pool][name] = sweep.score(prompts, flat[i:i + len(batch)])
            i += len(batch)
        print(f"[{pool}] {seconds[pool]:.0f} s", flush=True)

    table = report.rows(results, len(prompts))
    print(report.text_table(table))
    command = ".venv/bin/python -m bench.eval_demo " + " ".join(argv)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    Path(a.out).write_text(report.markdown(results=results, settings=settings, prompts=prompts,
                                           command=command.strip(), when=when, base_seed=base_seed,
                                           seconds=seconds))
    print(f"written: {a.out}")
    if a.replies:
        Path(a.replies).write_text(json.dumps(
            {pool: {name: {"replies": [asdict(r) for r in o.replies], "capital": [asdict(r) for r in o.capital]}
                    for name, o in by.items()} for pool, by in results.items()}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])

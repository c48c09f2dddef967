"""The engine front end's CPU per token with vLLM's defaults against the platform's,
in one AsyncLLM, phases interleaved.

    .venv/bin/python -m bench.probes.frontend_cpu [--concurrency 64] [--pairs 3] [--requests 128] [--stream-interval 4]

The front end (AsyncLLM's output handler: detokenizing, stats, the stat loggers) runs
in the worker's process, on the GIL its stream writer and Celery's threads need. Configurations
switched between phases of the same engine:
- "vllm": what AsyncLLM does by default: vLLM's PrometheusStatLogger records every
  step, and vLLM's settings are read from the environment on each access;
- "platform": what a worker does (inference.vllm_backend): the Prometheus logger
  replaced by a stand-in that records nothing (inference.stat_logger), settings cached.
- "interval" (with --stream-interval N > 1): the platform's, each request asking vLLM for
  one output per N engine steps (SamplingParams.stream_interval), as a worker does with
  N from its coalescing window and the engine's step time (inference.vllm_backend).
All keep the platform's own recorder (the figures the worker reports). Prints the CPU
seconds of this process (the engine core is a process of its own and is not counted)
per generated token, per phase, and each configuration's ratio to "vllm" per round.
"""
import argparse
import asyncio
import os
import time

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")

from bench import common, report  # noqa: E402


async def phase(engine, params, prompts, concurrency: int, total: int) -> tuple[float, int, float]:
    """CPU seconds of this process, tokens generated and wall seconds for `total` requests."""
    tokens = 0
    ids = iter(range(10**9))

    async def one(i: int):
        nonlocal tokens
        async for o in engine.generate({"prompt_token_ids": prompts[i % len(prompts)][1]}, params,
                                       f"fe-{time.monotonic_ns()}-{next(ids)}"):
            tokens += len(o.outputs[0].token_ids)

    cpu0, t0 = time.process_time(), time.perf_counter()
    await common.drive(concurrency, total, one)
    return time.process_time() - cpu0, tokens, time.perf_counter() - t0


async def main_async(a) -> None:
    from vllm import envs
    from vllm.sampling_params import RequestOutputKind, SamplingParams
    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm.v1.metrics.loggers import PrometheusStatLogger

    from inference.cpu_affinity import colocate_engine_core
    from inference.stat_logger import EngineCounters, stat_loggers

    prompts = common.make_contents(a.requests)
    engine = AsyncLLM.from_engine_args(common.engine_spec().engine_args(), stat_loggers=stat_loggers(EngineCounters()))
    colocate_engine_core()
    manager = engine.logger_manager
    ours = list(manager.stat_loggers)
    prometheus = PrometheusStatLogger(engine.vllm_config, manager.engine_indexes)
    uncached = envs.__getattr__
    envs.enable_envs_cache()
    cached = envs.__getattr__

    def configure(name: str) -> None:
        vllm_default = name == "vllm"
        manager.stat_loggers[:] = [*ours, prometheus] if vllm_default else ours
        envs.__dict__["__getattr__"] = uncached if vllm_default else cached

    def params(name: str):
        return SamplingParams(n=1, max_tokens=a.tokens, temperature=0.0, seed=0, ignore_eos=True,
                              output_kind=RequestOutputKind.DELTA,
                              stream_interval=a.stream_interval if name == "interval" else None)

    configs = ["vllm", "platform"] + (["interval"] if a.stream_interval > 1 else [])
    await phase(engine, params("platform"), prompts, a.concurrency, a.concurrency)  # warm-up
    rows, ratios = [], {name: [] for name in configs[1:]}
    for pair in range(a.pairs):
        order = configs[pair % len(configs):] + configs[:pair % len(configs)]
        got = {}
        for name in order:
            configure("vllm" if name == "vllm" else "platform")
            cpu, tokens, wall = await phase(engine, params(name), prompts, a.concurrency, a.requests)
            got[name] = 1e6 * cpu / tokens
            rows.append([pair + 1, name, tokens, round(wall, 1), round(tokens / wall), round(got[name], 1)])
        for name in configs[1:]:
            ratios[name].append(got[name] / got["vllm"])
    engine.shutdown()
    print(f"AsyncLLM front end (this process), concurrency {a.concurrency}, {a.requests} requests of {a.tokens} "
          f"tokens per phase, {a.pairs} interleaved rounds"
          + (f"; interval: the platform's, with vLLM's stream_interval={a.stream_interval}" if "interval" in configs
             else ""))
    print(report.table(["round", "config", "tokens", "wall s", "tok/s", "front-end CPU us/token"], rows))
    for name, rs in ratios.items():
        print(f"{name} / vllm per round: " + ", ".join(f"{r:.2f}" for r in rs))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--requests", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=common.OUTPUT_TOKENS)
    ap.add_argument("--pairs", type=int, default=3, help="rounds: each runs every configuration once")
    ap.add_argument("--stream-interval", type=int, default=1,
                    help="above 1: a third configuration, the platform's with vLLM's output coalescing")
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()

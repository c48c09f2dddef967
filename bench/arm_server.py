"""Arm (b): vLLM's own OpenAI server, driven by a streaming client.

    .venv/bin/python -m bench.arm_server OUT.json [--levels 1,8,32,64]

The server gets the same pinned engine arguments as a platform worker (the CLI
flags are generated from inference.specs over DEMO_ENGINE_ARGS). Requests go to
/v1/completions with the prompt as token ids (identical to the platform's
chat-templated prompt), streamed, with per-chunk usage so that a chunk carrying
several tokens is counted as several.
"""
import argparse
import asyncio
import json
import os
import signal
import subprocess
import time

import httpx

from bench import common, sse_client

SKIP = {"quantization", "speculative_config"}  # None: nothing to pass


def server_cmd(spec, port: int) -> list[str]:
    cmd = [common.PY, "-m", "vllm.entrypoints.openai.api_server", "--host", "127.0.0.1", "--port", str(port),
           "--model", spec.model, "--tokenizer", spec.model, "--max-model-len", str(spec.max_model_len),
           "--served-model-name", spec.pool]
    for key, value in spec.args.items():
        flag = "--" + key.replace("_", "-")
        if key in SKIP and value is None:
            continue
        if key == "disable_log_stats":
            cmd += [flag] if value else []
        elif isinstance(value, bool):
            cmd.append(flag if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, dict):  # a config (structured outputs'): the CLI reads JSON
            cmd += [flag, json.dumps(value)]
        else:
            cmd += [flag, str(value)]
    return cmd


def start_server(spec, env: dict) -> tuple[subprocess.Popen, str]:
    port = common.free_port()
    common.LOG_DIR.mkdir(parents=True, exist_ok=True)
    log = open(common.LOG_DIR / "vllm_server.log", "w")
    proc = subprocess.Popen(server_cmd(spec, port), cwd=common.ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    end = time.monotonic() + 300
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM server exited ({proc.returncode}); see {log.name}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                if common.colocate_baselines():
                    from inference.cpu_affinity import colocate_engine_core

                    colocate_engine_core(proc.pid)
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    stop_server(proc)
    raise TimeoutError("vLLM server did not come up in 300 s")


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


class ServerArm:
    """vLLM's OpenAI server as a subprocess; `one(i)` streams request i through it."""

    def __init__(self, prompts):
        self.prompts = prompts
        self.http = None

    def start(self) -> None:
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2")}
        self.spec = common.engine_spec()
        self.cmd = server_cmd(self.spec, 0)
        self.proc, self.url = start_server(self.spec, env)
        self.pids = {"api_server": self.proc.pid, **common.children(self.proc.pid)}

    async def warm_up(self, http) -> None:
        self.http = http
        await common.drive(4, 8, self.one)

    async def one(self, i: int) -> common.Request:
        body = {"model": common.POOL, "prompt": self.prompts[i][1], "max_tokens": common.OUTPUT_TOKENS,
                "temperature": 0.0, "seed": 0, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
        req = common.Request(start=time.perf_counter())
        try:
            async with self.http.post(f"{self.url}/v1/completions", json=body) as resp:
                if resp.status != 200:
                    req.error = f"HTTP {resp.status}: {(await resp.text())[:200]}"
                seen = 0
                async for ev in sse_client.events(resp):
                    if ev.data == "[DONE]":
                        break
                    chunk = ev.json()
                    usage = chunk.get("usage") or {}
                    total = usage.get("completion_tokens", seen)
                    if chunk.get("choices") and total > seen:
                        req.arrivals.append((ev.t, total - seen))
                    seen = total
                req.usage_tokens = seen
        except Exception as exc:
            req.error = f"{type(exc).__name__}: {exc}"
        req.end = time.perf_counter()
        return req

    async def level(self, c: int) -> tuple[list[common.Request], float]:
        return await common.drive(c, common.requests_for(c), self.one)

    def stop(self) -> None:
        stop_server(self.proc)


def main(out: str, levels: list[int]) -> None:
    arm = ServerArm(common.make_contents(max(common.requests_for(c) for c in levels)))
    arm.start()
    try:
        async def go():
            results = {}
            async with sse_client.session(limit=0) as http:
                await arm.warm_up(http)
                for c in levels:
                    meter = common.CpuMeter({**arm.pids, "client": os.getpid()})
                    meter.start()
                    reqs, wall = await arm.level(c)
                    results[c] = {**common.summarize(reqs, wall, common.OUTPUT_TOKENS), "cpu": meter.stop()}
                    print(f"[b] c={c}: {results[c]['tok_s']:.0f} tok/s", flush=True)
            return results
        common.write_json(out, {"arm": "b", "cmd": " ".join(server_cmd(arm.spec, 0)), "levels": asyncio.run(go())})
    finally:
        arm.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--levels", default=",".join(map(str, common.LEVELS)))
    a = ap.parse_args()
    main(a.out, [int(x) for x in a.levels.split(",")])

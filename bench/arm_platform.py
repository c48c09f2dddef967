"""Arm (c): the platform end to end on the real vLLM engine. Each request is a new
conversation: POST /api/chats/ with its first message (one request), then read the
run's SSE stream, exactly as a client of the REST API does. (Until Session 18 the arm
made its chats before each level, and POSTed the message to the chat: the chats' CPU
was counted in the level's, their time was not in TTFT.)

    .venv/bin/python -m bench.arm_platform OUT.json [--levels 1,8,32,64] [--profile]

Starts its own daphne and one Celery worker (vLLM, the flagship demo model, the
demo pool's pinned engine arguments) against a fresh Postgres database and a
Redis database of its own. --profile adds a pass at the highest level with
py-spy on the web process and the worker (after the measured levels, so the
measured figures carry no profiler overhead).
"""
import argparse
import asyncio
import os
import time

from bench import common, sse_client
from bench.platform_stack import Stack


# A message POST that fails with a 5xx is retried this many times in all, 50 ms apart:
# the time spent counts in the request's TTFT and the retries are reported.
POST_ATTEMPTS = 5


class Client:
    def __init__(self, url: str, key: str, http):
        self.url, self.http = url, http
        self.post_retries = 0
        self.snapshots = 0  # replies served as one snapshot event instead of the live stream
        self.conflicts = 0  # 409s retried: the chat's previous run was not finalized yet
        self.auth = {"Authorization": f"Bearer {key}"}

    async def new_chats(self, count: int) -> list[int]:
        """Chats made through the API, a few at a time (not measured)."""
        gate = asyncio.Semaphore(4)

        async def one():
            async with gate, self.http.post(f"{self.url}/api/chats/", json={"model": common.POOL}, headers=self.auth) as r:
                assert r.status == 201, await r.text()
                return (await r.json())["id"]
        return list(await asyncio.gather(*(one() for _ in range(count))))

    async def turn(self, chat_id: int | None, content: str, *, max_tokens: int = common.OUTPUT_TOKENS,
                   delays: list | None = None, on_run: asyncio.Future | None = None,
                   retry_conflict: bool = False, two_step: bool = False) -> common.Request:
        """One message: POST, then follow its events to the end. `chat_id` None: a new
        conversation, started with its first message in one POST /api/chats/ (or, with
        `two_step` or from a server without that, a chat POST and then the message's).
        `delays` collects (receive wall ms - stream entry id ms) per token event; `on_run`
        gets the run's events URL (None if the POST failed) as soon as it is known.
        `retry_conflict` retries a 409 (the chat's last run not yet finalized) too."""
        try:
            return await self._turn(chat_id, content, max_tokens, delays, on_run, retry_conflict, two_step)
        finally:
            if on_run is not None and not on_run.done():
                on_run.set_result(None)

    async def _turn(self, chat_id, content, max_tokens, delays, on_run, retry_conflict, two_step) -> common.Request:
        body = {"content": content, "max_tokens": max_tokens, "temperature": 0.0, "top_p": 1.0, "seed": 0,
                "ignore_eos": True}
        req = common.Request(start=time.perf_counter())
        try:
            attempts = 40 if retry_conflict else POST_ATTEMPTS  # a 409 lasts until the last run is finalized
            for attempt in range(attempts):  # a 5xx is retried (and counted): see POST_ATTEMPTS
                if chat_id is None:  # a new conversation
                    start = {"model": common.POOL} if two_step else {"model": common.POOL, "message": body}
                    status, answer = await self._post("/api/chats/", start)
                    if status == 201:
                        if "run" in answer:
                            run = answer["run"]
                            break
                        chat_id = answer["id"]  # a chat without its message (asked for, or an older server)
                if chat_id is not None:
                    status, answer = await self._post(f"/api/chats/{chat_id}/messages/", body)
                    if status == 202:
                        run = answer["run"]
                        break
                req.error = f"POST {status}: {str(answer)[:200]}"
                retry = status >= 500 or (status == 409 and retry_conflict)
                if not retry or attempt == attempts - 1:
                    return req
                self.conflicts += status == 409
                self.post_retries += 1
                await asyncio.sleep(0.05)
            req.error = ""
            req.run_id = run["id"]
            if on_run is not None:
                on_run.set_result(run["events_url"])
            sent_ms = time.time() * 1000
            async with self.http.get(self.url + run["events_url"], headers=self.auth) as resp:
                await self._read(resp, req, delays, sent_ms)
        except Exception as exc:
            req.error = f"{type(exc).__name__}: {exc}"
        finally:
            req.end = time.perf_counter()
        return req

    async def streamed_turn(self, chat_id: int | None, content: str, *, max_tokens: int = common.OUTPUT_TOKENS,
                            delays: list | None = None) -> common.Request:
        """One message with `"stream": true`: the run and its events in the POST's own
        response (a new conversation's start when `chat_id` is None). A 5xx is retried
        as in turn()."""
        body = {"content": content, "max_tokens": max_tokens, "temperature": 0.0, "top_p": 1.0, "seed": 0,
                "ignore_eos": True, "stream": True}
        if chat_id is None:
            path, body = "/api/chats/", {"model": common.POOL, "stream": True, "message": body}
        else:
            path = f"/api/chats/{chat_id}/messages/"
        req = common.Request(start=time.perf_counter())
        try:
            for attempt in range(POST_ATTEMPTS):
                sent_ms = time.time() * 1000
                async with self.http.post(self.url + path, json=body, headers=self.auth) as resp:
                    if resp.status == 200:
                        req.error = ""
                        await self._read(resp, req, delays, sent_ms)
                        break
                    req.error = f"POST {resp.status}: {(await resp.text())[:200]}"
                    if resp.status < 500 or attempt == POST_ATTEMPTS - 1:
                        break
                self.post_retries += 1
                await asyncio.sleep(0.05)
        except Exception as exc:
            req.error = f"{type(exc).__name__}: {exc}"
        finally:
            req.end = time.perf_counter()
        return req

    async def _read(self, resp, req: common.Request, delays: list | None, sent_ms: float) -> None:
        """A run's SSE events into `req`, to the terminal one (a streamed POST's `run` event first)."""
        async for ev in sse_client.events(resp):
            if ev.event == "token":
                data = ev.json()
                req.arrivals.append((ev.t, data["n"]))
                req.text += data["text"]
                written_ms = int(ev.id.split("-")[0])
                if delays is not None and written_ms >= sent_ms:  # not backlog from before we asked
                    delays.append(ev.wall_ms - written_ms)
            elif ev.event == "run":
                req.run_id = ev.json()["run"]["id"]
            elif ev.event == "snapshot":  # the whole reply at once, from Postgres; replaces what came
                data = ev.json()
                req.arrivals, req.text = [(ev.t, data["n"])], data["text"]
                self.snapshots += 1
            elif ev.event == "done":
                req.usage_tokens = ev.json()["usage"]["completion_tokens"]
                break
            elif ev.event == "error":
                req.error = f"stream error: {ev.data[:200]}"
                break


    async def _post(self, path: str, body: dict) -> tuple[int, dict | str]:
        async with self.http.post(self.url + path, json=body, headers=self.auth) as r:
            return r.status, (await r.json() if r.status < 300 else await r.text())


class OpenAIClient:
    """The platform through its OpenAI-compatible API: one streamed POST
    /v1/chat/completions per request (a new conversation each), as an SDK sends it.
    A chunk does not say how many tokens it carries, so each request's tokens (the
    usage chunk's count) are spread evenly over its content chunks: tok/s, TTFT and
    end-to-end times are exact, ITL and tokens per event are averages per request."""

    def __init__(self, url: str, key: str, http):
        self.url, self.http = url, http
        self.auth = {"Authorization": f"Bearer {key}"}

    async def turn(self, content: str, *, max_tokens: int = common.OUTPUT_TOKENS) -> common.Request:
        body = {"model": common.POOL, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
                "temperature": 0.0, "top_p": 1.0, "seed": 0, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}}
        req = common.Request(start=time.perf_counter())
        chunks = []
        try:
            async with self.http.post(f"{self.url}/v1/chat/completions", json=body, headers=self.auth) as r:
                if r.status != 200:
                    req.error = f"POST {r.status}: {(await r.text())[:200]}"
                    return req
                req.run_id = int(r.headers["X-Run-Id"])
                async for ev in sse_client.events(r):
                    if ev.data == "[DONE]":
                        break
                    data = ev.json()
                    if data.get("usage"):
                        req.usage_tokens = data["usage"]["completion_tokens"]
                    for choice in data.get("choices") or ():
                        delta = choice.get("delta") or {}
                        if "content" in delta and "role" not in delta:  # a token entry's chunk (its text may
                            chunks.append(ev.t)                         # be empty: a token held back by the
                            req.text += delta["content"] or ""          # detokenizer), not the opening one
                        if "error" in data:
                            req.error = f"stream error: {ev.data[:200]}"
            if chunks and req.usage_tokens:
                share, extra = divmod(req.usage_tokens, len(chunks))
                req.arrivals = [(t, share + (i < extra)) for i, t in enumerate(chunks)]
        except Exception as exc:
            req.error = f"{type(exc).__name__}: {exc}"
        finally:
            req.end = time.perf_counter()
        return req


def check_saved(stack: Stack, reqs: list[common.Request], timeout: float = 60) -> dict:
    """Tokens the client saw = usage reported = completion_tokens saved, and the saved
    reply is the streamed text, byte for byte."""
    reqs = [r for r in reqs if r.run_id]
    ids = [r.run_id for r in reqs]
    query = ("select r.id, r.status, r.completion_tokens, r.ttft_ms, m.content from runs_generationrun r "
             "join chats_message m on m.id = r.assistant_message_id where r.id = any(%s)")
    end = time.monotonic() + timeout
    with stack.sql() as conn:
        while True:
            rows = {row[0]: row for row in conn.execute(query, (ids,)).fetchall()}
            if (len(rows) == len(ids) and all(row[1] in TERMINAL for row in rows.values())) \
                    or time.monotonic() > end:
                break
            time.sleep(0.2)
    bad = []
    for r in reqs:
        row = rows.get(r.run_id)
        saved, text = (row[2], row[4]) if row else (None, None)
        if not (r.tokens == r.usage_tokens == saved) or text != r.text:
            bad.append({"run": r.run_id, "client": r.tokens, "usage": r.usage_tokens, "saved": saved,
                        "status": row and row[1], "text_equal": text == r.text})
    return {"runs": len(ids), "mismatches": len(bad), "mismatch_samples": bad[:3],
            "saved_tokens": sum(row[2] for row in rows.values()),
            "db_ttft_ms_p50": common.pct([row[3] for row in rows.values() if row[3] is not None], 50)}


TERMINAL = ("completed", "failed", "cancelled")


class PlatformArm:
    """The platform's processes on their own database and Redis; `level(c)` runs one
    concurrency level through the REST API and SSE."""

    def __init__(self, prompts, *, worker_slots: int = 64, db_name: str = "bench_chatsite", root=common.ROOT,
                 server: str = "daphne"):
        self.prompts = prompts
        self.worker_slots = worker_slots
        self.server = server  # the web's ASGI server (chatsite/edge/web_server.py)
        self.stack = Stack(db_name=db_name, root=root)

    def start(self) -> None:
        self.key = self.stack.seed()
        self.web, self.url = self.stack.start_web(server=self.server)
        self.worker = self.stack.start_worker(
            "bench", VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2"),
            CHATSITE_WORKER_SLOTS=self.worker_slots)
        self.pids = {"web": self.web.pid, "worker": self.worker.pid, **common.children(self.worker.pid),
                     **self.stack.server_pids()}

    async def warm_up(self, http) -> None:
        self.client = Client(self.url, self.key, http)
        await common.drive(4, 8, lambda i: self.client.turn(None, self.prompts[i][0]))

    async def level(self, c: int) -> tuple[list[common.Request], float, dict]:
        """(requests, wall seconds, extras: delivery delays, POST retries); each request is a new
        conversation, started with its message in one POST /api/chats/."""
        total = common.requests_for(c)
        delays: list[float] = []
        self.client.post_retries = self.client.snapshots = 0
        await self._wait_for_connections(c)
        with self.stack.pg_connections() as pg:
            reqs, wall = await common.drive(c, total, lambda i: self.client.turn(None, self.prompts[i][0],
                                                                                  delays=delays))
        return reqs, wall, {"delays": delays, "post_retries": self.client.post_retries, "pg_peak": pg.peak,
                            "snapshots": self.client.snapshots, "pg_mean_lock_waiters": pg.mean_lock_waiters,
                            "pg_server_peak": pg.server_peak}

    async def _wait_for_connections(self, c: int, timeout: float = 60) -> None:
        """The platform may hold a Postgres connection per running run (worker) and per
        in-flight POST (web); the server is shared, so wait until it has room."""
        end = time.monotonic() + timeout
        while await asyncio.to_thread(self.stack.pg_free_connections) < c + 20 and time.monotonic() < end:
            await asyncio.sleep(1)

    async def profile(self, c: int, seconds: int = 15) -> dict:
        """Load at concurrency c while py-spy samples the web process and the worker: one
        pass writing collapsed stacks (for the hotspot table), one writing flame graphs."""
        out = {}
        for fmt, ext in (("raw", "txt"), ("flamegraph", "svg")):
            procs = []
            for name in ("web", "worker"):
                path = common.OUT / f"profile_{name}.{ext}"
                procs.append(await asyncio.create_subprocess_exec(
                    str(common.ROOT / ".venv" / "bin" / "py-spy"), "record", "-p", str(self.pids[name]),
                    "-d", str(seconds), "-r", "100", "--nonblocking", "--gil", "-f", fmt, "-o", str(path),
                    stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL))
                out[f"{name}_{fmt}"] = str(path.relative_to(common.ROOT))
            total = max(c, int(c * 2.5))
            deadline = time.monotonic() + seconds + 2
            todo = iter(range(total))

            async def loop():
                for i in todo:
                    if time.monotonic() > deadline:
                        return
                    await self.client.turn(None, self.prompts[i % len(self.prompts)][0])
            await asyncio.gather(*(loop() for _ in range(c)))
            for p in procs:
                await p.wait()
        return out

    async def level_openai(self, c: int) -> tuple[list[common.Request], float, dict]:
        """One level through /v1/chat/completions (arm d): the same processes."""
        client = OpenAIClient(self.url, self.key, self.client.http)
        await self._wait_for_connections(c)
        with self.stack.pg_connections() as pg:
            reqs, wall = await common.drive(c, common.requests_for(c),
                                            lambda i: client.turn(self.prompts[i % len(self.prompts)][0]))
        return reqs, wall, {"delays": [], "post_retries": 0, "pg_peak": pg.peak, "snapshots": 0,
                            "pg_mean_lock_waiters": pg.mean_lock_waiters, "pg_server_peak": pg.server_peak}

    def stop(self) -> None:
        self.stack.stop()


class PlatformOpenAIArm:
    """Arm (d): arm (c)'s platform (the same web, worker and engine) driven through
    the OpenAI-compatible API instead of the REST API's POST and SSE GET."""

    def __init__(self, platform: PlatformArm):
        self.platform = platform

    def start(self) -> None:  # arm (c) starts and stops the processes
        pass

    def stop(self) -> None:
        pass

    @property
    def pids(self) -> dict:
        return self.platform.pids

    @property
    def stack(self) -> Stack:
        return self.platform.stack

    async def level(self, c: int):
        return await self.platform.level_openai(c)


def main(out: str, levels: list[int], profile: bool) -> None:
    arm = PlatformArm(common.make_contents(max(common.requests_for(c) for c in levels)),
                      worker_slots=max(64, max(levels)))
    try:
        arm.start()

        async def go():
            results = {"levels": {}}
            async with sse_client.session(limit=0) as http:
                await arm.warm_up(http)
                for c in levels:
                    meter = common.CpuMeter({**arm.pids, "client": os.getpid()})
                    meter.start()
                    reqs, wall, extra = await arm.level(c)
                    cpu = meter.stop()
                    results["levels"][c] = {
                        **common.summarize(reqs, wall, common.OUTPUT_TOKENS), "cpu": cpu,
                        "accounting": await asyncio.to_thread(check_saved, arm.stack, reqs), "post_retries": extra["post_retries"],
                        "delivery_ms_p50": common.pct(extra["delays"], 50), "pg_peak": extra["pg_peak"],
                        "delivery_ms_p99": common.pct(extra["delays"], 99)}
                    print(f"[c] c={c}: {results['levels'][c]['tok_s']:.0f} tok/s", flush=True)
                if profile:
                    results["profile"] = await arm.profile(max(levels))
            return results
        common.write_json(out, {"arm": "c", "pids": arm.pids, **asyncio.run(go())})
    finally:
        arm.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--levels", default=",".join(map(str, common.LEVELS)))
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    main(a.out, [int(x) for x in a.levels.split(",")], a.profile)

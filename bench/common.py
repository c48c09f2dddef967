"""Shared pieces of the benchmarks: the fixed workload, latency statistics, CPU
accounting from /proc, and the pinned engine arguments every arm uses."""
import json
import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
LOG_DIR = ROOT / "var" / "log" / "bench"
MODEL_DIR = ROOT / "var" / "models" / "flagship"
PY = str(ROOT / ".venv" / "bin" / "python")
POOL = "flagship"
CONTEXT_LENGTH = 1024
CLK_TCK = os.sysconf("SC_CLK_TCK")

_FILLER = ("Explain how a for loop in Python walks over the items of a list, what the range function "
           "returns when it is given a start, a stop and a step, how enumerate and zip help, and why "
           "a list comprehension is often shorter than the loop it replaces in everyday code").split()


def demo_engine_args() -> dict:
    """The tiny demo models' pinned engine arguments (inference.engine_config; no Django)."""
    from inference.engine_config import TINY_ENGINE_ARGS

    return dict(TINY_ENGINE_ARGS)


def engine_spec(**overrides):
    """The flagship demo pool's spec exactly as a worker builds it (TINY_ENGINE_ARGS
    over the platform's pinned defaults)."""
    from inference.specs import EngineSpec

    return EngineSpec.build(pool=POOL, model=str(MODEL_DIR), context_length=CONTEXT_LENGTH,
                            engine_args={**demo_engine_args(), **overrides})


def make_contents(count: int, prompt_tokens: int = 64) -> list[tuple[str, list[int]]]:
    """`count` distinct user messages whose chat-templated prompt is exactly
    `prompt_tokens` long (distinct so the prefix cache does not serve them for free
    beyond the shared template), with the token ids every arm sends."""
    from transformers import AutoTokenizer

    from inference.prompt import assemble

    tok = AutoTokenizer.from_pretrained(str(MODEL_DIR))
    out = []
    for i in range(count):
        words = [f"Request {i}."]
        best = None
        for w in _FILLER * 4:
            words.append(w)
            ids = assemble(tok, [{"role": "user", "content": " ".join(words)}],
                           max_prompt_tokens=CONTEXT_LENGTH).token_ids
            if len(ids) <= prompt_tokens:
                best = (" ".join(words), ids)
            if len(ids) >= prompt_tokens:
                break
        out.append(best)
    return out


@dataclass
class Request:
    """What one client saw of one request."""

    start: float  # perf_counter when the request was sent
    arrivals: list[tuple[float, int]] = field(default_factory=list)  # (perf_counter, tokens in that event)
    end: float = 0.0
    usage_tokens: int | None = None
    run_id: int | None = None
    text: str = ""
    error: str = ""

    @property
    def tokens(self) -> int:
        return sum(n for _, n in self.arrivals)

    @property
    def ttft(self) -> float | None:
        return self.arrivals[0][0] - self.start if self.arrivals else None

    def itl_samples(self) -> list[float]:
        """Per-token inter-token latency: an event carrying n tokens that arrives dt after
        the previous event counts as n tokens, each dt/n apart. Tokens in the first event
        beyond the first are part of time to first token, as in vLLM's own benchmark
        (mean ITL = (e2e - ttft) / (tokens - tokens of the first event))."""
        out = []
        for (t0, _), (t1, n) in zip(self.arrivals, self.arrivals[1:]):
            if n:
                out.extend([(t1 - t0) / n] * n)
        return out


def pct(values, q: float):
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summarize(reqs: list[Request], wall: float, expected_tokens: int) -> dict:
    ok = [r for r in reqs if not r.error]
    itl = [x for r in ok for x in r.itl_samples()]
    ttft = [r.ttft for r in ok if r.ttft is not None]
    e2e = [r.end - r.start for r in ok]
    events = sum(len(r.arrivals) for r in ok)
    tokens = sum(r.tokens for r in ok)
    return {
        "requests": len(reqs), "errors": len(reqs) - len(ok),
        "error_samples": [r.error for r in reqs if r.error][:3],
        "tokens": tokens, "events": events, "tokens_per_event": tokens / events if events else None,
        "wall_s": wall, "tok_s": tokens / wall if wall else None,
        "ttft_p50_ms": ms(pct(ttft, 50)), "ttft_p95_ms": ms(pct(ttft, 95)),
        "itl_p50_ms": ms(pct(itl, 50)), "itl_p95_ms": ms(pct(itl, 95)),
        "itl_mean_ms": ms(statistics.fmean(itl)) if itl else None,
        "e2e_p50_ms": ms(pct(e2e, 50)), "e2e_p95_ms": ms(pct(e2e, 95)),
        "all_complete": all(r.tokens == expected_tokens for r in ok),
        "usage_matches": all(r.usage_tokens == r.tokens for r in ok if r.usage_tokens is not None),
    }


def ms(x):
    return None if x is None else x * 1000


# --- CPU accounting ---------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / CLK_TCK


def tree_cpu_seconds(pid: int) -> float:
    """A server's CPU: the process itself, its reaped children and its live ones."""
    import psutil

    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    total = sum(int(x) for x in parts[11:15]) / CLK_TCK
    for child in psutil.Process(pid).children():
        try:
            total += cpu_seconds(child.pid)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def callgrind_summary(path: Path) -> int:
    """The instructions a callgrind output file counts (its `summary:` line)."""
    for line in path.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise RuntimeError(f"callgrind wrote no summary in {path}")


def callgrind_instructions(argv: list[str], *, cwd, env: dict, timeout: float = 1800) -> int:
    """Instructions callgrind counts for one run of `argv` (its children not followed)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv],
                       cwd=cwd, env=env, check=True, capture_output=True, timeout=timeout)
        return callgrind_summary(out)


def postgres_cpu_seconds() -> float:
    """CPU of the whole Postgres server (shared with every other session on the
    machine): the postmaster with its reaped backends (cutime + cstime) plus the
    live ones. Connections here live one request each, so no per-backend count."""
    import psutil

    master = next(p for p in psutil.process_iter(["name", "ppid"])
                  if p.info["name"] == "postgres" and psutil.Process(p.info["ppid"]).name() != "postgres")
    with open(f"/proc/{master.pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    total = sum(int(x) for x in parts[11:15]) / CLK_TCK
    for child in master.children():
        try:
            total += cpu_seconds(child.pid)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def colocate_baselines() -> bool:
    """Whether arms (a) and (b) get the platform's engine-core placement too
    (inference/cpu_affinity.py); off by default: they run as vLLM ships."""
    return os.environ.get("BENCH_COLOCATE_BASELINES", "0") == "1"


POSTGRES = -1  # a CpuMeter pid standing for the whole Postgres server


def children(pid: int) -> dict[str, int]:
    """A process's descendants that use CPU, by a readable name (vLLM names its
    engine processes, e.g. VLLM::EngineCore); the multiprocessing resource tracker
    is left out."""
    import psutil

    out = {}
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return out
    for k, c in enumerate(kids):
        try:
            name, cmd = c.name(), " ".join(c.cmdline())
        except psutil.NoSuchProcess:
            continue
        if "resource_tracker" in cmd:
            continue
        out[f"{name}#{k}" if name in out else name] = c.pid
    return out


def system_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        vals = [int(x) for x in f.readline().split()[1:]]
    idle = vals[3] + vals[4]
    return (sum(vals) - idle) / CLK_TCK, sum(vals) / CLK_TCK


class CpuMeter:
    """CPU seconds of named processes between start() and stop(), plus the whole
    machine's busy time (the machine is shared: what is not ours is someone else's)."""

    def __init__(self, pids: dict[str, int]):
        self.pids = pids

    def _read(self):
        out = {}
        for name, pid in self.pids.items():
            try:
                if pid == POSTGRES:
                    out[name] = postgres_cpu_seconds()
                elif isinstance(pid, (tuple, list)):  # ("tree", pid): a server and its children (a private Postgres)
                    out[name] = tree_cpu_seconds(pid[1])
                else:
                    out[name] = cpu_seconds(pid)
            except (FileNotFoundError, ProcessLookupError):
                out[name] = None
        return out

    def start(self):
        self._t0, self._c0, self._s0 = time.perf_counter(), self._read(), system_busy()

    def stop(self) -> dict:
        t1, c1, s1 = time.perf_counter(), self._read(), system_busy()
        procs = {k: (c1[k] - self._c0[k]) if c1.get(k) is not None and self._c0.get(k) is not None else None
                 for k in self.pids}
        return {"wall_s": t1 - self._t0, "proc_cpu_s": procs,
                "machine_busy_s": s1[0] - self._s0[0], "machine_cores": os.cpu_count()}


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def write_json(name: str, data) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    path.write_text(json.dumps(data, indent=1, default=lambda o: asdict(o)))
    return path


# --- the load ----------------------------------------------------------------------
LEVELS = (1, 8, 32, 64)
OUTPUT_TOKENS = 128
PROMPT_TOKENS = 64


def requests_for(concurrency: int) -> int:
    """Closed loop: `concurrency` clients, each sending its next request as soon as its
    last one ends, until this many requests have been sent (three rounds or more)."""
    return {1: 16, 8: 64, 32: 128}.get(concurrency, 3 * concurrency)


# Clients start this far apart (all arms alike), as real clients never arrive in the
# same millisecond; it also keeps the platform's burst of Postgres connections (one
# per in-flight POST) below the shared server's limit.
STAGGER_SECONDS = 0.01
# No request starts after this many seconds of a level (those running finish), so a
# slow arm costs bounded time; throughput is still tokens over the level's wall time.
LEVEL_MAX_SECONDS = 30.0


async def drive(concurrency: int, total: int, one_request) -> tuple[list[Request], float]:
    """Run `total` requests through `concurrency` concurrent clients; returns the
    requests and the wall time from the first send to the last byte."""
    import asyncio

    todo = iter(range(total))
    done: list[Request] = []

    async def client(k: int):
        await asyncio.sleep(k * STAGGER_SECONDS)
        for i in todo:
            if time.perf_counter() > deadline:
                return
            done.append(await one_request(i))

    t0 = time.perf_counter()
    deadline = t0 + LEVEL_MAX_SECONDS
    await asyncio.gather(*(client(k) for k in range(concurrency)))
    return done, time.perf_counter() - t0


def server_args(kind: str, app: str, port: int) -> list[str]:
    """The arguments after `python` that serve the ASGI `app` on 127.0.0.1:`port`: daphne
    (what the README runs) or uvicorn with uvloop and httptools (an operator's choice)."""
    if kind == "daphne":
        return ["-m", "daphne", "-b", "127.0.0.1", "-p", str(port), app]
    if kind != "uvicorn":
        raise ValueError(f"server must be daphne or uvicorn, not {kind!r}")
    return ["-m", "uvicorn", "--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning",
            "--host", "127.0.0.1", "--port", str(port), app]


def web_args(kind: str, port: int, root: Path = ROOT) -> list[str]:
    """The arguments after `python` that serve the platform's web on 127.0.0.1:`port` as the
    Procfile does (chatsite/edge/web_server.py: its access log on, under either server); for
    code from before that launcher (`root`, a base worktree), the servers' own commands."""
    if kind not in ("daphne", "uvicorn"):
        raise ValueError(f"server must be daphne or uvicorn, not {kind!r}")
    for launcher in ("edge/web_server.py", "web_server.py"):  # where it lives, and where it lived
        if (Path(root) / "chatsite" / launcher).exists():
            module = "chatsite." + launcher.removesuffix(".py").replace("/", ".")
            return ["-m", module, "--server", kind, "--host", "127.0.0.1", "--port", str(port)]
    return server_args(kind, "chatsite.asgi:application", port)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

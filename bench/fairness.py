"""Fairness between tenants: a noisy tenant keeps 300 runs queued on one pool while a
quiet tenant sends one run at a time; the quiet tenant's queue wait alone and beside
the noisy one, and the noisy tenant's throughput, with fair ordering and in FIFO order
(CHATSITE_FAIR_QUEUE=0). Real daphne and one Celery worker on the fake engine; Redis
and Postgres of the benchmark's own (bench/services.py).

    .venv/bin/python -m bench.fairness [--seconds 15] [--backlog 300] [--slots 16] [--tokens 40] [--quiet-tokens 4]

Queue wait is the run's started_at - queued_at as Postgres has it (admission to claim).
Writes bench/out/fairness.md, fairness.json and fairness.png.
"""
import argparse
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from bench import common, report
from bench.platform_stack import Stack

STEP_SECONDS = 0.05  # a token every 50 ms: a noisy run of 40 tokens holds its slot ~2 s
QUIET_ALONE_RUNS = 40


class Tenant:
    """One tenant's API key and a supply of fresh chats (one active run per chat)."""

    def __init__(self, stack: Stack, slug: str, user: str, key: str, chats: int):
        self.slug, self.key = slug, key
        self.auth = {"Authorization": f"Bearer {key}"}
        with stack.sql() as conn:
            rows = conn.execute(
                "insert into chats_chat (tenant_id, owner_id, title, system_prompt, listed, pool_id, created_at, "
                "updated_at) select t.id, u.id, '', '', true, p.id, now(), now() from generate_series(1, %s), "
                "tenancy_tenant t, "
                "auth_user u, pools_modelpool p where t.slug = %s and u.username = %s and p.name = %s returning id",
                (chats, slug, user, common.POOL)).fetchall()
        self._chats = iter(r[0] for r in rows)
        self._lock = threading.Lock()

    def next_chat(self) -> int:
        with self._lock:
            return next(self._chats)


def post(http: httpx.Client, tenant: Tenant, tokens: int) -> int:
    body = {"content": "work", "max_tokens": tokens, "ignore_eos": True}
    resp = http.post(f"/api/chats/{tenant.next_chat()}/messages/", headers=tenant.auth, json=body)
    if resp.status_code != 202:
        raise RuntimeError(f"{resp.status_code}: {resp.text[:300]}")
    return resp.json()["run"]["id"]


def tenant_counts(stack: Stack, slug: str) -> tuple[int, int]:
    """(queued, running) runs of a tenant."""
    with stack.sql() as conn:
        return conn.execute(
            "select count(*) filter (where r.status = 'queued'), count(*) filter (where r.status = 'running') "
            "from runs_generationrun r join tenancy_tenant t on t.id = r.tenant_id where t.slug = %s",
            (slug,)).fetchone()


def wait_terminal(stack: Stack, run_id: int, timeout: float = 300) -> None:
    end = time.monotonic() + timeout
    with stack.sql() as conn:
        while time.monotonic() < end:
            status = conn.execute("select status from runs_generationrun where id = %s", (run_id,)).fetchone()[0]
            if status in ("completed", "failed", "cancelled"):
                return
            time.sleep(0.01)
    raise TimeoutError(f"run {run_id} not finished after {timeout} s")


def waits_of(stack: Stack, run_ids: list[int]) -> list[float]:
    with stack.sql() as conn:
        rows = conn.execute("select extract(epoch from started_at - queued_at) from runs_generationrun "
                            "where id = any(%s) and started_at is not null", (run_ids,)).fetchall()
    return [float(r[0]) for r in rows]


def finished_between(stack: Stack, slug: str, t0: float, t1: float) -> int:
    with stack.sql() as conn:
        return conn.execute(
            "select count(*) from runs_generationrun r join tenancy_tenant t on t.id = r.tenant_id "
            "where t.slug = %s and r.status = 'completed' and r.finished_at >= to_timestamp(%s) "
            "and r.finished_at < to_timestamp(%s)", (slug, t0, t1)).fetchone()[0]


class Noisy:
    """Keeps `backlog` runs of the noisy tenant queued (tops the queue up every 50 ms)."""

    def __init__(self, stack: Stack, url: str, tenant: Tenant, backlog: int, tokens: int):
        self.stack, self.url, self.tenant, self.backlog, self.tokens = stack, url, tenant, backlog, tokens
        self.posted, self.errors = 0, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60) as http, ThreadPoolExecutor(6) as ex:
            while not self._stop.is_set():
                queued, _ = tenant_counts(self.stack, self.tenant.slug)
                missing = self.backlog - queued
                if missing > 0:
                    for result in ex.map(lambda _: self._post(http), range(missing)):
                        self.posted += result
                self._stop.wait(0.05)

    def _post(self, http) -> int:
        try:
            post(http, self.tenant, self.tokens)
            return 1
        except Exception as exc:  # a refusal is a finding: counted and shown
            self.errors.append(str(exc)[:200])
            return 0


def quiet_runs(stack: Stack, url: str, tenant: Tenant, tokens: int, *, count: int = 0, until: float = 0) -> list[int]:
    """The quiet tenant: one run at a time, the next as soon as the last one ended."""
    ids = []
    with httpx.Client(base_url=url, timeout=60) as http:
        while (count and len(ids) < count) or (until and time.time() < until):
            run_id = post(http, tenant, tokens)
            ids.append(run_id)
            wait_terminal(stack, run_id)
    return ids


def reset(stack: Stack) -> None:
    """Between orderings: the leftover backlog is dropped (Redis emptied, its rows ended)."""
    stack.redis().flushdb()
    with stack.sql() as conn:
        conn.execute("update runs_generationrun set status = 'cancelled', finished_at = now() "
                     "where status in ('queued', 'running')")


def summary(waits: list[float]) -> dict:
    return {"n": len(waits), "p50_ms": common.ms(common.pct(waits, 50)), "p95_ms": common.ms(common.pct(waits, 95)),
            "max_ms": common.ms(max(waits) if waits else None)}


def mode(stack: Stack, url: str, noisy_t: Tenant, quiet_t: Tenant, a) -> dict:
    """One ordering: the quiet tenant alone, then the noisy backlog alone, then both."""
    alone = quiet_runs(stack, url, quiet_t, a.quiet_tokens, count=QUIET_ALONE_RUNS)
    noisy = Noisy(stack, url, noisy_t, a.backlog, a.tokens)
    noisy.start()
    end = time.monotonic() + 60
    while tenant_counts(stack, noisy_t.slug)[0] < a.backlog * 0.9 and time.monotonic() < end:
        time.sleep(0.1)  # the backlog builds up
    time.sleep(2.0)
    t0 = time.time()
    time.sleep(a.seconds)
    t1 = time.time()
    beside = quiet_runs(stack, url, quiet_t, a.quiet_tokens, until=t1 + a.seconds)
    t2 = time.time()
    queued, running = tenant_counts(stack, noisy_t.slug)
    noisy.stop()
    return {"quiet_alone": summary(waits_of(stack, alone)), "quiet_beside_noisy": summary(waits_of(stack, beside)),
            "noisy_runs_per_s_quiet_idle": finished_between(stack, noisy_t.slug, t0, t1) / (t1 - t0),
            "noisy_runs_per_s_beside_quiet": finished_between(stack, noisy_t.slug, t1, t2) / (t2 - t1),
            "noisy_queued_at_end": queued, "noisy_running_at_end": running,
            "noisy_posted": noisy.posted, "noisy_errors": noisy.errors[:3], "load_avg": common.loadavg()}


def second_tenant(stack: Stack) -> tuple[str, str]:
    slug = stack.manage("create_tenant", "--name", "Quiet").strip().splitlines()[-1]
    stack.manage("add_member", "--tenant", slug, "--user", "quiet", "--create")
    key = stack.manage("create_api_key", "--user", "quiet", "--tenant", slug, "--name", "bench").strip().splitlines()[-1]
    return slug, key


def start(stack: Stack, fair: bool, slots: int, reserve: int | None):
    web, url = stack.start_web(CHATSITE_FAIR_QUEUE=int(fair))
    extra = {} if reserve is None else {"CHATSITE_WORKER_RESERVE_SLOTS": reserve}
    worker = stack.start_worker(f"fair{int(fair)}", CHATSITE_ENGINE="fake", CHATSITE_FAKE_STEP_SECONDS=STEP_SECONDS,
                                CHATSITE_WORKER_SLOTS=slots, CHATSITE_FAIR_QUEUE=int(fair), **extra)
    return [web, worker], url


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=15, help="length of each measured phase")
    ap.add_argument("--backlog", type=int, default=300, help="runs the noisy tenant keeps queued")
    ap.add_argument("--slots", type=int, default=16, help="the worker's slots (runs at once)")
    ap.add_argument("--tokens", type=int, default=40, help="tokens per noisy run (fake engine)")
    ap.add_argument("--quiet-tokens", type=int, default=4, help="tokens per quiet run")
    ap.add_argument("--reserve", type=int, default=None, help="CHATSITE_WORKER_RESERVE_SLOTS (default: the setting's)")
    ap.add_argument("--orders", default="fair,fifo", help="which orders to measure, of fair,fifo")
    ap.add_argument("--tag", default="", help="suffix of the output files")
    a = ap.parse_args()
    started = time.monotonic()
    stack = Stack(db_name="bench_fairness")
    results = {}
    try:
        noisy_key = stack.seed()
        with stack.sql() as conn:  # this bench measures ordering, not shedding
            conn.execute("update pools_modelpool set max_queue_wait_seconds = 100000, max_queued_runs = 100000")
        quiet_slug, quiet_key = second_tenant(stack)
        noisy_t = Tenant(stack, "demo", "demo", noisy_key, 2 * (a.backlog + int(20 * (4 * a.seconds + 60))))
        quiet_t = Tenant(stack, quiet_slug, "quiet", quiet_key, 2 * QUIET_ALONE_RUNS + int(a.seconds * 40))
        for fair in [name == "fair" for name in a.orders.split(",")]:
            procs, url = start(stack, fair, a.slots, a.reserve)
            print(f"{'fair' if fair else 'fifo'} order ...", flush=True)
            results["fair" if fair else "fifo"] = mode(stack, url, noisy_t, quiet_t, a)
            for proc in procs:
                proc.stop()
                stack.procs.remove(proc)
            reset(stack)
    finally:
        stack.stop()
    results["params"] = {**vars(a), "step_seconds": STEP_SECONDS, "wall_s": time.monotonic() - started}
    tag = f"_{a.tag}" if a.tag else ""
    common.write_json(f"fairness{tag}.json", results)
    text = render(results)
    (common.OUT / f"fairness{tag}.md").write_text(text + "\n")
    if "fair" in results and "fifo" in results:
        plot(results, common.OUT / f"fairness{tag}.png")
    print(text)


def render(results: dict) -> str:
    p = results["params"]
    orders = [name for name in ("fair", "fifo") if name in results]
    rows = []
    for name in orders:
        r = results[name]
        for phase in ("quiet_alone", "quiet_beside_noisy"):
            s = r[phase]
            rows.append([name, phase.replace("_", " "), s["n"], s["p50_ms"], s["p95_ms"], s["max_ms"]])
    waits = report.table(["order", "quiet tenant", "runs", "wait p50 ms", "wait p95 ms", "wait max ms"], rows)
    tput = report.table(["order", "noisy runs/s, quiet idle", "noisy runs/s, quiet sending", "load avg"],
                        [[n, results[n]["noisy_runs_per_s_quiet_idle"], results[n]["noisy_runs_per_s_beside_quiet"],
                          results[n]["load_avg"]] for n in orders])
    fair = results.get("fair")
    ratio = (fair["quiet_beside_noisy"]["p95_ms"] / fair["quiet_alone"]["p95_ms"]
             if fair and fair["quiet_alone"]["p95_ms"] else None)
    errors = {n: results[n]["noisy_errors"] for n in orders if results[n]["noisy_errors"]}
    return (f"# Fairness between tenants\n\nOne worker, {p['slots']} slots (fair order: + {report.fmt(p['reserve'])} reserve threads; - is the setting's 2), fake "
            f"engine at {p['step_seconds'] * 1000:.0f} ms a token: noisy runs of {p['tokens']} tokens, quiet ones of "
            f"{p['quiet_tokens']}; the noisy tenant keeps {p['backlog']} runs queued; each phase {p['seconds']:.0f} s; "
            f"wall {p['wall_s']:.0f} s.\n\nQueue wait (admission to claim) of the quiet tenant, "
            f"which sends one run at a time:\n\n{waits}\n\nQuiet p95 beside the noisy tenant / alone, fair order: "
            f"{report.fmt(ratio, 2)}x (target: within 2x)\n\nThe noisy tenant's throughput:\n\n{tput}\n"
            + (f"\nnoisy refusals: {errors}\n" if errors else ""))


def plot(results: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    labels, p50, p95 = [], [], []
    for name in ("fair", "fifo"):
        for phase, label in (("quiet_alone", "alone"), ("quiet_beside_noisy", "beside noisy")):
            labels.append(f"{name}\n{label}")
            p50.append(results[name][phase]["p50_ms"] or 0)
            p95.append(results[name][phase]["p95_ms"] or 0)
    xs = range(len(labels))
    left.bar([x - 0.2 for x in xs], p50, 0.4, label="p50")
    left.bar([x + 0.2 for x in xs], p95, 0.4, label="p95")
    left.set_yscale("log")
    left.set_xticks(list(xs), labels)
    left.set_ylabel("quiet tenant's queue wait, ms (log)")
    left.set_title(f"quiet tenant beside {results['params']['backlog']} queued noisy runs")
    left.legend()
    names = ["fair", "fifo"]
    idle = [results[n]["noisy_runs_per_s_quiet_idle"] for n in names]
    busy = [results[n]["noisy_runs_per_s_beside_quiet"] for n in names]
    right.bar([x - 0.2 for x in range(2)], idle, 0.4, label="quiet idle")
    right.bar([x + 0.2 for x in range(2)], busy, 0.4, label="quiet sending")
    right.set_xticks(range(2), names)
    right.set_ylabel("noisy tenant's runs finished per second")
    right.set_title("noisy tenant's throughput")
    right.legend(loc="lower center")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()

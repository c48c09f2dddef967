"""The platform under benchmark: its own Redis server and Postgres cluster
(bench/services.py; so every CPU second they spend is the platform's), one daphne
and Celery workers as subprocesses, and an API key.

With `private=False` it uses the machine's shared servers instead: a Redis database
claimed with the slot protocol settings_test uses (a key in db 0) and a fresh
Postgres database. The bench process itself never loads Django: setup goes through
manage.py commands, checks through plain SQL, so two stacks (two code trees) can
run side by side.
"""
import atexit
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import psycopg
import redis

from bench import common

PG = "postgres://postgres@127.0.0.1:5432"
REDIS_BASE = "redis://127.0.0.1:6379"


def claim_redis_db(preferred=(14, 15, 13, 12, 11)) -> int:
    client = redis.Redis.from_url(f"{REDIS_BASE}/0")
    token = f"bench-{os.getpid()}"
    for slot in preferred:
        if client.set(f"chatsite-test-slot:{slot}", token, nx=True, ex=3 * 3600):
            atexit.register(lambda s=slot: client.eval(
                "if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) end", 1,
                f"chatsite-test-slot:{s}", token))
            redis.Redis.from_url(f"{REDIS_BASE}/{slot}").flushdb()
            return slot
    raise RuntimeError("no free Redis database among %s" % (preferred,))


def fresh_database(name: str, base: str = PG) -> str:
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{base}/{name}"


class Stack:
    """Env, database and Redis for one benchmark; start web and workers on it.
    `root` is the code tree the processes run (this checkout by default)."""

    def __init__(self, *, db_name: str = "bench_chatsite", root: Path = common.ROOT, debug: bool = False,
                 private: bool = True, **extra_env):
        from bench.services import PrivatePostgres, PrivateRedis

        self.root = Path(root)
        self.db_name = db_name
        self.private = private
        if private:
            self.pg_server, self.redis_server = PrivatePostgres(), PrivateRedis()
            self.pg_base, self.redis_url = self.pg_server.url, self.redis_server.url
        else:
            self.pg_base, self.redis_url = PG, f"{REDIS_BASE}/{claim_redis_db()}"
        self.db_url = fresh_database(db_name, self.pg_base)
        self.env = {**os.environ, "DJANGO_SETTINGS_MODULE": "chatsite.settings", "DATABASE_URL": self.db_url,
                    "REDIS_URL": self.redis_url, "CELERY_BROKER_URL": self.redis_url, "PYTHONUNBUFFERED": "1",
                    "DJANGO_DEBUG": "1" if debug else "0", "LOG_LEVEL": "WARNING",
                    "CHATSITE_DEMO_MODELS_DIR": str(common.MODEL_DIR.parent),
                    # Every benchmark client is the one demo user: lift the per-user cap on open
                    # SSE streams (32), as an operator would for a load test.
                    "CHATSITE_SSE_MAX_STREAMS_PER_USER": "100000",
                    **{k: str(v) for k, v in extra_env.items()}}
        self.procs: list[Proc] = []
        self.manage("migrate", "--verbosity", "0")
        atexit.register(self.stop)

    def server_pids(self) -> dict:
        """CpuMeter entries for Redis and Postgres (the whole server when shared)."""
        if self.private:
            return {"redis": self.redis_server.pid, "postgres": ("tree", self.pg_server.pid)}
        return {"redis": redis_server_pid(self.redis_url), "postgres": common.POSTGRES}

    def pg_connections(self) -> "PgConnections":
        return PgConnections(self.db_name, self.pg_base)

    def pg_free_connections(self) -> int:
        return pg_free_connections(self.pg_base)

    def manage(self, *args: str) -> str:
        out = subprocess.run([common.PY, "manage.py", *args], cwd=self.root, env=self.env, capture_output=True,
                             text=True, timeout=300)
        if out.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{out.stderr[-3000:]}")
        return out.stdout

    def seed(self, *, engine_args: dict | None = None, product_model: bool = False) -> str:
        """The demo tenant, user and pools (flagship engine args overridable); returns an API key.
        The flagship pool serves the tiny trained model the other arms load (common.MODEL_DIR),
        or with `product_model` the product's own default, as `seed_demo` sets it."""
        self.manage("seed_demo")
        if product_model:
            if engine_args:
                raise ValueError("engine_args override the tiny model's; the product's model keeps its own")
        else:
            with self.sql() as conn:
                conn.execute("update pools_modelpool set model = %s, context_length = %s where name = %s",
                             (str(common.MODEL_DIR), common.CONTEXT_LENGTH, common.POOL))
            self.set_engine_args(engine_args or {})
        return self.manage("create_api_key", "--user", "demo", "--name", "bench").strip().splitlines()[-1]

    def set_engine_args(self, overrides: dict) -> None:
        """The flagship pool's engine arguments: the tiny model's pinned ones with these overrides."""
        with self.sql() as conn:
            conn.execute("update pools_modelpool set engine_args = %s where name = %s",
                         (json.dumps({**common.demo_engine_args(), **overrides}), common.POOL))

    def sql(self) -> psycopg.Connection:
        return psycopg.connect(self.db_url, autocommit=True)

    def make_chats(self, count: int, pool: str = common.POOL) -> list[int]:
        """Chats of the demo user, straight in the database (making them is not measured)."""
        with self.sql() as conn:
            return [row[0] for row in conn.execute(
                "insert into chats_chat (tenant_id, owner_id, title, pool_id, system_prompt, listed, created_at, "
                "updated_at) select t.id, u.id, '', p.id, '', true, now(), now() from generate_series(1, %s), "
                "tenancy_tenant t, auth_user u, pools_modelpool p where t.slug = 'demo' and u.username = 'demo' "
                "and p.name = %s returning id", (count, pool)).fetchall()]

    def redis(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis_url, decode_responses=True)

    def start_web(self, *, server: str = "daphne", wrap: list[str] = (), **env) -> tuple["Proc", str]:
        """The web under `server` (daphne, as the README runs it, or uvicorn); `wrap`: a command
        the process runs under (callgrind: Callgrind below), which makes its start slow."""
        env.setdefault("DATABASE_POOL_MAX", 24)  # as the Procfile runs the web
        port = common.free_port()
        proc = self._start(f"web-{port}", common.web_args(server, port, root=self.root), env, wrap=wrap)
        url = f"http://127.0.0.1:{port}"
        end = time.monotonic() + (600 if wrap else 60)
        while time.monotonic() < end:
            proc.check()
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    return proc, url
            except httpx.HTTPError:
                time.sleep(0.2)
        raise TimeoutError(f"{server} did not answer; see {proc.log_path}")

    def start_worker(self, name: str, *, pool: str = common.POOL, timeout: float = 600, wrap: list[str] = (),
                     **env) -> "Proc":
        env.setdefault("DATABASE_POOL_MAX", 8)  # as scripts/run.sh runs workers
        proc = self._start(f"worker-{name}", ["-m", "celery", "-A", "chatsite", "worker", "--model-pool", pool,
                                              "-n", f"{name}@%h", "-l", "warning", "--without-gossip",
                                              "--without-mingle"], env, wrap=wrap)
        self.wait_worker(name, proc, timeout)
        return proc

    def live_workers(self) -> dict[str, dict]:
        """Worker name -> its latest heartbeat (what chatsite.pools.health reads)."""
        from chatsite import redis_keys  # key names only; no Django

        r = self.redis()
        names = r.zrangebyscore(redis_keys.workers_index(), time.time() - 3.0, "+inf")
        return {n: r.hgetall(redis_keys.worker_heartbeat(n)) for n in names}

    def wait_worker(self, name: str, proc: "Proc", timeout: float) -> None:
        """Ready when its heartbeat says the engine is loaded (the log level is warning)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            proc.check()
            beat = next((b for w, b in self.live_workers().items() if w.startswith(f"{name}@")), None)
            if beat and beat.get("ready") == "1":
                time.sleep(1.0)  # the consumer starts right after the engine step
                return
            time.sleep(0.5)
        raise TimeoutError(f"worker {name} not ready after {timeout} s; see {proc.log_path}")

    def _start(self, name: str, args: list[str], env: dict, wrap: list[str] = ()) -> "Proc":
        proc = Proc(f"{self.db_name}-{name}", [*wrap, common.PY, *args],
                    {**self.env, **{k: str(v) for k, v in env.items()}}, cwd=self.root)
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()


class Proc:
    """A child process in its own session, output in var/log/bench/NAME.log."""

    def __init__(self, name: str, cmd: list[str], env: dict, cwd: Path = common.ROOT):
        common.LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.log_path = common.LOG_DIR / f"{name}.log"
        self._log = open(self.log_path, "w")
        self.popen = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                      start_new_session=True)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def check(self) -> None:
        if self.popen.poll() is not None:
            raise RuntimeError(f"{self.name} exited ({self.popen.returncode}); see {self.log_path}")

    def stop(self, timeout: float = 60) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)
        self._log.close()


def redis_server_pid(redis_url: str) -> int:
    return int(redis.Redis.from_url(redis_url).info("server")["process_id"])


class PgConnections:
    """Samples how many Postgres connections a database holds (every 0.2 s, in a
    thread) and how many the whole server has; the server is shared."""

    def __init__(self, db_name: str, base: str = PG):
        import threading

        self.db_name = db_name
        self.base = base
        self.peak = 0
        self.server_peak = 0
        self.samples = 0
        self.lock_waiters = 0
        from collections import Counter

        self.waiting_queries: Counter = Counter()  # what the lock waiters were running
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        with psycopg.connect(f"{self.base}/postgres", autocommit=True) as conn:
            while not self._stop.wait(0.2):
                mine, total, waiting = conn.execute(
                    "select count(*) filter (where datname = %s), count(*), "
                    "count(*) filter (where datname = %s and wait_event_type = 'Lock') "
                    "from pg_stat_activity where backend_type = 'client backend'",
                    (self.db_name, self.db_name)).fetchone()
                self.peak, self.server_peak = max(self.peak, mine), max(self.server_peak, total)
                self.samples += 1
                self.lock_waiters += waiting  # backends of this database waiting on a row/table lock
                if waiting:
                    for (query,) in conn.execute(
                            "select left(regexp_replace(query, '\s+', ' ', 'g'), 120) from pg_stat_activity "
                            "where datname = %s and wait_event_type = 'Lock'", (self.db_name,)).fetchall():
                        self.waiting_queries[query] += 1

    @property
    def mean_lock_waiters(self) -> float:
        return self.lock_waiters / self.samples if self.samples else 0.0


def pg_free_connections(base: str = PG) -> int:
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        limit = int(conn.execute("show max_connections").fetchone()[0])
        used = conn.execute("select count(*) from pg_stat_activity where backend_type = 'client backend'").fetchone()[0]
    return limit - used


class Callgrind:
    """Instructions a process runs, counted by valgrind's callgrind: the same count for the
    same work whatever else the machine does, where CPU seconds on this shared machine
    moved by a third between runs of the same code minutes apart. `wrap` goes before the
    process's command (it runs ~50x slower); `zero()` when the measured part starts and
    `instructions()` when it ends (callgrind_control asks the running process)."""

    def __init__(self, name: str):
        self.path = common.LOG_DIR / f"callgrind_{name}.out"
        for old in common.LOG_DIR.glob(f"{self.path.name}*"):
            old.unlink()
        self.wrap = ["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={self.path}"]
        self.pid = None

    def zero(self, pid: int) -> None:
        self.pid = pid
        subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True, timeout=120)

    def instructions(self) -> int:
        subprocess.run(["callgrind_control", "-d", str(self.pid)], check=True, capture_output=True, timeout=120)
        dumps = sorted(common.LOG_DIR.glob(f"{self.path.name}.*"), key=lambda p: int(p.suffix[1:]))
        return common.callgrind_summary(dumps[-1])

"""Starting the platform's real processes (daphne, Celery workers) for tests."""
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
# One folder a test session (its Redis database, chatsite/settings_test.py): concurrent sessions and
# xdist workers start processes of the same names, whose logs the tests read.
LOG_DIR = ROOT / "var" / "log" / "tests" / f"db{os.environ.get('REDIS_URL', '/0').rsplit('/', 1)[-1]}"


def _die_with_parent() -> None:
    """A child the test session started gets SIGTERM if the session itself is killed."""
    import ctypes
    import signal

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_redis(client, timeout: float = 10) -> None:
    """Until a Redis server just started answers PING."""
    import redis

    end = time.monotonic() + timeout
    while True:
        try:
            client.ping()
            return
        except redis.ConnectionError:
            if time.monotonic() > end:
                raise TimeoutError("redis-server did not start") from None
            time.sleep(0.05)


def process_env(db_settings: dict, redis_url: str, **extra) -> dict:
    """The environment a child process needs to share the test database and Redis."""
    env = os.environ.copy()
    user, host, port, name = db_settings["USER"], db_settings["HOST"], db_settings["PORT"], db_settings["NAME"]
    env.update({
        "DJANGO_SETTINGS_MODULE": "chatsite.settings_test",
        "DATABASE_URL": f"postgres://{user}@{host}:{port}/{name}",
        "REDIS_URL": redis_url,
        "CELERY_BROKER_URL": redis_url,
        "PYTHONUNBUFFERED": "1",
    })
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Proc:
    """A child process with its output appended to LOG_DIR/NAME.log (an earlier process of
    the same name keeps its lines there, for a failure found after its fixture ended)."""

    def __init__(self, name: str, cmd: list[str], env: dict):
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.log_path = LOG_DIR / f"{name}.log"
        self._log = open(self.log_path, "a")
        self._log_start = self._log.tell()
        self.popen = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                      start_new_session=True, preexec_fn=_die_with_parent)

    def log_text(self) -> str:
        """This process's own output (not an earlier one's of the same name)."""
        with open(self.log_path, "rb") as f:
            f.seek(self._log_start)
            return f.read().decode(errors="replace")

    def wait_for_log(self, needle: str, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if needle in self.log_text():
                return
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.popen.returncode}):\n{self.log_text()[-4000:]}")
            time.sleep(0.2)
        raise TimeoutError(f"{self.name}: no {needle!r} after {timeout} s:\n{self.log_text()[-4000:]}")

    def signal(self, sig) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, sig)

    def stop(self, timeout: float = 30) -> None:
        import signal

        if self.popen.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.popen.wait(10)
        self._log.close()


def in_netns(netns: str | None, cmd: list[str]) -> list[str]:
    """`cmd` run inside the network namespace `netns` (None: this one). `ip netns exec`
    execs the command, so the child keeps its pid and process group."""
    return cmd if netns is None else ["ip", "netns", "exec", netns, *cmd]


def start_web(env: dict, *, host: str = "127.0.0.1", port: int | None = None, netns: str | None = None,
              name: str | None = None, server: str = "daphne") -> tuple[Proc, str]:
    return wait_for_web(launch_web(env, host=host, port=port, netns=netns, name=name, server=server))


def launch_web(env: dict, *, host: str = "127.0.0.1", port: int | None = None, netns: str | None = None,
               name: str | None = None, server: str = "daphne") -> Proc:
    """The web (under daphne, or `server`) started as the Procfile starts it, not waited for
    (wait_for_web waits): processes launched together boot side by side."""
    env = {"DATABASE_POOL_MAX": "24", **env}  # the web runs with a connection pool, as the Procfile starts it
    port = port or free_port()
    proc = Proc(name or f"web-{port}", in_netns(netns, [sys.executable, "-m", "chatsite.edge.web_server", "--server", server,
                                                       "--host", host, "--port", str(port)]), env)
    proc.url = f"http://{host}:{port}"
    return proc


def wait_for_web(proc: Proc, timeout: float = 30) -> tuple[Proc, str]:
    """Until a launched web answers /healthz."""
    url = proc.url
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.stop()
    raise TimeoutError(f"the web did not answer:\n{proc.log_text()[-3000:]}")


def start_worker(env: dict, *, pool: str, name: str, timeout: float = 60, extra_args=(),
                 netns: str | None = None) -> Proc:
    return wait_for_worker(launch_worker(env, pool=pool, name=name, extra_args=extra_args, netns=netns),
                           timeout=timeout)


def launch_worker(env: dict, *, pool: str, name: str, extra_args=(), netns: str | None = None) -> Proc:
    """A worker process started but not waited for (wait_for_worker waits), so that its
    engine can load while other tests run."""
    env = {"DATABASE_POOL_MAX": "8", **env}  # workers run with a connection pool, as scripts/run.sh starts them
    started = time.time()
    proc = Proc(f"worker-{name}", in_netns(netns, [
        sys.executable, "-m", "celery", "-A", "chatsite", "worker", "--model-pool", pool, "-n", f"{name}@%h",
        "-l", "info", "--without-gossip", "--without-mingle", *extra_args]), env)
    proc.worker = (name, env["REDIS_URL"], started)
    return proc


def wait_for_worker(proc: Proc, *, timeout: float = 60) -> Proc:
    """Until a launched worker is ready and its first heartbeat landed."""
    name, redis_url, started = proc.worker
    proc.wait_for_log(f"{name}@", timeout=timeout)
    proc.wait_for_log("ready.", timeout=timeout)
    wait_for_heartbeat(proc, redis_url, f"{name}@{socket.gethostname()}", since=started, timeout=timeout)
    return proc


def wait_for_heartbeat(proc: Proc, redis_url: str, worker: str, *, since: float, timeout: float) -> None:
    """Until the worker's first heartbeat after `since` (epoch seconds) landed in the Redis
    at `redis_url`: admission refuses (503) a pool with no live worker."""
    import redis

    from chatsite import redis_keys

    client, end = redis.Redis.from_url(redis_url), time.monotonic() + timeout
    while float(client.hget(redis_keys.worker_heartbeat(worker), "ts") or 0) < since:
        if time.monotonic() > end or proc.popen.poll() is not None:
            raise TimeoutError(f"{worker}: no heartbeat after {timeout} s:\n{proc.log_text()[-3000:]}")
        time.sleep(0.1)


def start_beat(env: dict, *, sweep_seconds: float = 1.0, netns: str | None = None) -> Proc:
    return wait_for_beat(launch_beat(env, sweep_seconds=sweep_seconds, netns=netns))


def launch_beat(env: dict, *, sweep_seconds: float = 1.0, netns: str | None = None) -> Proc:
    """Celery beat, sweeping often so that recovery is quick in tests; not waited for."""
    schedule = LOG_DIR / f"beat-{free_port()}.schedule"
    return Proc("beat", in_netns(netns, [sys.executable, "-m", "celery", "-A", "chatsite", "beat", "-l", "info",
                                         "-s", str(schedule)]),
                {**env, "CHATSITE_SWEEP_SECONDS": str(sweep_seconds)})


def wait_for_beat(proc: Proc, timeout: float = 30) -> Proc:
    proc.wait_for_log("beat: Starting", timeout=timeout)
    return proc


def started_together(launched: list[Proc], waits: list) -> list:
    """Wait for processes launched one after another (their boots overlap), each with its
    wait_for_* function; stop them all if one does not come up. Launched from the calling
    thread, not a thread pool: a child gets SIGTERM when the thread that started it ends
    (PR_SET_PDEATHSIG)."""
    try:
        return [wait(proc) for proc, wait in zip(launched, waits)]
    except Exception:
        for proc in launched:
            proc.stop(timeout=10)
        raise

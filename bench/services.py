"""A Redis server and a Postgres cluster of the benchmark's own.

The machine's Redis and Postgres are shared with every other session, so their
CPU is not the platform's alone. A benchmark that owns its servers reads their CPU
exactly: Redis is one process; Postgres is the postmaster, its live backends and
those it reaped (cutime + cstime). Redis runs as setup runs it (AOF, fsync every
second); Postgres with its stock settings and a connection limit of 300.
"""
import atexit
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from bench import common

PG_BIN = Path("/usr/lib/postgresql") / sorted(os.listdir("/usr/lib/postgresql"))[-1] / "bin" \
    if os.path.isdir("/usr/lib/postgresql") else None


def _in_netns(netns: str | None, cmd: list[str]) -> list[str]:
    return cmd if netns is None else ["ip", "netns", "exec", netns, *cmd]


class PrivateRedis:
    """`host`, `port`, `netns`: where it listens (the fault tests' hosts run it inside a
    network namespace, on that namespace's address)."""

    def __init__(self, *, appendonly: bool = True, appendfsync: str = "everysec", host: str = "127.0.0.1",
                 port: int | None = None, netns: str | None = None):
        self.port = port or common.free_port()
        self.dir = tempfile.mkdtemp(prefix="bench-redis-")
        self.url = f"redis://{host}:{self.port}/0"
        self.proc = subprocess.Popen(_in_netns(netns, [
            "redis-server", "--port", str(self.port), "--bind", host, "--save", "", "--dir", self.dir,
            "--appendonly", "yes" if appendonly else "no", "--appendfsync", appendfsync,
            # Clients on another host than loopback (a namespace's peers) are refused otherwise.
            *(["--protected-mode", "no"] if host != "127.0.0.1" else [])]),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url)
        for _ in range(200):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            raise TimeoutError("redis-server did not start")
        self.pid = self.proc.pid
        atexit.register(self.stop)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


class PrivatePostgres:
    """initdb into a temporary folder (as the postgres user: initdb refuses root).
    `host`, `port`, `netns`: where it listens; `trust_cidr`: a network (besides
    loopback) whose clients it trusts."""

    def __init__(self, *, host: str = "127.0.0.1", port: int | None = None, netns: str | None = None,
                 trust_cidr: str | None = None):
        if PG_BIN is None:
            raise RuntimeError("no PostgreSQL binaries under /usr/lib/postgresql")
        self.host, self.port = host, port or common.free_port()
        self.dir = tempfile.mkdtemp(prefix="bench-pg-")
        os.chmod(self.dir, 0o777)
        self.data = os.path.join(self.dir, "data")
        self._as_postgres([str(PG_BIN / "initdb"), "-D", self.data, "-A", "trust", "-U", "postgres",
                           "--no-sync", "-E", "UTF8"])
        if trust_cidr:
            with open(os.path.join(self.data, "pg_hba.conf"), "a") as hba:
                hba.write(f"host all all {trust_cidr} trust\n")
        self._as_postgres([str(PG_BIN / "pg_ctl"), "-D", self.data, "-l", os.path.join(self.dir, "log"), "-w",
                           "-o", f"-p {self.port} -k {self.dir} -c listen_addresses={host} "
                                 "-c max_connections=300 -c fsync=on", "start"], netns=netns)
        self.url = f"postgres://postgres@{host}:{self.port}"
        self.pid = int(Path(self.data, "postmaster.pid").read_text().split()[0])
        atexit.register(self.stop)

    def _as_postgres(self, cmd: list[str], netns: str | None = None) -> None:
        subprocess.run(_in_netns(netns, ["runuser", "-u", "postgres", "--", *cmd]), check=True, capture_output=True,
                       timeout=120)

    def stop(self) -> None:
        if os.path.exists(self.data):
            subprocess.run(["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", self.data, "-m",
                            "fast", "stop"], capture_output=True, timeout=60)
            shutil.rmtree(self.dir, ignore_errors=True)

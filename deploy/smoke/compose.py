"""The compose stack the smoke drives: docker-compose with deploy/compose.yaml and
deploy/compose.smoke.yaml, on a subnet picked unused, every wait bounded."""
import json
import os
import secrets
import socket
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "chatsite-smoke"
FILES = ["-f", str(ROOT / "deploy/compose.yaml"), "-f", str(ROOT / "deploy/compose.smoke.yaml")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_subnet() -> str:
    """A /24 in 10.232.0.0/16 that no interface of this machine is on (tests/faults/hosts
    uses 10.231.N.0/24)."""
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    for n in range(1, 255):
        if f"10.232.{n}." not in used:
            return f"10.232.{n}.0/24"
    raise RuntimeError("no free /24 in 10.232.0.0/16")


class Stack:
    def __init__(self, *, env: dict | None = None):
        self.port = free_port()
        self.subnet = free_subnet()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "DJANGO_SECRET_KEY": secrets.token_urlsafe(50), "CHATSITE_SUBNET": self.subnet,
                    "CHATSITE_PUBLISH_ADDRESS": "127.0.0.1", "CHATSITE_PORT": str(self.port),
                    "CHATSITE_POSTGRES_IMAGE": "chatsite-base-postgres:bookworm",
                    "CHATSITE_REDIS_IMAGE": "chatsite-base-redis:bookworm",
                    "CHATSITE_BASE_IMAGE": "chatsite-base-python:bookworm", "CHATSITE_WHEELS": "chatsite-wheelhouse",
                    "FLAGSHIP_KV_GIB": "1", "POSTGRES_PASSWORD": secrets.token_urlsafe(12), **(env or {})}

    def compose(self, *args: str, timeout: float = 600, check: bool = True) -> str:
        done = subprocess.run(["docker-compose", "-p", PROJECT, *FILES, *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise RuntimeError(f"docker-compose {' '.join(args)}: {done.stderr[-3000:]}")
        return done.stdout

    def containers(self, service: str) -> list[str]:
        return self.compose("ps", "-q", service).split()

    def inspect(self, container: str) -> dict:
        out = subprocess.run(["docker", "inspect", container], capture_output=True, text=True, check=True, timeout=30)
        return json.loads(out.stdout)[0]

    def state(self, service: str) -> list[str]:
        """Each container's health ('healthy', 'starting', ...), or 'exited N' once it stopped."""
        out = []
        for container in self.containers(service):
            st = self.inspect(container)["State"]
            out.append(f"exited {st['ExitCode']}" if st["Status"] == "exited" else st.get("Health", {}).get("Status", st["Status"]))
        return out

    def wait(self, want: dict[str, str], *, timeout: float, say=print) -> float:
        """Until every service named is in the state given ('healthy', or 'exited 0' for a one-shot
        service), for each of its containers; seconds waited. Raises on a failed one-shot."""
        started, last = time.monotonic(), None
        while True:
            states = {service: self.state(service) for service in want}
            if states != last:
                say("   " + ", ".join(f"{s}: {'/'.join(v) or '-'}" for s, v in states.items()))
                last = states
            if all(v and all(x == want[s] for x in v) for s, v in states.items()):
                return time.monotonic() - started
            failed = [s for s, v in states.items() if any(x.startswith("exited") and x != want[s] for x in v)]
            if failed or time.monotonic() - started > timeout:
                logs = "\n".join(self.compose("logs", "--tail", "40", s, check=False) for s in (failed or want))
                raise RuntimeError(f"{failed or 'timeout'} waiting for {want}:\n{logs[-6000:]}")
            time.sleep(2)

    def ip(self, service: str) -> str:
        networks = self.inspect(self.containers(service)[0])["NetworkSettings"]["Networks"]
        return next(n["IPAddress"] for n in networks.values() if n["IPAddress"])

    def manage(self, *args: str, timeout: float = 120) -> str:
        return self.compose("exec", "-T", "web", ".venv/bin/python", "manage.py", *args, timeout=timeout)

    def container_of_worker(self, worker: str) -> str:
        """The container whose hostname is the Celery name's host part (flagship@<container id>)."""
        host = worker.split("@", 1)[1]
        for container in self.containers("worker-flagship"):
            if self.inspect(container)["Config"]["Hostname"] == host:
                return container
        raise LookupError(worker)

    def down(self) -> None:
        self.compose("down", "-v", "--remove-orphans", "--timeout", "30", timeout=300, check=False)

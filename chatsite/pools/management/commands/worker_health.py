"""Health of a worker's engine from its heartbeat, for container health checks and probes."""
import socket
import time

from django.core.management.base import BaseCommand, CommandError

from chatsite import redis_keys
from chatsite.pools.health import STALE_SECONDS, live_workers, pool_workers
from chatsite.redis_client import get_redis


def beat_problem(beat: dict, *, max_age: float, need_ready: bool, now: float) -> str | None:
    """Why this heartbeat does not say healthy (None: it does)."""
    if not beat:
        return "no heartbeat"
    age = now - float(beat.get("ts", 0))
    if age > max_age:
        return f"last heartbeat {age:.1f} s ago (more than {max_age:g} s)"
    if need_ready and beat.get("disabled") == "1":
        return "its pool is disabled: no engine is loaded until the pool is enabled"
    if need_ready and beat.get("ready") != "1":
        return "the engine is still loading"
    if need_ready and beat.get("draining") == "1":
        return "draining (taking no work)"
    return None


class Command(BaseCommand):
    help = ("Exit 0 when a fresh heartbeat says the worker's engine is ready and it takes work (1 otherwise, "
            "with the reason on stderr). --worker NAME (Celery's %h stands for this host, as in "
            "`-n flagship@%h`) or --pool NAME (any worker of the pool). --live: a fresh heartbeat is enough, "
            "loading or not (a liveness probe).")
    requires_system_checks = []  # a probe runs every few seconds: start fast

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--worker", help="a worker name, e.g. flagship@%%h")
        which.add_argument("--pool", help="a pool name: healthy when any of its workers is")
        parser.add_argument("--live", action="store_true", help="only ask for a fresh heartbeat, not a ready engine")
        parser.add_argument("--max-age", type=float, default=STALE_SECONDS,
                            help=f"seconds a heartbeat stays fresh (default {STALE_SECONDS:g})")

    def handle(self, *args, worker=None, pool=None, live=False, max_age=STALE_SECONDS, **opts):
        now, need_ready = time.time(), not live
        if worker:
            name = worker.replace("%h", socket.gethostname())
            problem = beat_problem(get_redis().hgetall(redis_keys.worker_heartbeat(name)), max_age=max_age,
                                   need_ready=need_ready, now=now)
            label = f"worker {name}"
        else:
            beats = pool_workers(pool, live_workers()).values()
            problems = [beat_problem(b, max_age=max_age, need_ready=need_ready, now=now) for b in beats]
            problem = None if any(p is None for p in problems) else (
                "; ".join(sorted(set(problems))) or "no live worker")
            label = f"pool {pool}"
        if problem:
            raise CommandError(f"{label}: {problem}", returncode=1)
        self.stdout.write(f"{label}: {'alive' if live else 'ready'}")

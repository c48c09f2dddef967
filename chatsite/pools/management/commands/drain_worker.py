"""Drain one worker and wait until its runs are done: a Kubernetes preStop hook."""
import socket
import time

from django.conf import settings
from django.core.management.base import BaseCommand

from chatsite import redis_keys
from chatsite.redis_client import get_redis

HAND_BACK_SECONDS = 10  # after the deadline, workers.drain waits this long for the hand-back


class Command(BaseCommand):
    help = ("Tell a worker to drain (`celery control drain`: it takes no new work and hands its runs to the pool's "
            "other workers, which continue them from their streams: at once with --mode handoff, the default, or "
            "once the deadline passes with --mode finish) and wait until its heartbeat shows no run left. Exits 0 "
            "also when the worker is not there.")
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--worker", required=True, help="the worker's name; %%h stands for this host")
        parser.add_argument("--mode", choices=("handoff", "finish"), default="handoff",
                            help="handoff: hand the runs over now (default); finish: let them finish by the deadline")
        parser.add_argument("--deadline", type=float, default=settings.CHATSITE["DRAIN_SECONDS"],
                            help="with --mode finish, seconds runs may take to finish "
                                 "(default CHATSITE_DRAIN_SECONDS, else 30)")

    def handle(self, *args, worker, mode, deadline, **opts):
        from chatsite.celery import app

        name = worker.replace("%h", socket.gethostname())
        replies = app.control.broadcast("drain", arguments={"mode": mode, "deadline": deadline}, destination=[name],
                                        reply=True, timeout=5)
        if not replies:
            self.stderr.write(f"{name} did not answer the drain (not running?); nothing to wait for")
            return
        answer = next(iter(replies[0].values()))
        if "ok" not in answer:
            self.stderr.write(f"{name}: {answer.get('error', answer)}; nothing to wait for")
            return
        self.stderr.write(f"{name}: {answer['ok']}")
        started, end = time.monotonic(), time.monotonic() + deadline + HAND_BACK_SECONDS
        while time.monotonic() < end:
            beat = get_redis().hgetall(redis_keys.worker_heartbeat(name))
            if not beat or (beat.get("draining") == "1" and int(float(beat.get("active_runs", 0))) == 0):
                break
            time.sleep(0.5)
        self.stdout.write(f"{name} drained in {time.monotonic() - started:.1f} s")

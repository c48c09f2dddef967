import json
import time

from django.core.management.base import BaseCommand

from chatsite.pools.health import live_workers, pool_workers
from chatsite.pools.models import ModelPool

WORKER_FIELDS = ("ready", "draining", "disabled", "running", "waiting", "kv_cache_usage", "tokens_per_second")


def _worker_row(name: str, beat: dict, now: float) -> dict:
    row = {"worker": name, "seconds_since_beat": round(now - float(beat.get("ts", 0)), 1)}
    for field in WORKER_FIELDS:
        value = float(beat.get(field, 0))
        row[field] = bool(value) if field in ("ready", "draining", "disabled") else value
    return row


class Command(BaseCommand):
    help = "List the model pools and the live workers of each (from their heartbeats)."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", dest="as_json", help="one JSON document, for scripts")
        parser.add_argument("--enabled-names", action="store_true",
                            help="only the names of the enabled pools, one per line (scripts/run.sh starts "
                                 "a worker for each of these)")

    def handle(self, *args, as_json: bool = False, enabled_names: bool = False, **opts):
        if enabled_names:
            for name in ModelPool.objects.filter(enabled=True).order_by("name").values_list("name", flat=True):
                self.stdout.write(name)
            return
        workers, now = live_workers(), time.time()
        pools = []
        for pool in ModelPool.objects.order_by("name"):
            pools.append({
                "pool": pool.name, "enabled": pool.enabled, "device": pool.device, "model": pool.model,
                "queue_when_cold": pool.queue_when_cold, "min_replicas": pool.min_replicas,
                "max_replicas": pool.max_replicas, "recommended_replicas": pool.recommended_replicas,
                "workers": [_worker_row(n, b, now) for n, b in sorted(pool_workers(pool.name, workers).items())],
            })
        if as_json:
            self.stdout.write(json.dumps(pools, indent=2))
            return
        for p in pools:
            ready = sum(1 for w in p["workers"] if w["ready"] and not w["draining"])
            flags = ", ".join(f for f, on in (("disabled", not p["enabled"]),
                                              ("queues when cold", p["queue_when_cold"])) if on)
            self.stdout.write(f"{p['pool']} ({p['device']}{', ' + flags if flags else ''}): {len(p['workers'])} live, "
                              f"{ready} ready; replicas {p['min_replicas']}..{p['max_replicas']}, recommended "
                              f"{p['recommended_replicas'] if p['recommended_replicas'] is not None else '-'}")
            for w in p["workers"]:
                state = ("draining" if w["draining"] else "ready" if w["ready"] else
                         "disabled (no engine loaded until its pool is enabled)" if w["disabled"] else "loading")
                self.stdout.write(f"  {w['worker']}: {state}, {w['running']:.0f} running, {w['waiting']:.0f} waiting, "
                                  f"KV {w['kv_cache_usage']:.0%}, {w['tokens_per_second']:.1f} tok/s, "
                                  f"beat {w['seconds_since_beat']:.1f} s ago")


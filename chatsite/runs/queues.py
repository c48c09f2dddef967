"""Celery queue names, built here and nowhere else."""

TIERS = ("interactive", "batch")


def pool_queue(pool: str, tier: str) -> str:
    """The shared queue of one pool and tier; any worker of the pool takes from it."""
    if tier not in TIERS:
        raise ValueError(f"unknown tier {tier!r}")
    return f"pool.{pool}.{tier}"


def worker_queue(worker: str) -> str:
    """A worker's own queue, for chats pinned to it by prefix-cache affinity."""
    return f"worker.{worker}"


def pool_queues(pool: str) -> list[str]:
    """The queues a worker of `pool` consumes, interactive first."""
    return [pool_queue(pool, tier) for tier in TIERS]

# The task every run queue carries.
GENERATE_TASK = "workers.generate_run"

# Beat's periodic tasks (sweeps, scale recommendations); every pool worker takes them last.
MAINTENANCE = "maintenance"

"""Priority tiers: an interactive run posted behind 100 queued batch runs starts as
soon as a slot frees. Real daphne, Celery worker (4 slots) and the fake engine.

    .venv/bin/python -m bench.priority
"""
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from bench.platform_stack import Stack

BATCH_RUNS, SLOTS, TOKENS, STEP = 100, 4, 50, 0.01


def post(url, auth, chat_id, tier):
    body = {"content": "work", "max_tokens": TOKENS, "ignore_eos": True, "tier": tier}
    resp = httpx.post(f"{url}/api/chats/{chat_id}/messages/", headers=auth, json=body, timeout=60)
    if resp.status_code != 202:
        raise RuntimeError(f"{resp.status_code}: {resp.text}")
    return resp.json()["run"]["id"]


def main():
    stack = Stack(db_name="bench_priority", CHATSITE_ENGINE="fake", CHATSITE_FAKE_STEP_SECONDS=str(STEP))
    try:
        auth = {"Authorization": f"Bearer {stack.seed()}"}
        with stack.sql() as conn:  # this bench measures ordering, not shedding
            conn.execute("update pools_modelpool set max_queue_wait_seconds = 100000")
        _, url = stack.start_web()
        stack.start_worker("prio", CHATSITE_WORKER_SLOTS=str(SLOTS))
        chats = [httpx.post(f"{url}/api/chats/", headers=auth, json={"model": "flagship"}).json()["id"]
                 for _ in range(BATCH_RUNS + 1)]
        with ThreadPoolExecutor(8) as ex:
            batch = list(ex.map(lambda c: post(url, auth, c, "batch"), chats[:BATCH_RUNS]))
        time.sleep(1.0)  # the batch backlog is queued and the slots are busy
        interactive = post(url, auth, chats[-1], "interactive")
        ids = [*batch, interactive]
        while True:
            with stack.sql() as conn:
                rows = conn.execute("select id, tier, extract(epoch from started_at - queued_at), "
                                    "extract(epoch from finished_at - started_at), "
                                    "extract(epoch from finished_at), status from runs_generationrun "
                                    "where id = any(%s)", (ids,)).fetchall()
            if all(r[5] in ("completed", "failed", "cancelled") for r in rows) and len(rows) == len(ids):
                break
            time.sleep(0.5)
        waits = {r[0]: r[2] for r in rows}
        service = statistics.median(r[3] for r in rows)
        batch_waits = sorted(waits[i] for i in batch)
        i_wait = waits[interactive]
        later_batch = sum(1 for r in rows if r[1] == "batch" and r[4] > [x for x in rows if x[0] == interactive][0][4])
        print(f"\n{BATCH_RUNS} batch runs queued, {SLOTS} slots, {TOKENS} tokens each "
              f"(median service {service:.2f} s); then one interactive run")
        print(f"{'run':<22}{'queue wait (s)':>16}")
        print(f"{'interactive':<22}{i_wait:>16.2f}")
        print(f"{'batch p50':<22}{batch_waits[len(batch_waits) // 2]:>16.2f}")
        print(f"{'batch max':<22}{batch_waits[-1]:>16.2f}")
        print(f"batch runs still to finish when the interactive one finished: {later_batch}")
    finally:
        stack.stop()


if __name__ == "__main__":
    main()

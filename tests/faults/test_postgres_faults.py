"""Postgres drops every connection and refuses new ones for a while, as in a restart:
the worker's final write is retried; nothing is queued without its row."""
import concurrent.futures
import threading
import time

import httpx
import psycopg
import pytest
from django.db import connection

from chatsite.runs.models import GenerationRun
from tests.faults.client import follow_in_thread
from tests.faults.conftest import POOL
from tests.faults.helpers import assert_nothing_lost

pytestmark = pytest.mark.django_db(transaction=True)


def own_pid() -> int:
    connection.ensure_connection()
    return connection.connection.info.backend_pid


def outage(seconds: float, keep_pid: int) -> None:
    """Kick every other session off the test database and refuse connections for `seconds`."""
    db = connection.settings_dict
    admin = psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname="postgres", autocommit=True)
    try:
        admin.execute(f'ALTER DATABASE "{db["NAME"]}" ALLOW_CONNECTIONS false')
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> %s",
                      (db["NAME"], keep_pid))
        time.sleep(seconds)
    finally:
        admin.execute(f'ALTER DATABASE "{db["NAME"]}" ALLOW_CONNECTIONS true')
        admin.close()


def test_postgres_outage_while_a_run_finishes(fault_stack, fault_redis_client, chat, auth):
    base = fault_stack["webs"][0]
    resp = httpx.post(f"{base}/api/chats/{chat.pk}/messages/", headers=auth,
                      json={"content": "Tell me about loops.", "max_tokens": 150, "ignore_eos": True}, timeout=30)
    run = resp.json()["run"]
    thread, box = follow_in_thread(run["events_url"], auth, base_urls=fault_stack["webs"], watchdog=60)
    time.sleep(0.5)
    outage(4.0, own_pid())  # the run (~1.5 s) finishes while Postgres is away: finalize must wait and retry
    thread.join(90)
    assert "error" not in box, box.get("error")
    saved = assert_nothing_lost(fault_redis_client, run["id"], box["result"].text)
    assert saved.status == "completed" and saved.completion_tokens == 150


def test_admission_during_an_outage_is_refused_cleanly_and_queues_nothing(fault_stack, fault_redis_client,
                                                                          chat, auth):
    base = fault_stack["webs"][0]
    # Longer than the optional connection pool's wait (DATABASE_POOL_TIMEOUT, 3 s).
    thread = threading.Thread(target=outage, args=(6.0, own_pid()))
    thread.start()
    time.sleep(0.5)
    resp = httpx.post(f"{base}/api/chats/{chat.pk}/messages/", headers=auth,
                      json={"content": "hello during the outage", "max_tokens": 5}, timeout=30)
    thread.join()
    assert resp.status_code == 503 and resp.headers["Retry-After"] == "5"
    assert resp.json()["error"]["code"] == "service_unavailable"
    assert not GenerationRun.objects.filter(chat=chat).exists()
    assert fault_redis_client.llen(f"pool.{POOL}.interactive") == 0
    # and once it is back, the same request goes through
    ok = httpx.post(f"{base}/api/chats/{chat.pk}/messages/", headers=auth,
                    json={"content": "hello after the outage", "max_tokens": 5}, timeout=30)
    assert ok.status_code == 202
    assert_nothing_lost(fault_redis_client, ok.json()["run"]["id"])



def test_web_pool_serves_again_right_after_an_outage(fault_stack, chat, auth):
    """A restart kills every pooled connection at once. The first request after it may
    wait one backoff; none may be refused (the stock checkout check walked through the
    dead connections one backoff at a time and timed out, request after request)."""
    base = fault_stack["webs"][1]
    with concurrent.futures.ThreadPoolExecutor(12) as pool:  # grow the pool to several idle connections
        warm = list(pool.map(lambda _: httpx.get(f"{base}/api/chats/", headers=auth, timeout=30).status_code,
                             range(48)))
    assert warm == [200] * 48
    outage(2.0, own_pid())
    statuses, waits = [], []
    for _ in range(15):
        started = time.monotonic()
        statuses.append(httpx.get(f"{base}/api/chats/", headers=auth, timeout=30).status_code)
        waits.append(time.monotonic() - started)
    assert statuses == [200] * 15, (statuses, waits)

"""Redis restarts or stops answering mid-run: writers and readers reconnect, nothing is lost or hangs."""
import time

import httpx
import pytest

from tests.faults.client import follow_in_thread
from tests.faults.helpers import assert_nothing_lost

pytestmark = pytest.mark.django_db(transaction=True)


def start_run(fault_stack, auth, chat, tokens=300):
    base = fault_stack["webs"][0]
    resp = httpx.post(f"{base}/api/chats/{chat.pk}/messages/", headers=auth,
                      json={"content": "Tell me about loops.", "max_tokens": tokens, "ignore_eos": True}, timeout=30)
    assert resp.status_code == 202, resp.text
    run = resp.json()["run"]
    thread, box = follow_in_thread(run["events_url"], auth, base_urls=fault_stack["webs"], watchdog=60)
    return run, thread, box


def wait_entries(client, run_id, n, timeout=20):
    end = time.monotonic() + timeout
    while client.xlen(f"run:{run_id}") < n:
        assert time.monotonic() < end, "the run did not start"
        time.sleep(0.01)


def test_redis_restarted_mid_run(fault_stack, fault_redis, fault_redis_client, chat, auth):
    run, thread, box = start_run(fault_stack, auth, chat)
    wait_entries(fault_redis_client, run["id"], 40)
    fault_redis.stop("term")  # AOF with fsync always: the streams survive, as in production
    time.sleep(1.0)
    fault_redis.start()
    thread.join(90)
    assert "error" not in box, box.get("error")
    saved = assert_nothing_lost(fault_redis_client, run["id"], box["result"].text)
    assert saved.status == "completed" and saved.completion_tokens == 300
    assert box["result"].reconnects >= 1  # the reader lost its connection and came back


def test_redis_unreachable_for_three_seconds(fault_stack, fault_redis, fault_redis_client, chat, auth):
    run, thread, box = start_run(fault_stack, auth, chat)
    wait_entries(fault_redis_client, run["id"], 40)
    fault_redis.pause(3.0)
    thread.join(90)
    assert "error" not in box, box.get("error")
    saved = assert_nothing_lost(fault_redis_client, run["id"], box["result"].text)
    assert saved.status == "completed" and saved.completion_tokens == 300


def test_redis_restarted_without_persistence_mid_run(fault_stack, fault_redis, fault_redis_client, chat, auth):
    """Every entry lost: the run is written again from token 0 under new ids. The client
    resumes by Last-Event-ID from before the restart and has its text replaced (a
    `snapshot`), never added to: its text is the saved reply, no token twice."""
    run, thread, box = start_run(fault_stack, auth, chat)
    wait_entries(fault_redis_client, run["id"], 40)
    fault_redis.restart_empty()
    thread.join(120)
    assert "error" not in box, box.get("error")
    followed = box["result"]
    saved = assert_nothing_lost(fault_redis_client, run["id"], followed.text)
    assert saved.status == "completed" and saved.completion_tokens == 300 and saved.attempt >= 2
    assert followed.reconnects >= 1 and "snapshot" in [e.event for e in followed.events]
    have = 0
    for e in followed.events:  # each token goes on where the text it is added to ends
        if e.event == "snapshot":
            have = e.data["n"]
        elif e.event == "token":
            assert e.data["seq"] == have, f"token {e.data['seq']} sent after {have} tokens"
            have += e.data["n"]
    assert have == 300


def test_a_revocation_outlives_a_redis_restart_without_persistence(fault_stack, fault_redis, fault_redis_client,
                                                                    chat, auth):
    """Issue 44 item 5: an events token of a revoked key was refused before a Redis restart
    and streamed the run again after it (the markers lived only in Redis). They are kept in
    Postgres, and written again into a Redis that lost them before any stream is let through."""
    base = fault_stack["webs"][0]
    run, thread, _ = start_run(fault_stack, auth, chat, tokens=20)
    thread.join(60)
    token_url = base + run["events_url"]
    assert httpx.get(token_url, timeout=10).status_code == 200  # the token streams the finished run
    key_id = httpx.get(f"{base}/api/keys/", headers=auth, timeout=10).json()[0]["id"]
    assert httpx.delete(f"{base}/api/keys/{key_id}/", headers=auth, timeout=10).status_code == 200
    assert httpx.get(token_url, timeout=10).status_code == 401
    fault_redis.restart_empty()  # every marker, the run's stream and the slots are gone
    assert fault_redis_client.keys("revoked:*") == []
    resp = httpx.get(token_url, timeout=10)
    assert resp.status_code == 401 and resp.json()["error"]["code"] == "not_authenticated", resp.text
    assert fault_redis_client.get("revoked:loaded") == "1"  # the markers were written again from Postgres

"""A web process runs at most WEB_THREADS request threads at once (the others wait
their turn), and a thread waiting for its turn holds no pooled database connection: more
/v1 streams than the pool has connections all complete, since each stream's connection
went back to the pool when its admission's hop ended, not when its response closed."""
import threading

import httpx
import pytest

from tests import stack

pytestmark = pytest.mark.django_db(transaction=True)

STREAMS, POOL = 6, 2


def _stream(url: str, key: str, out: list, i: int) -> None:
    body = {"model": "flagship", "stream": True, "max_tokens": 120,
            "messages": [{"role": "user", "content": f"Tell me a long story, number {i}."}]}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"},
                      timeout=60) as resp:
        out[i] = (resp.status_code, resp.read().decode())


def test_more_v1_streams_than_pooled_connections_all_complete(stack_env, fake_workers, pool, api_key):
    proc, url = stack.start_web({**stack_env, "DATABASE_POOL_MAX": str(POOL), "DATABASE_POOL_TIMEOUT": "3",
                                 "CHATSITE_WEB_THREADS": "2"})
    try:
        out: list = [None] * STREAMS
        threads = [threading.Thread(target=_stream, args=(url, api_key, out, i)) for i in range(STREAMS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
    finally:
        proc.stop()
    for status, text in out:
        assert status == 200, text[:300]  # no 503: no admission waited for a connection a stream held
        assert text.rstrip().endswith("data: [DONE]") and '"finish_reason"' in text

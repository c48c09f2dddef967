"""A worker paused past its run's lease stops the run on waking (another attempt may hold
it by then). When none took it meanwhile (no beat has swept it yet), the worker sends it
again itself at once: the reply completes, whole, each token once, with no beat running."""
import signal
import time

import pytest

from chatsite.runs.admission import run_submit
from chatsite.runs.stream import log as stream_log
from tests.factories import ChatFactory, PoolFactory
from tests.runs.helpers import wait_terminal

pytestmark = pytest.mark.django_db(transaction=True)

POOL = "lapse"
LEASE_SECONDS = 2.0


@pytest.fixture(scope="module")
def lapse_worker(start_pool_worker):
    """The pool's one worker (no beat in this stack): a short lease, a reply of ~4 s."""
    return start_pool_worker("lapse", pool=POOL, step_seconds=0.05, CHATSITE_RUN_LEASE=LEASE_SECONDS)


def test_a_run_whose_lease_lapsed_while_its_worker_was_paused_goes_on(lapse_worker, tenant, user,
                                                                       django_capture_on_commit_callbacks):
    chat = ChatFactory(tenant=tenant, owner=user, pool=PoolFactory(name=POOL))
    with django_capture_on_commit_callbacks(execute=True):
        run = run_submit(chat=chat, content="Explain the for statement.", max_tokens=80, ignore_eos=True)
    end = time.monotonic() + 30
    while not stream_log.read(run.pk).completion_tokens and time.monotonic() < end:
        time.sleep(0.05)
    assert stream_log.read(run.pk).completion_tokens, "the worker never began the run"
    lapse_worker.signal(signal.SIGSTOP)
    time.sleep(LEASE_SECONDS + 1.5)  # its lease lapses in Redis meanwhile
    lapse_worker.signal(signal.SIGCONT)
    saved = wait_terminal(run.pk, timeout=30)
    assert saved.status == "completed", saved.error
    # stopped on waking, then taken again (under load a 2 s lease may lapse once more: a third attempt)
    assert saved.attempt >= 2
    assert saved.completion_tokens == 80
    reply = stream_log.read(run.pk)
    assert reply.text == saved.assistant_message.content and reply.gap is None

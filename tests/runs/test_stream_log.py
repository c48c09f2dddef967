"""The run log's fenced writes against real Redis: only the lease holder writes, the
terminal entry is written once and last, a stale attempt never touches the live lease."""
import pytest

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.runs.stream import codec, lease, log
from chatsite.runs.stream.log import CANCEL_ASKED, STALE, WRITTEN, Write

RUN = 990001


@pytest.fixture(autouse=True)
def clean():
    r = get_redis()
    keys = [redis_keys.run_stream(RUN), redis_keys.run_lease(RUN)]
    r.delete(*keys)
    r.zrem(redis_keys.cancelled_runs(), str(RUN))
    yield
    r.delete(*keys)
    r.zrem(redis_keys.cancelled_runs(), str(RUN))


def tok(seq, text, attempt=1):
    return codec.token_fields(seq=seq, n=1, text=text, attempt=attempt)


def done(n):
    return codec.done_fields(finish_reason="stop", prompt_tokens=2, completion_tokens=n)


def lapse():
    get_redis().delete(redis_keys.run_lease(RUN))  # as a lease does when its worker is paused past its TTL


def test_only_the_lease_holder_writes_and_a_stale_attempt_never_touches_the_live_lease():
    first = lease.acquire(RUN, "w1")
    assert log.append([Write(RUN, first, token=tok(0, "a"))]) == [WRITTEN]
    lapse()
    second = lease.acquire(RUN, "w2")
    assert second and second != first
    # the paused attempt wakes up: its write is refused, and nothing is appended
    assert log.append([Write(RUN, first, token=tok(1, "X"), terminal=done(2))]) == [STALE]
    assert lease.refresh({RUN: first}) == {RUN}  # it learns the lease is gone, and does not take it back
    lease.release(RUN, first)  # its task ends: the live attempt's lease stays
    assert get_redis().get(redis_keys.run_lease(RUN)) == second
    assert log.append([Write(RUN, second, token=tok(1, "b", 2))]) == [WRITTEN]
    assert log.read(RUN).text == "ab"


def test_the_terminal_entry_is_written_once_and_last():
    holder = lease.acquire(RUN, "w1")
    assert log.append([Write(RUN, holder, token=tok(0, "a"), terminal=done(1))]) == [WRITTEN]
    assert log.has_ended(RUN)
    # the same call retried after a lost reply writes nothing more; nobody else may write at all
    assert log.append([Write(RUN, holder, token=tok(0, "a"), terminal=done(1))]) == [WRITTEN]
    assert not log.end(run_id=RUN, lease_token="someone-else", fields=done(1))
    assert lease.acquire(RUN, "late") is None  # a finished run cannot be claimed
    entries = log.entries(RUN)
    assert [e.type for e in entries] == ["token", "done"]
    assert get_redis().ttl(redis_keys.run_stream(RUN)) > 0  # the stream's TTL starts at its end


def test_after_its_terminal_entry_an_attempts_release_changes_nothing():
    """Why the worker does not release the lease of a run it ended (workers/generation.ENDED_HERE)."""
    holder = lease.acquire(RUN, "w1")
    log.append([Write(RUN, holder, token=tok(0, "a"), terminal=done(1))])
    ended = get_redis().get(redis_keys.run_lease(RUN))
    ttl = get_redis().ttl(redis_keys.run_lease(RUN))
    lease.release(RUN, holder)
    assert ended == f"ended:{holder}" and get_redis().get(redis_keys.run_lease(RUN)) == ended
    assert ttl > lease.lease_ms() // 1000 and get_redis().ttl(redis_keys.run_lease(RUN)) >= ttl - 1


def test_a_cancel_is_reported_to_the_writer_in_the_same_call():
    holder = lease.acquire(RUN, "w1")
    assert log.append([Write(RUN, holder, token=tok(0, "a"))]) == [WRITTEN]
    log.cancel_ask(RUN)
    assert log.cancel_asked(RUN)
    assert log.append([Write(RUN, holder)]) == [CANCEL_ASKED]  # no entry: only the checks


def test_a_new_attempt_takes_the_lease_and_reads_the_reply_so_far_and_the_cancel_together():
    first = lease.acquire(RUN, "w1")
    log.append([Write(RUN, first, token=tok(0, "a"))])
    log.append([Write(RUN, first, token=tok(1, "b"))])
    token, reply, cancel = log.acquire_reading(RUN, "w2")
    assert token is None and reply.text == "ab"  # w1 holds it: no lease for w2
    lease.release(RUN, first)  # w1 gave up (drained): a new attempt carries on
    log.cancel_ask(RUN)
    token, reply, cancel = log.acquire_reading(RUN, "w2")
    assert token.startswith("w2:") and get_redis().get(redis_keys.run_lease(RUN)) == token
    assert (reply.text, reply.completion_tokens, cancel) == ("ab", 2, True)
    assert log.append([Write(RUN, token, token=tok(2, "c"))]) == [CANCEL_ASKED]  # the lease is the new attempt's
    lease.release(RUN, token)
    get_redis().delete(redis_keys.run_stream(RUN))
    get_redis().zrem(redis_keys.cancelled_runs(), str(RUN))
    token, reply, cancel = log.acquire_reading(RUN, "w3")
    assert token is not None and (reply.exists, reply.text, cancel) == (False, "", False)


def test_the_caller_adds_its_commands_to_the_read_round_trip():
    """The worker pins the chat to itself in its finalize's read (workers/generation.py)."""
    holder = lease.acquire(RUN, "w1")
    log.append([Write(RUN, holder, token=tok(0, "a"))])
    key = f"test:{RUN}:also"
    try:
        reply = log.read(RUN, also=lambda pipe: (pipe.set(key, "w1"), pipe.get(key)))
        assert reply.text == "a" and get_redis().get(key) == "w1"
    finally:
        get_redis().delete(key)


def test_one_call_serves_many_runs_each_fenced_on_its_own():
    other = RUN + 1
    get_redis().delete(redis_keys.run_stream(other), redis_keys.run_lease(other))
    mine = lease.acquire(RUN, "w1")
    lease.acquire(other, "w2")
    try:
        answers = log.append([Write(RUN, mine, token=tok(0, "a")), Write(other, mine, token=tok(0, "b"))])
        assert answers == [WRITTEN, STALE]
        assert get_redis().xlen(redis_keys.run_stream(other)) == 0
    finally:
        get_redis().delete(redis_keys.run_stream(other), redis_keys.run_lease(other))


def test_the_seq_rule_skips_repeats_and_ends_at_a_gap():
    cursor = codec.SeqCursor()
    a, again, b, hole = (codec.decode(f"{i}-0", f) for i, f in
                         enumerate([tok(0, "a"), tok(0, "a"), tok(1, "b"), tok(5, "z")], start=1))
    assert [cursor.accept(e) for e in (a, again, b)] == [codec.NEW, codec.REPEAT, codec.NEW]
    assert cursor.accept(hole) == codec.GAP and cursor.have == 2
    gap = cursor.gap_entry(hole)
    assert gap.type == "error" and gap.code == codec.GAP_CODE and gap.id == hole.id


# --- token entries with log probabilities --------------------------------------
def lp_tok(seq, texts, attempt=1):
    lps = [[t, -0.5 - i, [[t, -0.5 - i], ["x", -3.0]]] for i, t in enumerate(texts)]
    return codec.logprobs_token_fields(seq=seq, n=len(texts), text="".join(texts), attempt=attempt, logprobs=lps)


def test_a_logprobs_token_entry_is_a_token_entry_with_its_tokens_logprobs():
    fields = lp_tok(4, ["Hé", " 1 2"], attempt=3)
    assert list(fields) == [codec.LOGPROBS_TOKEN_FIELD]
    for entry in (codec.decode("1-0", fields), codec.decode_flat("1-0", list(next(iter(fields.items()))))):
        assert (entry.type, entry.seq, entry.n, entry.attempt, entry.text) == (codec.TOKEN, 4, 2, 3, "Hé 1 2")
        assert entry.logprobs == [["Hé", -0.5, [["Hé", -0.5], ["x", -3.0]]], [" 1 2", -1.5, [[" 1 2", -1.5], ["x", -3.0]]]]
    assert codec.decode("1-0", tok(0, "a")).logprobs is None  # a plain token entry has none


def test_the_reply_takes_each_tokens_logprobs_once_across_repeats_and_attempts():
    first = lease.acquire(RUN, "w1")
    log.append([Write(RUN, first, token=lp_tok(0, ["a", "b"]))])
    log.append([Write(RUN, first, token=lp_tok(0, ["a", "b"]))])  # a write retried across a Redis hiccup
    lapse()
    second = lease.acquire(RUN, "w2")
    log.append([Write(RUN, second, token=lp_tok(2, ["c"], attempt=2), terminal=done(3))])
    reply = log.read(RUN)
    assert reply.text == "abc" and reply.completion_tokens == 3
    assert [lp[0] for lp in reply.logprobs] == ["a", "b", "c"]


def test_a_reply_of_plain_token_entries_has_no_logprobs():
    holder = lease.acquire(RUN, "w1")
    log.append([Write(RUN, holder, token=tok(0, "a"), terminal=done(1))])
    assert log.read(RUN).logprobs is None

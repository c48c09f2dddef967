"""The one door: every run, whatever surface asks for it, is admitted here.

The rules, in this order, the same for every surface:
1. the credential and its owner: the caller comes authenticated by its surface; a
   turn in an existing chat must be in one of the caller's own (404 otherwise);
2. idempotency, scoped to the owner (chatsite.runs.admission.idempotency);
3. the request itself: the pool (allowed to the tenant, enabled), the sampling, the
   text and the room it needs (400, naming the field);
4. request limits: the tenant's requests per minute (429; a queued message counts
   when it is queued, not again when its turn comes: Ask.from_queue);
5. in one transaction, under the chat's lock (one reply at a time, and none before the
   messages waiting in the chat's queue: 409; a queued message sent now may follow the
   reply it stops, Ask.steering): the budget and the concurrency, reserved
   for every choice (429);
6. the fair share and shedding, counting every choice as a run (503 + Retry-After),
   and a pool with no live worker (503);
7. the turn's rows written; after commit, its runs dispatched.
A refusal at any step writes nothing. Surfaces only translate their wire format into an
Ask and the Admitted back."""
from dataclasses import replace

from django.db import IntegrityError, transaction

from chatsite import stage_trace
from chatsite.chats import live
from chatsite.quotas.services import quota_check_rate, quota_for, quota_reserve_choices, refusals_counted
from chatsite.runs.admission import idempotency, write
from chatsite.runs.admission.ask import Admitted, Ask, NewChat, Send
from chatsite.runs.admission.plan import Plan, plan as plan_turn
from chatsite.runs.dispatch import run_dispatch_choices
from chatsite.runs.services.availability import refuse_if_no_worker
from chatsite.runs.services.finalize import run_finalize_if_ended
from chatsite.runs.services.shedding import shed_if_overloaded
from chatsite.runs.store import choices as store_choices, keys as store_keys, turns as store_turns


def run_admit(ask: Ask) -> Admitted:
    """Admit the turn `ask` describes: its messages and one queued run per choice,
    dispatched once committed; or, for a repeat of the owner's earlier call with the same
    Idempotency-Key, that call's runs (`replayed`), writing nothing.

    Raises InvalidInput (400) and NotFound (404) naming what is wrong with the request,
    Conflict (409) while a reply is being generated in the chat (ReplyInProgress), while
    messages wait in its queue (QueueWaiting; not for the queue's own turn: Ask.from_queue)
    or for a key used with another request, RateLimited (429) for the tenant's own limits and Overloaded or
    ModelUnavailable (503) when the pool cannot take it, both with a retry_after."""
    key = idempotency.check_key(ask.idempotency_key)
    asked = idempotency.ask_digest(ask) if key else ""
    if key and (earlier := idempotency.earlier(ask, key, asked)) is not None:
        return _replayed(earlier)
    if ask.caller.limits is None:  # a session's or a queued message's caller: its tenant's limits, one read
        limits = store_keys.tenant_limits(tenant_id=ask.caller.tenant.pk)
        ask = replace(ask, caller=replace(ask.caller, limits=limits))
    plan = plan_turn(ask)
    tenant, quota = ask.caller.tenant, _quota(ask)
    with refusals_counted(tenant):
        if not ask.from_queue:
            quota_check_rate(tenant=tenant, quota=quota)
        try:
            return _admit_once(ask, plan, quota, key, asked)
        except write.ReplyInProgress as busy:
            # The previous reply's stream has ended but its worker has not saved it yet (the
            # terminal entry comes first): save it here (idempotent), then admit this turn.
            if not run_finalize_if_ended(run_id=busy.run_id):
                raise
            return _admit_once(ask, plan, quota, key, asked)
        except IntegrityError:  # a call with the same key committed first
            earlier = idempotency.earlier(ask, key, asked) if key else None
            if earlier is None:
                raise
            return _replayed(earlier)


def run_count_rate(ask: Ask) -> None:
    """Rule 4 alone, for a turn taken now and admitted later (a queued message): it counts
    against the tenant's requests per minute now, once. Raises RateLimited (429)."""
    with refusals_counted(ask.caller.tenant):
        quota_check_rate(tenant=ask.caller.tenant, quota=_quota(ask))


def _quota(ask: Ask):
    return ask.caller.limits.quota if ask.caller.limits is not None else quota_for(ask.caller.tenant)


def _admit_once(ask: Ask, plan: Plan, quota, key: str, asked_digest: str) -> Admitted:
    chat, tenant = plan.chat, ask.caller.tenant
    with transaction.atomic():
        if not plan.new:
            if not ask.from_queue:  # queue_advance locked the chat before the plan read it: held, and read under it
                write.lock(plan, ask)
            # A repeat with the same key may have committed while this one waited for the lock.
            if key and (earlier := idempotency.earlier(ask, key, asked_digest)) is not None:
                return _replayed(earlier)
        *leaf, branched = write.path_end(plan, ask)
        asked, replies, anchor = write.messages(plan, ask, tuple(leaf))
        snapshot, prompt_tokens, from_depth = write.snapshot(plan, asked, stable=not ask.whole_history,
                                                             steering=ask.steering)
        write.refuse_unless_whole(plan, ask, snapshot, prompt_tokens)
        reservations = quota_reserve_choices(
            tenant=tenant, quota=quota, prompt_tokens=prompt_tokens, max_tokens=plan.sampling.max_tokens,
            active_runs=lambda: store_turns.active_runs(tenant_id=tenant.pk), choices=ask.choices)
        shed_if_overloaded(plan.pool, tenant, queue=plan.queue, arriving=ask.choices)
        refuse_if_no_worker(plan.pool)
        write.messages_insert(plan, asked, replies, prompt_from_depth=from_depth)
        runs = write.runs(plan, ask, asked, replies, reservations, snapshot=snapshot, digest=asked_digest)
        stage_trace.mark("web.saved", runs[0].pk)
        versions = None
        if isinstance(ask.turn, Send) and plan.edit_of is None and not branched and ask.choices == 1:
            versions = {asked.pk: [asked.pk], replies[0].pk: [replies[0].pk]}  # a turn at a path's end
        # No worker can have served a chat this transaction made, and one choice pins none
        # (several are pinned together before dispatch): the router need not ask Redis.
        pinned = not (plan.new and ask.choices == 1)
        # The reply the prompt starts with, whose kept ids the worker reads with its claim (store.claim):
        # the router sends the run where they are cached.
        builds_on = plan.continued.pk if plan.continued is not None else asked.parent_id
        transaction.on_commit(lambda: run_dispatch_choices(runs, pinned=pinned, builds_on=builds_on))
        if plan.new and isinstance(ask.where, NewChat):
            live.chat_event(chat, live.CHAT_CREATED, title=chat.title)
        live.chat_event(chat, live.PATH_CHANGED, anchor=anchor, leaf=replies[0].pk, run=runs[0].pk, title=chat.title)
        admitted = Admitted(runs=tuple(runs), chat=chat, versions=versions)
        if ask.also is not None:
            ask.also(admitted)
        return admitted


def _replayed(run) -> Admitted:
    """The owner's earlier call's runs (its choices as saved), as it admitted them."""
    choices = store_choices.run_choices(run_id=run.pk, tenant_id=run.tenant_id)
    return Admitted(runs=(run, *choices[1:]), chat=run.chat, replayed=True)

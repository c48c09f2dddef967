"""Admission: a user message becomes a queued run, in one transaction."""
from django.conf import settings
from django.db import IntegrityError, transaction

from chatsite.chats.models import Chat, Message
from chatsite.errors import Conflict, InvalidInput, RateLimited
from chatsite.pools.selectors import pool_for_tenant
from chatsite.pools.tokens import TEMPLATE_TOKENS_PER_MESSAGE, TEMPLATE_TOKENS_PER_PROMPT, count_tokens
from chatsite.quotas.services import quota_check_rate, quota_for, quota_record_refusal, quota_reserve
from chatsite.runs.dispatch import run_dispatch
from chatsite.runs.models import GenerationRun
from chatsite.runs.queues import TIERS
from chatsite.runs.services.availability import refuse_if_no_worker
from chatsite.runs.services.finalize import run_finalize
from chatsite.runs.services.shedding import shed_if_overloaded
from chatsite.runs.stream import log as stream_log
from chatsite.runs.validation import clean_sampling, clean_text

HISTORY_LIMIT = 200  # messages considered for the prompt snapshot
ACTIVE = (GenerationRun.Status.QUEUED, GenerationRun.Status.RUNNING)


def run_submit(*, chat: Chat, content, max_tokens=None, temperature=None, top_p=None, stop=None, seed=None,
               ignore_eos=None, tier: str = "interactive", source: str = GenerationRun.Source.API,
               idempotency_key: str = "", model: str | None = None) -> GenerationRun:
    """Save the user's message, an empty assistant message and a queued run, then
    (after commit) hand the run to its queue. A repeated `idempotency_key` returns
    the run it created the first time, also when the repeats race each other.
    `model` answers this one message with another pool than the chat's own.

    Raises InvalidInput (bad content, sampling, or a prompt that cannot fit the
    model's context), ModelUnavailable (503) when no worker of the pool is live and it does
    not queue when cold, and Conflict while a reply is still being
    generated in the chat; RateLimited (429) for the tenant's own limits and
    Overloaded (503) when the pool sheds load, both with a retry_after."""
    if idempotency_key:
        if not isinstance(idempotency_key, str) or len(idempotency_key) > 200:
            raise InvalidInput("Idempotency-Key must be at most 200 characters", field="Idempotency-Key")
        existing = _existing(chat, idempotency_key)
        if existing is not None:
            return existing
    content = clean_text(content, field="content", max_chars=settings.CHATSITE["MAX_MESSAGE_CHARS"])
    if tier not in TIERS:
        raise InvalidInput(f"priority must be one of {', '.join(TIERS)}", field="priority")
    pool = pool_for_tenant(chat.tenant, chat.pool.name if model is None else model,
                           loaded=chat.pool if model is None else None)
    sampling = clean_sampling(pool, max_tokens=max_tokens, temperature=temperature, top_p=top_p, stop=stop, seed=seed,
                              ignore_eos=ignore_eos)
    tokens = count_tokens(pool.model, content)
    room = pool.context_length - sampling.max_tokens - TEMPLATE_TOKENS_PER_PROMPT
    if tokens + TEMPLATE_TOKENS_PER_MESSAGE > room:
        raise InvalidInput(
            f"the message is {tokens} tokens, but model {pool.name!r} has room for {max(room, 0)} prompt tokens "
            f"when replying with up to {sampling.max_tokens} tokens; shorten it or ask for fewer max_tokens",
            field="content", code="context_length_exceeded")
    refuse_if_no_worker(pool)
    shed_if_overloaded(pool)
    try:
        quota = quota_for(chat.tenant)
        quota_check_rate(tenant=chat.tenant, quota=quota)
        try:
            with transaction.atomic():
                run = _create(chat, pool, content, tokens, sampling, tier, source, idempotency_key, room, quota)
        except ReplyInProgress as busy:
            # The previous reply's stream has ended but its worker has not saved it yet (the
            # terminal entry comes first): save it here (idempotent), then admit this message.
            if not stream_log.has_ended(busy.run_id):
                raise
            run_finalize(run_id=busy.run_id)
            with transaction.atomic():
                run = _create(chat, pool, content, tokens, sampling, tier, source, idempotency_key, room, quota)
    except RateLimited:
        quota_record_refusal(tenant=chat.tenant)
        raise
    except IntegrityError:
        existing = _existing(chat, idempotency_key) if idempotency_key else None
        if existing is None:
            raise
        return existing
    return run


class ReplyInProgress(Conflict):
    def __init__(self, run_id: int):
        super().__init__("a reply is still being generated in this chat; wait for it or stop it first")
        self.run_id = run_id


def _existing(chat: Chat, key: str) -> GenerationRun | None:
    run = GenerationRun.objects.filter(tenant=chat.tenant, idempotency_key=key).first()
    if run is not None and run.chat_id != chat.pk:
        raise Conflict("this Idempotency-Key was already used for another chat", field="Idempotency-Key")
    return run


def _create(chat, pool, content, tokens, sampling, tier, source, idempotency_key, room, quota) -> GenerationRun:
    locked = Chat.objects.select_for_update().get(pk=chat.pk)
    locked.tenant = chat.tenant  # already loaded
    chat = locked
    # A concurrent request with the same key may have committed while we waited for the lock.
    existing = _existing(chat, idempotency_key) if idempotency_key else None
    if existing is not None:
        return existing
    active = GenerationRun.objects.filter(chat=chat, status__in=ACTIVE).values_list("pk", flat=True).first()
    if active is not None:
        raise ReplyInProgress(active)
    user_msg, assistant_msg = Message.objects.bulk_create([  # one INSERT; ids in this order
        Message(chat=chat, role=Message.Role.USER, content=content, token_count=tokens),
        Message(chat=chat, role=Message.Role.ASSISTANT, content="")])
    if not chat.title:
        chat.title = " ".join(content.split())[:60]
    chat.save(update_fields=["title", "updated_at"])
    snapshot, prompt_tokens = _snapshot(chat, user_msg, room)
    reservation = quota_reserve(
        tenant=chat.tenant, quota=quota, prompt_tokens=prompt_tokens, max_tokens=sampling.max_tokens,
        active_runs=lambda: GenerationRun.objects.filter(tenant=chat.tenant, status__in=ACTIVE).count())
    run = GenerationRun.objects.create(
        tenant=chat.tenant, chat=chat, user_message=user_msg, assistant_message=assistant_msg, pool=pool,
        tier=tier, source=source, seed=sampling.seed, max_tokens=sampling.max_tokens,
        sampling={"temperature": sampling.temperature, "top_p": sampling.top_p, "stop": list(sampling.stop),
                  "ignore_eos": sampling.ignore_eos},
        prompt_snapshot=snapshot, idempotency_key=idempotency_key,
        reserved_tokens=reservation.reserved_tokens, budget_cap=reservation.budget_cap,
    )
    transaction.on_commit(lambda: run_dispatch(run))
    return run


def _snapshot(chat: Chat, user_msg: Message, room: int) -> tuple[list[dict], int]:
    """The newest turns that fit `room` prompt tokens, oldest first, and their
    estimated prompt tokens; the worker re-checks with the real chat template."""
    history = (Message.objects.filter(chat=chat, id__lt=user_msg.id).exclude(role=Message.Role.ASSISTANT, content="")
               .order_by("-id").values("role", "content", "token_count")[:HISTORY_LIMIT])
    kept = [{"role": user_msg.role, "content": user_msg.content}]
    used = TEMPLATE_TOKENS_PER_PROMPT + user_msg.token_count + TEMPLATE_TOKENS_PER_MESSAGE
    for msg in history:
        cost = msg["token_count"] + TEMPLATE_TOKENS_PER_MESSAGE
        if used + cost > room:
            break
        used += cost
        kept.append({"role": msg["role"], "content": msg["content"]})
    kept.reverse()
    return kept, used

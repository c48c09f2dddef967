"""The one Idempotency-Key rule, for every surface.

A key belongs to the credential's owner: two users of one tenant may send the same key
and each gets their own run (nothing tells one that the other used it). A repeat by
the same owner of the same request (the same surface, and the same digest of what was
asked) gets the first call's runs, and writes nothing; the same key with another
request is refused (409 idempotency_key_reused)."""
from chatsite.errors import Conflict, InvalidInput
from chatsite.request_digest import digest
from chatsite.runs.admission.ask import UNSET, Ask, Branch, InChat, Send
from chatsite.runs.models import GenerationRun

FIELD = "Idempotency-Key"
MAX_KEY_CHARS = 200


def check_key(key) -> str:
    """The key as sent ("" for none); InvalidInput for one that cannot be a key."""
    if not key:
        return ""
    if not isinstance(key, str) or len(key) > MAX_KEY_CHARS:
        raise InvalidInput(f"the Idempotency-Key header must be at most {MAX_KEY_CHARS} characters", field=FIELD)
    return key


def ask_digest(ask: Ask) -> str:
    """What a repeat must ask for again: everything of the Ask but who asks."""
    where, turn = ask.where, ask.turn
    if isinstance(where, InChat):
        place = {"chat": where.chat_id}
    elif isinstance(where, Branch):
        place = {"chat": where.chat.pk, "after": where.after.pk, "history": list(where.history)}
    else:
        place = {"model": where.model, "history": list(where.history), "listed": where.listed,
                 "title": where.title, **{name: getattr(where, name) for name in ("system_prompt", "temperature",
                                                                                 "max_tokens")
                                           if getattr(where, name) is not UNSET}}
    what = ({"send": turn.content, "edit_of": turn.edit_of, "tool_call_id": turn.tool_call_id}
            if isinstance(turn, Send) else {type(turn).__name__.lower(): turn.message_id})
    return digest({"source": ask.source, "where": place, "turn": what, "model": ask.model, "sampling": ask.sampling,
                   "tier": ask.tier, "choices": ask.choices, "raw_prompt": ask.raw_prompt,
                   "system_prompt": None if ask.system_prompt is UNSET else ask.system_prompt,
                   "run_sampling": ask.run_sampling, "extra": ask.digest_extra})


def earlier(ask: Ask, key: str, asked: str) -> GenerationRun | None:
    """The first run of the owner's earlier call with this key, if there was one and it
    asked for the same; Conflict if it asked for something else."""
    caller = ask.caller
    run = (GenerationRun.objects.filter(tenant=caller.tenant, owner=caller.user, idempotency_key=key)
           .select_related("chat", "pool", "user_message", "assistant_message").first())
    if run is None:
        return None
    refuse_unless_same(source=run.source, digest=run.request_digest, ask=ask, asked=asked)
    return run


def refuse_unless_same(*, source: str, digest: str, ask: Ask, asked: str) -> None:
    """Conflict unless the earlier call with the key (its surface, the digest of what it
    asked: "" for one saved without) asked for what `ask` asks (`asked`, its digest)."""
    if source != ask.source or (digest and digest != asked):
        raise Conflict("this Idempotency-Key was already used with a different request; send a new key for a new "
                       "request", field=FIELD, code="idempotency_key_reused")


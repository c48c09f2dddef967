"""A new chat and its first message in one call (POST /api/chats/ with `message`).

Starting a conversation took two requests: create the chat, then send the message.
That was a round trip more before the first token, a second request's worth of the
web's CPU, and a chat left behind, empty, whenever the message was then refused
(a limit, a prompt that cannot fit). Here both are one transaction: a refused
message writes nothing, the chat included.
"""
from dataclasses import dataclass

from django.db import transaction

from chatsite.chats import live
from chatsite.chats.services import INSERT_CHAT, UNSET, chat_build
from chatsite.errors import Conflict, InvalidInput
from chatsite.request_digest import digest
from chatsite.runs.models import GenerationRun
from chatsite.runs.services.admission import run_submit

KEY_FIELD = "Idempotency-Key"
# What a first message may carry: what POST .../messages/ takes.
MESSAGE_FIELDS = ("content", "model", "max_tokens", "temperature", "top_p", "stop", "seed", "ignore_eos", "tier")


@dataclass(frozen=True)
class Started:
    run: GenerationRun  # the first message's run; run.chat is the chat
    replayed: bool  # an earlier call's, found by its Idempotency-Key (the chat may have changed since)


def chat_start(*, tenant, owner, model, message, title=None, system_prompt=UNSET, temperature=UNSET,
               max_tokens=UNSET, idempotency_key: str = "") -> Started:
    """A new chat on pool `model` (title and settings as chat_create takes them) whose
    first message is `message` (a dict of MESSAGE_FIELDS, as run_submit takes them),
    and the queued run answering it (its `chat` is the new chat).

    One transaction: when the chat's fields or the message are refused, nothing is
    written and the error names the field (`message.content`, `message.max_tokens`...).
    With `idempotency_key`, a repeat of the call gets the first call's chat and run,
    also when the two race. Raises what chat_create and run_submit raise."""
    if not isinstance(message, dict):
        raise InvalidInput('message must be an object, e.g. {"content": "Hello"}', field="message")
    sent = {"model": model, "title": title, "system_prompt": system_prompt, "temperature": temperature,
            "max_tokens": max_tokens, "message": {name: message.get(name) for name in MESSAGE_FIELDS}}
    asked = digest({name: value for name, value in sent.items() if value is not UNSET})
    if idempotency_key and (earlier := _earlier(tenant, owner, idempotency_key, asked)) is not None:
        return Started(earlier, replayed=True)
    if "priority" in message:  # as a message POST refuses it (chatsite.api.views_messages)
        raise InvalidInput('priority is now called tier: send "tier": "interactive" or "batch"',
                           field="message.priority")
    tier = message.get("tier", "interactive")
    sampling = {name: message.get(name) for name in MESSAGE_FIELDS if name not in ("content", "tier")}
    try:
        with transaction.atomic():
            chat = chat_build(tenant=tenant, owner=owner, model=model, title=title, system_prompt=system_prompt,
                              temperature=temperature, max_tokens=max_tokens, admitting=True)
            INSERT_CHAT.save(chat)
            # What admission would read under the chat's lock: nothing yet (chatsite.runs.services.admission).
            chat.created_path_end = (None, None)
            try:
                run = run_submit(chat=chat, content=message.get("content"), tier=tier,
                                 source=GenerationRun.Source.API, idempotency_key=idempotency_key, **sampling)
            except InvalidInput as exc:  # the message's fields are named as the body nests them
                if exc.field in MESSAGE_FIELDS:
                    exc.field = f"message.{exc.field}"
                raise
            if idempotency_key:  # what a repeat must ask for to get this run back
                GenerationRun.objects.filter(pk=run.pk).update(request_digest=asked)
            live.chat_event(chat, live.CHAT_CREATED, title=chat.title)  # sent at commit; admission named it
            return Started(run, replayed=False)
    except Conflict as exc:  # a repeat with the same key committed first
        if exc.field != KEY_FIELD or (earlier := _earlier(tenant, owner, idempotency_key, asked)) is None:
            raise
        return Started(earlier, replayed=True)


def _earlier(tenant, owner, key: str, asked: str) -> GenerationRun | None:
    """The run an earlier call with this key made; Conflict unless it started a chat of
    this user's with the same request."""
    if not isinstance(key, str) or len(key) > 200:
        raise InvalidInput("Idempotency-Key must be at most 200 characters", field=KEY_FIELD)
    run = (GenerationRun.objects.filter(tenant=tenant, idempotency_key=key)
           .select_related("chat__pool", "user_message", "assistant_message").first())
    if run is None:
        return None
    if run.chat.owner_id != owner.pk or run.source != GenerationRun.Source.API or run.request_digest != asked:
        raise Conflict("this Idempotency-Key was already used for another request; send a new key for a new "
                       "request", field=KEY_FIELD, code="idempotency_key_reused")
    return run

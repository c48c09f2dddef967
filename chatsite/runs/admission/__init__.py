"""The one door every run comes in through (door.py), what a surface asks it (ask.py),
and, for scripts and tests that admit a turn in a chat they hold, three shorthands."""
from chatsite.runs.admission.ask import (UNSET, Admitted, Ask, Branch, Caller, Continue, InChat, NewChat, Regenerate,
                                         Send)
from chatsite.runs.admission.door import run_admit
from chatsite.runs.admission.write import QueueWaiting, ReplyInProgress
from chatsite.runs.models import GenerationRun

__all__ = ["UNSET", "Admitted", "Ask", "Branch", "Caller", "Continue", "InChat", "NewChat", "Regenerate", "Send",
           "QueueWaiting", "ReplyInProgress", "run_admit", "run_submit", "run_regenerate", "run_continue"]

_ORDER = ("source", "model", "tier", "choices", "raw_prompt", "idempotency_key")


def _ask(chat, turn, kwargs) -> Ask:
    order = {name: kwargs.pop(name) for name in _ORDER if name in kwargs}
    return Ask(caller=Caller(chat.tenant, chat.owner), where=InChat(chat.pk), turn=turn, sampling=kwargs, **order)


def run_submit(*, chat, content, edit_of=None, tool_call_id: str = "", role: str = "user",
               **kwargs) -> GenerationRun:
    """run_admit() of a message sent by the chat's owner (a new version of `edit_of`, a
    Message, when given); the first choice's run. `kwargs`: the Ask's source, model,
    tier, choices, raw_prompt and idempotency_key, and the rest as its sampling."""
    turn = Send(content, edit_of=edit_of.pk if edit_of is not None else None, tool_call_id=tool_call_id, role=role)
    return run_admit(_ask(chat, turn, kwargs)).run


def run_regenerate(*, chat, message, **kwargs) -> GenerationRun:
    """run_admit() of a new version of the reply `message`, by the chat's owner."""
    return run_admit(_ask(chat, Regenerate(message.pk), kwargs)).run


def run_continue(*, chat, message, **kwargs) -> GenerationRun:
    """run_admit() of the reply `message` carried on, by the chat's owner."""
    return run_admit(_ask(chat, Continue(message.pk), kwargs)).run

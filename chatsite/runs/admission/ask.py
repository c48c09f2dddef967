"""What a surface asks the door for, and what it gets back.

A surface (the REST API, the web page through it, /v1 chat and text completions, /v1
responses) translates its wire format into an Ask: who asks (Caller), where the turn
goes (InChat, NewChat, Branch), what the turn is (Send, Regenerate, Continue) and how
it is to be answered (model, sampling, tier, choices...). The door answers Admitted.
"""
from dataclasses import dataclass, field

from chatsite.chats.models import Chat, Message
from chatsite.chats.services import UNSET  # a chat setting the turn leaves as it is
from chatsite.runs.models import GenerationRun
from chatsite.tenancy.credentials import TenantLimits


@dataclass(frozen=True, slots=True)
class Caller:
    """The credential's owner, in the tenant it acts for; `limits`, when the credential's
    read brought them along (an API key's), spare the door reading them; `credential`, the
    credential itself as grants name it (chatsite.tenancy.revocation; "": none known), for
    a turn taken now and admitted later (a queued message) to be cut off by its revocation."""
    tenant: object
    user: object
    limits: TenantLimits | None = None
    credential: str = ""


@dataclass(frozen=True, slots=True)
class InChat:
    """A turn of one of the caller's chats."""
    chat_id: int


@dataclass(frozen=True, slots=True)
class NewChat:
    """A turn that starts a chat on pool `model`: after `history` (earlier messages,
    {role, content[, tool_calls, tool_call_id]} dicts, oldest first: an OpenAI call's), with
    the chat's own title and settings (UNSET: none). `listed`: the web chat lists it."""
    model: str
    history: tuple = ()
    listed: bool = True
    title: str | None = None
    system_prompt: object = UNSET
    temperature: object = UNSET
    max_tokens: object = UNSET


@dataclass(frozen=True, slots=True)
class Branch:
    """A turn asked right after `after`, a reply in `chat` (a Responses call's previous
    response), following `history`: a new branch when other turns follow it already."""
    chat: Chat
    after: Message
    history: tuple = ()


@dataclass(frozen=True, slots=True)
class Send:
    """A new message: the user's (`content`), or a tool's result for `tool_call_id`;
    `edit_of`: the id of an earlier message of the user's it is a new version of. `role`
    assistant: the start of the reply, which the model carries on (a /v1 prefill); system:
    a system message the model answers. `token_ids`: the prompt as token ids (a text
    completion's), its text then what the pool's tokenizer reads in them."""
    content: object
    edit_of: int | None = None
    tool_call_id: str = ""
    role: str = "user"
    token_ids: list | None = None


@dataclass(frozen=True, slots=True)
class Regenerate:
    """A new version of the reply `message_id`."""
    message_id: int


@dataclass(frozen=True, slots=True)
class Continue:
    """A reply `message_id` that stopped at the length limit, carried on."""
    message_id: int


@dataclass(frozen=True, slots=True)
class Steering:
    """The reply a queued message sent now stops (chatsite.runs.services.queued.send_now),
    admitted before its stop is written: the one reply in progress the turn may follow. Its
    text is not saved yet: the snapshot names it (`PENDING_REPLY`) and the worker fills it in
    once the reply is saved (workers.steered)."""
    run_id: int
    reply_id: int  # its message, the turn's parent
    tokens: int  # its tokens so far: the snapshot's estimate of it


# The snapshot message key naming the run whose saved reply fills it in (Steering).
PENDING_REPLY = "pending_run"


@dataclass(frozen=True, slots=True)
class Ask:
    caller: Caller
    where: InChat | NewChat | Branch
    turn: Send | Regenerate | Continue
    source: str = GenerationRun.Source.API
    model: str | None = None  # answer with another pool than the chat's own (this turn only)
    sampling: dict = field(default_factory=dict)  # clean_sampling's keyword arguments; None: the default
    tier: str = "interactive"
    choices: int = 1  # sibling replies, one run each (a /v1 call's n)
    raw_prompt: bool = False  # a text completion: the content as it is, no template, no history
    whole_history: bool = False  # refuse a turn whose earlier messages would not all fit (an OpenAI client's)
    keeps_token_ids: bool = True  # keep the reply's token ids for a later turn (False: no turn will follow)
    system_prompt: object = UNSET  # the chat's system prompt from this turn on (None clears it)
    run_sampling: dict = field(default_factory=dict)  # more of the run's record (tools, their constraint)
    needs_tools: str | None = None  # the request's parameter that needs a chat template with tools
    idempotency_key: str = ""
    turn_field_prefix: str = ""  # how the surface names the turn's fields ("message." in a REST chat start)
    digest_extra: object = None  # what else a repeat must send the same (a surface's own fields)
    also: object = None  # callable(Admitted), run in the admission's transaction: a surface's own rows
    # The chat's queue starting its first message: the one turn that may go before it; the
    # tenant's rate counted it when it was queued. Its caller (queue_advance) holds the chat's
    # lock already, taken before the plan read the chat: the door does not take it again.
    from_queue: bool = False
    steering: Steering | None = None  # a queued message sent now: the reply it stops, still in progress


@dataclass(frozen=True)
class Admitted:
    """One turn's runs (a completion's choices, the first first: each with its pool,
    chat, question and reply set), the chat, and whether an earlier call made them (a
    repeat with the same Idempotency-Key). `versions`: each written message's versions
    (its siblings' ids, itself included), where admission knew them."""
    runs: tuple
    chat: Chat
    replayed: bool = False
    versions: dict | None = None

    @property
    def run(self) -> GenerationRun:
        return self.runs[0]

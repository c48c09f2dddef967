"""Conversations and their messages, as a tree.

Each message has a parent (None for the first message of a branch); siblings are
versions of one turn (a regenerated reply, an edited question). The chat
remembers the leaf of the path its owner chose; the next prompt is that path."""
from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector
from django.db import models

SEARCH_CONFIG = "english"  # the text search configuration of the search indexes and queries


class Chat(models.Model):
    tenant = models.ForeignKey("tenancy.Tenant", on_delete=models.CASCADE, related_name="chats")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chats")
    title = models.CharField(max_length=200, blank=True)
    pool = models.ForeignKey("pools.ModelPool", on_delete=models.PROTECT, related_name="chats")
    current_leaf = models.ForeignKey("chats.Message", null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+", help_text="The last message of the chosen path.")
    system_prompt = models.TextField(blank=True)
    temperature = models.FloatField(null=True, blank=True, help_text="Empty: the model's default.")
    max_tokens = models.PositiveIntegerField(null=True, blank=True, help_text="Reply length; empty: the default.")
    listed = models.BooleanField(default=True, help_text="Shown in the web sidebar and search; chats made by "
                                                         "/v1/chat/completions are not.")
    # Filing, by its owner: a pinned chat heads the chat list; an archived one leaves it (search
    # still finds it) until restored. Neither changes updated_at, the list's order.
    pinned_at = models.DateTimeField(null=True, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["tenant", "owner", "-updated_at"]),
                   GinIndex(SearchVector("title", config=SEARCH_CONFIG), name="chats_chat_title_fts")]

    def __str__(self) -> str:
        return self.title or f"Chat {self.pk}"


class Message(models.Model):
    class Role(models.TextChoices):
        SYSTEM = "system"
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"  # a function's result, sent back by an OpenAI client (tool_call_id names the call)

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="messages")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    depth = models.PositiveIntegerField(default=0, help_text="Messages above it on its path.")
    # A reply continued past the length limit is replaced by the longer one (a new row, since each
    # run has its own message); the replaced one keeps its run's record but is no longer a version.
    replaced_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField(blank=True)
    token_count = models.PositiveIntegerField(default=0)
    # An assistant message's function calls as OpenAI sends them back ([{id, type, function: {name,
    # arguments}}]), and a tool message's call id: both reach the chat template.
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=100, blank=True)
    # A reply whose turn's history did not fit the model's room whole: the depth of the oldest
    # message its prompt kept. The next turns start there while they fit, so that their prompts
    # start as this one's did (chatsite.runs.admission.write.snapshot).
    prompt_from_depth = models.PositiveIntegerField(null=True, blank=True, default=None, db_default=None)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["chat", "parent"]),
                   GinIndex(SearchVector("content", config=SEARCH_CONFIG), name="chats_message_fts")]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:40]}"


class ChatShare(models.Model):
    """A read-only link to a chat (chatsite.chats.sharing): anyone holding its token sees the
    chat's chosen path and follows a reply live, without an account, until its owner revokes
    it. Only a SHA-256 of the token is stored; the token is shown once, when it is made."""

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="shares")
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["chat", "-created_at"])]

    def __str__(self) -> str:
        return f"share {self.pk} of chat {self.chat_id}"


class QueuedMessage(models.Model):
    """A message sent while a reply was being written: it waits in its chat, in `position`
    order, and starts (through the one door) when the reply in progress ends, one at a time
    (chatsite.runs.services.queued). Until then its owner may edit or withdraw it, or send
    it now: the reply in progress stops and this one runs next (`interrupted_run`)."""

    class State(models.TextChoices):
        QUEUED = "queued"
        STARTED = "started"
        WITHDRAWN = "withdrawn"
        REFUSED = "refused"  # the door refused it when its turn came (`error` says why)

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="queued_messages")
    tenant = models.ForeignKey("tenancy.Tenant", on_delete=models.CASCADE, related_name="+")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    content = models.TextField()
    # The run's settings as sent with the message: {"sampling": {...}, "model", "tier", "source"}.
    request = models.JSONField(default=dict)
    position = models.BigIntegerField(help_text="Order in the chat's queue (smallest first).")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    run = models.OneToOneField("runs.GenerationRun", null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="queued_message", help_text="The run it started.")
    interrupted_run = models.ForeignKey("runs.GenerationRun", null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="+", help_text="The reply its 'send now' stopped.")
    error = models.TextField(blank=True)
    not_before = models.DateTimeField(null=True, blank=True, help_text="Refused for a while when its turn came (the "
                                      "tenant's rate, a busy pool): the sweep tries it again from then.")
    # The credential that queued it (or last retried it), as grants name it (chatsite.tenancy.revocation), and
    # since when: its turn refuses it if that access has ended since. No `granted_at`: queued before they were kept.
    credential = models.CharField(max_length=80, blank=True)
    granted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "id"]
        indexes = [models.Index(fields=["chat", "position"], condition=models.Q(state="queued"),
                                name="chats_queued_waiting")]

    def __str__(self) -> str:
        return f"queued {self.pk} of chat {self.chat_id} ({self.state})"


class MessageTokens(models.Model):
    """The token ids the engine held at the end of a reply: the prompt it was sent and the
    ids it generated (inference.token_prefix.record), as little-endian uint32s, and the
    digest of the text they spell. A later turn after the reply starts its prompt with
    them instead of tokenizing the history again. A table of its own, so that reading
    messages never reads their ids; written by the run's finalize (runs/store/finalize.py)."""

    message = models.OneToOneField(Message, on_delete=models.CASCADE, primary_key=True, related_name="tokens")
    token_ids = models.BinaryField()
    digest = models.CharField(max_length=32)
    # The oldest turns its prompt left out (a conversation past the model's room): the next
    # turn's prompt leaves them out too, and starts with these ids.
    dropped = models.PositiveIntegerField(default=0, db_default=0)  # db_default: a worker not yet upgraded writes none

    def __str__(self) -> str:
        return f"tokens of message {self.message_id}"

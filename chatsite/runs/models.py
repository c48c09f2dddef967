"""A generation run: one request to a model pool, first-class and durable."""
from django.conf import settings
from django.db import models


class GenerationRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    class Tier(models.TextChoices):
        INTERACTIVE = "interactive"
        BATCH = "batch"

    class Source(models.TextChoices):
        WEB = "web"
        API = "api"
        OPENAI = "openai"

    TERMINAL = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)
    ACTIVE = (Status.QUEUED, Status.RUNNING)

    # No index of their own for tenant, pool and status: every non-HOT write of a run (its
    # claim and its finalize change its status) updates each index, and the indexes in Meta
    # lead with tenant and pool; Django's own for status came with a second, for LIKE.
    tenant = models.ForeignKey("tenancy.Tenant", on_delete=models.CASCADE, related_name="runs", db_index=False)
    chat = models.ForeignKey("chats.Chat", on_delete=models.CASCADE, related_name="runs")
    user_message = models.ForeignKey("chats.Message", on_delete=models.CASCADE, related_name="+")
    assistant_message = models.OneToOneField("chats.Message", on_delete=models.CASCADE, related_name="run")
    pool = models.ForeignKey("pools.ModelPool", on_delete=models.PROTECT, related_name="runs", db_index=False)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    attempt = models.PositiveIntegerField(default=0)
    tier = models.CharField(max_length=12, choices=Tier.choices, default=Tier.INTERACTIVE)
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.API)
    sampling = models.JSONField(default=dict, help_text="temperature, top_p, stop")
    seed = models.BigIntegerField()
    max_tokens = models.PositiveIntegerField()
    # Tokens reserved against the tenant's budget at admission (prompt + cap), settled at finalize.
    reserved_tokens = models.PositiveIntegerField(default=0)
    # For a tenant with a budget: the most tokens (prompt + completion) the run may use; a reply
    # cut short by it ends with finish_reason "budget". Empty when the tenant has no budget.
    budget_cap = models.PositiveIntegerField(null=True, blank=True)
    prompt_snapshot = models.JSONField(default=list, help_text="The messages the prompt is built from.")
    raw_prompt = models.BooleanField(default=False, help_text="The prompt is the user message's text as it is, "
                                     "without the chat template (text completions, /v1/completions).")
    keeps_token_ids = models.BooleanField(default=True, help_text=(
        "Its reply's token ids are kept for the next turn to start with (issue 43); false for a chat "
        "completion: its chat is the call's own, and no later call builds on it."))
    # Who asked (the credential's owner): an Idempotency-Key is theirs, not the tenant's.
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+",
                              db_index=False)
    idempotency_key = models.CharField(max_length=200, blank=True)
    # The OpenAI-compatible API's sha256 of the request body an idempotency key came with:
    # a repeat with another body is refused, not answered with this run.
    request_digest = models.CharField(max_length=64, blank=True)
    # A /v1 completion asked for n choices: one run each, made together. The first choice has
    # index 0 and no choice_of; the others name it. The prompt is the same for all, so only
    # the first choice's prompt tokens count against the tenant's budget and usage.
    choice_index = models.PositiveSmallIntegerField(default=0)
    choice_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE,
                                  related_name="other_choices")
    worker = models.CharField(max_length=200, blank=True)
    queued_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    first_token_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    ttft_ms = models.PositiveIntegerField(null=True, blank=True, help_text="Queued to first token.")
    itl_ms = models.FloatField(null=True, blank=True, help_text="Mean inter-token latency.")
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    finish_reason = models.CharField(max_length=20, blank=True)
    error = models.TextField(blank=True)
    # A run that asked for log probabilities (sampling["logprobs"]): one [token, logprob,
    # [[alt, logprob], ...]] per completion token, from its stream, saved at finalize so
    # an answer re-read after the stream expired still has them. Null otherwise.
    logprobs = models.JSONField(null=True, blank=True)
    # What the engine reported beyond the text, saved at finalize from the stream: the prompt
    # tokens its prefix cache served ("cached_tokens"), and what a /v1 call asked for (its
    # tokens' "ids", the prompt's "prompt_ids", "prompt_text", "prompt_logprobs"). Null when none.
    details = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["tenant", "status"]), models.Index(fields=["pool", "status"]),
                   # Time windows: the finish rate (shedding, scaling), the arrival rate,
                   # a tenant's month of usage. Without them each read scanned every run.
                   models.Index(fields=["pool", "finished_at"]), models.Index(fields=["pool", "queued_at"]),
                   models.Index(fields=["tenant", "queued_at"]),
                   models.Index(fields=["status"], name="runs_status_idx")]  # the sweep's, across pools
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "owner", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="one_run_per_owners_idempotency_key",
            )
        ]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL


class ReplyFeedback(models.Model):
    """What the person who asked thought of a reply: thumbs up or down and an optional
    comment, one per run (given again, it replaces the first)."""

    class Rating(models.TextChoices):
        UP = "up", "Thumbs up"
        DOWN = "down", "Thumbs down"

    run = models.OneToOneField(GenerationRun, on_delete=models.CASCADE, related_name="feedback")
    tenant = models.ForeignKey("tenancy.Tenant", on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    rating = models.CharField(max_length=4, choices=Rating.choices)
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["tenant", "-updated_at"])]

    def __str__(self) -> str:
        return f"{self.get_rating_display()} on run {self.run_id}"

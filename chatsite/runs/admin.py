import csv

from django.contrib import admin, messages
from django.http import HttpResponse

from chatsite.errors import ServiceError
from chatsite.runs.dispatch import run_dispatch
from chatsite.runs.models import GenerationRun, ReplyFeedback
from chatsite.runs.services import run_cancel
from chatsite.runs.admission import run_regenerate


class TtftFilter(admin.SimpleListFilter):
    title = "time to first token"
    parameter_name = "ttft"
    BUCKETS = {"fast": (0, 500), "ok": (500, 2000), "slow": (2000, None)}

    def lookups(self, request, model_admin):
        return [("fast", "< 0.5 s"), ("ok", "0.5 - 2 s"), ("slow", "> 2 s"), ("none", "no token yet")]

    def queryset(self, request, queryset):
        if self.value() == "none":
            return queryset.filter(ttft_ms__isnull=True)
        if self.value() in self.BUCKETS:
            lo, hi = self.BUCKETS[self.value()]
            queryset = queryset.filter(ttft_ms__gte=lo)
            return queryset.filter(ttft_ms__lt=hi) if hi else queryset
        return queryset


@admin.action(description="Cancel the selected runs")
def cancel_runs(modeladmin, request, queryset):
    """Stop each run still queued or running, as its Stop button does (chatsite.runs.services.run_cancel)."""
    live = [run for run in queryset.select_related("pool") if not run.is_terminal]
    for run in live:
        run_cancel(run=run)
    ended = queryset.count() - len(live)
    modeladmin.message_user(request, f"Asked {len(live)} run(s) to stop; {ended} had already ended.",
                            messages.SUCCESS if live else messages.WARNING)


@admin.action(description="Retry the selected runs")
def retry_runs(modeladmin, request, queryset):
    """A failed or cancelled run's reply is generated again as a new version of it (a
    regenerate, as the chat's Retry does: same question, same chat settings, the chat's owner
    sees both versions), when it is still the chat's latest reply; a queued run is dispatched
    again (a worker that already has it does nothing twice). Runs that completed, are running,
    or were followed by other turns are left as they are."""
    done, skipped = [], []
    for run in queryset.select_related("pool", "chat__pool", "chat__tenant", "assistant_message"):
        try:
            if run.status == GenerationRun.Status.QUEUED:
                run_dispatch(run)
                done.append(f"{run.pk} (dispatched again)")
            elif run.status in (GenerationRun.Status.FAILED, GenerationRun.Status.CANCELLED) \
                    and run.chat.current_leaf_id == run.assistant_message_id:
                new = run_regenerate(chat=run.chat, message=run.assistant_message, source=run.source)
                done.append(f"{run.pk} (as run {new.pk})")
            else:
                skipped.append(str(run.pk))
        except ServiceError as exc:
            skipped.append(f"{run.pk} ({exc.message})")
    if done:
        modeladmin.message_user(request, "Retried: " + ", ".join(done) + ".", messages.SUCCESS)
    if skipped:
        modeladmin.message_user(request, "Not retried (completed, running, or not the chat's latest reply): "
                                + ", ".join(skipped) + ".", messages.WARNING)


@admin.register(GenerationRun)
class GenerationRunAdmin(admin.ModelAdmin):
    list_display = ["id", "status", "pool", "tenant", "tier", "source", "attempt", "worker", "ttft_ms",
                    "completion_tokens", "finish_reason", "queued_at"]
    list_filter = ["status", "pool", "tenant", "tier", "source", "finish_reason", TtftFilter]
    search_fields = ["id", "worker", "error"]
    date_hierarchy = "queued_at"
    raw_id_fields = ["chat", "user_message", "assistant_message"]
    readonly_fields = [f.name for f in GenerationRun._meta.fields]
    actions = [cancel_runs, retry_runs]

    def has_add_permission(self, request):
        return False  # runs are created by sending a message


@admin.action(description="Download the selected feedback as CSV")
def feedback_csv(modeladmin, request, queryset):
    """One row per feedback, with the question and the reply it is about (the whole filtered
    list: "Select all" first)."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="reply-feedback.csv"'
    out = csv.writer(response)
    out.writerow(["run", "chat", "tenant", "user", "model", "rating", "comment", "question", "reply", "given_at"])
    rows = queryset.select_related("run__pool", "run__user_message", "run__assistant_message", "tenant", "user")
    for f in rows.order_by("-updated_at"):
        out.writerow([f.run_id, f.run.chat_id, f.tenant.name, f.user.username, f.run.pool.name, f.rating,
                      f.comment, f.run.user_message.content, f.run.assistant_message.content,
                      f.updated_at.isoformat()])
    return response


@admin.register(ReplyFeedback)
class ReplyFeedbackAdmin(admin.ModelAdmin):
    list_display = ["updated_at", "rating", "short_comment", "run", "tenant", "user", "model"]
    list_filter = ["rating", "tenant", "run__pool", ("updated_at", admin.DateFieldListFilter)]
    search_fields = ["comment", "user__username", "run__id"]
    date_hierarchy = "updated_at"
    raw_id_fields = ["run", "user"]
    readonly_fields = ["run", "tenant", "user", "rating", "comment", "created_at", "updated_at"]
    actions = [feedback_csv]
    list_select_related = ["run__pool", "tenant", "user"]

    @admin.display(description="comment")
    def short_comment(self, feedback):
        return feedback.comment[:80] + ("…" if len(feedback.comment) > 80 else "")

    @admin.display(description="model", ordering="run__pool__name")
    def model(self, feedback):
        return feedback.run.pool.name

    def has_add_permission(self, request):
        return False  # given on a reply, in the chat or through the API

from django.contrib import admin

from chatsite.runs.models import GenerationRun


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


@admin.register(GenerationRun)
class GenerationRunAdmin(admin.ModelAdmin):
    list_display = ["id", "status", "pool", "tenant", "tier", "source", "attempt", "worker", "ttft_ms",
                    "completion_tokens", "finish_reason", "queued_at"]
    list_filter = ["status", "pool", "tenant", "tier", "source", "finish_reason", TtftFilter]
    search_fields = ["id", "worker", "error"]
    date_hierarchy = "queued_at"
    raw_id_fields = ["chat", "user_message", "assistant_message"]
    readonly_fields = [f.name for f in GenerationRun._meta.fields]

    def has_add_permission(self, request):
        return False  # runs are created by sending a message

from django.contrib import admin

from chatsite.pools.health import live_workers, pool_is_up, pool_workers
from chatsite.pools.models import ModelPool


@admin.register(ModelPool)
class ModelPoolAdmin(admin.ModelAdmin):
    list_display = ["name", "display_name", "model", "context_length", "max_output_tokens", "enabled", "up", "workers"]
    list_filter = ["enabled"]
    search_fields = ["name", "display_name", "model"]

    def changelist_view(self, request, extra_context=None):
        self._workers = live_workers()
        return super().changelist_view(request, extra_context)

    @admin.display(boolean=True, description="up")
    def up(self, pool):
        return pool_is_up(pool.name, getattr(self, "_workers", None))

    @admin.display(description="live workers")
    def workers(self, pool):
        return len(pool_workers(pool.name, getattr(self, "_workers", None)))

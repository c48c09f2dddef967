"""/settings/: the signed-in person's own settings: the theme, the instructions new chats
start with, their API keys, their usage this month against the team's budget, and their
archived chats. The theme and instructions are a plain form; keys and archived chats go
through the REST API from static/js/settings-page.js."""
from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from chatsite.chats.selectors import listed_chats_for
from chatsite.text import MAX_SYSTEM_PROMPT_CHARS
from chatsite.errors import InvalidInput
from chatsite.quotas.selectors import quota_allowances
from chatsite.quotas.services import quota_for
from chatsite.tenancy.models import UserPreferences
from chatsite.tenancy.selectors import api_keys_for
from chatsite.tenancy.services import preferences_update
from chatsite.usage.selectors import usage_this_month
from chatsite.web.context import request_preferences
from chatsite.web.csp import with_csp
from chatsite.web.views import with_tenant

ARCHIVED_SHOWN = 100


def _in_words(exc: InvalidInput, instructions: str) -> str:
    if exc.field == "theme":
        return "Pick a theme: the system's, light or dark. Nothing was saved."
    if len(instructions) > MAX_SYSTEM_PROMPT_CHARS:
        return (f"Default instructions can be at most {MAX_SYSTEM_PROMPT_CHARS:,} characters; these are "
                f"{len(instructions):,}. Nothing was saved.")
    return f"These settings could not be saved: {exc.message}."


def _budget(tenant) -> dict | None:
    quota, allowances = quota_for(tenant), quota_allowances(tenant)
    if quota is None or allowances.tokens is None:
        return None
    tokens = allowances.tokens
    used = tokens.limit - tokens.remaining
    return {"limit": tokens.limit, "used": used, "period": quota.period,
            "percent": min(100, round(100 * used / tokens.limit)) if tokens.limit else 100,
            "renews_in_days": max(1, round(tokens.reset_seconds / 86400))}


@require_http_methods(["GET", "POST"])
@with_csp
@with_tenant
def settings_page(request, tenant):
    prefs, status = request_preferences(request), 200
    if request.method == "POST":
        try:
            preferences_update(user=request.user, theme=request.POST.get("theme"),
                               default_instructions=request.POST.get("default_instructions"))
            messages.success(request, "Settings saved.")
            return redirect("settings")
        except InvalidInput as exc:
            messages.error(request, _in_words(exc, request.POST.get("default_instructions") or ""))
            status = 400
    context = {
        "prefs": prefs, "themes": UserPreferences.Theme.choices,
        "keys": api_keys_for(tenant=tenant, user=request.user),
        "mine": usage_this_month(tenant=tenant, user=request.user), "team": usage_this_month(tenant=tenant),
        "budget": _budget(tenant), "tenant": tenant,
        "archived": listed_chats_for(tenant=tenant, user=request.user, archived=True)
                    .order_by("-archived_at")[:ARCHIVED_SHOWN],
    }
    return render(request, "web/settings.html", context, status=status)

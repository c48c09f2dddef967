"""Server-rendered pages: the chat list, one chat, rename and delete.

Views stay thin: reads through chatsite.web.selectors, writes through
chatsite.chats.services. Sending a message and streaming the reply happen in
the browser, through the REST API and the run's event stream."""
from dataclasses import asdict
from functools import wraps

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from chatsite.api.serializers import ChatSerializer
from chatsite.chats import live
from chatsite.chats.selectors import chat_get
from chatsite.chats.services import chat_update
from chatsite.runs.services.chat_edits import chat_delete
from chatsite.errors import NotFound, ServiceError
from chatsite.redis_durability import cached_persistence
from chatsite.tenancy.selectors import tenant_for_request
from chatsite.web import selectors
from chatsite.web.context import request_preferences
from chatsite.web.csp import with_csp
from chatsite.web.forms import RenameForm


def with_tenant(view):
    """Pass the signed-in user's tenant to the view, or explain that there is none."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        try:
            tenant = tenant_for_request(request.user, None)
        except NotFound as exc:
            return render(request, "web/no_tenant.html", {"message": exc.message}, status=403)
        return view(request, tenant, *args, **kwargs)

    return login_required(wrapper)


def _owned_chat(tenant, request, chat_id):
    try:
        return chat_get(tenant=tenant, user=request.user, chat_id=chat_id)
    except NotFound:
        raise Http404("no such chat") from None


def _chat_data(chat) -> dict:
    return ChatSerializer(chat).data  # as the API answers it: the page's script reads both


def _page(request, tenant, chat):
    events_after = live.latest_id(request.user.pk)  # first: what changes while the page is read is sent after it
    models = selectors.model_options(tenant=tenant)
    current = selectors.current_model(models, chat)
    messages_data, more_before = selectors.chat_messages(chat=chat) if chat else ([], False)
    groups, chats_next = selectors.sidebar_groups(tenant=tenant, user=request.user)
    page = {
        "chat": _chat_data(chat) if chat else None,
        "models": [asdict(m) for m in models],
        "messages": messages_data, "more_before": more_before,
        "chats_next": chats_next, "events_after": events_after,
        "max_message_chars": settings.CHATSITE["MAX_MESSAGE_CHARS"],
        "default_instructions": request_preferences(request).default_instructions,  # a new chat's system prompt
    }
    context = {
        "chat": chat, "groups": groups,
        "models": models, "current_model": current.id if current else "",
        "current_up": bool(current and current.up), "messages_data": messages_data, "page": page,
    }
    return render(request, "web/chat.html", context)


@require_GET
@with_csp
@with_tenant
def home(request, tenant):
    """A new chat: the model picker and an empty conversation."""
    return _page(request, tenant, None)


@require_GET
@with_csp
@with_tenant
def chat_page(request, tenant, chat_id: int):
    return _page(request, tenant, _owned_chat(tenant, request, chat_id))


@require_POST
@with_tenant
def chat_rename(request, tenant, chat_id: int):
    chat = _owned_chat(tenant, request, chat_id)
    form = RenameForm(request.POST)
    if form.is_valid():
        try:
            chat_update(chat=chat, title=form.cleaned_data["title"])
        except ServiceError as exc:
            messages.error(request, exc.message)
    else:
        messages.error(request, "A title can be at most 200 characters.")
    return redirect("chat", chat_id=chat.pk)


@require_POST
@with_tenant
def chat_remove(request, tenant, chat_id: int):
    chat = _owned_chat(tenant, request, chat_id)
    try:
        chat_delete(chat=chat)
    except ServiceError as exc:
        messages.error(request, exc.message)
        return redirect("chat", chat_id=chat.pk)
    messages.success(request, f"Deleted “{chat}”.")
    return redirect("home")


def healthz(request):
    """Up, and whether the Redis holding run streams persists them (asked at most once a minute)."""
    redis_state = cached_persistence()
    return JsonResponse({"ok": True, "redis_persistent": redis_state.persistent,
                         "redis_persistence": redis_state.detail})

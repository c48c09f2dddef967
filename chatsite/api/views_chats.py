"""Chats: list, create, settings, delete, search and export."""
import re

from django.db import transaction
from django.http import HttpResponse
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param
from rest_framework.views import APIView

from chatsite.api import serializers as s
from chatsite.api.mixins import TenantScoped
from chatsite.api.openapi import READ_ERRORS, WRITE_ERRORS, errors
from chatsite.api.pagination import PAGE_PARAMETERS, paginate
from chatsite.api.streamed import streamed, wants_stream
from chatsite.api.views_messages import (CONTENT_RULE, IDEMPOTENCY, MAX_TOKENS_RULE, MODEL_RULE, STREAMED, caller,
                                         posted, run_errors)
from chatsite.chats import export
from chatsite.chats.selectors import MAX_QUERY_CHARS, chat_get, chat_search, chats_for
from chatsite.chats.services import UNSET, chat_create, chat_file, chat_update
from chatsite.runs.services.chat_edits import chat_delete
from chatsite.errors import InvalidInput
from chatsite.runs.admission import Ask, NewChat, Send, run_admit
from chatsite.runs.admission.idempotency import check_key
from chatsite.runs.models import GenerationRun

TAGS = ["chats"]
# `<updated_at>,<id>`: an ISO 8601 time as the API writes it, and an id.
BEFORE_PATTERN = (r"^[1-9]\d{3}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?"
                  r"(Z|[+-]([01]\d|2[0-3]):[0-5]\d),\d{1,18}$")
SETTINGS = ("system_prompt", "temperature", "max_tokens")
NOT_NULL = ("title", "model", "pinned", "archived")  # what PATCH takes besides the settings
# What a first message may carry: what POST .../messages/ takes.
MESSAGE_FIELDS = ("content", "model", "max_tokens", "temperature", "top_p", "stop", "seed", "ignore_eos", "tier")
LIST_PARAMETERS = PAGE_PARAMETERS + [
    OpenApiParameter("listed", {"type": "boolean"}, description="true: only the chats the web chat list shows "
                     "(not those the OpenAI-compatible API made); false: only those."),
    OpenApiParameter("before", {"type": "string", "pattern": BEFORE_PATTERN}, description="Keyset paging: the "
                     "chats after this position, as `<updated_at>,<id>` of the last chat you have (a date of the "
                     "calendar, UTC `Z` or an offset). The `next` link carries it."),
    OpenApiParameter("archived", {"type": "boolean"}, description="true: only archived chats; false: only the "
                     "others. Left out: both."),
    OpenApiParameter("pinned", {"type": "boolean"}, description="true: only pinned chats; false: only the others."),
]


def _flag_filter(request, chats, name: str, field: str):
    """`?name=true|false`: only the chats whose `field` (a time) is set, or is not."""
    raw = request.query_params.get(name)
    if raw is None:
        return chats
    if raw not in ("true", "false"):
        raise InvalidInput(f"{name} must be true or false", field=name)
    return chats.filter(**{f"{field}__isnull": raw == "false"})


def _settings(data: dict) -> dict:
    return {name: data[name] if name in data else UNSET for name in SETTINGS}


def _keyset(request, chats):
    """Chats after the `before` cursor (newest first), without an offset that shifts as chats move."""
    raw = request.query_params.get("before")
    if raw is None:
        return chats, False
    stamp, _, pk = raw.rpartition(",")
    try:
        when = parse_datetime(stamp) if re.fullmatch(BEFORE_PATTERN, raw) else None
    except ValueError:  # well formed, not in the calendar (February 30th)
        when = None
    if when is None:
        raise InvalidInput("before must be '<updated_at>,<id>' of a chat, as the next link gives it", field="before")
    return chats.filter(updated_at__lte=when).exclude(updated_at=when, id__gte=int(pk)), True


def _start(view, data: dict):
    """A new chat and its first message, in one transaction (the door's NewChat): a refused
    message writes nothing, the chat included, and its errors name `message.<field>`."""
    message = data["message"]
    if not isinstance(message, dict):
        raise InvalidInput('message must be an object, e.g. {"content": "Hello"}', field="message")
    if "priority" in message:  # as a message POST refuses it
        raise InvalidInput('priority is now called tier: send "tier": "interactive" or "batch"',
                           field="message.priority")
    settings = {name: value for name, value in _settings(data).items()}
    where = NewChat(model=data.get("model"), title=data.get("title"), **settings)
    sampling = {name: message.get(name) for name in MESSAGE_FIELDS if name not in ("content", "tier", "model")}
    ask = Ask(caller=caller(view), where=where, turn=Send(message.get("content")), source=GenerationRun.Source.API,
              tier=message.get("tier", "interactive"), model=message.get("model"), sampling=sampling,
              idempotency_key=view.request.headers.get("Idempotency-Key", ""), turn_field_prefix="message.")
    return run_admit(ask)


class ChatListView(TenantScoped, APIView):
    @extend_schema(operation_id="chats_list", summary="List your chats, newest first", tags=TAGS,
                   parameters=LIST_PARAMETERS, responses={200: s.ChatPage, **errors(400, *READ_ERRORS, rules=(
                       "`before` whose date is not in the calendar (February 30th)."))})
    def get(self, request):
        chats = chats_for(tenant=self.tenant, user=request.user)
        listed = request.query_params.get("listed")
        if listed is not None:
            if listed not in ("true", "false"):
                raise InvalidInput("listed must be true or false", field="listed")
            chats = chats.filter(listed=listed == "true")
        chats = _flag_filter(request, _flag_filter(request, chats, "archived", "archived_at"), "pinned", "pinned_at")
        chats, keyset = _keyset(request, chats)
        page = paginate(request, chats, lambda rows: s.ChatSerializer(rows, many=True).data)
        if keyset:  # the next page starts after this page's last chat
            last = page["results"][-1] if page["results"] else None
            url = remove_query_param(page["next"], "offset") if page["next"] and last else None
            page.update(next=url and replace_query_param(url, "before", f"{last['updated_at']},{last['id']}"),
                        previous=None)
        return Response(page)

    @extend_schema(operation_id="chats_create",
                   summary="Start a chat with a model, and optionally send its first message", tags=TAGS,
                   description="With `message`, the chat and its first message are one request and one "
                               "transaction: the answer (201) is the chat with the `run`, `user_message` and "
                               "`assistant_message` that POST .../messages/ returns, and a refused message "
                               "(errors name `message.<field>`) writes nothing, not even the chat. Send an "
                               "`Idempotency-Key` header with a message to make retries safe: a repeat returns "
                               "the first call's chat and run.",
                   request=s.ChatCreateWithSettings, parameters=[IDEMPOTENCY],
                   examples=[OpenApiExample("New chat", request_only=True, value={
                       "model": "flagship", "title": "Loops", "system_prompt": "Answer briefly.",
                       "temperature": 0.3, "max_tokens": 400}),
                             OpenApiExample("New chat with its first message", request_only=True, value={
                                 "model": "flagship", "message": {"content": "What does a for loop do?"}})],
                   responses={201: s.ChatStartedResponse, **STREAMED, **run_errors(
                       MODEL_RULE.replace("`model`", "`model` or `message.model`"),
                       MAX_TOKENS_RULE.replace("`max_tokens`", "`max_tokens` or `message.max_tokens`"),
                       CONTENT_RULE.replace("`content`", "`message.content`"),
                       "`stream` without `message` (it streams the first message's reply)")})
    def post(self, request):
        data = self.body()
        if "message" in data:
            stream = wants_stream(data)  # checked before anything is written
            admitted = _start(self, data)
            answer = {**s.ChatSerializer(admitted.chat).data, **posted(admitted)}
            if stream:
                return streamed(request, admitted.run, answer)
            return Response(answer, status=status.HTTP_201_CREATED)
        if wants_stream(data):
            raise InvalidInput("stream streams the reply to the chat's first message: send it as `message`",
                               field="stream")
        check_key(request.headers.get("Idempotency-Key"))  # as with a message, though a chat alone is not replayed
        chat = chat_create(tenant=self.tenant, owner=request.user, model=data.get("model"), title=data.get("title"),
                           **_settings(data))
        return Response(s.ChatSerializer(chat).data, status=status.HTTP_201_CREATED)


class ChatDetailView(TenantScoped, APIView):
    @extend_schema(operation_id="chats_retrieve",
                   summary="One chat", tags=TAGS, responses={200: s.ChatSerializer, **errors(*READ_ERRORS)})
    def get(self, request, chat_id: int):
        return Response(s.ChatSerializer(chat_get(tenant=self.tenant, user=request.user, chat_id=chat_id)).data)

    @extend_schema(operation_id="chats_update",
                   summary="Rename a chat, switch its model, change its settings, pin or archive it", tags=TAGS,
                   description="Settings (system_prompt, temperature, max_tokens) apply to the chat's next runs; "
                               "null clears one. `pinned` and `archived` (true or false) file the chat without "
                               "changing its `updated_at`. Fields left out stay as they are.",
                   request=s.ChatUpdateRequest, responses={200: s.ChatSerializer, **errors(
                       *WRITE_ERRORS, rules=f"{MODEL_RULE}; {MAX_TOKENS_RULE} (the new model's, when both change).")})
    def patch(self, request, chat_id: int):
        data = self.body()
        for name in NOT_NULL:
            if name in data and data[name] is None:  # null clears a setting; these have no "unset"
                raise InvalidInput(f"{name} cannot be null: leave it out to keep it as it is", field=name)
        chat = chat_get(tenant=self.tenant, user=request.user, chat_id=chat_id)
        filing = {name: data[name] for name in ("pinned", "archived") if name in data}
        with transaction.atomic():  # a field refused changes nothing
            if filing:
                chat = chat_file(chat=chat, **filing)
            if not filing or set(data) - set(filing):
                chat = chat_update(chat=chat, title=data.get("title"), model=data.get("model"), **_settings(data))
        return Response(s.ChatSerializer(chat).data)

    @extend_schema(operation_id="chats_delete", summary="Delete a chat and its messages", tags=TAGS,
                   description="Refused with 409 while a reply is being generated: cancel the run first.",
                   responses={204: None, **errors(409, *READ_ERRORS)})
    def delete(self, request, chat_id: int):
        chat_delete(chat=chat_get(tenant=self.tenant, user=request.user, chat_id=chat_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ChatSearchView(TenantScoped, APIView):
    @extend_schema(operation_id="chats_search", summary="Search your chats' titles and messages", tags=TAGS,
                   description="Full-text search (English stemming; the last word also matches as a prefix) "
                               "over the titles and every message of the chats the web chat list shows. "
                               "Newest first, at most `limit` (default 20, at most 50).",
                   parameters=[OpenApiParameter("q", {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS,
                                                      "pattern": r"\w"}, required=True,
                                                description="The words to find (at least one letter or digit)."),
                               OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": 50},
                                                description="1 to 50 (default 20).")],
                   responses={200: s.ChatSearchResponse, **errors(400, 401, 503)})
    def get(self, request):
        raw = request.query_params.get("limit", "20")
        if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= 50:
            raise InvalidInput("limit must be an integer from 1 to 50", field="limit")
        found = chat_search(tenant=self.tenant, user=request.user, q=request.query_params.get("q"), limit=int(raw))
        return Response({"results": s.ChatSearchResult(found, many=True).data})


def _download(body: str, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


class ChatExportMarkdownView(TenantScoped, APIView):
    @extend_schema(operation_id="chats_export_markdown", summary="Download a chat as Markdown", tags=TAGS,
                   description="The chosen path of the conversation, as a Markdown document.",
                   responses={(200, "text/markdown"): OpenApiResponse(OpenApiTypes.STR), **errors(*READ_ERRORS)})
    def get(self, request, chat_id: int):
        chat = chat_get(tenant=self.tenant, user=request.user, chat_id=chat_id)
        return _download(export.as_markdown(chat=chat), "text/markdown; charset=utf-8", export.filename(chat, "md"))


class ChatExportJsonView(TenantScoped, APIView):
    @extend_schema(operation_id="chats_export_json", summary="Download a chat as JSON", tags=TAGS,
                   description="The chat, its settings and every message of every branch (each with its "
                               "`parent`), with `path`: the ids of the chosen path, oldest first.",
                   responses={(200, "application/json"): OpenApiResponse(OpenApiTypes.OBJECT),
                              **errors(*READ_ERRORS)})
    def get(self, request, chat_id: int):
        chat = chat_get(tenant=self.tenant, user=request.user, chat_id=chat_id)
        return _download(export.as_json(chat=chat), "application/json", export.filename(chat, "json"))

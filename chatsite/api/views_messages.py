"""A chat's messages: the chosen path, sending, and the actions on one message
(regenerate, edit, continue, choose a version)."""
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (OpenApiExample, OpenApiParameter, OpenApiResponse, PolymorphicProxySerializer,
                                   extend_schema)
from rest_framework import status
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param
from rest_framework.views import APIView

from chatsite.api import serializers as s
from chatsite.api.mixins import TenantScoped
from chatsite.api.openapi import READ_ERRORS, WRITE_ERRORS, errors
from chatsite.api.serializers_queue import QueuedResponse
from chatsite.api.views_queue import queued_data
from chatsite.api.pagination import DEFAULT_LIMIT, MAX_LIMIT, MAX_OFFSET, PAGE_PARAMETERS
from chatsite.api.streamed import streamed, wants_stream
from chatsite.chats.selectors import chat_get, message_get, path_page, versions_of
from chatsite.runs.services.chat_edits import message_select
from chatsite.errors import InvalidInput
from chatsite.runs.admission import Admitted, Ask, Caller, Continue, InChat, Regenerate, Send, run_admit
from chatsite.runs.models import GenerationRun
from chatsite.runs.services.queued.add import message_send_or_queue
from chatsite.tenancy.credentials import KeyRead, request_credential

TAGS = ["chats"]
# What a well-formed request may still be refused for (chatsite.api.openapi.errors' `rules`).
MODEL_RULE = ("`model` that is not one of your models (`model_not_found`; GET /api/models/ lists them) or is "
              "disabled (`model_disabled`)")
MAX_TOKENS_RULE = "`max_tokens` over the model's `max_output_tokens`"
CONTENT_RULE = ("`content` that, with the chat's system prompt, does not fit the model's context "
                "(`context_length_exceeded`)")


def run_errors(*rules: str) -> dict:
    """The errors of a request that starts a run."""
    return errors(*WRITE_ERRORS, 409, 429, 503, rules="; ".join(rules) + ".")


# With "stream": true (chatsite.api.streamed).
STREAMED = {(200, "text/event-stream"): OpenApiResponse(OpenApiTypes.STR, description=(
    "With `\"stream\": true`: `event: run` (data: the JSON answered otherwise), then the run's events as GET "
    "`run.events_url` sends them: `token` events with ids, `done` or `error` last. A client that drops resumes "
    "with GET `events_url` and `Last-Event-ID`."))}
IDEMPOTENCY = OpenApiParameter("Idempotency-Key", {"type": "string", "maxLength": 200}, OpenApiParameter.HEADER,
                               description="Any unique string per logical request, e.g. a UUID.")
MAX_MESSAGE_ID = 2**62
PATH_PARAMETERS = PAGE_PARAMETERS + [
    OpenApiParameter("before", {"type": "integer", "minimum": 0, "maximum": MAX_MESSAGE_ID},
                     description="The messages just before this one on the path (older: load on scroll)."),
    OpenApiParameter("after", {"type": "integer", "minimum": 0, "maximum": MAX_MESSAGE_ID},
                     description="The messages just after this one on the chosen path."),
]



def _tier(data: dict) -> str:
    """The run's scheduling tier; the old name `priority` is refused by name."""
    if "priority" in data:
        raise InvalidInput("priority is now called tier: send \"tier\": \"interactive\" or \"batch\"",
                           field="priority")
    return data.get("tier", "interactive")

def _int(request, name: str, default, hi: int):
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()) or int(raw) > hi or (name == "limit" and int(raw) < 1):
        raise InvalidInput(f"{name} must be an integer from {1 if name == 'limit' else 0} to {hi}", field=name)
    return int(raw)


def _page_links(request, page, offset, limit) -> tuple[str | None, str | None]:
    url = request.build_absolute_uri()
    msgs = page.messages
    if offset is not None:
        url = replace_query_param(url, "limit", limit)
        nxt = replace_query_param(url, "offset", offset + limit) if offset + limit < page.count else None
        prev = None if offset <= 0 else (remove_query_param(url, "offset") if offset <= limit
                                         else replace_query_param(url, "offset", offset - limit))
        return nxt, prev
    url = remove_query_param(remove_query_param(url, "before"), "after")
    nxt = replace_query_param(url, "after", msgs[-1].pk) if msgs and msgs[-1].depth < page.count - 1 else None
    prev = replace_query_param(url, "before", msgs[0].pk) if msgs and msgs[0].depth > 0 else None
    return nxt, prev


def posted(admitted: Admitted) -> dict:
    """What a request that started a run answers: the run and the turn's two messages,
    with their versions (read, unless admission already knew them: a message sent after
    a path end with nothing after it has none but itself, nor has its reply)."""
    run = admitted.run
    msgs = [run.user_message, run.assistant_message]
    versions = admitted.versions or versions_of(chat=admitted.chat, messages=msgs)
    return {"run": s.RunSerializer(run).data,
            "user_message": s.MessageSerializer(msgs[0], context={"versions": versions}).data,
            "assistant_message": s.MessageSerializer(msgs[1], context={"versions": versions}).data}


def _posted(request, admitted: Admitted, stream: bool):
    """202 with the run and its messages; with `"stream": true`, 200 streaming them and the reply."""
    answer = posted(admitted)
    if stream:
        return streamed(request, admitted.run, answer)
    return Response(answer, status=status.HTTP_202_ACCEPTED)


def _sampling(data: dict, *names) -> dict:
    return {name: data.get(name) for name in names}


def caller(view) -> Caller:
    """The request's credential owner, in the tenant it acts for (with the limits a key's read brought)."""
    auth = view.request.auth
    return Caller(view.tenant, view.request.user, limits=auth.limits if isinstance(auth, KeyRead) else None,
                  credential=request_credential(view.request))


def turn_ask(view, data: dict, where, turn, *sampling_names) -> Ask:
    """The door's Ask for a REST turn: its tier, model, sampling and Idempotency-Key."""
    return Ask(caller=caller(view), where=where, turn=turn, source=GenerationRun.Source.API, tier=_tier(data),
               model=data.get("model"), sampling=_sampling(data, *sampling_names),
               idempotency_key=view.request.headers.get("Idempotency-Key", ""))


SEND_SAMPLING = ("max_tokens", "temperature", "top_p", "stop", "seed", "ignore_eos")
SENT_OR_QUEUED = PolymorphicProxySerializer(
    component_name="MessageSentOrQueued", serializers=[s.MessagePostedResponse, QueuedResponse],
    resource_type_field_name=None)


def _queue(data: dict) -> bool:
    queue = data.get("queue", False)
    if not isinstance(queue, bool):
        raise InvalidInput("queue must be true (wait for the reply being written) or false", field="queue")
    return queue


class MessageListView(TenantScoped, APIView):
    @extend_schema(operation_id="messages_list", summary="The chat's chosen path of messages, oldest first",
                   tags=TAGS, parameters=PATH_PARAMETERS,
                   description="Only the chosen versions: each message's `versions` lists its siblings "
                               "(POST .../select to choose another). Page by `offset`, or by `before`/`after` "
                               "a message (the `previous`/`next` links then page the same way).",
                   responses={200: s.MessagePage, **errors(400, *READ_ERRORS, rules=(
                       "`before` or `after` a message that is not on the chat's chosen path."))})
    def get(self, request, chat_id: int):
        chat = chat_get(tenant=self.tenant, user=request.user, chat_id=chat_id)
        limit = _int(request, "limit", DEFAULT_LIMIT, MAX_LIMIT)
        before, after = _int(request, "before", None, MAX_MESSAGE_ID), _int(request, "after", None, MAX_MESSAGE_ID)
        offset = _int(request, "offset", 0 if before is None and after is None else None, MAX_OFFSET)
        page = path_page(chat=chat, limit=limit, before=before, after=after, offset=offset)
        nxt, prev = _page_links(request, page, offset, limit)
        msgs = page.messages
        return Response({"count": page.count, "next": nxt, "previous": prev, "results": s.MessageSerializer(
            msgs, many=True, context={"versions": versions_of(chat=chat, messages=msgs)}).data})

    @extend_schema(
        operation_id="messages_create", summary="Send a message; the reply is generated by a run", tags=TAGS,
        description="Returns 202 at once with the user's message, the (empty) assistant message and the run. "
                    "The message follows the chat's chosen path. "
                    "Read the reply from `run.events_url` (Server-Sent Events), or poll `GET /api/runs/{id}/`. "
                    "`model` answers this one message with another model; the chat keeps its own. Sampling left "
                    "out comes from the chat's settings, then the model's defaults. "
                    "Send an `Idempotency-Key` header to make retries safe: a repeat returns the first run "
                    "(202) instead of creating another. One reply at a time per chat: 409 while a reply is "
                    "being written, unless `\"queue\": true`, which queues the message instead (202 with "
                    "`queued_message` and its `place`; with `stream` too, the same JSON): it starts when the "
                    "replies before it end, in order (GET .../queue/ lists the waiting ones). A message sent "
                    "while messages wait in the chat's queue joins them at the end, queue flag or not (the same "
                    "202 with `queued_message`): none overtakes the queue. "
                    "A refused message writes nothing.",
        request=s.MessageCreateRequest,
        examples=[OpenApiExample("A question", request_only=True, value={
            "content": "What does a for loop do?", "max_tokens": 16, "temperature": 0.7, "seed": 1})],
        parameters=[IDEMPOTENCY], responses={202: SENT_OR_QUEUED, **STREAMED, **run_errors(
            MODEL_RULE, MAX_TOKENS_RULE, CONTENT_RULE, "`queue` true while 20 messages wait in the chat already")},
    )
    def post(self, request, chat_id: int):
        data = self.body()
        stream = wants_stream(data)  # checked before anything is written
        ask = turn_ask(self, data, InChat(chat_id), Send(data.get("content")), *SEND_SAMPLING)
        sent = message_send_or_queue(ask=ask, queue=_queue(data))
        if isinstance(sent, Admitted):
            return _posted(request, sent, stream)
        return Response({"queued_message": queued_data(sent)}, status=status.HTTP_202_ACCEPTED)


class _MessageAction(TenantScoped, APIView):
    def target(self, chat_id, message_id):
        chat = chat_get(tenant=self.tenant, user=self.request.user, chat_id=chat_id)
        return chat, message_get(chat=chat, message_id=message_id)


class RegenerateView(_MessageAction):

    @extend_schema(operation_id="messages_regenerate", summary="Regenerate a reply as a new version", tags=TAGS,
                   description="A new reply to the same question, beside the old one (both stay: see `versions`); "
                               "the chosen path follows the new one. 202 with the run, as sending does.",
                   request=s.RegenerateRequest, parameters=[IDEMPOTENCY],
                   responses={202: s.MessagePostedResponse, **STREAMED, **run_errors(
                       MODEL_RULE, MAX_TOKENS_RULE, "`message` that is not a reply (only an assistant message is "
                                                    "regenerated)")})
    def post(self, request, chat_id: int, message_id: int):
        data = self.body()
        stream = wants_stream(data)  # checked before anything is written
        ask = turn_ask(self, data, InChat(chat_id), Regenerate(message_id), "max_tokens", "temperature", "top_p",
                       "seed")
        return _posted(request, run_admit(ask), stream)


class EditView(_MessageAction):

    @extend_schema(operation_id="messages_edit", summary="Edit a message you sent and send it again", tags=TAGS,
                   description="A new version of your message (the old one and its replies stay reachable: "
                               "see `versions`) and a new reply to it; the chosen path follows the new one.",
                   request=s.MessageEditRequest, parameters=[IDEMPOTENCY],
                   responses={202: s.MessagePostedResponse, **STREAMED, **run_errors(
                       MODEL_RULE, MAX_TOKENS_RULE, CONTENT_RULE, "`message` that is not one you sent (only a user "
                                                                  "message is edited)")})
    def post(self, request, chat_id: int, message_id: int):
        data = self.body()
        stream = wants_stream(data)  # checked before anything is written
        ask = turn_ask(self, data, InChat(chat_id), Send(data.get("content"), edit_of=message_id), *SEND_SAMPLING)
        return _posted(request, run_admit(ask), stream)


class ContinueView(_MessageAction):
    @extend_schema(operation_id="messages_continue", summary="Continue a reply that stopped at the length limit",
                   tags=TAGS, description="A new run carries on the reply (finish_reason `length`) with the same "
                   "model and sampling. Its `assistant_message` starts with the reply's text and replaces it; its "
                   "events stream the new text only. 400 for any other reply.",
                   request=s.ContinueRequest, parameters=[IDEMPOTENCY],
                   responses={202: s.MessagePostedResponse, **STREAMED, **run_errors(
                       MAX_TOKENS_RULE, "`message` that is not a reply stopped at the length limit, was continued "
                                        "already, or is not the last of its conversation")})
    def post(self, request, chat_id: int, message_id: int):
        data = self.body()
        stream = wants_stream(data)  # checked before anything is written
        ask = turn_ask(self, {**data, "model": None}, InChat(chat_id), Continue(message_id), "max_tokens")
        return _posted(request, run_admit(ask), stream)


class SelectView(_MessageAction):
    @extend_schema(operation_id="messages_select", summary="Show another version of a message", tags=TAGS,
                   description="The chosen path goes through this message and on down its newest branch; the "
                               "next message (and the model) follows it. 409 while a reply is being generated.",
                   request=None, responses={200: s.PathResponse, **errors(400, 409, *READ_ERRORS)})
    def post(self, request, chat_id: int, message_id: int):
        chat, message = self.target(chat_id, message_id)
        leaf = message_select(chat=chat, message=message)
        page = path_page(chat=chat, limit=MAX_LIMIT, after=message.parent_id) if message.parent_id else \
            path_page(chat=chat, limit=MAX_LIMIT, offset=0)
        msgs = page.messages
        return Response({"leaf": leaf, "results": s.MessageSerializer(
            msgs, many=True, context={"versions": versions_of(chat=chat, messages=msgs)}).data})

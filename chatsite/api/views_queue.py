"""A chat's queued messages: sent while a reply was being written, they wait their turn
(chatsite.runs.services.queued). List, edit, withdraw, send now; retry one refused when its
turn came."""
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from chatsite.api.mixins import TenantScoped
from chatsite.api.openapi import READ_ERRORS, WRITE_ERRORS, errors
from chatsite.api.serializers_queue import QueuedEditRequest, QueuedMessageSerializer, QueueList
from chatsite.chats.models import QueuedMessage
from chatsite.chats.selectors import chat_get, queue_of, queued_places
from chatsite.runs.services.queued.edit import queued_edit, queued_retry, queued_withdraw
from chatsite.runs.services.queued.send_now import queued_send_now
from chatsite.tenancy.credentials import request_credential

TAGS = ["chats"]
LEFT = "409: the message has started or left the queue already."
REFUSED = ("A message refused when its turn came (state `refused`, `error` says why: a token budget used up, say) "
           "stays listed until retried or withdrawn.")


def queued_data(item: QueuedMessage) -> dict:
    """The queued message with its place in its chat's queue."""
    places = queued_places(chat=item.chat) if item.state == QueuedMessage.State.QUEUED else {}
    return QueuedMessageSerializer(item, context={"places": places}).data


class QueueListView(TenantScoped, APIView):
    @extend_schema(operation_id="queue_list", summary="The messages waiting in the chat's queue", tags=TAGS,
                   description="Messages sent with `\"queue\": true` while a reply was being written (or sent "
                               "while others waited), the next first. Each starts when the reply before it ends "
                               "(completed, stopped or failed). Listed before them: " + REFUSED,
                   responses={200: QueueList, **errors(*READ_ERRORS)})
    def get(self, request, chat_id: int):
        chat = chat_get(tenant=self.tenant, user=request.user, chat_id=chat_id)
        items = queue_of(chat=chat)
        waiting = [item for item in items if item.state == QueuedMessage.State.QUEUED]
        places = {item.pk: place for place, item in enumerate(waiting, 1)}
        return Response({"results": QueuedMessageSerializer(items, many=True, context={"places": places}).data})


class QueuedDetailView(TenantScoped, APIView):
    @extend_schema(operation_id="queue_edit", summary="Edit a queued message before it starts", tags=TAGS,
                   description="A refused message can be edited too (it stays refused until retried). " + LEFT,
                   request=QueuedEditRequest,
                   responses={200: QueuedMessageSerializer, **errors(*WRITE_ERRORS, 409)})
    def patch(self, request, chat_id: int, queued_id: int):
        item = queued_edit(tenant=self.tenant, user=request.user, chat_id=chat_id, queued_id=queued_id,
                           content=self.body().get("content"))
        return Response(queued_data(item))

    @extend_schema(operation_id="queue_withdraw", summary="Withdraw a queued message before it starts",
                   tags=TAGS, description="Or take a refused one off the list. " + LEFT,
                   responses={204: None, **errors(*READ_ERRORS, 409)})
    def delete(self, request, chat_id: int, queued_id: int):
        queued_withdraw(tenant=self.tenant, user=request.user, chat_id=chat_id, queued_id=queued_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class QueuedSendNowView(TenantScoped, APIView):
    @extend_schema(operation_id="queue_send_now", summary="Send a queued message now", tags=TAGS, request=None,
                   description="Steers: the reply being written stops at its next token (its text so far is kept "
                               "as the reply, which ends with finish_reason `interrupted`), and this message runs "
                               "next, with that reply in its context: sent by this request's credential from now "
                               "on (as a retry is). With no reply being written it starts at once. 202 with the "
                               "message (`state` started and `run` set once it started). " + LEFT,
                   responses={202: QueuedMessageSerializer, **errors(*READ_ERRORS, 409)})
    def post(self, request, chat_id: int, queued_id: int):
        item = queued_send_now(tenant=self.tenant, user=request.user, chat_id=chat_id, queued_id=queued_id,
                               credential=request_credential(request))
        return Response(queued_data(item), status=status.HTTP_202_ACCEPTED)


class QueuedRetryView(TenantScoped, APIView):
    @extend_schema(operation_id="queue_retry", summary="Queue a refused message again", tags=TAGS, request=None,
                   description="A message refused when its turn came goes back in the queue, behind the messages "
                               "waiting (it starts at once when nothing is being written or waiting), and is "
                               "checked again when its turn comes. 202 with the message. 409 unless it was refused.",
                   responses={202: QueuedMessageSerializer, **errors(*WRITE_ERRORS, 409, rules=(
                       "a retry while 20 messages wait in the chat already (`queue`)."))})
    def post(self, request, chat_id: int, queued_id: int):
        item = queued_retry(tenant=self.tenant, user=request.user, chat_id=chat_id, queued_id=queued_id,
                            credential=request_credential(request))
        return Response(queued_data(item), status=status.HTTP_202_ACCEPTED)

"""Share links: the owner makes, lists and revokes a chat's links; anyone holding one reads
the chat (GET /api/shared/{token}, no account)."""
from dataclasses import asdict

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from chatsite.api import serializers_shares as s
from chatsite.api.mixins import TenantScoped
from chatsite.api.openapi import READ_ERRORS, errors
from chatsite.chats.selectors import chat_get
from chatsite.chats.sharing import share_by_token, share_create, share_get, share_revoke, shares_for
from chatsite.runs.shared_view import shared_chat

TAGS = ["sharing"]


class ShareListView(TenantScoped, APIView):
    def _chat(self, request, chat_id):
        return chat_get(tenant=self.tenant, user=request.user, chat_id=chat_id)

    @extend_schema(operation_id="shares_list", summary="List a chat's share links (never their tokens)", tags=TAGS,
                   description="The chat's links, live and revoked, newest first. Only the chat's owner sees them.",
                   responses={200: s.ShareSerializer(many=True), **errors(*READ_ERRORS)})
    def get(self, request, chat_id: int):
        return Response(s.ShareSerializer(shares_for(chat=self._chat(request, chat_id)), many=True).data)

    @extend_schema(operation_id="shares_create", summary="Share a chat by a link (its token is shown once)",
                   tags=TAGS, request=None,
                   description="Anyone holding the link reads the chat without an account: its chosen path as it "
                               "is when they open it, and a reply in progress live. No other chat, version or "
                               "setting of yours. At most 20 live links a chat (400).",
                   responses={201: s.ShareCreatedSerializer, **errors(400, *READ_ERRORS)})
    def post(self, request, chat_id: int):
        made = share_create(chat=self._chat(request, chat_id))
        return Response({**s.ShareSerializer(made.share).data, "token": made.token,
                         "url": request.build_absolute_uri(f"/s/{made.token}"),
                         "api_url": request.build_absolute_uri(f"/api/shared/{made.token}")},
                        status=status.HTTP_201_CREATED)


class ShareDetailView(TenantScoped, APIView):
    @extend_schema(operation_id="shares_revoke", summary="Revoke a share link", tags=TAGS,
                   description="The link stops working at once (its page and API read answer 404), and viewers "
                               "following a reply through it are cut off within about a second. It stays listed "
                               "as revoked. Idempotent.",
                   responses={200: s.ShareSerializer, **errors(*READ_ERRORS)})
    def delete(self, request, chat_id: int, share_id: int):
        chat = chat_get(tenant=self.tenant, user=request.user, chat_id=chat_id)
        return Response(s.ShareSerializer(share_revoke(share=share_get(chat=chat, share_id=share_id))).data)


class SharedChatView(APIView):
    authentication_classes: list = []  # the link is the credential: no session, no key, no CSRF
    permission_classes = [AllowAny]

    @extend_schema(operation_id="shared_retrieve", summary="Read a shared chat (no account needed)", tags=TAGS,
                   auth=[], description="The chat a share link opens: its title, its model and its chosen path "
                   "now, oldest first. A reply in progress has its text so far and an `events_url` to follow "
                   "it live (Server-Sent Events, as GET /api/runs/{id}/events). An unknown or revoked link is 404.",
                   responses={200: s.SharedChatSerializer, **errors(404, 503)})
    def get(self, request, token: str):
        response = Response(asdict(shared_chat(share=share_by_token(token))))
        response["Cache-Control"] = "no-store"
        response["X-Robots-Tag"] = "noindex, nofollow"
        return response

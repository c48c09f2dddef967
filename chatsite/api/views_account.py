"""The caller's own API keys, and the tenant's usage this month."""
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from chatsite.api import serializers_account as s
from chatsite.api.mixins import TenantScoped
from chatsite.api.openapi import READ_ERRORS, WRITE_ERRORS, errors
from chatsite.tenancy.selectors import api_key_get, api_keys_for
from chatsite.tenancy.services import api_key_create, api_key_revoke
from chatsite.usage.selectors import usage_this_month

KEYS = ["keys"]


class ApiKeyListView(TenantScoped, APIView):
    @extend_schema(operation_id="keys_list", summary="List your API keys (never their secrets)", tags=KEYS,
                   description="Your own keys in this tenant, newest first, live and revoked.",
                   responses={200: s.ApiKeySerializer(many=True), **errors(*READ_ERRORS)})
    def get(self, request):
        return Response(s.ApiKeySerializer(api_keys_for(tenant=self.tenant, user=request.user), many=True).data)

    @extend_schema(operation_id="keys_create", summary="Create an API key (its secret is shown once)", tags=KEYS,
                   request=s.ApiKeyCreateRequest,
                   examples=[OpenApiExample("A key", value={"name": "nightly batch"}, request_only=True)],
                   description="The response's `secret` is the whole key; only a hash is kept, so it cannot "
                               "be shown again. Use it as `Authorization: Bearer KEY`.",
                   responses={201: s.ApiKeyCreatedSerializer, **errors(409, *WRITE_ERRORS)})
    def post(self, request):
        key, secret = api_key_create(user=request.user, tenant=self.tenant, name=self.body().get("name"))
        return Response({**s.ApiKeySerializer(key).data, "secret": secret}, status=status.HTTP_201_CREATED)


class ApiKeyDetailView(TenantScoped, APIView):
    @extend_schema(operation_id="keys_revoke", summary="Revoke one of your API keys", tags=KEYS,
                   description="The key stops working at once and stays listed as revoked. Idempotent.",
                   responses={200: s.ApiKeySerializer, **errors(*READ_ERRORS)})
    def delete(self, request, key_id: int):
        key = api_key_revoke(key=api_key_get(tenant=self.tenant, user=request.user, key_id=key_id))
        return Response(s.ApiKeySerializer(key).data)


class UsageView(TenantScoped, APIView):
    @extend_schema(operation_id="usage_retrieve",
                   summary="Your tenant's token usage this month, per model", tags=["usage"],
                   description="Prompt + completion tokens of all the tenant's runs (every member, key and "
                               "source: web, REST, OpenAI) since the start of the calendar month, UTC.",
                   responses={200: s.UsageSerializer, **errors(*READ_ERRORS)})
    def get(self, request):
        return Response(s.UsageSerializer(usage_this_month(tenant=self.tenant)).data)

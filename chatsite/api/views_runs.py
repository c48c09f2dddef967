"""Runs and the models a tenant may use."""
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from chatsite.api import serializers as s
from chatsite.api.mixins import TenantScoped
from chatsite.api.openapi import READ_ERRORS, errors
from chatsite.pools.health import live_workers, pool_is_up, pool_workers
from chatsite.pools.selectors import pools_for_tenant
from chatsite.runs.selectors import run_get
from chatsite.runs.services import run_cancel


class RunDetailView(TenantScoped, APIView):
    @extend_schema(operation_id="runs_retrieve", summary="A run's status, timings and token counts", tags=["runs"],
                   responses={200: s.RunSerializer, **errors(*READ_ERRORS)})
    def get(self, request, run_id: int):
        return Response(s.RunSerializer(run_get(tenant=self.tenant, user=request.user, run_id=run_id)).data)


class RunCancelView(TenantScoped, APIView):
    @extend_schema(operation_id="runs_cancel", summary="Stop a run", tags=["runs"], request=None,
                   description="The engine aborts the request at its next step; the stream ends with "
                               "finish_reason 'cancelled' and the partial reply is kept. Idempotent: "
                               "cancelling a finished run returns it unchanged.",
                   responses={200: s.RunSerializer, **errors(*READ_ERRORS)})
    def post(self, request, run_id: int):
        run = run_cancel(run=run_get(tenant=self.tenant, user=request.user, run_id=run_id))
        return Response(s.RunSerializer(run).data)


class ModelListView(TenantScoped, APIView):
    @extend_schema(operation_id="models_list",
                   summary="The models your tenant may use, and whether each is up", tags=["models"],
                   responses={200: s.ModelSerializer(many=True), **errors(*READ_ERRORS)})
    def get(self, request):
        workers = live_workers()
        data = [{"id": p.name, "display_name": p.display_name, "context_length": p.context_length,
                 "max_output_tokens": p.max_output_tokens, "up": pool_is_up(p.name, workers),
                 "workers": len(pool_workers(p.name, workers))} for p in pools_for_tenant(self.tenant)]
        return Response(data)

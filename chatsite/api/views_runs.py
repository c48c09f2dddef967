"""Runs and models."""
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from chatsite.api import serializers as s
from chatsite.api.mixins import TenantScoped
from chatsite.pools.health import live_workers, pool_is_up, pool_workers
from chatsite.pools.selectors import pools_for_tenant
from chatsite.runs.selectors import run_get
from chatsite.runs.services import run_cancel

ERRORS = {401: s.ErrorResponse, 404: s.ErrorResponse}


class RunDetailView(TenantScoped, APIView):
    @extend_schema(summary="A run's status, timings and token counts", responses={200: s.RunSerializer, **ERRORS})
    def get(self, request, run_id: int):
        return Response(s.RunSerializer(run_get(tenant=self.tenant, user=request.user, run_id=run_id)).data)


class RunCancelView(TenantScoped, APIView):
    @extend_schema(summary="Stop a run", request=None,
                   description="The engine aborts the request at its next step; the stream ends with "
                               "finish_reason 'cancelled' and the partial reply is kept. Idempotent.",
                   responses={200: s.RunSerializer, **ERRORS})
    def post(self, request, run_id: int):
        run = run_cancel(run=run_get(tenant=self.tenant, user=request.user, run_id=run_id))
        return Response(s.RunSerializer(run).data)


class ModelListView(TenantScoped, APIView):
    @extend_schema(summary="The models your tenant may use, and whether each is up",
                   responses={200: s.ModelSerializer(many=True), **ERRORS})
    def get(self, request):
        workers = live_workers()
        data = [{"id": p.name, "display_name": p.display_name, "context_length": p.context_length,
                 "max_output_tokens": p.max_output_tokens, "up": pool_is_up(p.name, workers),
                 "workers": len(pool_workers(p.name, workers))} for p in pools_for_tenant(self.tenant)]
        return Response(data)

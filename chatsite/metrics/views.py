from django.conf import settings
from django.http import HttpResponse

from chatsite.metrics.exposition import render


def metrics(request):
    """Prometheus scrape endpoint; when METRICS_TOKEN is set, it must be sent as a Bearer token."""
    token = settings.CHATSITE.get("METRICS_TOKEN")
    if token and request.headers.get("Authorization") != f"Bearer {token}":
        return HttpResponse("metrics need the scrape token\n", status=401, content_type="text/plain")
    return HttpResponse(render(), content_type="text/plain; version=0.0.4; charset=utf-8")

import hmac

from django.conf import settings
from django.http import HttpResponse

from chatsite.metrics.exposition import render


def metrics(request):
    """Prometheus scrape endpoint. When METRICS_TOKEN is set it must be sent as a Bearer
    token; under production settings (METRICS_REQUIRE_TOKEN) there is no scrape without one."""
    token = settings.CHATSITE.get("METRICS_TOKEN")
    if not token and settings.CHATSITE.get("METRICS_REQUIRE_TOKEN"):
        return HttpResponse("metrics are closed: set CHATSITE_METRICS_TOKEN and scrape with "
                            "'Authorization: Bearer TOKEN'\n", status=403, content_type="text/plain")
    if token and not hmac.compare_digest(request.headers.get("Authorization", "").encode(),
                                         f"Bearer {token}".encode()):
        return HttpResponse("metrics need the scrape token: 'Authorization: Bearer TOKEN'\n", status=401,
                            content_type="text/plain", headers={"WWW-Authenticate": 'Bearer realm="metrics"'})
    return HttpResponse(render(), content_type="text/plain; version=0.0.4; charset=utf-8")

"""ASGI entry point for daphne: Django views, plus the SSE consumer."""
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.urls import path, re_path  # noqa: E402

django_asgi_app = get_asgi_application()

from chatsite.runs.consumers import RunEventsConsumer  # noqa: E402

application = ProtocolTypeRouter({
    "http": URLRouter([
        path("api/runs/<int:run_id>/events", AuthMiddlewareStack(RunEventsConsumer.as_asgi())),
        path("api/runs/<int:run_id>/events/", AuthMiddlewareStack(RunEventsConsumer.as_asgi())),
        re_path(r"", django_asgi_app),
    ]),
})

"""ASGI entry point for daphne: Django views, plus the SSE consumer."""
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")

from channels.sessions import SessionMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.urls import path, re_path  # noqa: E402

django_asgi_app = get_asgi_application()

from chatsite.runs.consumers import RunEventsConsumer  # noqa: E402

# The session is loaded lazily: a request with a valid events token never reads it
# (chatsite/runs/access.py resolves the session's user only when it must).
events = SessionMiddlewareStack(RunEventsConsumer.as_asgi())

application = ProtocolTypeRouter({
    "http": URLRouter([
        path("api/runs/<int:run_id>/events", events),
        path("api/runs/<int:run_id>/events/", events),
        re_path(r"", django_asgi_app),
    ]),
})

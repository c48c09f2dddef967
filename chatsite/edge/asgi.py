"""ASGI entry point (daphne, or uvicorn: chatsite/edge/web_server.py): Django views, plus the
run events' SSE app, behind the body limit (chatsite/edge/body_limit.py)."""
import gc
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from chatsite.edge.handler import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()  # a sync view's request in one thread hop

from chatsite import redis_durability  # noqa: E402
from chatsite.edge.body_limit import BodyLimit  # noqa: E402
from chatsite.runs.events_app import run_events as events  # noqa: E402

if "daphne.server" in sys.modules:  # daphne loads its server before the application
    from chatsite.edge import daphne_server

    daphne_server.install()  # oversized bodies refused before Twisted stores them; tokens kept out of the access log
redis_durability.check_at_start("web")  # warns when the Redis holding run streams does not persist

# No session middleware around the events: a request with a valid events token never
# reads the session, and the others read it once (chatsite/runs/access.py).
application = BodyLimit(ProtocolTypeRouter({
    "http": URLRouter([
        path("api/runs/<int:run_id>/events", events),
        path("api/runs/<int:run_id>/events/", events),
        re_path(r"", django_asgi_app),
    ]),
}))

# Everything loaded so far (Django, the apps, DRF, the URLconf: hundreds of thousands of
# objects) lives as long as the process. Frozen, the collector's full passes skip it, and
# young collections run every 50,000 allocations instead of 700: the passes stalled
# every open stream at once (bench.floor, daphne, 400 clients: p99 182 -> 68 ms).
gc.freeze()
gc.set_threshold(50_000, 20, 20)

"""The REST API's turns on the async admission path, as /v1's are.

A sync DRF view is served in one thread hop with every middleware hook and its view in
it (chatsite.edge.handler): the request's whole work waits for a place in the web's
gate. Served as an async view, the middleware runs on the event loop (for an API
client's request, no hop at all: chatsite.edge.flat_middleware) and only the
view, with its response rendered, takes the one hop, so a burst of sends queues for
less. The view is DRF's as it is: its authentication, parsing, errors and schema."""
from asgiref.sync import sync_to_async
from django.views.decorators.csrf import csrf_exempt


def on_the_loop(view_class):
    """`view_class.as_view()` as an async view that runs it in one hop and renders its
    response there (a response still to render would take a hop of its own afterwards)."""
    sync_view = view_class.as_view()

    def rendered(request, *args, **kwargs):
        response = sync_view(request, *args, **kwargs)
        if hasattr(response, "render") and not response.is_rendered:
            response.render()
        return response

    async def view(request, *args, **kwargs):
        return await sync_to_async(rendered, thread_sensitive=True)(request, *args, **kwargs)

    view.cls, view.initkwargs = sync_view.cls, sync_view.initkwargs  # what the schema generator reads
    return csrf_exempt(view)  # as DRF's views are: its SessionAuthentication enforces CSRF itself

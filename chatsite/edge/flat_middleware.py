"""settings.MIDDLEWARE run flat, as two lists of hooks, for an async view's request
(chatsite.edge.handler): every process_request and process_view in one call before the
view, every process_response in one call after it, each call in one thread hop or, for
a request without a session cookie when every middleware is vetted (`inline_safe`), on
the event loop. Django's async path gave every hook a hop of its own.
"""
from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.core.handlers.exception import response_for_exception
from django.urls import get_resolver, set_urlconf
from django.utils.deprecation import MiddlewareMixin
from django.utils.log import log_response
from django.utils.module_loading import import_string


# Django's own middleware (as of 5.2, the version these were read in: a test fails on
# another) whose hooks read and write only the request and the response (headers,
# cookies) unless the request carries a session. Ours say so themselves (`inline_safe =
# True`). FlatMiddleware runs the hooks on the event loop for a request without a session
# cookie when every middleware settings.MIDDLEWARE loads is one of these (measured:
# bench.per_run --callgrind web, /v1, 11.1 M instructions a run without this, 9.0 with).
DJANGO_INLINE_SAFE = frozenset({
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
})


def inline_safe(mw) -> bool:
    """Whether a loaded middleware's hooks touch no database or file for a request without a session."""
    return getattr(mw, "inline_safe", False) or f"{type(mw).__module__}.{type(mw).__qualname__}" in DJANGO_INLINE_SAFE


def _unused(request):  # pragma: no cover - a flat middleware's get_response is never called
    raise RuntimeError("a flattened middleware called its get_response")


class FlatMiddleware:
    """settings.MIDDLEWARE as two lists of hooks, for an async view.

    Django nests the middleware: each layer's process_request, then the layers inside
    it, then its process_response; an exception in a layer becomes a response there
    (convert_exception_to_response) that the outer layers' process_response still see.
    Run flat, the same order and the same rules: `before` runs process_request layer by
    layer (a layer answering, or raising, ends the walk inward), then runs process_view
    on the view the handler resolved (again if a hook set request.urlconf); `after` runs process_response for the layers entered,
    innermost first."""

    def __init__(self):
        self.layers = []
        for path in settings.MIDDLEWARE:
            try:
                mw = import_string(path)(_unused)
            except MiddlewareNotUsed:
                continue
            if not _hooks_only(mw) or hasattr(mw, "process_template_response"):
                raise TypeError(f"middleware {path} is not hooks only")
            self.layers.append(mw)
        self.inline_safe = not settings.CSRF_USE_SESSIONS and all(inline_safe(mw) for mw in self.layers)
        self.view_hooks = [mw.process_view for mw in self.layers if hasattr(mw, "process_view")]
        self.exception_hooks = [mw.process_exception for mw in reversed(self.layers)
                                if hasattr(mw, "process_exception")]

    def inline_before(self, request) -> bool:
        """Whether `before` may run on the event loop: every middleware is one whose
        request hooks touch no database or file unless the request carries a session
        (Django's session, auth and messages middleware read the session lazily, and only
        through its cookie), and this request carries none. An API client's request,
        bearer-authenticated, saves a thread hop."""
        return self.inline_safe and settings.SESSION_COOKIE_NAME not in request.COOKIES

    def inline_after(self, request, response) -> bool:
        """Whether `after` may run on the event loop: as inline_before, and the view left
        nothing to save (no session written, no message added), no error to log and no
        template to render."""
        if not self.inline_before(request) or response.status_code >= 400 or _to_render(response):
            return False
        session = getattr(request, "session", None)
        if session is not None and (session.modified or settings.SESSION_SAVE_EVERY_REQUEST):
            return False
        messages = getattr(request, "_messages", None)
        return messages is None or not (messages.used or messages.added_new)

    def before(self, request, match):
        """(layers entered, the response if one answered before the view, the view match)."""
        for i, mw in enumerate(self.layers):
            hook = getattr(mw, "process_request", None)
            if hook is None:
                continue
            try:
                response = hook(request)
            except Exception as exc:
                return i, response_for_exception(request, exc), None
            if response is not None:
                return i + 1, response, None
        entered = len(self.layers)
        try:
            if hasattr(request, "urlconf"):  # a process_request chose another URLconf
                set_urlconf(request.urlconf)
                match = get_resolver(request.urlconf).resolve(request.path_info)
            request.resolver_match = match
            for hook in self.view_hooks:
                response = hook(request, match.func, match.args, match.kwargs)
                if response:
                    return entered, response, None
        except Exception as exc:
            return entered, response_for_exception(request, exc), None
        return entered, None, match

    def failed(self, request, exc):
        """The view raised: process_exception, innermost first, else Django's answer for it."""
        try:
            for hook in self.exception_hooks:
                response = hook(request, exc)
                if response:
                    return response
        except Exception as raised:
            exc = raised
        return response_for_exception(request, exc)

    def after(self, request, entered: int, response):
        if hasattr(response, "render") and callable(response.render):  # a TemplateResponse
            try:
                response = response.render()
            except Exception as exc:
                response = self.failed(request, exc)
        for mw in reversed(self.layers[:entered]):
            hook = getattr(mw, "process_response", None)
            if hook is None:
                continue
            try:
                response = hook(request, response)
            except Exception as exc:
                response = response_for_exception(request, exc)
        if response.status_code >= 400:
            log_response("%s: %s", response.reason_phrase, request.path, response=response, request=request)
        return response


def _to_render(response) -> bool:
    """A TemplateResponse not rendered yet (rendering may read a template or the database);
    a REST turn's response comes rendered (chatsite.api.async_path), its hooks inline."""
    return hasattr(response, "render") and not getattr(response, "is_rendered", True)


def _hooks_only(mw) -> bool:
    """A middleware whose whole behaviour is its hooks: Django's MiddlewareMixin, or a
    class of ours that says so (`hooks_only = True`)."""
    return isinstance(mw, MiddlewareMixin) or getattr(mw, "hooks_only", False)

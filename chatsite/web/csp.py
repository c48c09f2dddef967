"""A strict Content-Security-Policy for the HTML pages.

Every script, style, font and connection comes from this origin, and no inline
script may run: even if some text slipped past the Markdown renderer as HTML,
the browser would refuse to execute it. (The page data is a JSON <script> block,
which is not executed and so needs no exception.)"""
from functools import wraps

POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])


def with_csp(view):
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        response.headers.setdefault("Content-Security-Policy", POLICY)
        return response

    return wrapper

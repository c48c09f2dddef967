"""What every page's template may read: the signed-in person's theme."""
import logging

from django.db import DatabaseError
from django.utils.functional import lazy

from chatsite.tenancy.selectors import preferences_for

log = logging.getLogger(__name__)


def request_preferences(request):
    """The signed-in person's preferences, read once per request (the page and its template both want them)."""
    if not hasattr(request, "_preferences"):
        request._preferences = preferences_for(request.user)
    return request._preferences


def _theme(request) -> str:
    try:
        return request_preferences(request).theme
    except DatabaseError:  # an error page must still render: the system's theme then
        log.warning("could not read the theme", exc_info=True)
        return "system"


def preferences(request) -> dict:
    """`theme` ("system", "light" or "dark"), read only by a template that uses it (ours, not the admin's)."""
    return {"theme": lazy(_theme, str)(request)}

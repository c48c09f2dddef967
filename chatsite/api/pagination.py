"""Limit/offset pages with strict parameters: a bad `limit` or `offset` is a 400,
never a silent default or a database error."""
from drf_spectacular.utils import OpenApiParameter
from rest_framework.utils.urls import remove_query_param, replace_query_param

from chatsite.errors import InvalidInput

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
MAX_OFFSET = 10**9


def _int_param(request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or not lo <= value <= hi:
        raise InvalidInput(f"{name} must be an integer from {lo} to {hi}", field=name)
    return value


def paginate(request, queryset, serialize) -> dict:
    """One page of `queryset`: {count, next, previous, results}, where `serialize`
    turns the page's rows into the results list."""
    limit = _int_param(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    offset = _int_param(request, "offset", 0, 0, MAX_OFFSET)
    count = queryset.count()
    rows = list(queryset[offset:offset + limit])
    url = request.build_absolute_uri()
    url = replace_query_param(url, "limit", limit)
    nxt = replace_query_param(url, "offset", offset + limit) if offset + limit < count else None
    if offset <= 0:
        prev = None
    elif offset - limit <= 0:
        prev = remove_query_param(url, "offset")
    else:
        prev = replace_query_param(url, "offset", offset - limit)
    return {"count": count, "next": nxt, "previous": prev, "results": serialize(rows)}


PAGE_PARAMETERS = [
    OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                     description=f"Page size, 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT})."),
    OpenApiParameter("offset", {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET},
                     description="How many items to skip (default 0)."),
]

"""GET /s/{token}: a shared chat's read-only page, for anyone holding the link (no account).

The chat's chosen path as it is now, a reply in progress with its text so far, followed
live in the browser through the run's events (as the link: chatsite.runs.shared_view).
No composer, no chat list, no name but the chat's title; not indexed, and the link is not
sent on as a Referer. An unknown or revoked link is the product's own 404 page."""
from dataclasses import asdict

from django.shortcuts import render
from django.views.decorators.http import require_GET

from chatsite.chats.sharing import share_by_token
from chatsite.errors import NotFound
from chatsite.runs.shared_view import shared_chat
from chatsite.web.csp import with_csp
from chatsite.web.errors import not_found_page

PRIVATE_HEADERS = {"X-Robots-Tag": "noindex, nofollow", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


@require_GET
@with_csp
def shared_page(request, token: str):
    try:
        shared = shared_chat(share=share_by_token(token))
    except NotFound:
        response = not_found_page(request)
    else:
        page = {**asdict(shared), "api_url": f"/api/shared/{token}"}
        response = render(request, "web/shared.html", {"shared": shared, "page": page})
    for name, value in PRIVATE_HEADERS.items():
        response[name] = value
    return response

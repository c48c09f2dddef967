"""With DEBUG off (the default, `make run` included) every error is the product's own
page: a missing chat, a refusal, a failed CSRF check and a bug. None of them shows the
settings, the URL patterns, a traceback or Django's reason for a CSRF failure."""
import re
from contextlib import contextmanager

import httpx
import pytest
from django.test import Client

from tests.factories import PASSWORD, ChatFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

LEAKS = ["URLconf", "urlpatterns", "chatsite.urls", "Traceback", "DEBUG", "settings", "CSRF_FAILURE_VIEW",
         "Reason given", "Django", "SECRET_KEY", "technical"]


def _product_page(resp, status: int, heading: str) -> str:
    assert resp.status_code == status, (resp.status_code, resp.text[:300])
    assert resp.headers["content-type"].startswith("text/html")
    html = resp.text
    assert re.search(rf"<h1>{re.escape(heading)}</h1>", html), html[:2000]
    assert f"Error {status}" in html and 'href="/"' in html  # the product's look, and a way back
    assert "script-src 'self'" in resp.headers["Content-Security-Policy"]
    assert not [word for word in LEAKS if word in html], html
    return html


@contextmanager
def _signed_in(live_url, user):
    """An httpx client holding a signed-in session."""
    with httpx.Client(base_url=live_url, follow_redirects=False) as client:
        client.get("/login/")
        resp = client.post("/login/", data={"username": user.username, "password": PASSWORD,
                                            "csrfmiddlewaretoken": client.cookies["csrftoken"]},
                           headers={"Referer": live_url + "/login/"})
        assert resp.status_code == 302, resp.text[:300]
        yield client


def test_a_missing_and_someone_elses_chat_are_not_found(live_url, user, pool):
    theirs = ChatFactory(tenant=user.memberships.get().tenant, owner=UserFactory(), pool=pool)
    with _signed_in(live_url, user) as client:
        _product_page(client.get("/c/987654321/"), 404, "Not found")
        _product_page(client.get(f"/c/{theirs.pk}/"), 404, "Not found")  # not told apart from a missing one
        _product_page(client.get("/no/such/page"), 404, "Not found")
        _product_page(client.get("/static/js/no-such-file.js"), 404, "Not found")
        api = client.get("/api/chats/987654321/")  # an API keeps its JSON errors
        assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"


def test_a_page_for_operators_refuses_others_in_words(live_url, user):
    with _signed_in(live_url, user) as client:
        _product_page(client.get("/admin/operations/"), 403, "Not allowed")


def test_a_user_in_no_team_is_refused_in_words(live_url, db):
    with _signed_in(live_url, UserFactory()) as client:
        resp = client.get("/")
        assert resp.status_code == 403 and "not in a team" in resp.text
        assert not [word for word in LEAKS if word in resp.text]


def test_a_failed_csrf_check_says_what_to_do(live_url, user):
    with _signed_in(live_url, user) as client:
        html = _product_page(client.post("/logout/", headers={"Referer": live_url + "/"}), 403,
                             "This form has expired")  # no token
        assert "Reload the page and try again" in html
        assert client.get("/api/chats/").status_code == 200  # still signed in: nothing was changed
    with httpx.Client(base_url=live_url) as anonymous:
        _product_page(anonymous.post("/login/", data={"username": "x", "password": "y"}), 403,
                      "This form has expired")


def test_a_server_error_is_the_product_page_without_details(user, chat, monkeypatch):
    from chatsite.web import selectors

    def broken(**_):
        raise RuntimeError("an internal detail: the secret word is swordfish")

    monkeypatch.setattr(selectors, "model_options", broken)
    client = Client(raise_request_exception=False)
    client.force_login(user)
    resp = client.get(f"/c/{chat.pk}/")
    assert resp.status_code == 500
    html = resp.content.decode()
    assert "<h1>Something went wrong</h1>" in html and "Error 500" in html
    assert "swordfish" not in html and not [word for word in LEAKS if word in html]
    assert client.get(f"/api/chats/{chat.pk}/").status_code == 200  # the rest of the site is unaffected

"""Static files as the product serves them (chatsite.settings, DEBUG off): collectstatic's
hashed names, compressed as the browser accepts, cached for a year; the pages name only
those, and the chat page still runs under its CSP."""
import re
import subprocess
import sys

import httpx
import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher

from tests import stack
from tests.factories import PASSWORD
from tests.web.pages import ChatPage

pytestmark = pytest.mark.django_db(transaction=True)
HASHED = re.compile(r"/static/(css|js|vendor)/[\w/.-]+\.[0-9a-f]{12}\.(css|js|woff2)$")


@pytest.fixture(scope="module")
def product_web(stack_env, tmp_path_factory):
    """A web under the product's own settings, its static files collected for it (ours only:
    the admin's and the API docs' take most of collectstatic's time)."""
    root = tmp_path_factory.mktemp("static")
    env = {**stack_env, "DJANGO_SETTINGS_MODULE": "chatsite.settings", "CHATSITE_STATIC_ROOT": str(root)}
    env.pop("DJANGO_DEBUG", None)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0", "-i", "admin",
                    "-i", "drf_spectacular_sidecar", "-i", "rest_framework"],
                   cwd=stack.ROOT, env=env, check=True, timeout=300)
    proc, url = stack.start_web(env, name="web-product")
    yield url
    proc.stop()


def _assets(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="(/static/[^"]+)"', html)


@pytest.mark.slow
def test_pages_name_hashed_files_served_compressed_and_cached_for_a_year(product_web):
    html = httpx.get(product_web + "/login/").text
    assets = _assets(html)
    assert assets and all(HASHED.search(a) for a in assets), assets
    css = next(a for a in assets if a.endswith(".css"))
    for accept, encoding in (("br, gzip", "br"), ("gzip", "gzip")):
        resp = httpx.get(product_web + css, headers={"Accept-Encoding": accept})
        assert resp.status_code == 200 and resp.headers["content-encoding"] == encoding
        assert "immutable" in resp.headers["cache-control"] and "max-age=315360000" in resp.headers["cache-control"]
        assert "Accept-Encoding" in resp.headers["vary"]
    plain = httpx.get(product_web + css, headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.text == resp.text  # the same file, decoded
    assert int(resp.headers["content-length"]) < int(plain.headers["content-length"]) / 2  # sent compressed
    assert httpx.get(product_web + "/static/css/base.css").status_code == 404  # only the hashed names


def test_the_chat_page_runs_from_those_files(product_web, browser, web_user):
    # The product's password hasher (the tests' own is a fast one the product does not know).
    web_user.password = PBKDF2PasswordHasher().encode(PASSWORD, PBKDF2PasswordHasher().salt())
    web_user.save(update_fields=["password"])
    ctx = browser.new_context()
    chat = ChatPage(ctx.new_page(), product_web)
    refused = []
    chat.page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    statics = []
    chat.page.on("response", lambda r: statics.append(r) if "/static/" in r.url else None)
    chat.sign_in(web_user.username)
    chat.page.wait_for_function("() => window.ChatUI && ChatUI.api && ChatUI.markdown")
    assert chat.page.evaluate("() => document.fonts.check('15px Inter')")
    assert statics and all(r.status == 200 and HASHED.search(r.url.split("?")[0]) for r in statics), \
        [(r.url, r.status) for r in statics]
    assert refused == []
    ctx.close()

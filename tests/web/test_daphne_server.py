"""daphne's requests (chatsite/edge/daphne_server.py): the body goes to the app as it came;
Twisted does not parse a POST's form or multipart body on the way (daphne never reads
what it would make of it, and the app parses the body itself)."""
import io

from twisted.web import http
from twisted.web.test.requesthelper import DummyChannel

from chatsite.edge.daphne_server import LimitedWebRequest


def _received(monkeypatch, content_type: bytes, body: bytes):
    parsed = []
    monkeypatch.setattr(http, "_parseContentType", lambda line: parsed.append(line) or b"application/x-www-form-urlencoded")
    req = object.__new__(LimitedWebRequest)
    http.Request.__init__(req, DummyChannel())
    req.content = io.BytesIO(body)
    req.content.seek(len(body))
    req.requestHeaders.setRawHeaders(b"content-type", [content_type])
    processed = []
    monkeypatch.setattr(req, "process", lambda: processed.append(req.content.read()))
    req.requestReceived(b"POST", b"/login/", b"HTTP/1.1")
    return req, parsed, processed


def test_a_form_post_reaches_the_app_unparsed(monkeypatch):
    req, parsed, processed = _received(monkeypatch, b"application/x-www-form-urlencoded", b"username=a&password=b")
    assert parsed == [] and req.args == {}
    assert processed == [b"username=a&password=b"]  # the whole body, from its start


def test_the_stock_request_would_have_parsed_it(monkeypatch):
    """What the line above turns off (so the test above can fail)."""
    parsed = []
    monkeypatch.setattr(http, "_parseContentType", lambda line: parsed.append(line) or b"application/x-www-form-urlencoded")
    req = http.Request(DummyChannel())
    req.content = io.BytesIO(b"username=a")
    req.content.seek(10)
    req.requestHeaders.setRawHeaders(b"content-type", [b"application/x-www-form-urlencoded"])
    monkeypatch.setattr(req, "process", lambda: None)
    req.requestReceived(b"POST", b"/login/", b"HTTP/1.1")
    assert parsed and req.args == {b"username": [b"a"]}

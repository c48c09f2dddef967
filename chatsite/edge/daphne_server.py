"""Two things only the server can do, for daphne (installed by chatsite/edge/asgi.py).

1. Refuse an oversized body before it is stored. Twisted reads a request's whole
   body (into a temporary file past 100 kB) before daphne hands the request to
   the application, so no ASGI layer can stop it. `LimitedWebRequest` checks the
   Content-Length as soon as the headers are in, and counts a chunked body as it
   arrives; past DATA_UPLOAD_MAX_MEMORY_SIZE it answers 413 (the body of
   chatsite.edge.body_limit), closes its side, and discards whatever the client still
   sends for up to LINGER_SECONDS (closing at once would reset the connection and
   the client might never read the 413).
2. Keep secrets out of the access log: daphne writes every request's URL there,
   an events URL's ?token= included. `RedactingAccessLog` writes it redacted
   (chatsite.logging_filters.redact).

Both are subclasses of daphne's own classes, put in place of the names daphne
looks up when it builds a connection and its access log.
"""
import io
import logging

import daphne.cli
import daphne.http_protocol
from daphne.access import AccessLogGenerator
from twisted.internet import reactor

from chatsite.edge.body_limit import body_limit, too_large_response
from chatsite.logging_filters import redact

log = logging.getLogger(__name__)

LINGER_SECONDS = 5.0


class LimitedWebRequest(daphne.http_protocol.WebRequest):
    _refused = False
    _body_bytes = 0

    def gotLength(self, length):
        limit = body_limit()
        if limit is None:
            return super().gotLength(length)
        if length is not None and length > limit:
            self.requestHeaders.removeHeader(b"Expect")  # no "100 Continue": the client need not send it
            return self._refuse()
        self.content = io.BytesIO()  # at most `limit` bytes: memory, never Twisted's temporary file

    def handleContentChunk(self, data):
        if self._refused:
            return  # discarded
        self._body_bytes += len(data)
        limit = body_limit()
        if limit is not None and self._body_bytes > limit:
            return self._refuse()
        super().handleContentChunk(data)

    def requestReceived(self, command, path, version):
        # Twisted parses a POST's form body into request.args (the Content-Type header
        # through the email package, 33 us, and a multipart upload whole); daphne never
        # reads them: it hands the raw body to the app, which parses it once.
        self._parsePOSTFormSubmission = False
        if not self._refused:
            super().requestReceived(command, path, version)

    def _refuse(self) -> None:
        self._refused = True
        self.content = io.BytesIO()
        path = getattr(self.channel, "_path", b"/").split(b"?", 1)[0].decode("ascii", "replace")
        status, headers, body = too_large_response(path)
        head = b"HTTP/1.1 413 Request Entity Too Large\r\n" + b"".join(k + b": " + v + b"\r\n" for k, v in headers)
        transport = self.channel.transport
        transport.write(head + b"\r\n" + body)
        self._log_refusal(path, len(body))
        try:
            transport.loseWriteConnection()  # FIN after the 413; keep reading (and discarding) a moment
            reactor.callLater(LINGER_SECONDS, _abort, transport)
        except (AttributeError, NotImplementedError):  # a transport that cannot half-close (TLS)
            transport.loseConnection()

    def _log_refusal(self, path: str, size: int) -> None:
        method = getattr(self.channel, "_command", b"?").decode("ascii", "replace")
        client = "%s:%s" % (self.client.host, self.client.port) if hasattr(self.client, "host") else None
        self.server.log_action("http", "complete", {"path": path, "status": 413, "method": method,
                                                    "client": client, "time_taken": 0, "size": size})


def _abort(transport) -> None:
    try:
        transport.abortConnection()
    except Exception:  # already gone
        pass


class RedactingAccessLog(AccessLogGenerator):
    def __call__(self, protocol, action, details):
        if isinstance(details.get("path"), str):
            details = {**details, "path": redact(details["path"])}
        super().__call__(protocol, action, details)


def install() -> None:
    """Make daphne build its requests and its access log from the classes above (idempotent)."""
    daphne.http_protocol.WebRequest = LimitedWebRequest
    daphne.cli.AccessLogGenerator = RedactingAccessLog

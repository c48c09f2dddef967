"""DRF's parser for the REST API: the strict JSON decoder of chatsite.json_body."""
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from chatsite.json_body import BodyError, decode_json, max_body_bytes


class StrictJSONParser(BaseParser):
    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        limit = max_body_bytes()
        raw = stream.read(limit + 1) if stream is not None else b""
        try:
            return decode_json(raw)
        except BodyError as exc:
            raise ParseError(str(exc), code="invalid_json") from None

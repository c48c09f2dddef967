"""Request fields that state, in the OpenAPI schema, the limits the code enforces: each
built from the enforcing module's own constant or pattern, so the two cannot drift.

The request serializers are documentation (the views and services check the body); what
the schema cannot state (an unknown model, a message of another role) their 400 says in
words (chatsite.api.openapi.errors' `rules`)."""
from django.conf import settings
from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chatsite.pools.selectors import POOL_NAME_PATTERN
from chatsite.runs.validation import MAX_STOP_CHARS, MAX_STOP_SEQUENCES

NO_NUL = r"^[^\u0000]*$"  # chatsite.text.clean_text refuses a NUL
NOT_BLANK = r"^[^\u0000]*[^\u0000\s][^\u0000]*$"  # ... and a blank message
MODEL_HELP = "A model name (`id`) from GET /api/models/."


def text(*, blank: bool = True, **kwargs) -> serializers.CharField:
    """A string clean_text takes: no NUL, and not blank unless `blank`."""
    return serializers.CharField(validators=[RegexValidator(NO_NUL if blank else NOT_BLANK)],
                                 allow_blank=blank, **kwargs)


def message_text(**kwargs) -> serializers.CharField:
    return text(blank=False, max_length=settings.CHATSITE["MAX_MESSAGE_CHARS"], **kwargs)


def model(help_text: str = "", **kwargs) -> serializers.CharField:
    """A pool name: the pattern every pool name has (which pools a tenant may use is its data)."""
    return serializers.CharField(validators=[RegexValidator(POOL_NAME_PATTERN)],
                                 help_text=(MODEL_HELP + " " + help_text).strip(), **kwargs)


@extend_schema_field({"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1})
class TopP(serializers.FloatField):
    """top_p: greater than 0, at most 1 (chatsite.runs.validation)."""


STOP_STRING = {"type": "string", "minLength": 1, "maxLength": MAX_STOP_CHARS, "pattern": NO_NUL}


@extend_schema_field({"oneOf": [STOP_STRING, {"type": "array", "items": STOP_STRING,
                                              "maxItems": MAX_STOP_SEQUENCES}]})
class Stop(serializers.JSONField):
    """stop: a string, or a list of at most MAX_STOP_SEQUENCES of them."""

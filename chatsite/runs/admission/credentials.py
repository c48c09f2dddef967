"""The credential and its owner, the door's first rule: a presented API key read (one
statement: chatsite.runs.store.keys) and checked, for every surface (DRF's REST API,
/v1, the events stream)."""
import secrets

from django.utils import timezone
from rest_framework import authentication, exceptions

from chatsite.runs.store.keys import live_key
from chatsite.tenancy.credentials import KeyRead, bearer_token, key_parts, secret_hash
from chatsite.tenancy.models import ApiKey

LAST_USED_EVERY_SECONDS = 60


def key_authenticate(raw: str) -> KeyRead | None:
    """The live key for a presented secret, with its tenant's limits; None when it is
    unknown, revoked, or its user inactive or no longer a member of its tenant. Records
    when it was last used (at most once a minute)."""
    parts = key_parts(raw)
    if parts is None:
        return None
    read = live_key(prefix=parts[0])
    if read is None or not secrets.compare_digest(read.key.secret_hash, secret_hash(parts[1])):
        return None
    key = read.key
    if not (key.user.is_active and key.tenant.is_active):
        return None
    now = timezone.now()
    if key.last_used_at is None or (now - key.last_used_at).total_seconds() > LAST_USED_EVERY_SECONDS:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return read


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer KEY` for DRF: request.user is the key's user, request.auth its KeyRead."""

    def authenticate(self, request):
        token = bearer_token(request.META.get("HTTP_AUTHORIZATION"))
        if token is None:
            return None
        read = key_authenticate(token)
        if read is None:
            raise exceptions.AuthenticationFailed("invalid or revoked API key")
        return read.user, read

    def authenticate_header(self, request):
        return 'Bearer realm="api"'

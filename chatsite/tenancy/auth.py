"""`Authorization: Bearer KEY` authentication for DRF."""
from rest_framework import authentication, exceptions

from chatsite.tenancy.services import api_key_authenticate


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


class ApiKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        token = bearer_token(request.META.get("HTTP_AUTHORIZATION"))
        if token is None:
            return None
        key = api_key_authenticate(token)
        if key is None:
            raise exceptions.AuthenticationFailed("invalid or revoked API key")
        return key.user, key

    def authenticate_header(self, request):
        return 'Bearer realm="api"'

"""Login throttling: too many failed sign-ins for one account or from one address
lock both out for a while, for the web login and the admin alike."""
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.signals import user_login_failed
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver

from chatsite import redis_keys
from chatsite.redis_client import get_redis


def _keys(request, username) -> list[str]:
    ip = request.META.get("REMOTE_ADDR", "?") if request is not None else "?"
    return [redis_keys.login_failures("user", (username or "").lower()), redis_keys.login_failures("ip", ip)]


class ThrottledModelBackend(ModelBackend):
    """Django's backend, refusing every attempt while the account or address is locked out."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        limit = settings.CHATSITE["LOGIN_MAX_FAILURES"]
        counts = get_redis().mget(_keys(request, username))
        if any(int(c or 0) >= limit for c in counts):
            raise PermissionDenied("too many failed sign-ins; try again later")  # stops authenticate()
        return super().authenticate(request, username=username, password=password, **kwargs)


@receiver(user_login_failed)
def _count_failure(sender, credentials, request=None, **kwargs):
    pipe = get_redis().pipeline()
    for key in _keys(request, credentials.get("username")):
        pipe.incr(key)
        pipe.expire(key, settings.CHATSITE["LOGIN_LOCKOUT_SECONDS"])
    pipe.execute()

"""Sign-in throttling for the web login and the admin: every password check goes
through this backend (API keys never do, so an API request costs nothing here).

Two records in Redis, each a hash {failures, locked_until}:

- one per account (the username as typed): after LOGIN_MAX_FAILURES failures the
  account is locked for LOGIN_LOCK_SECONDS, doubling with each further failure up
  to LOGIN_LOCK_MAX_SECONDS. Failures for one username never lock another, so a
  flood of made-up names locks nobody real.
- one per client address (chatsite.tenancy.addresses, through trusted proxies):
  the same from LOGIN_MAX_FAILURES_PER_ADDRESS, far higher, since a whole office
  may sign in from one address; it slows one address spraying many accounts.

While a record is locked an attempt is refused without checking the password and
is not counted, so it does not push the lock further. A successful sign-in clears
the account's record (not the address's: one good account must not reset a
spray). A record is forgotten LOGIN_FAILURE_WINDOW_SECONDS after its last failure.
The refusal, with its reason and end, is left on `request.login_refusal` for the
login page to show.
"""
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.signals import user_login_failed
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.tenancy.addresses import request_address

MAX_USERNAME_CHARS = 150

# KEYS: records. ARGV: now, ttl, then (limit, base seconds, max seconds) per record.
# A record that is locked is left as it is: attempts made while locked never count.
_COUNT_FAILURE = """
local now, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
for i, key in ipairs(KEYS) do
  local locked_until = tonumber(redis.call('HGET', key, 'locked_until') or '0')
  if locked_until <= now then
    local n = redis.call('HINCRBY', key, 'failures', 1)
    local limit, base, cap = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2])
    if n >= limit then
      redis.call('HSET', key, 'locked_until', now + math.min(base * 2 ^ (n - limit), cap))
    end
    redis.call('EXPIRE', key, ttl)
  end
end
return 0
"""


@dataclass(frozen=True)
class LoginRefusal:
    """Why and until when sign-ins are refused (for the login page)."""

    kind: str  # "account" or "address"
    until: float

    @property
    def seconds_left(self) -> int:
        return max(1, int(self.until - time.time() + 0.999))

    @property
    def message(self) -> str:
        at = datetime.fromtimestamp(self.until, tz=timezone.utc).strftime("%H:%M:%S UTC")
        minutes = (self.seconds_left + 59) // 60
        wait = f"about {minutes} minute{'s' if minutes != 1 else ''}" if self.seconds_left > 60 \
            else f"{self.seconds_left} seconds"
        who = ("this account" if self.kind == "account" else "your network address")
        return (f"Signing in is paused: there were too many failed sign-ins for {who}. "
                f"Try again after {at} ({wait}). Your password was not checked this time.")


def _limits() -> dict:
    c = settings.CHATSITE
    return {"user": (c["LOGIN_MAX_FAILURES"], c["LOGIN_LOCK_SECONDS"], c["LOGIN_LOCK_MAX_SECONDS"]),
            "ip": (c["LOGIN_MAX_FAILURES_PER_ADDRESS"], c["LOGIN_LOCK_SECONDS"], c["LOGIN_LOCK_MAX_SECONDS"])}


def _records(request, username) -> dict[str, str]:
    records = {"user": redis_keys.login_lock("user", (username or "")[:MAX_USERNAME_CHARS])}
    if request is not None:
        records["ip"] = redis_keys.login_lock("ip", request_address(request))
    return records


def login_refusal(request, username) -> LoginRefusal | None:
    """The lock that refuses this attempt now, if any (one Redis round trip)."""
    records = _records(request, username)
    pipe = get_redis().pipeline(transaction=False)
    for key in records.values():
        pipe.hget(key, "locked_until")
    now = time.time()
    found = [(float(v), kind) for kind, v in zip(records, pipe.execute()) if v and float(v) > now]
    if not found:
        return None
    until, kind = max(found)
    return LoginRefusal("account" if kind == "user" else "address", until)


def login_failure_count(*, request, username) -> None:
    """Count a failed sign-in against the account and the address (unless they are locked)."""
    records = _records(request, username)
    limits = _limits()
    args = [time.time(), max(settings.CHATSITE["LOGIN_FAILURE_WINDOW_SECONDS"], limits["user"][2])]
    for kind in records:
        args.extend(limits[kind])
    get_redis().eval(_COUNT_FAILURE, len(records), *records.values(), *args)


def login_success_clear(*, username) -> None:
    """Forget the account's failures after it signed in."""
    get_redis().delete(redis_keys.login_lock("user", (username or "")[:MAX_USERNAME_CHARS]))


class ThrottledModelBackend(ModelBackend):
    """Django's backend, refusing every attempt while the account or the address is locked."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        refusal = login_refusal(request, username)
        if refusal is not None:
            if request is not None:
                request.login_refusal = refusal
            raise PermissionDenied(refusal.message)  # stops authenticate(); Django then signals a failure
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None:
            login_success_clear(username=username)
        return user


@receiver(user_login_failed)
def _count_failure(sender, credentials, request=None, **kwargs):
    if getattr(request, "login_refusal", None) is not None:
        return  # refused while locked: the password was not checked, nothing to count
    login_failure_count(request=request, username=credentials.get("username"))

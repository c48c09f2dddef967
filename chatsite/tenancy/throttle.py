"""Sign-in throttling for the web login and the admin: every password check goes
through this backend (API keys never do, so an API request costs nothing here).

A lock must slow a password guesser without handing anyone a way to lock a real user
out, so each lock is scoped to what the guesser controls. Three records in Redis, each
a hash {failures, locked_until}, all counted on every failure:

- one per account and client address (the "pair"): after LOGIN_MAX_FAILURES failures
  that account is locked from that address. Someone guessing a user's password from
  one address locks that user out of nowhere else.
- one per client address (chatsite.tenancy.addresses, through trusted proxies): after
  LOGIN_MAX_FAILURES_PER_ADDRESS failures, far more (a whole office may sign in from
  one address), that address is locked: one address spraying many accounts, or
  made-up names, is stopped.
- one per account (the username as typed): after LOGIN_MAX_FAILURES_PER_ACCOUNT
  failures from anywhere the account is locked: many addresses guessing one password
  are stopped.

The address's and the account's locks do not apply where the account is known: an
address it signed in from within LOGIN_KNOWN_ADDRESS_SECONDS. There only the pair's
lock applies, so a flood of failures (made-up names from the user's own address, the
user's name from elsewhere) does not refuse the user's right password where they
usually sign in, while a guesser there is held to the pair's few tries per account.
A correct password from an unknown address stays refused while the address or the
account is locked: letting it through would let a spray guess on (one check per
account) and a botnet guess one account. Locks last LOGIN_LOCK_SECONDS, doubling with
each further failure up to LOGIN_LOCK_MAX_SECONDS.

While a record is locked an attempt is refused without checking the password and is
not counted against it, so it does not push the lock further. A successful sign-in
clears its pair and makes its address known (not the address's or the account's
records: one good sign-in must not reset a spray or a botnet). A record is forgotten
LOGIN_FAILURE_WINDOW_SECONDS after its last failure. The refusal, with its reason and
end, is left on `request.login_refusal` for the login page to show.
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
NO_ADDRESS = "unknown"  # a check without a request (a shell's authenticate()): one shared address

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

_REASONS = {"pair": "this account from your network address", "address": "your network address",
            "account": "this account from network addresses it has not signed in from lately"}


@dataclass(frozen=True)
class LoginRefusal:
    """Why and until when sign-ins are refused (for the login page)."""

    kind: str  # "pair" (this account from this address), "address" or "account"
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
        return (f"Signing in is paused: there were too many failed sign-ins for {_REASONS[self.kind]}. "
                f"Try again after {at} ({wait}). Your password was not checked this time.")


def _limits() -> dict:
    c = settings.CHATSITE
    lock = (c["LOGIN_LOCK_SECONDS"], c["LOGIN_LOCK_MAX_SECONDS"])
    return {"pair": (c["LOGIN_MAX_FAILURES"], *lock), "address": (c["LOGIN_MAX_FAILURES_PER_ADDRESS"], *lock),
            "account": (c["LOGIN_MAX_FAILURES_PER_ACCOUNT"], *lock)}


def _who(request, username) -> tuple[str, str]:
    address = request_address(request) if request is not None else NO_ADDRESS
    return address, (username or "")[:MAX_USERNAME_CHARS]


def _records(address: str, username: str) -> dict[str, str]:
    return {"pair": redis_keys.login_lock("pair", f"{address} {username}"),
            "address": redis_keys.login_lock("ip", address), "account": redis_keys.login_lock("user", username)}


def login_refusal(request, username) -> LoginRefusal | None:
    """The lock that refuses this attempt now, if any (one Redis round trip)."""
    address, username = _who(request, username)
    records = _records(address, username)
    pipe = get_redis().pipeline(transaction=False)
    for key in records.values():
        pipe.hget(key, "locked_until")
    pipe.exists(redis_keys.login_known(address, username))
    *until, known = pipe.execute()
    now = time.time()
    found = [(float(v), kind) for kind, v in zip(records, until)
             if v and float(v) > now and (kind == "pair" or not known)]
    if not found:
        return None
    until, kind = max(found)
    return LoginRefusal(kind, until)


def login_failure_count(*, request, username) -> None:
    """Count a failed sign-in against its pair, its address and its account (those not locked)."""
    records = _records(*_who(request, username))
    limits = _limits()
    ttl = max(settings.CHATSITE["LOGIN_FAILURE_WINDOW_SECONDS"], *(limit[2] for limit in limits.values()))
    args = [time.time(), ttl]
    for kind in records:
        args.extend(limits[kind])
    get_redis().eval(_COUNT_FAILURE, len(records), *records.values(), *args)


def login_success_record(*, request, username) -> None:
    """After a sign-in: forget its pair's failures and know its address for the account."""
    address, username = _who(request, username)
    pipe = get_redis().pipeline(transaction=False)
    pipe.delete(_records(address, username)["pair"])
    pipe.set(redis_keys.login_known(address, username), 1, ex=settings.CHATSITE["LOGIN_KNOWN_ADDRESS_SECONDS"])
    pipe.execute()


class ThrottledModelBackend(ModelBackend):
    """Django's backend, refusing every attempt a lock applies to (see the module's docstring)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        refusal = login_refusal(request, username)
        if refusal is not None:
            if request is not None:
                request.login_refusal = refusal
            raise PermissionDenied(refusal.message)  # stops authenticate(); Django then signals a failure
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None:
            login_success_record(request=request, username=username)
        return user


@receiver(user_login_failed)
def _count_failure(sender, credentials, request=None, **kwargs):
    if getattr(request, "login_refusal", None) is not None:
        return  # refused while locked: the password was not checked, nothing to count
    login_failure_count(request=request, username=credentials.get("username"))

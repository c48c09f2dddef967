"""What a request's credential is: a bearer API key's parts, and what reading it brings
along (chatsite.runs.admission.credentials reads it)."""
import hashlib
import re
from dataclasses import dataclass

from chatsite.tenancy.models import ApiKey
from chatsite.tenancy.revocation import key_credential, session_credential

KEY_PREFIX = "csk"
_PREFIX_ID = re.compile(r"[0-9a-f]{12}")


@dataclass(frozen=True, slots=True)
class TenantLimits:
    """What limits a tenant's runs, as the credential's read found it."""
    quota: object  # the TenantQuota, or None: no limits
    allowed_pool_ids: frozenset  # empty: every enabled pool


@dataclass(frozen=True, slots=True)
class KeyRead:
    """A live API key (its user and tenant set), with its tenant's limits."""
    key: ApiKey
    limits: TenantLimits

    @property
    def user(self):
        return self.key.user

    @property
    def tenant(self):
        return self.key.tenant


def bearer_token(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header, else None."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def key_parts(raw: str) -> tuple[str, str] | None:
    """(prefix, secret) of a presented key `csk_<prefix>_<secret>`; None for anything else."""
    parts = raw.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX or not _PREFIX_ID.fullmatch(parts[1]):
        return None
    return parts[1], parts[2]


def request_credential(request) -> str:
    """The credential a request came with, as grants name it (chatsite.tenancy.revocation):
    its API key's, else its session's; "" for none."""
    auth = getattr(request, "auth", None)
    if isinstance(auth, KeyRead):
        return key_credential(auth.key.pk)
    session = getattr(request, "session", None)
    return session_credential(getattr(session, "session_key", None))

"""Writes for tenants, memberships and API keys."""
import hashlib
import re
import secrets

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from chatsite.errors import Conflict, InvalidInput
from chatsite.rows import Columns, fetch_one, prepared, split
from chatsite.runs.validation import clean_text
from chatsite.tenancy import revocation
from chatsite.tenancy.models import ApiKey, Membership, Tenant, TenantPreload, UserPreferences
from chatsite.tenancy.revocation import principal_revoke

KEY_PREFIX = "csk"
_PREFIX_ID = re.compile(r"[0-9a-f]{12}")
MAX_KEY_NAME_CHARS = 100
MAX_LIVE_KEYS_PER_USER = 50


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def tenant_create(*, name: str) -> Tenant:
    """Create a tenant; raises IntegrityError if the name is taken."""
    return Tenant.objects.create(name=name, slug=slugify(name)[:50])


def membership_add(*, tenant: Tenant, user, role: str = Membership.Role.MEMBER) -> Membership:
    """Add `user` to `tenant` (idempotent)."""
    membership, _ = Membership.objects.get_or_create(tenant=tenant, user=user, defaults={"role": role})
    return membership


def user_create_in_tenant(*, tenant: Tenant, username: str, password: str, **extra):
    """Create a user and its membership in one transaction."""
    with transaction.atomic():
        user = get_user_model().objects.create_user(username=username, password=password, **extra)
        membership_add(tenant=tenant, user=user)
    return user


def preferences_update(*, user, theme: str | None = None, default_instructions: str | None = None) -> UserPreferences:
    """Save the user's theme and/or default instructions (None: leave it as it is). Raises
    InvalidInput naming the field for a theme that is not one of UserPreferences.Theme or
    instructions that are not text or longer than a chat's system prompt may be."""
    from chatsite.chats.services import MAX_SYSTEM_PROMPT_CHARS  # they become one; chats imports tenancy

    prefs = UserPreferences.objects.filter(user=user).first() or UserPreferences(user=user)
    if theme is not None:
        if theme not in UserPreferences.Theme.values:
            raise InvalidInput(f"theme must be one of {', '.join(UserPreferences.Theme.values)}", field="theme")
        prefs.theme = theme
    if default_instructions is not None:
        prefs.default_instructions = clean_text(default_instructions, field="default_instructions",
                                                max_chars=MAX_SYSTEM_PROMPT_CHARS, allow_empty=True).strip()
    prefs.save()
    return prefs


def api_key_create(*, user, tenant: Tenant, name: str) -> tuple[ApiKey, str]:
    """Create a key; returns the row and the full secret, which is never stored or shown again.

    Raises InvalidInput for a blank or overlong name, Conflict when the user already
    holds MAX_LIVE_KEYS_PER_USER live keys in the tenant; ValueError (a caller's bug)
    when the user is not a member of the tenant."""
    if not Membership.objects.filter(user=user, tenant=tenant).exists():
        raise ValueError(f"{user} is not a member of {tenant}")
    name = " ".join(clean_text(name, field="name", max_chars=MAX_KEY_NAME_CHARS).split())
    if ApiKey.objects.filter(user=user, tenant=tenant, revoked_at__isnull=True).count() >= MAX_LIVE_KEYS_PER_USER:
        raise Conflict(f"you already have {MAX_LIVE_KEYS_PER_USER} live keys; revoke one you no longer use first")
    prefix = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    key = ApiKey.objects.create(user=user, tenant=tenant, name=name, prefix=prefix, secret_hash=_hash(secret))
    return key, f"{KEY_PREFIX}_{prefix}_{secret}"


def api_key_revoke(*, key: ApiKey) -> ApiKey:
    """Revoke a key (idempotent): it stops authenticating at once, and the event streams
    opened with it (or with events tokens issued through it) end within a few seconds;
    the row stays, listed as revoked."""
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        principal_revoke(kind=revocation.KEY, ident=key.pk, permanent=True)
    return key


_KEY, _TENANT = Columns(ApiKey, "k"), Columns(Tenant, "t")
_USER = _QUOTA = _LIVE_KEY = None  # the user model's and the quota's columns, and the SQL, once apps are loaded


def _live_key(prefix: str) -> ApiKey | None:
    """One query, in plain SQL as every API request runs it: the unrevoked key, its user
    and tenant, and that the user is still a member of the tenant (removed from it, the
    keys made while a member stop working too). The tenant comes with what admitting a
    run reads of it, so that request asks no more: its quota and its allowed pools
    (pools.selectors.allowed_pool_ids, quotas.services.quota_for)."""
    global _USER, _QUOTA, _LIVE_KEY
    if _LIVE_KEY is None:
        from chatsite.quotas.models import TenantQuota

        _USER, _QUOTA = Columns(get_user_model(), "u"), Columns(TenantQuota, "q")
        allowed = Tenant.allowed_pools.through._meta.db_table
        _LIVE_KEY = prepared(
            f'SELECT {_KEY.sql}, {_USER.sql}, {_TENANT.sql}, {_QUOTA.sql}, '
            f'ARRAY(SELECT a.modelpool_id FROM "{allowed}" a WHERE a.tenant_id = k.tenant_id) FROM "{_KEY.table}" k '
            f'JOIN "{_USER.table}" u ON u.id = k.user_id JOIN "{_TENANT.table}" t ON t.id = k.tenant_id '
            f'LEFT JOIN "{_QUOTA.table}" q ON q.tenant_id = k.tenant_id '
            f'WHERE k.prefix = %s AND k.revoked_at IS NULL AND EXISTS (SELECT 1 FROM "{Membership._meta.db_table}" m '
            f'WHERE m.user_id = k.user_id AND m.tenant_id = k.tenant_id)')
    row = fetch_one(_LIVE_KEY, [prefix])
    if row is None:
        return None
    key, user, tenant, quota, pool_ids = split(row, _KEY, _USER, _TENANT, _QUOTA)
    key.user, key.tenant = user, tenant
    tenant.preloaded = TenantPreload(quota=quota, allowed_pool_ids=frozenset(pool_ids))
    return key


def api_key_authenticate(raw: str) -> ApiKey | None:
    """The live key for a presented secret, or None (unknown, revoked, or its user
    inactive or no longer a member of its tenant); records when it was last used."""
    parts = raw.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX or not _PREFIX_ID.fullmatch(parts[1]):
        return None
    key = _live_key(parts[1])
    if key is None or not secrets.compare_digest(key.secret_hash, _hash(parts[2])):
        return None
    if not (key.user.is_active and key.tenant.is_active):
        return None
    now = timezone.now()
    if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)  # at most once a minute per key
    return key

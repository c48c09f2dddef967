"""Writes for tenants, memberships and API keys."""
import secrets

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from chatsite.errors import Conflict, InvalidInput
from chatsite.tenancy import revocation
from chatsite.tenancy.credentials import KEY_PREFIX, secret_hash
from chatsite.tenancy.models import ApiKey, Membership, Tenant, UserPreferences
from chatsite.tenancy.revocation import principal_revoke
from chatsite.text import MAX_SYSTEM_PROMPT_CHARS, clean_text

MAX_KEY_NAME_CHARS = 100
MAX_LIVE_KEYS_PER_USER = 50


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
    key = ApiKey.objects.create(user=user, tenant=tenant, name=name, prefix=prefix, secret_hash=secret_hash(secret))
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

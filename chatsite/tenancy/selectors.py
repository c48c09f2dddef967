"""Reads for tenancy: which tenant a request acts for."""
from django.db.models import Exists

from chatsite.errors import NotFound
from chatsite.tenancy.credentials import KeyRead
from chatsite.tenancy.models import ApiKey, Membership, Tenant, UserPreferences


def tenant_for_request(user, auth) -> Tenant:
    """The tenant a request acts for: the API key's, else the user's first membership.

    Raises NotFound (404) for a user who belongs to no active tenant."""
    if isinstance(auth, KeyRead):
        return auth.tenant
    membership = (Membership.objects.select_related("tenant")
                  .filter(user=user, tenant__is_active=True).order_by("id").first())
    if membership is None:
        raise NotFound("your account does not belong to any tenant; ask an administrator to add you")
    return membership.tenant


def member_active(*, tenant, user) -> Exists:
    """Whether `user` (active) belongs to `tenant` (active) still: what a request acting
    for them later (a queued message, when its turn comes) needs. An expression, read
    with the row it is about (`tenant` and `user` may be OuterRefs)."""
    return Exists(Membership.objects.filter(tenant=tenant, user=user, tenant__is_active=True, user__is_active=True))


def api_keys_for(*, tenant: Tenant, user):
    """The user's own keys in this tenant, newest first (live and revoked)."""
    return ApiKey.objects.filter(tenant=tenant, user=user).order_by("-created_at", "-id")


def api_key_get(*, tenant: Tenant, user, key_id) -> ApiKey:
    """One of the user's own keys in this tenant, or NotFound (404)."""
    try:
        return api_keys_for(tenant=tenant, user=user).get(pk=int(key_id))
    except (ApiKey.DoesNotExist, ValueError, TypeError, OverflowError):
        raise NotFound("no such API key") from None


def preferences_for(user) -> UserPreferences:
    """The user's preferences: the saved ones, else the defaults (not saved)."""
    if not user.is_authenticated:
        return UserPreferences()
    return UserPreferences.objects.filter(user=user).first() or UserPreferences(user=user)

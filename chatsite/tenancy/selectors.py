"""Reads for tenancy: which tenant a request acts for."""
from chatsite.errors import NotFound
from chatsite.tenancy.models import ApiKey, Membership, Tenant


def tenant_for_request(user, auth) -> Tenant:
    """The tenant a request acts for: the API key's, else the user's first membership.

    Raises NotFound (404) for a user who belongs to no active tenant."""
    if isinstance(auth, ApiKey):
        return auth.tenant
    membership = (Membership.objects.select_related("tenant")
                  .filter(user=user, tenant__is_active=True).order_by("id").first())
    if membership is None:
        raise NotFound("your account does not belong to any tenant; ask an administrator to add you")
    return membership.tenant

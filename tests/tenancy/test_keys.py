"""API keys: hashed, shown once, revocable, and only as good as their owner's membership."""
import pytest

from chatsite.runs.admission.credentials import key_authenticate
from chatsite.tenancy.models import ApiKey, Membership
from chatsite.tenancy.services import api_key_create, api_key_revoke


def api_key_authenticate(secret):
    """The live key a secret presents, or None."""
    read = key_authenticate(secret)
    return None if read is None else read.key

pytestmark = pytest.mark.django_db


def test_a_key_authenticates_until_revoked(user, tenant):
    key, secret = api_key_create(user=user, tenant=tenant, name="k")
    assert api_key_authenticate(secret) == key
    assert secret.split("_", 2)[2] not in ApiKey.objects.get(pk=key.pk).secret_hash
    api_key_revoke(key=key)
    assert api_key_authenticate(secret) is None


@pytest.mark.parametrize("tamper", [
    lambda s: s[:-1] + ("A" if s[-1] != "A" else "B"), lambda s: s.replace("csk_", "sk_"), lambda s: s.split("_")[0],
    lambda s: "csk_" + "0" * 12 + "_" + s.split("_", 2)[2], lambda s: "csk_\x00_x", lambda s: "",
])
def test_a_wrong_secret_is_refused(user, tenant, tamper):
    _, secret = api_key_create(user=user, tenant=tenant, name="k")
    assert api_key_authenticate(tamper(secret)) is None


def test_keys_die_with_the_membership_the_user_or_the_tenant(user, tenant):
    _, secret = api_key_create(user=user, tenant=tenant, name="k")
    Membership.objects.filter(user=user, tenant=tenant).delete()
    assert api_key_authenticate(secret) is None
    Membership.objects.create(user=user, tenant=tenant)
    assert api_key_authenticate(secret) is not None
    tenant.is_active = False
    tenant.save()
    assert api_key_authenticate(secret) is None
    tenant.is_active = True
    tenant.save()
    user.is_active = False
    user.save()
    assert api_key_authenticate(secret) is None


def test_a_key_for_a_tenant_the_user_is_not_in_cannot_be_made(user):
    from tests.factories import TenantFactory

    with pytest.raises(ValueError):
        api_key_create(user=user, tenant=TenantFactory(), name="k")

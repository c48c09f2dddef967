"""The pools a tenant may list, read once, or taken from what the request's authentication loaded."""
from types import SimpleNamespace

import pytest

from chatsite.pools.selectors import pools_for_tenant
from tests.factories import PoolFactory, TenantFactory

pytestmark = pytest.mark.django_db


def test_a_tenant_lists_the_enabled_pools_it_may_use():
    mine, other = PoolFactory(name="sel-mine"), PoolFactory(name="sel-other")
    off = PoolFactory(name="sel-off", enabled=False)
    limited, free = TenantFactory(), TenantFactory()
    limited.allowed_pools.set([mine, off])
    assert [p.name for p in pools_for_tenant(limited)] == ["sel-mine"]
    names = [p.name for p in pools_for_tenant(free)]
    assert {"sel-mine", "sel-other"} <= set(names) and "sel-off" not in names
    allowed = frozenset([mine.pk, off.pk])  # as the API key's query reads it
    # the list the caller read is the one used: the tenant's own is not read again
    assert [p.name for p in pools_for_tenant(SimpleNamespace(pk=limited.pk), allowed)] == ["sel-mine"]
    assert other.pk not in {p.pk for p in pools_for_tenant(limited)}

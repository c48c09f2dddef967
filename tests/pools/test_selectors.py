"""The pools a tenant may list, read once, or taken from what the request's authentication loaded."""
import pytest

from chatsite.pools.selectors import pools_for_tenant
from tests.factories import PoolFactory, TenantFactory

pytestmark = pytest.mark.django_db


def test_a_tenant_lists_the_enabled_pools_it_may_use(django_assert_num_queries):
    mine, other = PoolFactory(name="sel-mine"), PoolFactory(name="sel-other")
    off = PoolFactory(name="sel-off", enabled=False)
    limited, free = TenantFactory(), TenantFactory()
    limited.allowed_pools.set([mine, off])
    with django_assert_num_queries(2):  # the tenant's list, then the pools
        assert [p.name for p in pools_for_tenant(limited)] == ["sel-mine"]
    names = [p.name for p in pools_for_tenant(free)]
    assert {"sel-mine", "sel-other"} <= set(names) and "sel-off" not in names
    allowed = frozenset([mine.pk, off.pk])  # as the API key's query reads it
    with django_assert_num_queries(1):
        assert [p.name for p in pools_for_tenant(limited, allowed)] == ["sel-mine"]
    assert other.pk not in {p.pk for p in pools_for_tenant(limited)}

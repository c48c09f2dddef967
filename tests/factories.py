"""factory_boy factories for the platform's rows."""
import factory
from django.contrib.auth import get_user_model

from chatsite.chats.models import Chat
from chatsite.pools.models import ModelPool
from chatsite.tenancy.models import Membership, Tenant

PASSWORD = "test-password-123"


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant

    name = factory.Sequence(lambda n: f"Tenant {n}")
    slug = factory.Sequence(lambda n: f"tenant-{n}")


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.PostGenerationMethodCall("set_password", PASSWORD)

    @factory.post_generation
    def tenant(self, create, extracted, **kwargs):
        self.save()
        if extracted is not None:
            Membership.objects.create(user=self, tenant=extracted)


class PoolFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ModelPool
        django_get_or_create = ("name",)

    name = "flagship"
    display_name = factory.LazyAttribute(lambda o: o.name.title())
    model = "/nonexistent/fake-model"
    context_length = 1024
    max_output_tokens = 512
    default_sampling = {"temperature": 0.7, "top_p": 0.95, "max_tokens": 40}


def queueing_pool(name: str, **fields) -> ModelPool:
    """A pool that queues runs while it has no live worker (`queue_when_cold`), for tests
    that admit runs with no worker running; an existing row of that name is marked too,
    and given `fields` (get-or-create would keep its old values)."""
    pool = PoolFactory(name=name, **fields)
    changed = [k for k, v in {**fields, "queue_when_cold": True}.items() if getattr(pool, k) != v]
    for k in changed:
        setattr(pool, k, {**fields, "queue_when_cold": True}[k])
    if changed:
        pool.save(update_fields=changed)
    return pool


class ChatFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Chat

    tenant = factory.SubFactory(TenantFactory)
    owner = factory.SubFactory(UserFactory)
    pool = factory.SubFactory(PoolFactory)

from django.core.management.base import BaseCommand, CommandError
from django.utils.text import slugify

from chatsite.tenancy.models import Tenant
from chatsite.tenancy.services import tenant_create


class Command(BaseCommand):
    help = "Create a tenant (idempotent: an existing tenant of that name is reported, not changed); prints its slug."

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True, help="The tenant's name, e.g. 'Acme Research'.")

    def handle(self, *args, name, **opts):
        name = " ".join(name.split())
        if not name or len(name) > 100:
            raise CommandError("--name must be 1 to 100 characters")
        if not slugify(name):
            raise CommandError(f"--name {name!r} has no letters or digits to make a slug from")
        tenant = Tenant.objects.filter(name=name).first()
        if tenant is None:
            if Tenant.objects.filter(slug=slugify(name)[:50]).exists():
                raise CommandError(f"another tenant already has the slug {slugify(name)[:50]!r}; pick another name")
            tenant = tenant_create(name=name)
            self.stderr.write(f"created tenant {tenant.name!r}")
        else:
            self.stderr.write(f"tenant {tenant.name!r} exists")
        self.stdout.write(tenant.slug)

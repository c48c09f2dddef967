from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from chatsite.errors import ServiceError
from chatsite.tenancy.models import Membership
from chatsite.tenancy.services import api_key_create


class Command(BaseCommand):
    help = "Create an API key for a user and print it (it is shown only once)."

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True)
        parser.add_argument("--tenant", default=None, help="Tenant slug (default: the user's first tenant).")
        parser.add_argument("--name", default="cli")

    def handle(self, *args, user, tenant, name, **opts):
        account = get_user_model().objects.filter(username=user).first()
        if account is None:
            raise CommandError(f"no user named {user!r}")
        memberships = Membership.objects.filter(user=account).select_related("tenant").order_by("id")
        if tenant:
            memberships = memberships.filter(tenant__slug=tenant)
        membership = memberships.first()
        if membership is None:
            raise CommandError(f"{user!r} is not a member of {'tenant ' + tenant if tenant else 'any tenant'}")
        try:
            _, secret = api_key_create(user=account, tenant=membership.tenant, name=name)
        except ServiceError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(secret)

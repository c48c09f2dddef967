import secrets
import sys

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from chatsite.tenancy.models import Membership, Tenant
from chatsite.tenancy.services import membership_add, user_create_in_tenant


class Command(BaseCommand):
    help = ("Add a user to a tenant with a role (idempotent; a second run sets the role). With --create, a "
            "missing user is created: its password is read from stdin (--password-stdin) or generated and "
            "printed once.")

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True, help="The tenant's slug.")
        parser.add_argument("--user", required=True, help="The username.")
        parser.add_argument("--role", choices=Membership.Role.values, default=Membership.Role.MEMBER)
        parser.add_argument("--create", action="store_true", help="Create the user if there is none of that name.")
        parser.add_argument("--email", default="", help="With --create: the new user's email.")
        parser.add_argument("--password-stdin", action="store_true",
                            help="With --create: read the new user's password from the first line of stdin.")

    def handle(self, *args, tenant, user, role, create, email, password_stdin, **opts):
        team = Tenant.objects.filter(slug=tenant).first()
        if team is None:
            raise CommandError(f"no tenant with the slug {tenant!r} (manage.py create_tenant makes one)")
        account = get_user_model().objects.filter(username=user).first()
        if account is None and not create:
            raise CommandError(f"no user named {user!r}; pass --create to create one")
        with transaction.atomic():
            if account is None:
                account = self._create(team, user, email, password_stdin)
            membership = membership_add(tenant=team, user=account, role=role)
            if membership.role != role:
                # No service sets a role yet: the admin's form does the same single-field write.
                Membership.objects.filter(pk=membership.pk).update(role=role)
        self.stderr.write(f"{account.username} is {'an' if role == 'admin' else 'a'} {role} of {team.slug}")

    def _create(self, team, username, email, password_stdin):
        generated = not password_stdin
        password = secrets.token_urlsafe(18) if generated else sys.stdin.readline().rstrip("\n")
        if not password:
            raise CommandError("--password-stdin read an empty password")
        model = get_user_model()
        try:
            model(username=username).clean_fields(exclude=["password", "email"])
        except ValidationError as exc:
            raise CommandError(f"--user: {'; '.join(exc.messages)}") from None
        account = user_create_in_tenant(tenant=team, username=username, password=password, email=email)
        self.stderr.write(f"created user {username}")
        if generated:
            self.stdout.write(password)  # shown once, as create_api_key shows a key
        return account

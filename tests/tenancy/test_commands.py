"""Operator commands a deployment script runs: create a tenant, add a user with a role."""
import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from chatsite.tenancy.models import Membership, Tenant
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def run(*args, stdin: str | None = None, monkeypatch=None) -> str:
    out = io.StringIO()
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue().strip()


def test_create_tenant_prints_its_slug_and_a_second_run_changes_nothing():
    assert run("create_tenant", "--name", "Acme  Research") == "acme-research"
    assert run("create_tenant", "--name", "Acme Research") == "acme-research"
    assert Tenant.objects.filter(name="Acme Research").count() == 1


@pytest.mark.parametrize("name, problem", [("", "1 to 100 characters"), ("!!!", "no letters or digits")])
def test_create_tenant_refuses_a_name_it_cannot_use(name, problem):
    with pytest.raises(CommandError, match=problem):
        run("create_tenant", "--name", name)


def test_create_tenant_refuses_a_name_whose_slug_is_taken():
    run("create_tenant", "--name", "Acme")
    with pytest.raises(CommandError, match="slug 'acme'"):
        run("create_tenant", "--name", "ACME")


def test_add_member_creates_a_user_with_a_password_from_stdin_and_sets_the_role(monkeypatch):
    run("create_tenant", "--name", "Ops")
    out = run("add_member", "--tenant", "ops", "--user", "ana", "--role", "admin", "--create",
              "--password-stdin", stdin="s3cret-pass\n", monkeypatch=monkeypatch)
    assert out == ""  # nothing secret printed when the password came from stdin
    ana = get_user_model().objects.get(username="ana")
    assert ana.check_password("s3cret-pass")
    assert Membership.objects.get(user=ana, tenant__slug="ops").role == "admin"
    run("add_member", "--tenant", "ops", "--user", "ana", "--role", "member")  # a second run sets the role
    assert Membership.objects.get(user=ana, tenant__slug="ops").role == "member"


def test_add_member_generates_and_prints_a_password_once():
    run("create_tenant", "--name", "Gen")
    password = run("add_member", "--tenant", "gen", "--user", "bo", "--create")
    assert len(password) >= 20 and get_user_model().objects.get(username="bo").check_password(password)


def test_add_member_adds_an_existing_user_to_a_second_tenant():
    user = UserFactory()
    run("create_tenant", "--name", "First")
    run("create_tenant", "--name", "Second")
    run("add_member", "--tenant", "first", "--user", user.username)
    run("add_member", "--tenant", "second", "--user", user.username, "--role", "admin")
    assert dict(Membership.objects.filter(user=user).values_list("tenant__slug", "role")) == {
        "first": "member", "second": "admin"}


@pytest.mark.parametrize("args, problem", [
    (["--tenant", "nope", "--user", "x"], "no tenant with the slug 'nope'"),
    (["--tenant", "t", "--user", "nobody"], "pass --create"),
    (["--tenant", "t", "--user", "bad name!", "--create"], "--user: Enter a valid username"),
])
def test_add_member_names_the_problem(args, problem):
    Tenant.objects.create(name="T", slug="t")
    with pytest.raises(CommandError, match=problem):
        run("add_member", *args)

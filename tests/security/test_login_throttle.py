"""Sign-in throttling as a user meets it on the web login page and the admin:
made-up names lock nobody real, an account locks from an address with backoff and
says so, an address locks only far later, an address where the account signed in is
known to it, and the address is the client's, through trusted proxies only. Real
Redis; Django's test client posts the real forms (tests/security/test_login_lockout.py
drives the live stack)."""
import time

import pytest
from django.test import Client

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.tenancy.addresses import client_address
from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _limits(settings):
    for pattern in ("login-lock:*", "login-known:*"):
        for key in get_redis().scan_iter(pattern):
            get_redis().delete(key)
    settings.CHATSITE = {**settings.CHATSITE, "LOGIN_MAX_FAILURES": 5, "LOGIN_MAX_FAILURES_PER_ADDRESS": 12,
                         "LOGIN_MAX_FAILURES_PER_ACCOUNT": 20, "LOGIN_KNOWN_ADDRESS_SECONDS": 3600,
                         "LOGIN_LOCK_SECONDS": 60, "LOGIN_LOCK_MAX_SECONDS": 900, "TRUSTED_PROXIES": []}


def _sign_in(client: Client, username: str, password: str, **extra):
    resp = client.post("/login/", {"username": username, "password": password}, **extra)
    return resp, client.session.get("_auth_user_id")


def _record(kind: str, value: str) -> dict:
    return get_redis().hgetall(redis_keys.login_lock(kind, value))


def _pair(address: str, username: str) -> dict:
    return _record("pair", f"{address} {username}")


def test_failures_for_made_up_names_never_lock_a_real_account(tenant):
    user = UserFactory(tenant=tenant)
    attacker = Client(REMOTE_ADDR="203.0.113.7")
    for i in range(11):  # the reproduction was 6; stay under the address limit (12)
        resp, signed_in = _sign_in(attacker, f"nobody{i}", "guess")
        assert resp.status_code == 200 and signed_in is None
    resp, signed_in = _sign_in(Client(REMOTE_ADDR="203.0.113.7"), user.username, PASSWORD)
    assert signed_in == str(user.pk)  # same address, real user, right password: in


def test_an_account_locks_from_an_address_says_why_and_until_when_and_locked_attempts_do_not_count(tenant):
    user = UserFactory(tenant=tenant)
    client = Client(REMOTE_ADDR="198.51.100.1")
    for _ in range(5):
        resp, _ = _sign_in(client, user.username, "wrong")
        assert "don’t match" in resp.content.decode()
    locked_until = float(_pair("198.51.100.1", user.username)["locked_until"])
    assert 55 < locked_until - time.time() <= 60
    for _ in range(3):  # right password while locked: refused, not checked, not counted
        resp, signed_in = _sign_in(Client(REMOTE_ADDR="198.51.100.1"), user.username, PASSWORD)
        assert signed_in is None
    page = resp.content.decode()
    assert "too many failed sign-ins for this account from your network address" in page
    assert "Try again after" in page and "UTC" in page and "password was not checked" in page
    record = _pair("198.51.100.1", user.username)
    assert record["failures"] == "5" and float(record["locked_until"]) == locked_until  # not pushed further
    assert _record("user", user.username)["failures"] == "5"  # counted for the account too, under its limit
    _, signed_in = _sign_in(Client(REMOTE_ADDR="198.51.100.2"), user.username, PASSWORD)
    assert signed_in == str(user.pk)  # from another address: in


def test_the_lock_doubles_per_further_failure_and_a_success_clears_the_pair(tenant, settings):
    settings.CHATSITE = {**settings.CHATSITE, "LOGIN_LOCK_SECONDS": 1, "LOGIN_MAX_FAILURES": 2}
    user = UserFactory(tenant=tenant)
    client = Client()
    locks = []
    for _ in range(3):  # failures 2 and 3 each lock; each waits out the previous lock first
        _sign_in(client, user.username, "wrong")
        if _pair("127.0.0.1", user.username).get("locked_until"):
            locks.append(float(_pair("127.0.0.1", user.username)["locked_until"]) - time.time())
            time.sleep(max(0.0, locks[-1]) + 0.05)
    assert [round(x) for x in locks] == [1, 2]  # 1 s after the 2nd failure, 2 s after the 3rd
    _, signed_in = _sign_in(Client(), user.username, PASSWORD)
    assert signed_in == str(user.pk)
    assert _pair("127.0.0.1", user.username) == {}  # forgotten: the next typo starts from zero


def test_one_address_spraying_many_accounts_is_locked_later_and_only_that_address(tenant):
    victim = UserFactory(tenant=tenant)
    spray = Client(REMOTE_ADDR="192.0.2.50")
    for i in range(12):
        _sign_in(spray, f"user-guess-{i}", "Winter2026!")
    resp, signed_in = _sign_in(Client(REMOTE_ADDR="192.0.2.50"), victim.username, PASSWORD)
    assert signed_in is None and "too many failed sign-ins for your network address" in resp.content.decode()
    _, signed_in = _sign_in(Client(REMOTE_ADDR="192.0.2.51"), victim.username, PASSWORD)
    assert signed_in == str(victim.pk)
    assert _record("user", victim.username) == {}  # the victim's own account was never counted


def test_at_an_address_where_the_account_signed_in_a_guesser_is_held_to_the_pairs_limit(tenant):
    user = UserFactory(tenant=tenant)
    office = Client(REMOTE_ADDR="192.0.2.60")
    _, signed_in = _sign_in(office, user.username, PASSWORD)
    assert signed_in == str(user.pk)
    for i in range(12):  # the address locks
        _sign_in(Client(REMOTE_ADDR="192.0.2.60"), f"nobody{i}", "guess")
    for _ in range(5):  # guesses for the known account are still checked, and counted for its pair
        resp, signed_in = _sign_in(Client(REMOTE_ADDR="192.0.2.60"), user.username, "wrong")
        assert signed_in is None and "don’t match" in resp.content.decode()
    resp, signed_in = _sign_in(Client(REMOTE_ADDR="192.0.2.60"), user.username, PASSWORD)
    assert signed_in is None and "for this account from your network address" in resp.content.decode()


def test_an_address_is_known_for_the_account_only_for_a_while(tenant, settings):
    settings.CHATSITE = {**settings.CHATSITE, "LOGIN_KNOWN_ADDRESS_SECONDS": 1}
    user = UserFactory(tenant=tenant)
    _sign_in(Client(REMOTE_ADDR="192.0.2.70"), user.username, PASSWORD)
    for i in range(12):
        _sign_in(Client(REMOTE_ADDR="192.0.2.70"), f"nobody{i}", "guess")
    _, signed_in = _sign_in(Client(REMOTE_ADDR="192.0.2.70"), user.username, PASSWORD)
    assert signed_in == str(user.pk)  # known there: the address's lock does not apply
    time.sleep(1.2)
    resp, signed_in = _sign_in(Client(REMOTE_ADDR="192.0.2.70"), user.username, PASSWORD)
    assert signed_in is None and "for your network address" in resp.content.decode()


def test_the_admin_login_is_throttled_too(tenant):
    staff = UserFactory(tenant=tenant, is_staff=True, is_superuser=True)
    client = Client()
    for _ in range(5):
        client.post("/admin/login/", {"username": staff.username, "password": "wrong", "next": "/admin/"})
    resp = client.post("/admin/login/", {"username": staff.username, "password": PASSWORD, "next": "/admin/"})
    assert resp.status_code == 200 and "_auth_user_id" not in client.session


def test_behind_trusted_proxies_each_client_is_its_own_address(tenant, settings):
    settings.CHATSITE = {**settings.CHATSITE, "TRUSTED_PROXIES": ["10.0.0.0/8"], "LOGIN_MAX_FAILURES_PER_ADDRESS": 3}
    user = UserFactory(tenant=tenant)
    via_proxy = {"REMOTE_ADDR": "10.0.0.2"}
    for i in range(3):  # one client behind the balancer sprays and gets its address locked
        _sign_in(Client(**via_proxy), f"x{i}", "x", HTTP_X_FORWARDED_FOR="198.51.100.9")
    _, signed_in = _sign_in(Client(**via_proxy), user.username, PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.10")
    assert signed_in == str(user.pk)  # another client of the same balancer is not affected
    # the sprayer cannot dodge by writing its own X-Forwarded-For: the balancer appends the real address
    _, signed_in = _sign_in(Client(**via_proxy), user.username, PASSWORD,
                            HTTP_X_FORWARDED_FOR="1.2.3.4, 198.51.100.9")
    assert signed_in is None


@pytest.mark.parametrize("remote, forwarded, expected", [
    ("198.51.100.1", "1.2.3.4", "198.51.100.1"),  # not a trusted peer: its header is ignored
    ("10.0.0.2", "198.51.100.7", "198.51.100.7"),
    ("10.0.0.2", "6.6.6.6, 198.51.100.7, 10.0.0.9", "198.51.100.7"),  # right to left through trusted hops
    ("10.0.0.2", "10.0.0.3, 10.0.0.9", "10.0.0.3"),  # all trusted: the farthest
    ("10.0.0.2", "198.51.100.7:4242", "198.51.100.7"),
    ("10.0.0.2", "[2001:db8::1]:443", "2001:db8::1"),
    ("10.0.0.2", "2001:db8::2", "2001:db8::2"),
    ("10.0.0.2", "6.6.6.6, garbage", "10.0.0.2"),  # a hop that is not an address: stop at the last good one
    ("10.0.0.2", "", "10.0.0.2"),
    ("::1", "198.51.100.7", "::1"),
])
def test_client_address_reads_forwarded_for_only_through_trusted_proxies(settings, remote, forwarded, expected):
    settings.CHATSITE = {**settings.CHATSITE, "TRUSTED_PROXIES": ["10.0.0.0/8", "127.0.0.1"]}
    assert client_address(remote, forwarded) == expected

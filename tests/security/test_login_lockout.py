"""Sign-in throttling must not hand a guesser a way to lock a real user out (issue 44
item 8), on the live stack: a web process behind a trusted proxy (127.0.0.1, as a
load balancer would be), each client's address in X-Forwarded-For, the default limits
(5 failures per account and address, 50 per address, 20 per account)."""
import httpx
import pytest
from django.middleware.csrf import _get_new_csrf_string

from chatsite.redis_client import get_redis
from tests import stack
from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)  # the web process reads the users


@pytest.fixture(scope="module")
def web(stack_env):
    proc, url = stack.start_web({**stack_env, "CHATSITE_TRUSTED_PROXIES": "127.0.0.1"}, name="web-login-lockout")
    yield url
    proc.stop()


@pytest.fixture(autouse=True)
def _forget_sign_ins():
    for pattern in ("login-lock:*", "login-known:*"):
        for key in get_redis().scan_iter(pattern):
            get_redis().delete(key)


def _sign_in(web: str, username: str, password: str, address: str) -> httpx.Response:
    """The login form posted by a client at `address` (appended by the trusted proxy)."""
    csrf = _get_new_csrf_string()
    return httpx.post(f"{web}/login/", data={"username": username, "password": password, "csrfmiddlewaretoken": csrf},
                      cookies={"csrftoken": csrf}, headers={"X-Forwarded-For": address}, timeout=30)


def _signed_in(resp: httpx.Response) -> bool:
    return resp.status_code == 302 and "sessionid" in resp.cookies


@pytest.mark.slow
def test_made_up_names_from_the_users_address_do_not_lock_the_user_out_there(web, tenant):
    """Found: 50 failed sign-ins with made-up names from one address refused the real
    user's right password from that address."""
    user, office = UserFactory(tenant=tenant), "198.51.100.20"
    assert _signed_in(_sign_in(web, user.username, PASSWORD, office))  # where the user signs in
    for i in range(50):
        assert not _signed_in(_sign_in(web, f"nobody-{i}", "guess", office))
    refused = _sign_in(web, "nobody-50", "guess", office)
    assert "too many failed sign-ins for your network address" in refused.text  # the address is locked...
    assert _signed_in(_sign_in(web, user.username, PASSWORD, office))  # ...not for the user who signs in there


def test_bad_passwords_from_one_address_lock_the_account_there_only(web, tenant):
    """Found: five bad passwords locked a named account from everywhere."""
    user, guesser = UserFactory(tenant=tenant), "203.0.113.30"
    for _ in range(5):
        assert not _signed_in(_sign_in(web, user.username, "wrong", guesser))
    assert _signed_in(_sign_in(web, user.username, PASSWORD, "198.51.100.31"))  # an address with no failures
    refused = _sign_in(web, user.username, PASSWORD, guesser)  # the guesser's address stays locked for it
    assert not _signed_in(refused)
    assert "too many failed sign-ins for this account from your network address" in refused.text
    assert "password was not checked" in refused.text


@pytest.mark.slow
def test_a_spray_from_one_address_is_still_stopped_there(web, tenant):
    """What the address's lock is for: once it is locked, a right password for an account
    that never signed in from there is refused unchecked, as a sprayer's lucky guess would be."""
    user, sprayer = UserFactory(tenant=tenant), "192.0.2.40"
    for i in range(50):
        _sign_in(web, f"user-guess-{i}", "Winter2026!", sprayer)
    refused = _sign_in(web, user.username, PASSWORD, sprayer)
    assert not _signed_in(refused) and "too many failed sign-ins for your network address" in refused.text
    assert _signed_in(_sign_in(web, user.username, PASSWORD, "192.0.2.41"))


def test_many_addresses_guessing_one_account_lock_it_except_where_it_signs_in(web, tenant):
    """A botnet's guesses (5 from each of 4 addresses, the pairs' limit) lock the account
    from new addresses; the address the user signs in from is not affected."""
    user, home = UserFactory(tenant=tenant), "198.51.100.50"
    assert _signed_in(_sign_in(web, user.username, PASSWORD, home))
    for i in range(20):
        assert not _signed_in(_sign_in(web, user.username, f"guess-{i}", f"203.0.113.{100 + i // 5}"))
    refused = _sign_in(web, user.username, PASSWORD, "203.0.113.200")
    assert not _signed_in(refused) and "too many failed sign-ins for this account" in refused.text
    assert _signed_in(_sign_in(web, user.username, PASSWORD, home))

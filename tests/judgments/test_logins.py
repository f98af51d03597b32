"""Login throttling: failed logins pause logging in per username and per address, before any password
hashing, with the same answers for unknown usernames; the login page explains; a command lifts it."""

import re
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.hashers import MD5PasswordHasher
from django.core.management import CommandError, call_command
from django.test import Client, RequestFactory
from django.urls import reverse

from judgments.logins import client_address
from tests.factory import PASSWORD

LOGIN = reverse("login")


class CountingHasher(MD5PasswordHasher):
    """The tests' fast hasher, counting how often a password is hashed."""

    calls = 0

    def encode(self, password, salt):
        CountingHasher.calls += 1
        return super().encode(password, salt)


def log_in(username: str, password: str, address: str = "10.0.0.1", client: Client | None = None, **extra):
    return (client or Client()).post(LOGIN, {"username": username, "password": password, **extra}, REMOTE_ADDR=address)


def logged_in(response) -> bool:
    return response.status_code == 302 and "_auth_user_id" in response.wsgi_request.session


def paused(response) -> bool:
    return response.status_code == 429 and "Logging in is paused" in response.content.decode()


def test_after_the_limit_of_wrong_passwords_even_the_right_one_is_refused(people, settings):
    assert settings.AXES_FAILURE_LIMIT == settings.LOGIN_FAILURE_LIMIT == 10
    for attempt in range(9):
        response = log_in("lena", "wrong")
        assert response.status_code == 200 and "enter a correct username and password" in response.content.decode()
    assert paused(log_in("lena", "wrong"))  # the tenth
    refused = log_in("lena", PASSWORD)
    assert paused(refused) and not logged_in(refused)
    assert logged_in(log_in("ravi", PASSWORD, address="10.0.0.2"))  # other people are not affected


def test_the_pause_is_explained_on_the_login_page_until_it_ends(people, settings):
    settings.AXES_FAILURE_LIMIT = 3
    for _ in range(3):
        response = log_in("lena", "wrong", next="/queue/")
    page = response.content.decode()
    assert paused(response)
    assert "Try again after" in page and "in 15" in page and "ask an administrator of this Verdict to unlock it now" in page
    assert 'value="lena"' in page and 'name="next" value="/queue/"' in page and 'name="password"' in page
    assert 14 * 60 < int(response["Retry-After"]) <= 15 * 60
    for _ in range(5):  # attempts during the pause are not counted, so it ends on time
        log_in("lena", "wrong")
    assert sum(AccessAttempt.objects.values_list("failures_since_start", flat=True)) == 3
    AccessAttempt.objects.update(attempt_time=AccessAttempt.objects.get().attempt_time - timedelta(minutes=15, seconds=1))
    assert logged_in(log_in("lena", PASSWORD))


def test_unknown_usernames_count_and_get_the_same_answers(people, settings):
    settings.AXES_FAILURE_LIMIT = 3
    answers = {}
    for username, address in (("lena", "10.0.0.1"), ("nobody", "10.0.0.2")):
        client = Client()
        pages = [log_in(username, "wrong", address, client) for _ in range(4)]
        answers[username] = [(page.status_code, _message(page).replace(username, "NAME")) for page in pages]
    assert answers["lena"] == answers["nobody"]
    assert [status for status, _ in answers["nobody"]] == [200, 200, 429, 429]


def _message(response) -> str:
    return " ".join(re.findall(r'role="alert">\s*([^<]*)', response.content.decode())).split(" Try again")[0]


def test_one_address_guessing_many_usernames_is_paused_but_not_the_people_elsewhere(people, settings):
    settings.AXES_FAILURE_LIMIT = 4
    for username in ("lena", "ravi", "vera", "otto"):  # one failure each: no username reaches the limit
        log_in(username, "wrong", address="203.0.113.9")
    assert paused(log_in("vera", PASSWORD, address="203.0.113.9"))
    assert logged_in(log_in("vera", PASSWORD, address="198.51.100.7"))


def test_many_addresses_guessing_one_username_pause_it_everywhere(people, settings):
    settings.AXES_FAILURE_LIMIT = 4
    for n in range(4):
        log_in("lena", "wrong", address=f"198.51.100.{n}")
    assert paused(log_in("lena", PASSWORD, address="192.0.2.200"))


def test_a_paused_attempt_is_refused_before_any_password_is_hashed(people, settings):
    settings.AXES_FAILURE_LIMIT = 2
    settings.PASSWORD_HASHERS = ["tests.judgments.test_logins.CountingHasher"]
    for username in ("lena", "nobody"):
        CountingHasher.calls = 0
        log_in(username, "wrong", address="10.9.9.9")
        assert CountingHasher.calls == 1  # an unknown username is hashed too, so it takes as long
    CountingHasher.calls = 0
    for _ in range(20):
        assert paused(log_in("lena", PASSWORD, address="10.9.9.9"))
    assert CountingHasher.calls == 0


def test_the_unlock_command_lifts_a_pause_on_a_username_or_an_address(people, settings, capsys):
    settings.AXES_FAILURE_LIMIT = 3
    for _ in range(3):
        log_in("lena", "wrong", address="10.1.1.1")
    for username in ("ravi", "vera", "otto"):
        log_in(username, "wrong", address="10.2.2.2")
    call_command("unlock_login", "lena", "ghost")
    output = capsys.readouterr().out
    assert "username lena: 3 failed login(s) forgotten; logging in works again." in output
    assert "username ghost: no failed logins recorded, nothing to unlock." in output
    assert paused(log_in("ravi", PASSWORD, address="10.2.2.2"))
    call_command("unlock_login", "--ip", "10.2.2.2")
    assert "address 10.2.2.2: 3 failed login(s) forgotten" in capsys.readouterr().out
    assert logged_in(log_in("ravi", PASSWORD, address="10.2.2.2"))
    assert logged_in(log_in("lena", PASSWORD, address="10.1.1.1"))
    with pytest.raises(CommandError, match="name a USERNAME or an --ip ADDRESS"):
        call_command("unlock_login")
    with pytest.raises(CommandError, match="'10.0.0' is not an IP address"):
        call_command("unlock_login", "--ip", "10.0.0")


@pytest.mark.parametrize("proxies, forwarded, expected", [
    (0, "198.51.100.1", "10.0.0.1"),  # no proxy trusted: the header is anyone's to write
    (1, "198.51.100.1", "198.51.100.1"),
    (1, "6.6.6.6, 198.51.100.1", "198.51.100.1"),  # what the client wrote stays on the left
    (2, "6.6.6.6, 198.51.100.1, 10.0.0.5", "198.51.100.1"),
    (2, "198.51.100.1", "10.0.0.1"),  # fewer entries than proxies: not through them
    (1, "not-an-address", "10.0.0.1"),
    (1, "", "10.0.0.1"),
    (1, "2001:db8::1", "2001:db8::1"),
])
def test_the_client_address_comes_from_x_forwarded_for_only_through_trusted_proxies(settings, proxies, forwarded, expected):
    settings.TRUSTED_PROXY_COUNT = proxies
    request = RequestFactory().post(LOGIN, REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_address(request) == expected


def test_behind_a_proxy_each_client_address_has_its_own_count(people, settings):
    settings.AXES_FAILURE_LIMIT = 2
    settings.TRUSTED_PROXY_COUNT = 1
    for username in ("ravi", "vera"):
        Client().post(LOGIN, {"username": username, "password": "wrong"}, REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="198.51.100.1")
    through_proxy = Client().post(LOGIN, {"username": "lena", "password": PASSWORD}, REMOTE_ADDR="10.0.0.1",
                                  HTTP_X_FORWARDED_FOR="198.51.100.1")
    assert paused(through_proxy)
    other = Client().post(LOGIN, {"username": "lena", "password": PASSWORD}, REMOTE_ADDR="10.0.0.1",
                          HTTP_X_FORWARDED_FOR="6.6.6.6, 198.51.100.2")
    assert logged_in(other)

"""Password reset by mail: offered only when mail is configured (EMAIL_URL), and it never tells who has an account."""

import re

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse

from tests.factory import PASSWORD

NEW_PASSWORD = "a brand new passphrase 42"
RESET_URLS = ["/accounts/password_reset/", "/accounts/password_reset/done/",
              "/accounts/reset/MQ/set-password/", "/accounts/reset/done/"]


def logs_in(username: str, password: str) -> bool:
    """Through the login form, as a person would (django-axes refuses authenticate() without a request)."""
    response = Client().post(reverse("login"), {"username": username, "password": password})
    return response.status_code == 302


@pytest.fixture
def mail_on(settings):
    # The test run sends every mail to Django's locmem outbox (mail.outbox), whatever EMAIL_URL says.
    settings.EMAIL_ENABLED = True
    settings.DEFAULT_FROM_EMAIL = "verdict@shop.example"


def ask_for_reset(address: str):
    return Client().post(reverse("password_reset"), {"email": address})


def test_the_login_page_offers_a_reset_when_mail_is_on(mail_on, client):
    page = client.get(reverse("login")).content.decode()
    assert f'href="{reverse("password_reset")}">Forgot your password?</a>' in page


def test_a_forgotten_password_is_reset_through_the_mailed_link(mail_on, people):
    form = Client().get(reverse("password_reset"))
    assert form.status_code == 200
    assert "Forgot your password?" in form.content.decode()

    response = ask_for_reset("ravi@example.com")
    assert response["Location"] == reverse("password_reset_done")
    assert "Check your mail" in Client().get(response["Location"]).content.decode()
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert (message.to, message.from_email, message.subject) == (["ravi@example.com"], "verdict@shop.example",
                                                                 "Verdict: set a new password")
    link = re.search(r"http://testserver(/accounts/reset/\S+/)", message.body).group(1)

    browser = Client()
    choose = browser.get(link, follow=True)
    assert "Set a new password" in choose.content.decode()
    assert 'name="new_password1"' in choose.content.decode()
    done = browser.post(choose.redirect_chain[-1][0], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert done["Location"] == reverse("password_reset_complete")
    assert "Password set" in browser.get(done["Location"]).content.decode()

    assert logs_in("ravi", NEW_PASSWORD)
    assert not logs_in("ravi", PASSWORD)
    login = Client().post(reverse("login"), {"username": "ravi", "password": NEW_PASSWORD})
    assert login["Location"] == reverse("judgments:projects")
    used_again = Client().get(link, follow=True).content.decode()
    assert "This link has expired or was used already." in used_again


def test_an_unknown_address_gets_the_same_answer_and_no_mail(mail_on, people):
    known, unknown = ask_for_reset("ravi@example.com"), ask_for_reset("nobody@example.com")
    assert (unknown.status_code, unknown["Location"]) == (known.status_code, known["Location"])
    assert [message.to for message in mail.outbox] == [["ravi@example.com"]]


def test_a_weak_new_password_is_refused_with_the_reason(mail_on, people):
    ask_for_reset("ravi@example.com")
    link = re.search(r"http://testserver(/accounts/reset/\S+/)", mail.outbox[0].body).group(1)
    browser = Client()
    choose = browser.get(link, follow=True)
    refused = browser.post(choose.redirect_chain[-1][0], {"new_password1": "12345678", "new_password2": "12345678"})
    assert refused.status_code == 200
    assert "This password is too common." in refused.content.decode()
    assert logs_in("ravi", PASSWORD)


def test_without_mail_the_reset_pages_do_not_exist_and_login_offers_none(settings, client):
    settings.EMAIL_ENABLED = False
    assert "Forgot your password?" not in client.get(reverse("login")).content.decode()
    for url in RESET_URLS:
        assert client.get(url).status_code == 404, url
        assert client.post(url, {"email": "ravi@example.com"}).status_code == 404, url
    assert not mail.outbox

"""A lead invites members by e-mail, removes them and changes their role; a project always keeps a lead.
An invitation never tells the lead whether an account uses the address."""

import hashlib
import html
import re
from datetime import timedelta

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from judgments.models import Invitation, Membership, Role
from tests.factory import make_user


def members_url(people, name="judgments:members", member=None, invitation=None):
    args = [people.project.slug] + ([member.uuid] if member else []) + ([invitation.uuid] if invitation else [])
    return reverse(name, args=args)


def membership(people, user) -> Membership:
    return people.project.memberships.get(user=user)


def test_every_member_sees_the_member_list_but_only_the_lead_gets_the_controls_and_invitations(people):
    invite(people, "newbie@example.com")
    lead_page = people.client("lead").get(members_url(people))
    for who in ("rater", "viewer"):
        page = people.client(who).get(members_url(people))
        assert b"ravi" in page.content and b"vera" in page.content
        assert b"Invite" not in page.content and b"newbie@example.com" not in page.content
    assert b"Invite" in lead_page.content and b"newbie@example.com" in lead_page.content


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def invite(people, email: str, role: str = "rater", **headers):
    return people.client("lead").post(members_url(people, "judgments:invitation-create"), {"email": email, "role": role}, headers=headers)


def message_of(response) -> str:
    return re.search(r'<p class="message message-\w+">([^<]*)</p>', response.content.decode()).group(1)


@pytest.mark.parametrize("email_enabled", [False, True])
def test_inviting_any_address_creates_an_invitation_and_says_the_same_whoever_uses_it(people, settings, email_enabled):
    settings.EMAIL_ENABLED = email_enabled
    make_user("newbie")
    answers = set()
    # An account's address, an address no account uses, a member's address: the lead cannot tell them apart.
    for email in ("newbie@example.com", "nobody@example.org", "ravi@example.com"):
        response = invite(people, email, HX_Request="true")
        assert response.status_code == 200 and b"<html" not in response.content and b'id="member-list"' in response.content
        answers.add(html.unescape(message_of(response)).replace(email, "ADDRESS"))
    assert answers == {"Invitation for ADDRESS created and sent by e-mail." if email_enabled else
                       "Invitation for ADDRESS created: share its link below with them."}
    assert people.project.memberships.count() == 3  # nobody was added
    assert set(people.project.invitations.values_list("email", "role")) == {
        ("newbie@example.com", "rater"), ("nobody@example.org", "rater"), ("ravi@example.com", "rater")}
    if email_enabled:
        assert [message.to for message in mail.outbox] == [["newbie@example.com"], ["nobody@example.org"], ["ravi@example.com"]]
        link = people.project.invitations.get(email="nobody@example.org").get_absolute_url()
        assert link in mail.outbox[1].body and "Shop search" in mail.outbox[1].subject
    else:
        assert not mail.outbox


def test_a_mail_that_cannot_be_sent_leaves_the_invitation_to_share_by_hand(people, settings, monkeypatch):
    settings.EMAIL_ENABLED = True
    monkeypatch.setattr("django.core.mail.EmailMessage.send", lambda self, **kw: (_ for _ in ()).throw(ConnectionRefusedError(111, "refused")))
    response = people.client("lead").post(members_url(people, "judgments:invitation-create"), {"email": "newbie@example.com", "role": "rater"},
                                          follow=True)
    assert "Invitation for newbie@example.com created, but the mail could not be sent: share its link below" in response.content.decode()
    assert people.project.invitations.pending().count() == 1


def test_the_lead_copies_a_pending_link_again_and_the_database_keeps_only_its_hash(people):
    invite(people, "newbie@example.com")
    invitation = people.project.invitations.get()
    page = people.client("lead").get(members_url(people)).content.decode()
    assert f'value="http://testserver/invitations/{invitation.token}/"' in page
    assert invitation.token not in repr(list(Invitation.objects.values_list()))
    assert invitation.token_hash == hashlib.sha256(invitation.token.encode()).hexdigest()


def test_a_second_pending_invitation_for_the_same_address_is_refused(people):
    invite(people, "newbie@example.com")
    again = invite(people, "NEWBIE@example.com", role="viewer")
    assert "already has a pending invitation" in again.content.decode()
    assert people.project.invitations.count() == 1
    assert b"Enter a valid email address" in invite(people, "not an address").content


def test_the_invitee_logs_in_and_accepts_and_joins_with_the_invited_role(people, client):
    newbie = make_user("newbie")
    invite(people, "Newbie@Example.com", role="viewer")
    link = people.project.invitations.get().get_absolute_url()
    anonymous = client.get(link)
    assert anonymous.status_code == 200
    page = anonymous.content.decode()
    assert "lena invites" in page and "Shop search" in page and "Log in to accept" in page and "no sign-up" in page
    assert client.post(link)["Location"] == f"{reverse('login')}?next={link}"
    accepted = client_of(newbie).post(link)
    assert accepted["Location"] == people.project.get_absolute_url()
    assert client_of(newbie).post(link)["Location"] == link  # a second click changes nothing
    assert people.project.memberships.get(user=newbie).role == Role.VIEWER
    invitation = people.project.invitations.get()
    assert invitation.accepted_by == newbie and invitation.status == Invitation.Status.ACCEPTED
    used = client.get(link)
    assert used.status_code == 410 and "a link works once" in used.content.decode()


def test_an_account_with_another_address_cannot_accept(people):
    invite(people, "newbie@example.com")
    link = people.project.invitations.get().get_absolute_url()
    otto = people.client("outsider")
    page = otto.get(link).content.decode()
    assert "This invitation is for newbie@example.com, and you are logged in as otto (otto@example.com)" in page
    assert "Join Shop search" not in page
    otto.post(link)
    assert not people.project.memberships.filter(user=people.outsider).exists()
    assert people.project.invitations.get().status == Invitation.Status.PENDING


def test_an_account_without_an_address_accepts_and_a_member_is_told_so(people):
    invite(people, "someone@example.com")
    link = people.project.invitations.get().get_absolute_url()
    ravi = people.client("rater")
    people.rater.email = ""
    people.rater.save()
    assert "You are already a member of this project (rater)" in ravi.get(link).content.decode()
    quiet = make_user("quiet", email="")
    client_of(quiet).post(link)
    assert people.project.memberships.get(user=quiet).role == Role.RATER


def test_expired_revoked_and_unknown_links_say_what_happened(people, client):
    invite(people, "late@example.com")
    invite(people, "gone@example.com")
    late, gone = (people.project.invitations.get(email=email) for email in ("late@example.com", "gone@example.com"))
    Invitation.objects.filter(pk=late.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    response = people.client("lead").post(members_url(people, "judgments:invitation-revoke", invitation=gone), follow=True)
    assert "Invitation for gone@example.com revoked" in response.content.decode()
    expired = client.get(late.get_absolute_url())
    assert expired.status_code == 410 and "This invitation expired on" in expired.content.decode()
    revoked = client.get(gone.get_absolute_url())
    assert revoked.status_code == 410 and "withdrawn by a lead" in revoked.content.decode()
    unknown = client.get(reverse("judgments:invitation", args=["0" * 64]))
    assert unknown.status_code == 404 and "This invitation link is not valid" in unknown.content.decode()
    newbie = make_user("late")
    client_of(newbie).post(late.get_absolute_url())
    assert not people.project.memberships.filter(user=newbie).exists()
    assert not people.project.invitations.pending().exists()


def test_only_a_lead_of_the_project_revokes(people):
    invite(people, "newbie@example.com")
    invitation = people.project.invitations.get()
    url = members_url(people, "judgments:invitation-revoke", invitation=invitation)
    assert people.client("rater").post(url).status_code == 403
    assert people.client("outsider").post(url).status_code == 404
    other = people.outsider.memberships.get().project
    foreign = reverse("judgments:invitation-revoke", args=[other.slug, invitation.uuid])
    assert people.client("outsider").post(foreign).status_code == 404
    assert people.client("lead").get(url).status_code == 405
    assert people.project.invitations.get().status == Invitation.Status.PENDING


def test_a_lead_changes_a_role(people):
    target = membership(people, people.rater)
    response = people.client("lead").post(members_url(people, "judgments:member-role", target), {"role": "lead"})
    assert response.status_code == 302
    target.refresh_from_db()
    assert target.role == Role.LEAD


def test_a_bad_role_is_refused_without_change(people):
    target = membership(people, people.rater)
    people.client("lead").post(members_url(people, "judgments:member-role", target), {"role": "owner"})
    target.refresh_from_db()
    assert target.role == Role.RATER


def test_the_last_lead_cannot_step_down_or_leave(people):
    own = membership(people, people.lead)
    client = people.client("lead")
    demote = client.post(members_url(people, "judgments:member-role", own), {"role": "viewer"}, follow=True)
    assert "A project needs at least one lead" in demote.content.decode()
    client.post(members_url(people, "judgments:member-remove", own))
    own.refresh_from_db()
    assert own.role == Role.LEAD


def test_a_lead_removes_a_member_who_then_gets_404(people):
    target = membership(people, people.rater)
    people.client("lead").post(members_url(people, "judgments:member-remove", target))
    assert not Membership.objects.filter(pk=target.pk).exists()
    assert people.client("rater").get(reverse("judgments:project", args=[people.project.slug])).status_code == 404


def test_a_lead_who_leaves_after_naming_another_lead_goes_back_to_the_projects(people):
    client = people.client("lead")
    client.post(members_url(people, "judgments:member-role", membership(people, people.viewer)), {"role": "lead"})
    response = client.post(members_url(people, "judgments:member-remove", membership(people, people.lead)))
    assert response["Location"] == reverse("judgments:projects")


def test_a_member_of_another_project_cannot_be_changed_through_this_one(people):
    foreign = people.outsider.memberships.get()
    response = people.client("lead").post(members_url(people, "judgments:member-role", foreign), {"role": "rater"})
    assert response.status_code == 404
    foreign.refresh_from_db()
    assert foreign.role == Role.LEAD

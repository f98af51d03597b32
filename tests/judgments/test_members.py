"""A lead adds and removes members and changes their role; a project always keeps a lead."""

from django.urls import reverse

from judgments.models import Membership, Role
from tests.factory import make_user


def members_url(people, name="judgments:members", member=None):
    args = [people.project.slug] + ([member.uuid] if member else [])
    return reverse(name, args=args)


def membership(people, user) -> Membership:
    return people.project.memberships.get(user=user)


def test_every_member_sees_the_member_list_but_only_the_lead_gets_the_controls(people):
    lead_page = people.client("lead").get(members_url(people))
    rater_page = people.client("rater").get(members_url(people))
    assert b"ravi" in rater_page.content and b"vera" in rater_page.content
    assert b"Add member" in lead_page.content
    assert b"Add member" not in rater_page.content


def test_a_lead_adds_a_member_by_username_or_email(people):
    make_user("newbie")
    response = people.client("lead").post(members_url(people, "judgments:member-add"), {"user": "NEWBIE@example.com", "role": "rater"})
    assert response.status_code == 302
    assert people.project.memberships.get(user__username="newbie").role == Role.RATER


def test_adding_an_unknown_or_existing_user_shows_the_problem_and_changes_nothing(people):
    client = people.client("lead")
    unknown = client.post(members_url(people, "judgments:member-add"), {"user": "ghost", "role": "rater"})
    assert b"No active user has this username or e-mail." in unknown.content
    again = client.post(members_url(people, "judgments:member-add"), {"user": "ravi", "role": "viewer"})
    assert b"ravi is already a member" in again.content
    assert membership(people, people.rater).role == Role.RATER
    assert people.project.memberships.count() == 3


def test_adding_with_htmx_returns_only_the_member_list(people):
    make_user("newbie")
    response = people.client("lead").post(
        members_url(people, "judgments:member-add"), {"user": "newbie", "role": "viewer"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    assert b"<html" not in response.content
    assert b'id="member-list"' in response.content
    assert b"newbie" in response.content


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

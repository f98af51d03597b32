"""Projects: the list with roles, creating one, its page and settings."""

from pathlib import Path

from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from judgments.demo import DEMO_PROJECT
from judgments.models import Membership, Project, Role
from tests.factory import make_user


def test_the_projects_page_lists_my_projects_with_my_role_and_nothing_else(people):
    page = people.client("rater").get(reverse("judgments:projects")).content.decode()
    assert "Shop search" in page
    assert "Rater" in page
    assert "Otto" not in page


def test_creating_a_project_makes_me_its_lead(people):
    people.rater.is_staff = True
    people.rater.save()
    response = people.client("rater").post(reverse("judgments:project-create"), {"name": "Docs search", "description": ""})
    project = Project.objects.get(name="Docs search")
    assert response["Location"] == project.get_absolute_url()
    assert project.slug == "docs-search"
    assert Membership.objects.get(project=project, user=people.rater).role == Role.LEAD


def test_only_staff_create_projects_unless_the_setting_lets_anyone(people, settings, client):
    create = reverse("judgments:project-create")
    assert "New project" not in people.client("rater").get(reverse("judgments:projects")).content.decode()
    assert people.client("rater").get(create).status_code == 403
    assert people.client("rater").post(create, {"name": "Sneaky"}).status_code == 403
    assert not Project.objects.filter(name="Sneaky").exists()
    assert client.get(create).status_code == 302  # anonymous: to the login page
    boss = make_user("boss", is_superuser=True)
    boss_client = Client()
    boss_client.force_login(boss)
    assert "New project" in boss_client.get(reverse("judgments:projects")).content.decode()
    assert boss_client.get(create).status_code == 200
    settings.PROJECT_CREATION = "anyone"
    assert "New project" in people.client("rater").get(reverse("judgments:projects")).content.decode()
    assert people.client("rater").post(create, {"name": "Docs search"}).status_code == 302


def test_the_demo_server_lets_anyone_create_projects_unless_told_otherwise():
    serve = (Path(__file__).resolve().parents[2] / "scripts" / "serve").read_text()
    assert 'export PROJECT_CREATION="${PROJECT_CREATION:-anyone}"' in serve


def test_a_taken_address_is_refused(people, settings):
    settings.PROJECT_CREATION = "anyone"
    response = people.client("lead").post(reverse("judgments:project-create"), {"name": "Copy", "slug": people.project.slug})
    assert b"Another project already uses this address." in response.content
    assert not Project.objects.filter(name="Copy").exists()


def test_the_lead_renames_the_project_and_keeps_its_address(people):
    url = reverse("judgments:project-settings", args=[people.project.slug])
    people.client("lead").post(url, {"name": "Shop search (EU)", "slug": "", "description": "EU index", "version": 1})
    people.project.refresh_from_db()
    assert (people.project.name, people.project.slug) == ("Shop search (EU)", "shop-search")


def test_a_refused_settings_form_with_an_empty_address_shows_its_errors(people):
    url = reverse("judgments:project-settings", args=[people.project.slug])
    response = people.client("lead").post(url, {"name": "", "slug": "", "description": ""})
    assert response.status_code == 200
    assert "This field is required." in response.content.decode()
    assert Project.objects.get(pk=people.project.pk).slug == "shop-search"


def test_the_settings_page_shows_the_leads_project_menu_and_role(people):
    page = people.client("lead").get(reverse("judgments:project-settings", args=[people.project.slug])).content.decode()
    assert '<span class="role">Lead</span>' in page
    assert reverse("evaluation:evaluations", args=[people.project.slug]) in page


def test_the_project_page_tells_each_role_what_it_can_do(people):
    url = reverse("judgments:project", args=[people.project.slug])
    assert "You manage this project" in people.client("lead").get(url).content.decode()
    assert people.client("rater").get(url, follow=True).redirect_chain == [(reverse("judgments:my-queue"), 302)]
    assert "cannot change anything" in people.client("viewer").get(url).content.decode()


def test_loading_the_demo_twice_changes_nothing(db):
    call_command("load_demo")
    counts = (Project.objects.count(), Membership.objects.count())
    password = Membership.objects.get(role=Role.LEAD, project__slug=DEMO_PROJECT["slug"]).user.password
    call_command("load_demo")
    assert (Project.objects.count(), Membership.objects.count()) == counts == (1, 3)
    assert Membership.objects.get(role=Role.LEAD).user.password == password

"""Two leads in two browsers editing one round's settings: the later save shows the conflict in place."""

import pytest
from playwright.sync_api import expect

from judgments.demo import DEMO_PASSWORD, DEMO_PROJECT
from judgments.models import Project, Round
from tests.factory import PASSWORD, Role, add_member, make_user

from .conftest import fresh_page, log_in

pytestmark = pytest.mark.browser


def test_the_later_of_two_leads_sees_what_changed_keeps_her_input_and_saves_on_top(demo, live_server, browser):
    add_member(Project.objects.get(slug=DEMO_PROJECT["slug"]), make_user("lina"), Role.LEAD)
    round = Round.objects.get(name="Launch round 1")
    edit = f"{live_server.url}{round.get_absolute_url()}edit/"
    with fresh_page(browser) as lead, fresh_page(browser) as lina:
        log_in(lead, live_server, "lead", DEMO_PASSWORD)
        log_in(lina, live_server, "lina", PASSWORD)
        lead.goto(edit)
        lina.goto(edit)

        lead.get_by_label("Show raters the rank").check()
        lead.get_by_role("button", name="Save").click()
        expect(lead.get_by_text("Round settings saved.")).to_be_visible()
        assert lead.url == edit  # htmx swapped the fresh form in

        lina.get_by_label("Name").fill("Launch round 1 (EU)")
        lina.get_by_role("button", name="Save").click()
        conflict = lina.get_by_role("alert")
        expect(conflict).to_contain_text("Someone else saved this while you were editing it")
        expect(conflict.get_by_role("row", name="Name").get_by_role("cell")).to_have_text(["Launch round 1 (EU)", "Launch round 1"])
        expect(conflict.get_by_role("row", name="Show raters the rank").get_by_role("cell")).to_have_text(["no", "yes"])
        expect(lina.get_by_label("Name")).to_have_value("Launch round 1 (EU)")
        round.refresh_from_db()
        assert (round.name, round.show_rank) == ("Launch round 1", True)

        lina.get_by_label("Show raters the rank").check()
        lina.get_by_role("button", name="Save").click()
        expect(lina.get_by_text("Round settings saved.")).to_be_visible()
        expect(lina.get_by_role("heading", name="Edit “Launch round 1 (EU)”")).to_be_visible()
    round.refresh_from_db()
    assert (round.name, round.show_rank) == ("Launch round 1 (EU)", True)

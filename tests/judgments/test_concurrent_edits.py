"""Two leads editing the same settings at once: the later save is refused with what differs, never lost."""

import re
from html import unescape
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.urls import reverse

from judgments.models import EditConflict, GuidelinesVersion, Round
from judgments.ops import rounds
from judgments.ops.actions import save_guidelines
from judgments.ops.imports import import_queries
from tests.factory import Role, add_member, make_round, make_user

pytestmark = pytest.mark.django_db

CONFLICT = "Someone else saved this while you were editing it: your changes are not saved yet."


class _FormReader(HTMLParser):
    """What a browser would submit from the page's POST forms: {action: {name: value or [values]}}."""

    def __init__(self):
        super().__init__()
        self.forms: dict[str, dict] = {}
        self._form = self._select = self._textarea = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and attrs.get("method") == "post":
            self._form = self.forms.setdefault(attrs.get("action") or "", {})
        elif self._form is None or "disabled" in attrs:
            return
        elif tag == "input" and attrs.get("type") not in ("submit", "button"):
            if attrs.get("type") in ("checkbox", "radio") and "checked" not in attrs:
                return
            self._add(attrs["name"], attrs.get("value", "on" if attrs.get("type") == "checkbox" else ""))
        elif tag == "select":
            self._select = attrs["name"]
        elif tag == "option" and self._select and "selected" in attrs:
            self._add(self._select, attrs.get("value", ""))
        elif tag == "textarea":
            self._textarea = attrs["name"]
            self._form[self._textarea] = ""

    def handle_data(self, data):
        if self._textarea:
            self._form[self._textarea] += data

    def handle_endtag(self, tag):
        if tag == "form":
            self._form = None
        elif tag == "select":
            self._select = None
        elif tag == "textarea" and self._textarea:
            self._form[self._textarea] = self._form[self._textarea].removeprefix("\n")
            self._textarea = None

    def _add(self, name, value):
        value = unescape(value)
        if name in self._form:
            previous = self._form[name]
            self._form[name] = (previous if isinstance(previous, list) else [previous]) + [value]
        else:
            self._form[name] = value


def loaded_form(response, action: str = "") -> dict:
    """The values of the page's POST form (the one posting to `action`; "" = to the page itself)."""
    reader = _FormReader()
    reader.feed(response.content.decode())
    return {name: value for name, value in reader.forms[action].items() if name != "csrfmiddlewaretoken"}


@pytest.fixture
def two_leads(people) -> tuple[Client, Client]:
    """Browsers of the project's lead, lena, and of a second lead, lina."""
    lina = make_user("lina")
    add_member(people.project, lina, Role.LEAD)
    browser = Client()
    browser.force_login(lina)
    return people.client("lead"), browser


@pytest.fixture
def round(people):
    return make_round(people.project, people.lead, [people.rater, people.lead], open=False)


def edit_url(round: Round) -> str:
    return reverse("judgments:round-edit", args=[round.project.slug, round.uuid])


def conflict_rows(page: str) -> list[tuple[str, str, str]]:
    table = page[page.index(CONFLICT):page.index("Your input is still in the form below")]
    return [tuple(unescape(cell).strip() for cell in row)
            for row in re.findall(r'<th scope="row">(.*?)</th>\s*<td>(.*?)</td><td>(.*?)</td>', table, re.DOTALL)]


# --- round settings ------------------------------------------------------------------------------


def test_the_later_of_two_round_edits_gets_the_conflict_and_the_first_change_stays(people, two_leads, round):
    lena, lina = two_leads
    lenas, linas = loaded_form(lena.get(edit_url(round))), loaded_form(lina.get(edit_url(round)))
    assert lenas["version"] == linas["version"] == "1"

    assert lena.post(edit_url(round), {**lenas, "show_rank": "on"}).status_code == 302
    response = lina.post(edit_url(round), {**linas, "name": "Autumn round"})

    assert response.status_code == 200
    page = response.content.decode()
    assert CONFLICT in page
    assert conflict_rows(page) == [("Name", "Autumn round", "Round 1"),
                                   ("Show raters the rank (rounds are blind by default)", "no", "yes")]
    round.refresh_from_db()
    assert (round.name, round.show_rank, round.version) == ("Round 1", True, 2)
    again = loaded_form(response)
    assert (again["name"], again["version"], "show_rank" in again) == ("Autumn round", "2", False)  # the input is kept

    # Having read what changed, lina keeps lena's change and saves on top of it.
    assert lina.post(edit_url(round), {**again, "show_rank": "on"}).status_code == 302
    round.refresh_from_db()
    assert (round.name, round.show_rank, round.version) == ("Autumn round", True, 3)


def test_a_conflict_refuses_every_change_of_the_stale_form_raters_included(people, two_leads, round):
    lena, lina = two_leads
    lenas, linas = loaded_form(lena.get(edit_url(round))), loaded_form(lina.get(edit_url(round)))
    lena.post(edit_url(round), {**lenas, "order": "shuffled"})
    page = lina.post(edit_url(round), {**linas, "raters": ["ravi"], "show_rank": "on"}).content.decode()
    assert ("Raters", "ravi", "lena, ravi") in conflict_rows(page)
    assert ("Show raters the rank (rounds are blind by default)", "yes", "no") in conflict_rows(page)
    assert ("Order", "Grouped by query", "Fully shuffled") in conflict_rows(page)
    round.refresh_from_db()
    assert set(round.raters.values_list("username", flat=True)) == {"ravi", "lena"}
    assert (round.order, round.show_rank) == ("shuffled", False)


def test_with_htmx_the_form_answers_with_itself_saved_or_in_conflict(people, two_leads, round):
    lena, lina = two_leads
    htmx = {"HX-Request": "true"}
    lenas, linas = loaded_form(lena.get(edit_url(round))), loaded_form(lina.get(edit_url(round)))

    saved = lena.post(edit_url(round), {**lenas, "show_rank": "on"}, headers=htmx)
    assert saved.status_code == 200 and b"<html" not in saved.content
    assert "Round settings saved." in saved.content.decode()
    assert loaded_form(saved)["version"] == "2"  # the fresh form can save again

    conflict = lina.post(edit_url(round), {**linas, "name": "Autumn round"}, headers=htmx)
    page = conflict.content.decode()
    assert conflict.status_code == 200 and "<html" not in page and 'id="round-settings"' in page
    assert CONFLICT in page and ("Name", "Autumn round", "Round 1") in conflict_rows(page)
    round.refresh_from_db()
    assert (round.name, round.show_rank) == ("Round 1", True)

    again = lina.post(edit_url(round), {**loaded_form(conflict), "show_rank": "on"}, headers=htmx)
    assert "Round settings saved." in again.content.decode()
    round.refresh_from_db()
    assert (round.name, round.show_rank, round.version) == ("Autumn round", True, 3)


def test_a_form_without_a_version_saves_nothing_and_offers_the_saved_version(people, round):
    lena = people.client("lead")
    stale = {name: value for name, value in loaded_form(lena.get(edit_url(round))).items() if name != "version"}
    response = lena.post(edit_url(round), {**stale, "name": "Autumn round"})
    assert "This form came from an older page" in response.content.decode()
    round.refresh_from_db()
    assert round.name == "Round 1"
    assert lena.post(edit_url(round), loaded_form(response)).status_code == 302
    round.refresh_from_db()
    assert round.name == "Autumn round"


def test_the_saving_update_must_change_exactly_the_round_at_the_version_it_was_based_on(people, round):
    rounds.update_round(round, version=1, name="First")
    with pytest.raises(EditConflict) as conflict:
        rounds.update_round(round, version=1, name="Second", raters=[people.rater])
    assert (conflict.value.current.name, conflict.value.current.version) == ("First", 2)
    round.refresh_from_db()
    assert (round.name, round.raters.count()) == ("First", 2)
    rounds.update_round(round, name="Third")  # without a version: on top of whatever is saved
    assert Round.objects.get(pk=round.pk).version == 3


# --- the other settings forms --------------------------------------------------------------------


def test_the_consensus_and_gate_settings_detect_a_concurrent_save(people, two_leads, round):
    lena, lina = two_leads
    page_url = reverse("judgments:round-agreement", args=[round.project.slug, round.uuid])
    action = reverse("judgments:round-agreement-settings", args=[round.project.slug, round.uuid]) + "#settings"
    lenas, linas = loaded_form(lena.get(page_url), action), loaded_form(lina.get(page_url), action)

    assert lena.post(action, {**lenas, "gate": "0.7"}).status_code == 302
    response = lina.post(action, {**linas, "consensus_rule": "median"})
    page = response.content.decode()
    assert response.status_code == 200 and CONFLICT in page
    assert conflict_rows(page) == [("Consensus rule", "Median", "Majority vote (a tie goes to the lower grade)"),
                                   ("Gate: at least", "0.6", "0.7")]
    round.refresh_from_db()
    assert (round.consensus_rule, round.gate) == ("majority", 0.7)

    assert lina.post(action, {**loaded_form(response, action), "gate": "0.7"}).status_code == 302
    round.refresh_from_db()
    assert (round.consensus_rule, round.gate) == ("median", 0.7)


def test_round_settings_and_agreement_settings_share_the_rounds_version(people, two_leads, round):
    lena, lina = two_leads
    page_url = reverse("judgments:round-agreement", args=[round.project.slug, round.uuid])
    action = reverse("judgments:round-agreement-settings", args=[round.project.slug, round.uuid]) + "#settings"
    settings = loaded_form(lena.get(page_url), action)
    lina.post(edit_url(round), {**loaded_form(lina.get(edit_url(round))), "name": "Autumn round"})
    assert CONFLICT in lena.post(action, {**settings, "gate": "0.8"}).content.decode()
    assert Round.objects.get(pk=round.pk).gate == 0.6


def test_project_settings_detect_a_concurrent_save(people, two_leads):
    lena, lina = two_leads
    url = reverse("judgments:project-settings", args=[people.project.slug])
    lenas, linas = loaded_form(lena.get(url)), loaded_form(lina.get(url))
    lena.post(url, {**lenas, "name": "Shop search (EU)"})
    response = lina.post(url, {**linas, "description": "Product search judgments\nfor the EU index"})
    page = response.content.decode()
    assert CONFLICT in page and ("Name", "Shop search", "Shop search (EU)") in conflict_rows(page)
    assert '<span class="diff-added">+for the EU index</span>' in page  # a long text comes as a line diff
    people.project.refresh_from_db()
    assert (people.project.name, people.project.description) == ("Shop search (EU)", "Product search judgments")
    lina.post(url, {**loaded_form(response), "name": "Shop search (EU)"})
    people.project.refresh_from_db()
    assert (people.project.name, people.project.version) == ("Shop search (EU)", 3)
    assert people.project.description.splitlines() == ["Product search judgments", "for the EU index"]


def test_query_edits_detect_a_concurrent_save(people, two_leads):
    lena, lina = two_leads
    collection, _ = import_queries(people.project, b"query_id,query,information_need\nq1,tent,A tent\n", "q.csv", name="Set")
    url = reverse("judgments:query-edit", args=[people.project.slug, collection.uuid, "q1"])
    lenas, linas = loaded_form(lena.get(url)), loaded_form(lina.get(url))
    lena.post(url, {**lenas, "text": "2 person tent"})
    response = lina.post(url, {**linas, "weight": "3"})
    assert ("Query", "tent", "2 person tent") in conflict_rows(response.content.decode())
    assert collection.queries.get().weight is None
    lina.post(url, {**loaded_form(response), "text": "2 person tent"})
    query = collection.queries.get()
    assert (query.text, query.weight) == ("2 person tent", 3.0)


def test_guidelines_saved_from_an_older_version_show_the_newer_one_as_a_diff(people, two_leads):
    lena, lina = two_leads
    save_guidelines(people.project, "# Rules\nGrade 3: exact match\n", author=people.lead)
    url = reverse("judgments:guidelines-edit", args=[people.project.slug])
    lenas, linas = loaded_form(lena.get(url)), loaded_form(lina.get(url))
    assert lenas["version"] == linas["version"] == "1"
    lena.post(url, {**lenas, "text": lenas["text"] + "Grade 0: unrelated\n", "note": "grade 0"})
    response = lina.post(url, {**linas, "text": linas["text"].replace("exact match", "exact match or a variant"), "note": "variants"})
    page = response.content.decode()
    assert response.status_code == 200 and CONFLICT in page
    assert '<span class="diff-removed">-Grade 0: unrelated</span>' in page  # lena's line, missing from lina's text
    assert '<span class="diff-added">+Grade 3: exact match or a variant</span>' in page
    assert GuidelinesVersion.objects.filter(project=people.project).count() == 2

    again = loaded_form(response)
    assert again["version"] == "2" and "or a variant" in again["text"]
    lina.post(url, {**again, "text": again["text"] + "Grade 0: unrelated\n"})
    latest = people.project.guideline_versions.first()
    assert (latest.number, latest.note) == (3, "variants")
    assert "or a variant" in latest.text and "Grade 0: unrelated" in latest.text

"""What the grading screens tell a screen reader over HTTP (issue #20): a small live region outside the
swapped pair, its text written by the server after each verdict (what was saved, what comes next), the
element the browser focuses next, and the skip link to the grades."""

import re
from html import unescape

import pytest
from django.urls import reverse

from judgments.models import RoundItem
from judgments.ops import grading
from tests.factory import make_round

from .test_grading_screen import HTMX, grade_url, shown_item

pytestmark = pytest.mark.django_db
STATUS = re.compile(r'<p id="grading-status" class="grading-status[^"]*" role="status"( hx-swap-oob="innerHTML")?>(.*?)</p>', re.S)


@pytest.fixture
def round(people):
    return make_round(people.project, people.lead, [people.rater, people.lead])


def status(response) -> tuple[str, str, bool]:
    """(the live region's text, the id it asks to focus, whether it comes out of band)."""
    found = STATUS.findall(response.content.decode())
    assert len(found) == 1, found
    out_of_band, inner = found[0]
    focus = re.search(r'data-focus="([^"]*)"', inner)
    return unescape(re.sub(r"<[^>]+>", "", inner)), focus.group(1) if focus else "", bool(out_of_band)


def query_of(item_uuid: str) -> str:
    return RoundItem.objects.get(uuid=item_uuid).query.text


def test_the_page_has_an_empty_polite_region_outside_the_pair_and_a_skip_link_to_the_grades(people, round):
    response = people.client("rater").get(grade_url(round))
    page = response.content.decode()
    assert status(response) == ("", "", False)
    assert page.index('id="grading-status"') < page.index('id="grader"')
    assert re.search(r'<div id="grader" class="grader" data-item="[^"]+">', page)  # the swapped pair is no live region
    assert page.index('href="#grades">Skip to the grades</a>') < page.index('href="#main">Skip to content</a>')
    assert re.search(r'<div class="grade-buttons" id="grades" role="group" aria-label="Grades" tabindex="-1">', page)
    assert "Skip to the grades" in page[page.index('id="keys-help"'):]


def test_a_grade_says_what_was_saved_and_names_the_next_pair_and_its_place(people, round):
    client = people.client("rater")
    first = shown_item(client.get(grade_url(round)))
    response = client.post(grade_url(round, first), {"grade": "2"}, **HTMX)
    following = shown_item(response)
    # The rater has judged 1 pair; 11 of the 12 still need a judgment: the next pair is the 2nd of 12.
    assert status(response) == (f"Saved: 2 Good. Next: {query_of(following)}, 2 of 12.", "grades", True)
    response = client.post(grade_url(round, following), {"grade": "0"}, **HTMX)
    assert status(response)[0] == f"Saved: 0 Poor. Next: {query_of(shown_item(response))}, 3 of 12."


def test_judge_later_unrateable_back_and_a_refusal_are_said_too(people, round):
    client = people.client("rater")
    first = shown_item(client.get(grade_url(round)))
    response = client.post(grade_url(round, first), {"later": "1"}, **HTMX)
    second = shown_item(response)
    assert status(response) == (f"Put off for later: {query_of(first)}. Next: {query_of(second)}, 1 of 12.", "grades", True)

    refused = client.post(grade_url(round, second), {"unrateable": "other"}, **HTMX)
    assert status(refused) == ("Not saved: Say what makes the pair unrateable.", "unrateable-note", True)
    response = client.post(grade_url(round, second), {"unrateable": "foreign_language"}, **HTMX)
    assert status(response)[0] == f"Saved: unrateable (foreign language). Next: {query_of(shown_item(response))}, 2 of 12."

    back = client.get(grade_url(round, second), **HTMX)
    assert status(back) == (f"Your judged pair: {query_of(second)}, unrateable (foreign language). Choose again to change it.",
                            "grades", True)


def test_the_last_pair_says_nothing_is_left_and_focuses_the_heading(people):
    round = make_round(people.project, people.lead, [people.rater], {"q1": ["d1"]})
    client = people.client("rater")
    response = client.post(grade_url(round, shown_item(client.get(grade_url(round)))), {"grade": "3"}, **HTMX)
    assert status(response) == ("Saved: 3 Perfect. Nothing left for you in this round.", "grading-done", True)
    assert '<h1 id="grading-done" tabindex="-1">' in response.content.decode()


def test_the_break_prompt_takes_the_focus(people, round, settings):
    settings.GRADING_BREAK_EVERY = 1
    client = people.client("rater")
    response = client.post(grade_url(round, shown_item(client.get(grade_url(round)))), {"grade": "1"}, **HTMX)
    assert status(response)[1] == "break-done" and 'id="break-done"' in response.content.decode()


def test_the_one_page_view_says_the_saved_grade_and_focuses_the_next_ungraded_pair(people, round):
    client = people.client("rater")
    query = round.items.order_by("pk").first().query
    items = [item for item, _ in grading.items_for_bulk(round, people.rater, query)]
    # A list's title of a document (its first field without a display template; JSON key order differs by database).
    titles = [item.document.title(round.project.display_template()) for item in items]
    url = reverse("judgments:grade-bulk", args=[round.project.slug, round.uuid, query.query_id])
    page = client.get(url)
    assert status(page) == ("", "", False)
    assert f'href="#grades-{items[0].uuid}">Skip to the grades</a>' in page.content.decode()

    def grade(item, value: str):
        return client.post(grade_url(round, item.uuid), {"grade": value, "bulk": "1"}, **HTMX)

    assert status(grade(items[1], "2")) == (f"Saved: 2 Good for {titles[1]}. Next: {titles[2]}, 3 of 4.", f"grades-{items[2].uuid}", True)
    assert status(grade(items[3], "1"))[1:] == (f"grades-{items[0].uuid}", True)  # from the top again
    assert status(grade(items[3], "0"))[0] == f"Saved: 0 Poor for {titles[3]}. Next: {titles[0]}, 1 of 4."
    grade(items[0], "3")
    assert status(grade(items[2], "3")) == (f"Saved: 3 Perfect for {titles[2]}. Every pair of this query on this page is judged.",
                                            f"grades-{items[2].uuid}", True)
    refused = client.post(grade_url(round, items[2].uuid), {"grade": "7", "bulk": "1"}, **HTMX)
    assert status(refused)[0].startswith("Not saved: ") and status(refused)[1] == f"grades-{items[2].uuid}"

"""Counts read with thousands separators on the rater's and the lead's round pages, and a grade posted without
JavaScript answers with a page that says it was saved (issue #28, item 13), over HTTP."""

import re
from html import unescape

import pytest
from django.urls import reverse

from judgments.models import Judgment
from tests.factory import make_round

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
PAIRS = 1_200  # one query: a pool 1,200 documents deep


def text_of(response) -> str:
    """What a person reads: the page without its tags, attributes and scripts."""
    html = response.content.decode()
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


def shown_item(response) -> str:
    return re.search(r'id="grader" class="grader" data-item="([^"]*)"', response.content.decode()).group(1)


@pytest.fixture
def big_round(people):
    return make_round(people.project, people.lead, [people.rater], {"q1": [f"d{n}" for n in range(PAIRS)]},
                      raters_per_pair=1)


def test_the_rater_and_the_lead_read_counts_over_999_with_separators(people, big_round):
    slug, rater, lead = people.project.slug, people.client("rater"), people.client("lead")
    grade_url = reverse("judgments:grade", args=[slug, big_round.uuid])
    screen = rater.get(grade_url)
    assert "1,200 to go" in text_of(screen)
    first = shown_item(screen)
    answer = rater.post(reverse("judgments:grade-item", args=[slug, big_round.uuid, first]), {"grade": "2"}, **HTMX)
    region = re.search(r'<p id="grading-status"[^>]*>(.*?)</p>', answer.content.decode(), re.S).group(1)
    assert "Saved: 2 Good." in region and "2 of 1,200." in region, region
    assert Judgment.objects.filter(item__round=big_round, rater=people.rater).count() == 1

    pages = {
        "grading screen": (rater, grade_url, ["1 judged", "1,199 to go"]),
        "work queue": (rater, reverse("judgments:my-queue"), ["1,199 to go", "1 of 1,200 judgments"]),
        "round": (lead, reverse("judgments:round", args=[slug, big_round.uuid]),
                  ["1 of 1,200 judgments", "1 of 1,200 pairs complete", "1 / 1,200"]),
        "rounds": (lead, reverse("judgments:rounds", args=[slug]), ["1 / 1,200 judgments"]),
        "one query's pairs": (lead, reverse("judgments:round-query", args=[slug, big_round.uuid, "q1"]),
                              ["1,200 pairs"]),
    }
    for name, (client, url, expected) in pages.items():
        text = text_of(client.get(url))
        for words in expected:
            assert words in text, f"{name}: {words!r} not in the page"
        assert not re.search(r"\b1 ?19\d\b|\b1200\b", text), f"{name}: a count without its separator"


def test_a_grade_posted_without_javascript_answers_with_a_page_that_says_it_was_saved(people, big_round):
    slug, rater = people.project.slug, people.client("rater")
    first = shown_item(rater.get(reverse("judgments:grade", args=[slug, big_round.uuid])))
    url = reverse("judgments:grade-item", args=[slug, big_round.uuid, first])
    response = rater.post(url, {"grade": "3", "note": "exactly it"}, follow=True)
    judgment = Judgment.objects.get(item__uuid=first, rater=people.rater)
    assert (judgment.grade, judgment.note) == (3, "exactly it")
    text = text_of(response)
    title = judgment.item.document.title(people.project.display_template())
    assert f"Saved: 3 Perfect for “{title}” (query “query q1”)." in text
    assert shown_item(response) != first
    assert "Saved" not in text_of(rater.get(reverse("judgments:grade", args=[slug, big_round.uuid])))  # said once

    later = shown_item(response)
    later_url = reverse("judgments:grade-item", args=[slug, big_round.uuid, later])
    response = rater.post(later_url, {"later": "1"}, follow=True)
    assert "Put off for later: query q1." in text_of(response)


def test_a_grade_posted_without_javascript_on_the_one_page_view_says_it_was_saved(people):
    round = make_round(people.project, people.lead, [people.rater])
    slug, rater = people.project.slug, people.client("rater")
    bulk = reverse("judgments:grade-bulk", args=[slug, round.uuid, "q1"])
    item = round.items.filter(query__query_id="q1").order_by("pk").first()
    url = reverse("judgments:grade-item", args=[slug, round.uuid, item.uuid])
    response = rater.post(url, {"grade": "1", "bulk": "1"}, follow=True)
    assert response.redirect_chain[-1][0] == bulk
    assert Judgment.objects.get(item=item, rater=people.rater).grade == 1
    title = item.document.title(people.project.display_template())
    assert f"Saved: 1 Fair for “{title}”." in text_of(response)
    assert f"for “{title}”." not in text_of(rater.get(bulk))  # said once (the row keeps its own "Saved: 1 Fair")

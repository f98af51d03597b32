"""The rater's grading screen over HTTP: with htmx, without JavaScript, blind, and refusing others."""

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.urls import reverse

from judgments.models import Claim, Judgment, JudgmentEdit
from tests.factory import Role, add_member, make_round, make_user

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def round(people):
    return make_round(people.project, people.lead, [people.rater, people.lead])


def shown_item(response) -> str:
    return re.search(r'id="grader" class="grader" data-item="([^"]*)"', response.content.decode()).group(1)


def grade_url(round, item=None) -> str:
    if item is None:
        return reverse("judgments:grade", args=[round.project.slug, round.uuid])
    return reverse("judgments:grade-item", args=[round.project.slug, round.uuid, item])


def test_the_screen_shows_the_query_its_need_the_document_and_the_scale(people, round):
    response = people.client("rater").get(grade_url(round))
    page = response.content.decode()
    item = round.items.get(uuid=shown_item(response))
    assert f"query {item.query.query_id}" in page and f"need of {item.query.query_id}" in page
    assert f"Title of {item.document.doc_id}" in page
    for label in ("Poor", "Fair", "Good", "Perfect", "I see the connection"):
        assert label in page
    assert "Guidelines v1" in page and "<kbd>?</kbd>" in page


def test_a_changed_display_template_shows_on_the_next_pair_at_once(people, round):
    rater = people.client("rater")
    assert "Text of" in rater.get(grade_url(round)).content.decode()  # no template yet: every field
    form = {"form-TOTAL_FORMS": "1", "form-INITIAL_FORMS": "0",
            "form-0-field": "title", "form-0-label": "Headline", "form-0-render": "text", "form-0-order": "1"}
    people.client("lead").post(reverse("judgments:display-template", args=[people.project.slug]), form)
    page = rater.get(grade_url(round)).content.decode()
    assert "Headline" in page and "Text of" not in page


def test_a_grade_posted_with_htmx_returns_the_next_pair_fragment(people, round):
    client = people.client("rater")
    first = shown_item(client.get(grade_url(round)))
    response = client.post(grade_url(round, first), {"grade": "2", "note": "close variant"}, **HTMX)
    assert response.status_code == 200
    assert "<html" not in response.content.decode()
    following = shown_item(response)
    assert following and following != first
    judgment = Judgment.objects.get()
    assert (str(judgment.item.uuid), judgment.grade, judgment.note, judgment.rater) == (first, 2, "close variant", people.rater)
    assert 'data-judged="1"' in response.content.decode()


def test_without_javascript_a_grade_posts_and_redirects_to_the_next_pair(people, round):
    client = people.client("rater")
    first = shown_item(client.get(grade_url(round)))
    response = client.post(grade_url(round, first), {"grade": "3"})
    assert response.status_code == 302 and response["Location"].startswith(grade_url(round))
    assert shown_item(client.get(response["Location"])) != first
    assert Judgment.objects.get().grade == 3


def test_a_double_submit_keeps_one_judgment(people, round):
    client = people.client("rater")
    first = shown_item(client.get(grade_url(round)))
    client.post(grade_url(round, first), {"grade": "1"}, **HTMX)
    client.post(grade_url(round, first), {"grade": "1"}, **HTMX)
    assert Judgment.objects.count() == 1 and not JudgmentEdit.objects.exists()


def test_going_back_shows_my_grade_and_a_new_one_replaces_it_with_history(people, round):
    client = people.client("rater")
    first = shown_item(client.get(grade_url(round)))
    client.post(grade_url(round, first), {"grade": "1"}, **HTMX)
    page = client.get(grade_url(round, first), **HTMX).content.decode()
    assert "You judged this pair" in page and 'aria-pressed="true"' in page
    client.post(grade_url(round, first), {"grade": "3"}, **HTMX)
    assert Judgment.objects.get().grade == 3
    assert JudgmentEdit.objects.values_list("old_grade", "new_grade").get() == (1, 3)


def test_judge_later_and_unrateable_from_the_screen(people, round):
    client = people.client("rater")
    first = shown_item(client.get(grade_url(round)))
    second = shown_item(client.post(grade_url(round, first), {"later": "1"}, **HTMX))
    assert Claim.objects.get(item__uuid=first).kind == Claim.Kind.LATER
    client.post(grade_url(round, second), {"unrateable": "foreign_language"}, **HTMX)
    judgment = Judgment.objects.get()
    assert judgment.grade is None and judgment.get_unrateable_display() == "Foreign language"


def test_a_refused_verdict_says_why_and_keeps_the_pair(people, round):
    client = people.client("rater")
    first = shown_item(client.get(grade_url(round)))
    response = client.post(grade_url(round, first), {"unrateable": "other"}, **HTMX)
    assert "Say what makes the pair unrateable" in response.content.decode()
    assert shown_item(response) == first and not Judgment.objects.exists()


def test_the_screen_is_blind_to_rank_systems_and_other_raters(people):
    round = make_round(people.project, people.lead, [people.rater, people.lead], {"q1": ["d1", "d2"]}, raters_per_pair=2)
    lead = people.client("lead")
    first = shown_item(lead.get(grade_url(round)))
    lead.post(grade_url(round, first), {"grade": "3", "note": "LEADS-NOTE"})
    page = people.client("rater").get(grade_url(round)).content.decode()
    assert "Ranked" not in page and "BM25" not in page and "LEADS-NOTE" not in page
    assert "Perfect" in page and 'aria-pressed="true"' not in page


def test_a_lead_can_show_the_rank(people):
    round = make_round(people.project, people.lead, [people.rater], show_rank=True)
    assert "Ranked 1 by the best system" in people.client("rater").get(grade_url(round)).content.decode()


def test_a_break_is_offered_after_every_fifty_judgments(people, settings):
    settings.GRADING_BREAK_EVERY = 3
    round = make_round(people.project, people.lead, [people.rater])
    client = people.client("rater")
    item = shown_item(client.get(grade_url(round)))
    prompts = []
    for _ in range(6):
        response = client.post(grade_url(round, item), {"grade": "0"}, **HTMX)
        prompts.append("Time for a short break" in response.content.decode())
        item = shown_item(response)
    assert prompts == [False, False, True, False, False, True]


def test_bulk_mode_grades_one_querys_documents_in_place(people, round):
    client = people.client("rater")
    query = round.items.order_by("pk").first().query
    url = reverse("judgments:grade-bulk", args=[round.project.slug, round.uuid, query.query_id])
    page = client.get(url).content.decode()
    items = list(round.items.filter(query=query))
    assert all(f"Title of {item.document.doc_id}" in page for item in items)
    response = client.post(grade_url(round, items[0].uuid), {"grade": "2", "bulk": "1"}, **HTMX)
    assert f'id="pair-{items[0].uuid}"' in response.content.decode() and "Saved: 2 Good" in response.content.decode()
    assert client.post(grade_url(round, items[1].uuid), {"grade": "1", "bulk": "1"}).status_code == 302
    assert sorted(Judgment.objects.values_list("grade", flat=True)) == [1, 2]


def test_a_member_who_is_not_a_rater_of_the_round_is_refused(people):
    round = make_round(people.project, people.lead, [people.lead])
    other = round.items.first()
    assert people.client("rater").get(grade_url(round)).status_code == 403
    assert people.client("rater").post(grade_url(round, other.uuid), {"grade": "1"}).status_code == 403
    assert people.client("viewer").get(grade_url(round)).status_code == 403
    assert people.client("outsider").get(grade_url(round)).status_code == 404
    assert not Judgment.objects.exists()


def test_a_pair_of_another_round_is_not_found(people, round):
    other = make_round(people.project, people.lead, [people.rater], {"q9": ["d9"]}, name="Round 2")
    response = people.client("rater").post(grade_url(round, other.items.get().uuid), {"grade": "1"})
    assert response.status_code == 404 and not Judgment.objects.exists()


def test_a_rater_cannot_open_a_pair_that_is_not_in_their_queue(people, round):
    held = shown_item(people.client("lead").get(grade_url(round)))
    assert people.client("rater").get(grade_url(round, held)).status_code == 404


def test_my_queue_lists_my_open_rounds_with_my_counts(people, round):
    outsider_round = make_round(people.project, people.lead, [people.lead], {"q9": ["d9"]}, name="Leads only")
    page = people.client("rater").get(reverse("judgments:my-queue")).content.decode()
    assert round.name in page and outsider_round.name not in page and "Start grading" in page


def test_a_viewer_turned_rater_loses_nothing_and_a_removed_member_sees_nothing(people, round):
    newcomer = make_user("nina")
    add_member(people.project, newcomer, Role.VIEWER)
    round.raters.add(newcomer)
    client = people.client("rater")
    client.force_login(newcomer)
    assert client.get(grade_url(round)).status_code == 403  # viewers never grade, even if listed


def checked_reason(page: str) -> str | None:
    found = re.search(r'<input type="radio" name="unrateable" value="([a-z_]+)"[^>]*\bchecked\b', page)
    return found.group(1) if found else None


@pytest.mark.parametrize("headers", [{}, HTMX], ids=["without JavaScript", "with htmx"])
def test_other_without_its_text_comes_back_with_the_choice_the_note_and_a_message(people, round, headers):
    client = people.client("rater")
    first = shown_item(client.get(grade_url(round)))
    response = client.post(grade_url(round, first), {"unrateable": "other", "unrateable_note": " "}, **headers)
    page = response.content.decode()
    assert response.status_code == 200 and shown_item(response) == first
    assert checked_reason(page) == "other"
    assert re.search(r'<details id="unrateable"[^>]*\sopen\b', page)
    assert re.search(r'name="unrateable_note"[^>]*aria-invalid="true"', page)
    assert '<small id="unrateable-error">Say what makes the pair unrateable.</small>' in page
    assert not Judgment.objects.exists()
    judged = client.post(grade_url(round, first), {"unrateable": "other", "unrateable_note": "a parked domain"}, **headers)
    assert judged.status_code in (200, 302)
    assert Judgment.objects.get().unrateable_note == "a parked domain"


def test_a_verdict_refused_without_javascript_gives_back_the_typed_note(people, round):
    client = people.client("rater")
    first = shown_item(client.get(grade_url(round)))
    response = client.post(grade_url(round, first), {"grade": "7", "note": "half a thought"})
    page = response.content.decode()
    assert response.status_code == 200 and shown_item(response) == first
    assert "7 is not a grade of this round" in page and ">half a thought</textarea>" in page
    assert checked_reason(page) is None and not re.search(r'<details id="unrateable"[^>]*\sopen\b', page)


class KeyHints(HTMLParser):
    """The <kbd> elements of a page, each with whether it or an element around it is marked js-only."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self):
        super().__init__()
        self.open: list[bool] = []
        self.hints: list[bool] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        marked = "js-only" in (dict(attrs).get("class") or "").split() or any(self.open)
        if tag == "kbd":
            self.hints.append(marked)
        self.open.append(marked)

    def handle_endtag(self, tag):
        if tag not in self.VOID and self.open:
            self.open.pop()


def test_key_hints_and_the_keys_button_are_only_for_browsers_running_javascript(people, round):
    page = people.client("rater").get(grade_url(round)).content.decode()
    hints = KeyHints()
    hints.feed(page[page.index('<div id="grader"'):page.index('<aside id="guidelines-panel"')])
    assert len(hints.hints) >= 5 and all(hints.hints)  # G, E, L, ?, U
    assert re.search(r'<button type="button" id="keys-button" class="[^"]*\bjs-only\b', page)
    head = page[:page.index("</head>")]
    assert re.search(r'<script src="[^"]*/js/has-js\.js"></script>', head)  # no defer: the class is set before the first paint
    css = (Path(__file__).resolve().parents[2] / "static" / "css" / "verdict.css").read_text()
    assert "html:not(.js) .js-only { display: none !important; }" in css
    queue = people.client("rater").get(reverse("judgments:my-queue")).content.decode()
    assert '<p class="muted js-only">Grading works with the keyboard' in queue


def test_letter_keys_are_shown_in_capitals_so_that_l_cannot_pass_for_1(people, round):
    page = people.client("rater").get(grade_url(round)).content.decode()
    for key in "GULBE":
        assert f"<kbd>{key}</kbd>" in page or f'<kbd class="js-only">{key}</kbd>' in page
    assert not re.search(r"<kbd[^>]*>[a-z]</kbd>", page)


def test_the_guidelines_open_in_a_panel_outside_the_swapped_pair_and_link_to_their_page_without_javascript(people, round):
    client = people.client("rater")
    page = client.get(grade_url(round)).content.decode()
    version = reverse("judgments:guidelines-version", args=[round.project.slug, 1])
    assert re.search(rf'<a id="guidelines-toggle" href="{version}" target="_blank"', page)
    assert page.index('<aside id="guidelines-panel"') > page.index('<div id="grader"') and "<h1>Rules</h1>" in page
    fragment = client.post(grade_url(round, shown_item(client.get(grade_url(round)))), {"grade": "1"}, **HTMX).content.decode()
    assert 'id="guidelines-toggle"' in fragment and '<aside id="guidelines-panel"' not in fragment


def test_the_to_go_count_is_exact_after_every_grade(people, round):
    client = people.client("rater")
    response = client.get(grade_url(round))
    counts = []
    for _ in range(6):
        page = response.content.decode()
        counts.append(tuple(int(re.search(rf'data-{name}="(\d+)"', page).group(1)) for name in ("judged", "remaining")))
        response = client.post(grade_url(round, shown_item(response)), {"grade": "1"}, **HTMX)
    assert counts == [(n, 12 - n) for n in range(6)]
    people.client("lead").post(grade_url(round, shown_item(people.client("lead").get(grade_url(round)))), {"grade": "2"})
    page = client.get(grade_url(round), **HTMX).content.decode()
    assert 'data-judged="6"' in page and 'data-remaining="5"' in page  # another rater's grade shows at once


def test_a_bulk_grade_brings_the_fresh_counts_out_of_band(people, round):
    client = people.client("rater")
    item = round.items.order_by("pk").first()
    url = reverse("judgments:grade-bulk", args=[round.project.slug, round.uuid, item.query.query_id])
    assert 'data-remaining="12"' in client.get(url).content.decode()
    answer = client.post(grade_url(round, item.uuid), {"grade": "2", "bulk": "1"}, **HTMX).content.decode()
    assert re.search(r'<p id="bulk-progress" hx-swap-oob="true">', answer)
    assert 'data-judged="1"' in answer and 'data-remaining="11"' in answer


def test_a_grade_and_the_next_pair_cost_twelve_queries(people, round):
    """The hot path (benchmarks/grading_load.py): the exact counts cost no extra round trip on
    PostgreSQL, where the pair's count, the round's totals and the rater's go up in one statement; the
    claim on the next pair is checked again there in a fresh snapshot (SQLite serialises its writers: no
    need, but its three counts take a statement each)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = people.client("rater")
    item = shown_item(client.get(grade_url(round)))
    client.post(grade_url(round, item), {"grade": "1"}, **HTMX)  # warm: sessions, caches, the first claim
    item = shown_item(client.get(grade_url(round), **HTMX))
    with CaptureQueriesContext(connection) as captured:
        assert shown_item(client.post(grade_url(round, item), {"grade": "2"}, **HTMX)) != item
    statements = [q["sql"] for q in captured.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]
    assert len(statements) == (12 if connection.vendor == "postgresql" else 13), "\n".join(statements)

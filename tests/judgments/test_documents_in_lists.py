"""Leads see documents, not ids: a round's query page, the adjudication queue and ranked lists show each
document by its title with the whole document on demand, every verdict with its rater and note, the pair's
edit history, and the label the consensus rule gives. Raters never see another rater's grades or notes."""

import re

import pytest
from django.urls import reverse

from judgments.models import DisplayField, JudgmentEdit, Round
from judgments.ops import grading
from judgments.ops.grading import Verdict
from tests.evaluation.test_evaluations import evaluated, setup  # noqa: F401 (a fixture)
from tests.factory import Role, add_member, make_round, make_user
from tests.judgments.test_agreement_and_exports import url

pytestmark = pytest.mark.django_db

PAIRS = {"q1": ["d11", "d12", "d13"], "q2": ["d21", "d22"]}


@pytest.fixture
def rosa(people):
    rosa = make_user("rosa")
    add_member(people.project, rosa, Role.RATER)
    return rosa


@pytest.fixture
def round(people, rosa) -> Round:
    """Two raters per pair; the display template shows the title, and the body folded."""
    DisplayField.objects.create(project=people.project, field="title", label="Title", order=0)
    DisplayField.objects.create(project=people.project, field="body", label="Text", render=DisplayField.Render.LONG_TEXT, order=1)
    return make_round(people.project, people.lead, [people.rater, rosa], PAIRS, raters_per_pair=2)


def item_of(round: Round, doc: str):
    return round.items.select_related("query", "document", "round").get(document__doc_id=doc)


def article(page: str, item) -> str:
    """The page's block for one pair."""
    start = page.index(f'id="pair-{item.uuid}"')
    return page[start:page.index("</article>", start)]


def test_the_round_s_query_page_shows_each_document_by_title_with_the_whole_document_folded(people, round):
    page = people.client("viewer").get(url("round-query", round, "q1")).content.decode()
    for doc in PAIRS["q1"]:
        block = article(page, item_of(round, doc))
        assert re.search(rf'<details class="document-brief">\s*<summary><span class="document-title">Title of {doc}</span>', block)
        assert f"Text of {doc}" in block  # the body, inside the <details>: shown on demand without JavaScript


def test_the_lead_sees_every_verdict_with_its_note_and_the_pair_s_edit_history(people, rosa, round):
    item = item_of(round, "d11")
    grading.record(item, people.rater, Verdict(grade=1, note="Only mentions tents in passing"))
    grading.record(item, rosa, Verdict(unrateable="foreign_language"))
    grading.record(item, people.rater, Verdict(grade=3, note="On second look: the exact product"))
    grading.record(item, people.rater, Verdict(grade=3, note="On second look: the exact product"))  # a retry changes nothing
    edits = list(JudgmentEdit.objects.filter(item=item).values_list("old_grade", "new_grade", "old_note", "new_note"))
    assert edits == [(1, 3, "Only mentions tents in passing", "On second look: the exact product")]
    block = article(people.client("lead").get(url("round-query", round, "q1")).content.decode(), item)
    assert "<strong>ravi</strong>: 3 Perfect" in block and "On second look: the exact product" in block
    assert "<strong>rosa</strong>:" in block and "unrateable (foreign language)" in block
    history = block[block.index('class="edit-history"'):]
    assert "Edit history (1 change)" in history and "1 Fair → 3 Perfect" in re.sub(r"\s+", " ", history)
    assert "“Only mentions tents in passing” → “On second look: the exact product”" in history


def test_a_changed_note_alone_is_kept_in_the_history(people, round):
    item = item_of(round, "d12")
    grading.record(item, people.rater, Verdict(grade=2, note="first thought"))
    grading.record(item, people.rater, Verdict(grade=2, note="better thought"))
    edit = JudgmentEdit.objects.get(item=item)
    assert (edit.old_grade, edit.new_grade, edit.old_note, edit.new_note) == (2, 2, "first thought", "better thought")
    block = article(people.client("lead").get(url("round-query", round, "q1")).content.decode(), item)
    assert "→" in block and "“first thought” → “better thought”" in block and "2 Good → 2 Good" not in block


def test_the_adjudication_queue_shows_grades_with_raters_and_notes_and_the_rule_s_label(people, rosa, round):
    Round.objects.filter(pk=round.pk).update(adjudication_margin=2, consensus_rule=Round.Consensus.MEDIAN)
    grades = {"d11": (0, 3), "d12": (1, 3), "d13": (2, 2)}
    for doc, (ravi, rosas) in grades.items():
        item = item_of(round, doc)
        grading.record(item, people.rater, Verdict(grade=ravi, note=f"ravi on {doc}"))
        grading.record(item, rosa, Verdict(grade=rosas, note=f"rosa on {doc}"))
    page = people.client("lead").get(url("round-adjudication", round)).content.decode()
    assert page.count('class="document-brief"') == 2 and "d13" not in page
    scale = round.grading_scale
    for doc in ("d11", "d12"):
        block = article(page, item_of(round, doc))
        assert f"Title of {doc}" in block and f"ravi on {doc}" in block and f"rosa on {doc}" in block
        # Two grades: the median of the scale's values is their mean rounded down (ties go to the lower grade).
        expected = min(scale.values, key=lambda v: (abs(v - sum(grades[doc]) / 2), v))
        assert f"the consensus rule gives <strong>{expected} {scale.label_of(expected)}</strong>" in block


def test_ranked_lists_show_documents_by_title(people, setup):  # noqa: F811
    round, run_a, run_b, _ = setup
    evaluation = evaluated(people, round, [run_a, run_b])
    page = people.client("viewer").get(reverse("evaluation:ranked-list", args=[round.project.slug, evaluation.uuid, "h1"]),
                                       {"run": str(run_b.uuid)}).content.decode()
    assert page.count('<details class="document-brief">') == 6  # h1-new and the five pooled documents, all in the corpus
    assert '<span class="document-title">h1-new</span>' in page


def test_raters_never_see_another_rater_s_grades_or_notes(people, rosa, round):
    for doc in PAIRS["q1"]:
        grading.record(item_of(round, doc), rosa, Verdict(grade=3, note=f"rosa's secret on {doc}"))
    ravi = people.client("rater")
    assert ravi.get(url("round-query", round, "q1")).status_code == 403
    assert ravi.get(url("round-adjudication", round)).status_code == 403
    pages = [ravi.get(reverse("judgments:grade", args=[people.project.slug, round.uuid])).content.decode(),
             ravi.get(reverse("judgments:grade-bulk", args=[people.project.slug, round.uuid, "q1"])).content.decode()]
    assert "Title of d1" in pages[1]  # the bulk page does show q1's documents
    for page in pages:
        assert "secret" not in page and "rosa" not in page
    assert people.client("outsider").get(url("round-query", round, "q1")).status_code == 404

"""A round's kept totals (RoundTotals) equal the sums over its pairs after every kind of change, and a
rater's counts are exact at once."""

import io
from datetime import timedelta

import pytest
from django.utils import timezone

from judgments.models import Claim, RoundTotals
from judgments.ops import grading, rounds
from judgments.ops.grading import Verdict
from judgments.ops.imports import import_corpus, import_run
from judgments.ops.judgment_files import import_judgments
from judgments.ops.pools import add_runs_to_pool
from tests.factory import Role, add_member, make_round, make_user, trec_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def raters(people):
    second = make_user("rosa")
    add_member(people.project, second, Role.RATER)
    return [people.rater, second]


def kept(round) -> dict:
    return RoundTotals.objects.filter(round=round).values("pairs", "complete", "done", "needed").get()


def assert_kept_totals_are_the_sums(round) -> None:
    assert kept(round) == grading.round_totals(round)


def test_the_totals_are_kept_exact_through_grades_flags_imports_and_new_pairs(people, raters):
    pairs = {f"q{q}": [f"d{q}{d}" for d in range(1, 5)] for q in range(1, 6)}
    round = make_round(people.project, people.lead, raters, pairs, overlap_share=0.15)
    assert kept(round) == {"pairs": 20, "complete": 0, "done": 0, "needed": 23}

    for _ in range(6):
        grading.record(grading.next_item(round, raters[0]), raters[0], Verdict(grade=2))
    grading.record(grading.next_item(round, raters[1]), raters[1], Verdict(unrateable="broken"))
    assert_kept_totals_are_the_sums(round)
    assert kept(round)["done"] == 7

    rounds.reset_flags(round, unrateable=True, by=people.lead)
    assert_kept_totals_are_the_sums(round)
    assert kept(round)["done"] == 6

    labelled = round.items.select_related("query", "document")[:10]
    qrels = "".join(f"{item.query.query_id} 0 {item.document.doc_id} 1\n" for item in labelled)
    import_judgments(round, qrels.encode(), "labels.qrels", rater=raters[1].username)
    assert_kept_totals_are_the_sums(round)

    run, _ = import_run(people.project, trec_run({"q1": ["d11", "d19"]}), "new.run", name="new", system="dense")
    import_corpus(people.project, io.BytesIO(b'{"doc_id": "d19", "title": "New"}\n'), "more.jsonl")
    add_runs_to_pool(round.pool, [run])
    rounds.add_pool_pairs(round)
    assert_kept_totals_are_the_sums(round)
    assert kept(round)["pairs"] == 21


def test_a_late_answer_beyond_the_need_counts_no_further(people, raters, settings):
    round = make_round(people.project, people.lead, raters, {"q1": ["d1"]})
    item = grading.next_item(round, raters[0])
    Claim.objects.filter(item=item).update(since=timezone.now() - timedelta(seconds=settings.GRADING_HOLD_SECONDS + 1))
    grading.record(grading.next_item(round, raters[1]), raters[1], Verdict(grade=1))
    grading.record(item, raters[0], Verdict(grade=2))
    assert kept(round) == {"pairs": 1, "complete": 1, "done": 1, "needed": 1}
    assert_kept_totals_are_the_sums(round)


def test_a_draft_round_counts_nothing_yet(people, raters):
    round = make_round(people.project, people.lead, raters, open=False)
    progress = grading.progress_of(round, raters[0])
    assert (progress.judged, progress.remaining, progress.round_done, progress.round_needed) == (0, 0, 0, 0)


def test_my_counts_follow_every_grade_at_once_mine_and_others(people, raters):
    round = make_round(people.project, people.lead, raters)  # 12 pairs, one judgment each
    progress = grading.progress_of(round, raters[0])
    assert (progress.judged, progress.remaining, progress.round_done, progress.round_needed) == (0, 12, 0, 12)
    for n in range(1, 6):
        grading.record(grading.next_item(round, raters[0]), raters[0], Verdict(grade=1))
        progress = grading.progress_of(round, raters[0])
        assert (progress.judged, progress.remaining, progress.round_done) == (n, 12 - n, n)
    grading.record(grading.next_item(round, raters[1]), raters[1], Verdict(grade=1))
    progress = grading.progress_of(round, raters[0])
    assert (progress.judged, progress.remaining, progress.round_done) == (5, 6, 6)


def test_a_pair_i_judged_that_waits_for_a_second_rater_is_no_longer_to_go_for_me(people, raters):
    round = make_round(people.project, people.lead, raters, raters_per_pair=2)
    for _ in range(3):
        grading.record(grading.next_item(round, raters[0]), raters[0], Verdict(grade=1))
    mine, theirs = grading.progress_of(round, raters[0]), grading.progress_of(round, raters[1])
    assert (mine.remaining, theirs.remaining, mine.round_done, mine.round_needed) == (9, 12, 3, 24)


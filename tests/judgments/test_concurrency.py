"""Many raters at once on PostgreSQL: claims never overlap and repeated submits never double."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, connections

from judgments.models import Judgment, RoundTotals
from judgments.ops import grading
from judgments.ops.grading import Verdict
from tests.factory import Role, add_member, make_round, make_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def many_raters(people):
    if connection.vendor != "postgresql":
        pytest.skip("row locks need PostgreSQL; SQLite serialises every write transaction anyway")
    raters = [make_user(f"rater{i}") for i in range(8)]
    for rater in raters:
        add_member(people.project, rater, Role.RATER)
    return raters


def in_threads(function, arguments):
    def run(argument):
        try:
            return function(argument)
        finally:
            connections.close_all()
    with ThreadPoolExecutor(max_workers=len(arguments)) as pool:
        return list(pool.map(run, arguments))


def test_raters_asking_at_the_same_moment_get_different_pairs(people, many_raters):
    round = make_round(people.project, people.lead, many_raters, {"q1": [f"d{i}" for i in range(16)]})
    for _ in range(3):
        served = in_threads(lambda rater: grading.next_item(round, rater), many_raters)
        assert len({item.pk for item in served}) == len(many_raters)
        in_threads(lambda pair: grading.record(pair[0], pair[1], Verdict(grade=1)), list(zip(served, many_raters))[:4])
    assert sorted(round.items.values_list("n_judged", flat=True)) == [0] * 4 + [1] * 12


def test_the_same_verdict_sent_eight_times_at_once_is_one_judgment(people, many_raters):
    round = make_round(people.project, people.lead, many_raters)
    item = grading.next_item(round, many_raters[0])
    in_threads(lambda grade: grading.record(item, many_raters[0], Verdict(grade=grade)), [2] * 8)
    assert Judgment.objects.count() == 1
    item.refresh_from_db()
    assert item.n_judged == 1


def test_grades_landing_while_a_lead_sums_the_round_afresh_leave_its_totals_exact(people, many_raters):
    round = make_round(people.project, people.lead, many_raters, {f"q{q}": [f"d{q}-{d}" for d in range(8)] for q in range(8)},
                       raters_per_pair=2)

    def work(rater):
        if rater is None:  # a lead's bulk change (an import, a flag reset) ends by summing the totals again
            for _ in range(10):
                grading.count_round(round)
            return
        for _ in range(6):
            grading.record(grading.next_item(round, rater), rater, Verdict(grade=1))

    in_threads(work, [*many_raters, None])
    kept = RoundTotals.objects.filter(round=round).values("pairs", "complete", "done", "needed").get()
    assert kept == grading.round_totals(round)
    assert (kept["pairs"], kept["done"], kept["needed"]) == (64, 48, 128)


def test_raters_grading_one_query_at_once_in_a_bandit_round_all_succeed_and_its_order_sees_every_grade(people, many_raters):
    # Each grade re-ranks the query's other pairs: without the per-query lock two such grades would wait on each
    # other's rows (a deadlock, one grade lost to an error) or rank from a view missing the other's grade.
    from judgments.lib import judging_order

    round = make_round(people.project, people.lead, many_raters, {"q1": [f"d{i:02d}" for i in range(24)]}, judging_order="mmns")
    for _ in range(3):
        served = in_threads(lambda rater: grading.next_item(round, rater), many_raters)
        in_threads(lambda pair: grading.record(pair[0], pair[1], Verdict(grade=pair[0].pk % 2 * 2)), list(zip(served, many_raters)))
    assert Judgment.objects.count() == 3 * len(many_raters)
    items = list(round.items.select_related("pair").prefetch_related("judgments"))
    first = {item.pair.doc_id: item.judgments.all()[0] for item in items if item.n_judged}
    judged = {doc: bool(judgment.grade) for doc, judgment in sorted(first.items(), key=lambda pair: (pair[1].created_at, pair[1].pk))}
    ranked = sorted((rank, system, item.pair.doc_id) for item in items for system, rank in item.pair.provenance.items())
    rankings = {system: [doc for _rank, run, doc in ranked if run == system] for _rank, system, _doc in ranked}
    pool_order = [item.pair.doc_id for item in sorted(items, key=lambda item: (-item.pair.priority, item.pair.doc_id))]
    expected = judging_order.priorities("mmns", rankings, judged, pool_order=pool_order, seed=round.seed)
    assert {item.pair.doc_id: item.priority for item in items if not item.n_judged} == expected

"""The counters the lead's pages read instead of scanning a round (RaterTotals per rater, the spread of each
pair's grades) equal what the judgments say after every kind of change: grades, changed grades, unrateable
flags and their reset, imports, reassigning, adjudication, deletion, and many raters at once."""

from collections import defaultdict

import pytest
from django.db import connection

from judgments.models import Adjudication, Judgment, RaterTotals, Round, RoundItem
from judgments.ops import grading, rounds
from judgments.ops.grading import Verdict
from judgments.ops.judgment_files import import_judgments
from tests.factory import Role, add_member, make_round, make_user
from tests.judgments.test_concurrency import in_threads

pytestmark = pytest.mark.django_db


def by_hand(round) -> tuple[dict, dict]:
    """The oracle: each rater's counts and each pair's spread, from the judgment rows one by one."""
    raters, grades = defaultdict(lambda: {"judgments": 0, "unrateable": 0, "last_at": None}), defaultdict(list)
    for judgment in Judgment.objects.filter(item__round=round):
        row = raters[judgment.rater_id]
        row["judgments"] += 1
        row["unrateable"] += judgment.grade is None
        row["last_at"] = max(filter(None, [row["last_at"], judgment.created_at]))
        if judgment.grade is not None:
            grades[judgment.item_id].append(judgment.grade)
    spreads = {item: max(found) - min(found) for item, found in grades.items()}
    return dict(raters), spreads


def assert_counters_match(round) -> None:
    raters, spreads = by_hand(round)
    kept = {row.rater_id: {"judgments": row.judgments, "unrateable": row.unrateable, "last_at": row.last_at}
            for row in RaterTotals.objects.filter(round=round)}
    assert kept == raters
    assert {pk: spread for pk, spread in round.items.filter(spread__isnull=False).values_list("pk", "spread")} == spreads
    assert_query_rows_match(round)


def assert_query_rows_match(round) -> None:
    """The round page's row per query (pairs, complete, judgments, unrateable, gold) against the judgment rows:
    the page sums the pairs' kept n_judged and counts flags alone, so both must stay exact."""
    expected = defaultdict(lambda: {"pairs": 0, "complete": 0, "judged": 0, "unrateable": 0, "gold": 0})
    for item in round.items.select_related("query").prefetch_related("judgments"):
        found = list(item.judgments.all())
        row = expected[item.query.query_id]
        row["pairs"] += 1
        row["complete"] += len(found) >= item.required
        row["judged"] += len(found)
        row["unrateable"] += sum(j.grade is None for j in found)
        row["gold"] += item.gold_grade is not None
    shown = {row["query__query_id"]: {key: row[key] for key in ("pairs", "complete", "judged", "unrateable", "gold")}
             for row in rounds.query_report(round, size=1000).rows}
    assert shown == dict(expected)


@pytest.fixture
def raters(people):
    second = make_user("rosa")
    add_member(people.project, second, Role.RATER)
    return [people.rater, second]


def test_counters_follow_grades_changes_flags_imports_reassigning_and_adjudication(people, raters):
    round = make_round(people.project, people.lead, raters, raters_per_pair=2)
    first, second = list(round.items.order_by("pk")[:2])
    grading.record(first, raters[0], Verdict(grade=0))
    grading.record(first, raters[1], Verdict(grade=3))
    assert_counters_match(round)
    assert RoundItem.objects.get(pk=first.pk).spread == 3

    grading.record(first, raters[1], Verdict(grade=1))  # a changed grade narrows the spread
    assert RoundItem.objects.get(pk=first.pk).spread == 1
    grading.record(first, raters[1], Verdict(unrateable="broken"))  # a grade becomes a flag
    assert_counters_match(round)
    assert RoundItem.objects.get(pk=first.pk).spread == 0
    grading.record(second, raters[0], Verdict(unrateable="login_wall"))
    assert RaterTotals.objects.get(round=round, rater=raters[0]).unrateable == 1
    grading.record(second, raters[0], Verdict(grade=2))  # and a flag a grade again
    assert_counters_match(round)
    grading.record(second, raters[1], Verdict(unrateable="broken"))

    rounds.reset_flags(round, unrateable=True, by=people.lead)  # deletes the flagged judgments
    assert not Judgment.objects.filter(grade__isnull=True).exists()
    assert_counters_match(round)

    labelled = round.items.select_related("query", "document").order_by("pk")[:6]
    qrels = "".join(f"{item.query.query_id} 0 {item.document.doc_id} {i % 4}\n" for i, item in enumerate(labelled))
    import_judgments(round, qrels.encode(), "labels.qrels", rater=raters[1].username)
    assert_counters_match(round)

    rounds.reassign(round, raters[0], raters[1])
    Adjudication.objects.create(item=first, grade=2, lead=people.lead)
    rounds.set_gold(second, 2)
    assert_counters_match(round)


def test_a_deleted_round_takes_its_counters_along(people, raters):
    round = make_round(people.project, people.lead, raters)
    grading.record(grading.next_item(round, raters[0]), raters[0], Verdict(grade=1))
    assert RaterTotals.objects.filter(round=round).count() == 1
    Round.objects.filter(pk=round.pk).delete()
    assert not RaterTotals.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_many_raters_at_once_and_a_lead_summing_afresh_leave_the_counters_exact(people):
    if connection.vendor != "postgresql":
        pytest.skip("row locks need PostgreSQL; SQLite serialises every write transaction anyway")
    many = [make_user(f"rater{i}") for i in range(6)]
    for rater in many:
        add_member(people.project, rater, Role.RATER)
    round = make_round(people.project, people.lead, many, {f"q{q}": [f"d{q}-{d}" for d in range(6)] for q in range(6)},
                       raters_per_pair=3)

    def work(rater):
        if rater is None:  # a lead's bulk change ends by summing the counters again
            for _ in range(5):
                grading.count_round(round)
            return
        for n in range(6):
            item = grading.next_item(round, rater)
            assert item is not None, f"{rater} got no pair at grade {n}"
            grading.record(item, rater, Verdict(grade=(rater.pk + n) % 4))
            grading.record(item, rater, Verdict(grade=n % 4) if n % 3 else Verdict(unrateable="broken"))

    in_threads(work, [*many, None])
    assert Judgment.objects.count() == 36
    assert_counters_match(round)

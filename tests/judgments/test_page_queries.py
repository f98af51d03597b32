"""Every lead, viewer and rater page of a round runs no more queries for a big round than for a small one
(issue 19): totals come from kept counters, long lists are pages, nothing is counted or read per pair.
And the agreement report computed from the streamed grades is the one the old ORM path gave."""

import pandas as pd
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from judgments.models import Adjudication, Claim, Judgment
from judgments.ops import grading, reports, rounds
from judgments.ops.grading import Verdict
from tests.factory import Role, add_member, make_project, make_round, make_user

pytestmark = pytest.mark.django_db


def graded_round(people, raters, queries: int, documents: int):
    """A round in a project of its own, every pair graded by two raters (some far apart, one in seven
    flagged, one put off by both), a gold pair, an adjudication and a stored agreement report."""
    project = make_project(people.lead, name=f"Shop {queries}x{documents}")
    for user, role in ((people.viewer, Role.VIEWER), *((rater, Role.RATER) for rater in raters)):
        add_member(project, user, role)
    pairs = {f"q{q:02d}": [f"d{q}-{d}" for d in range(documents)] for q in range(queries)}
    round = make_round(project, people.lead, raters, pairs, raters_per_pair=2)
    items = list(round.items.order_by("pk"))
    for n, item in enumerate(items[:-1]):
        grading.record(item, raters[0], Verdict(grade=n % 4))
        grading.record(item, raters[1], Verdict(grade=(n * 3) % 4) if n % 7 != 1 else Verdict(unrateable="broken"))
    Claim.objects.create(item=items[-1], rater=raters[0], kind=Claim.Kind.LATER)
    Claim.objects.create(item=items[-1], rater=raters[1], kind=Claim.Kind.LATER)
    rounds.set_gold(items[0], 2)
    Adjudication.objects.create(item=items[2], grade=1, lead=people.lead)
    reports.store(round, reports.compute(round, resamples=10))
    return round


def pages(round, people, raters) -> list[tuple[str, object]]:
    slug, uuid, pool = round.project.slug, round.uuid, round.pool.uuid
    flags = reverse("judgments:round-flags", args=[slug, uuid])
    flagged = Judgment.objects.filter(item__round=round, grade__isnull=True).order_by("-created_at", "-pk").first()
    put_off = Claim.objects.filter(item__round=round, kind=Claim.Kind.LATER).select_related("item", "rater").order_by("since", "pk").first()
    read = [reverse("judgments:project", args=[slug]), reverse("judgments:rounds", args=[slug]),
            reverse("judgments:round", args=[slug, uuid]), reverse("judgments:round", args=[slug, uuid]) + "?after=q00",
            reverse("judgments:round-query", args=[slug, uuid, "q01"]), reverse("judgments:round-flags", args=[slug, uuid]),
            reverse("judgments:round-agreement", args=[slug, uuid]), reverse("judgments:round-adjudication", args=[slug, uuid]),
            reverse("judgments:round-export", args=[slug, uuid]), reverse("judgments:round-judges", args=[slug, uuid]),
            reverse("judgments:pools", args=[slug]), reverse("judgments:pool", args=[slug, pool]),
            f"{flags}?after={flagged.uuid}", f"{flags}?later_after={put_off.item.uuid}&later_rater={put_off.rater.username}"]
    rater = [reverse("judgments:grade", args=[slug, uuid]), reverse("judgments:grade-bulk", args=[slug, uuid, "q01"]),
             reverse("judgments:my-queue")]
    return ([(url, people.lead) for url in [*read, reverse("judgments:round-edit", args=[slug, uuid])]]
            + [(url, people.viewer) for url in read] + [(url, raters[0]) for url in rater])


def queries_of(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


def test_no_page_runs_more_queries_for_a_round_five_times_the_size(people, client, django_assert_max_num_queries):
    second = make_user("rosa")
    raters = [people.rater, second]
    small, big = graded_round(people, raters, 3, 4), graded_round(people, raters, 6, 10)
    for (small_url, user), (big_url, _) in zip(pages(small, people, raters), pages(big, people, raters)):
        client.force_login(user)
        client.get(small_url)  # the first load caches the session and the user's memberships
        allowed = queries_of(client, small_url)
        client.get(big_url)
        with django_assert_max_num_queries(allowed):
            assert client.get(big_url).status_code == 200, big_url


def test_the_adjudication_queue_and_the_queries_are_pages_linked_without_script(people, client):
    raters = [people.rater, make_user("rosa")]
    round = graded_round(people, raters, 3, 4)
    client.force_login(people.lead)
    url = reverse("judgments:round-adjudication", args=[round.project.slug, round.uuid])
    first = client.get(url, {"after": ""})
    shown = first.context["rows"]
    assert [row["spread"] for row in shown] == sorted((row["spread"] for row in shown), reverse=True)
    wide = sorted(((pk, s) for pk, s in round.items.filter(spread__gte=round.adjudication_margin).values_list("pk", "spread")),
                  key=lambda row: (-row[1], row[0]))
    assert [row["item"].pk for row in shown] == [pk for pk, _ in wide]

    page = rounds.query_report(round, size=2)
    assert [row["query__query_id"] for row in page.rows] == ["q00", "q01"] and page.has_next and not page.has_previous
    after = rounds.query_report(round, after="q01", size=2)
    assert [row["query__query_id"] for row in after.rows] == ["q02"] and after.has_previous and not after.has_next
    assert [row["query__query_id"] for row in rounds.query_report(round, before="q02", size=2).rows] == ["q00", "q01"]
    page_html = client.get(reverse("judgments:round", args=[round.project.slug, round.uuid])).content.decode()
    assert "Queries q00 to q02, by query id" in page_html
    row = rounds.query_report(round, after="q00", size=1).rows[0]
    on_q01 = Judgment.objects.filter(item__round=round, item__query__query_id="q01")
    assert (row["pairs"], row["judged"], row["unrateable"]) == (4, on_q01.count(), on_q01.filter(grade__isnull=True).count())


def test_the_agreement_report_from_streamed_grades_is_the_old_paths(people, monkeypatch):
    raters = [people.rater, make_user("rosa")]
    round = graded_round(people, raters, 4, 5)

    def old_grades_of(round):  # the ORM path the report job used before the grades were streamed
        rows = (Judgment.objects.filter(item__round=round, grade__isnull=False)
                .values_list("item_id", "rater__username", "grade", "created_at", "item__query__query_id"))
        return pd.DataFrame(list(rows), columns=["item", "rater", "grade", "time", "query"])

    streamed = reports.grades_of(round)
    assert sorted(map(tuple, streamed[["item", "rater", "grade", "query"]].values.tolist())) == sorted(
        map(tuple, old_grades_of(round)[["item", "rater", "grade", "query"]].values.tolist()))
    new = reports.compute(round, resamples=50)
    monkeypatch.setattr(reports, "grades_of", old_grades_of)
    old = reports.compute(round, resamples=50)
    for key in ("computed_at",):
        new.pop(key), old.pop(key)
    assert new == old


def test_the_grades_read_for_the_report_are_the_judgments_to_the_microsecond(people):
    raters = [people.rater, make_user("rosa")]
    round = graded_round(people, raters, 3, 4)
    expected = Judgment.objects.filter(item__round=round, grade__isnull=False).values_list(
        "item_id", "rater__username", "grade", "created_at", "item__query__query_id")

    grades = reports.grades_of(round)

    assert list(grades.columns) == ["item", "rater", "grade", "time", "query"]
    assert str(grades["time"].dtype) == "datetime64[us, UTC]" and grades["grade"].dtype == "int64"
    assert sorted(zip(grades["item"].tolist(), grades["rater"].tolist(), grades["grade"].tolist(),
                      grades["time"].dt.to_pydatetime().tolist(), grades["query"].tolist())) == sorted(expected)


def test_a_round_without_grades_reads_an_empty_table(people):
    raters = [people.rater, make_user("rosa")]
    project = make_project(people.lead, name="Empty shop")
    for rater in raters:
        add_member(project, rater, Role.RATER)
    round = make_round(project, people.lead, raters, {"q00": ["d0", "d1"]}, raters_per_pair=2)

    grades = reports.grades_of(round)

    assert len(grades) == 0 and list(grades.columns) == ["item", "rater", "grade", "time", "query"]

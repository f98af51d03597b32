"""The agreement report page reads as words where alpha is undefined, and names each query by its text."""

import re

import pytest

from judgments.ops import grading, reports
from judgments.ops.grading import Verdict
from tests.factory import Role, add_member, make_round, make_user
from tests.judgments.test_agreement_and_exports import url

pytestmark = pytest.mark.django_db

PAIRS = {"q1": ["d11", "d12", "d13"], "q2": ["d21", "d22", "d23"], "q3": ["d31", "d32"]}


@pytest.fixture
def round(people):
    """q1: both raters give every pair grade 2 (they all agree, no variance); q2: they split;
    q3: only ravi graded (no pair graded twice)."""
    rosa = make_user("rosa")
    add_member(people.project, rosa, Role.RATER)
    round = make_round(people.project, people.lead, [people.rater, rosa], PAIRS, raters_per_pair=2)
    for item in round.items.select_related("query", "document"):
        query, doc = item.query.query_id, item.document.doc_id
        grading.record(item, people.rater, Verdict(grade=2 if query != "q2" else int(doc[-1])))
        if query != "q3":
            grading.record(item, rosa, Verdict(grade=2 if query == "q1" else 3 - int(doc[-1])))
    reports.store(round, reports.compute(round, resamples=20))
    return round


def rows_of(page: str) -> dict[str, str]:
    """The per-query table's rows by query id, as text."""
    table = page[page.index("Queries, worst agreement first"):page.index("Each rater against the others")]
    return {match[1]: re.sub(r"<[^>]+>|\s+", " ", match[0]) for match in re.finditer(r"<tr><td><a [^>]*>(q\d)</a>.*?</tr>", table, re.S)}


def test_a_query_whose_raters_all_agree_reads_all_agree_and_one_without_overlap_says_why_it_is_undefined(people, round):
    page = people.client("lead").get(url("round-agreement", round)).content.decode()
    rows = rows_of(page)
    assert list(rows) == ["q2", "q1", "q3"]  # worst first, then all agree, then no data
    assert "all agree" in rows["q1"] and "undefined" not in rows["q1"]
    assert "undefined: no pair graded twice" in rows["q3"]
    assert "all agree" not in rows["q2"] and "undefined" not in rows["q2"]


def test_each_query_shows_its_text_beside_its_id(people, round):
    rows = rows_of(people.client("viewer").get(url("round-agreement", round)).content.decode())
    assert all(f"query {query_id}" in rows[query_id] for query_id in PAIRS)


def test_the_csv_report_says_all_agree_and_why_alpha_is_undefined(people, round):
    response = people.client("lead").get(url("round-agreement-download", round, "csv"))
    lines = {line.split(",")[1]: line for line in response.content.decode().splitlines() if line.startswith("query,")}
    assert lines["q1"].endswith(",all agree") and lines["q3"].endswith(",undefined: no pair graded twice")
    assert lines["q2"].endswith(",")


def test_raters_and_outsiders_do_not_see_the_report(people, round):
    assert people.client("rater").get(url("round-agreement", round)).status_code == 403
    assert people.client("outsider").get(url("round-agreement", round)).status_code == 404


def test_grades_per_rater_are_counted_in_a_table_beside_the_coloured_bars(people, round):
    from collections import Counter

    from judgments.models import Judgment

    page = people.client("viewer").get(url("round-agreement", round)).content.decode()
    table = page[page.index('<table class="compact grade-counts">'):]
    table = table[:table.index("</table>")]
    grades = re.findall(r'<th scope="col" class="num">.*?grade (\S+)</th>', table, re.S)
    shown = {name: [int(count) for count in re.findall(r'<td class="num">(\d+) <small', row)]
             for name, row in re.findall(r'<tr><th scope="row">([^<]+)</th>(.*?)</tr>', table, re.S)}
    counted = {rater: Counter(str(grade) for grade in Judgment.objects.filter(item__round=round, rater__username=rater)
                              .values_list("grade", flat=True)) for rater in shown}
    assert set(shown) == {people.rater.username, "rosa"} and grades
    assert shown == {rater: [counts[grade] for grade in grades] for rater, counts in counted.items()}
    assert 'aria-describedby="dist-desc"' in page and "Grades per rater, counted" in page


def test_the_reports_tables_have_no_empty_header(people, round):
    page = people.client("lead").get(url("round-agreement", round)).content.decode()
    assert not re.search(r"<th[^>]*>\s*</th>", page)

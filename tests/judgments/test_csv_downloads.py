"""Every CSV download guards its cells against spreadsheet formulas (OWASP's CSV injection rule), and the
files Verdict reads back (query sets, Quepid CSV) lose the guard again, so round trips stay exact."""

import csv
import io
import json

import pytest
from django.urls import reverse
from hypothesis import given, settings, strategies as st

from judgments.lib.fileformats import FORMULA_STARTS, csv_chunks, guard_cell, read_queries, unguard_cell
from judgments.models import Job, Query, QueryCollection, StoredRun
from judgments.ops import grading
from judgments.ops.grading import Verdict
from judgments.ops.imports import import_queries, import_run
from tests.factory import Role, add_member, make_round, make_user, run_queued_jobs, trec_run, upload

HOSTILE = ['=HYPERLINK("x")', "+cmd|' /C calc'!A0", "@SUM(1)", "-2+3", "\tx", "\rx", "'=already", "''@twice"]


# ------------------------------------------------------------------------------------------- the helper


@pytest.mark.parametrize("value, cell", [
    ('=HYPERLINK("x")', '\'=HYPERLINK("x")'),
    ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
    ("@SUM(1)", "'@SUM(1)"),
    ("-2+3", "'-2+3"),
    ("\tx", "'\tx"),
    ("\rx", "'\rx"),
    ("-", "'-"),
    ("-inf", "'-inf"),
    (float("-inf"), "'-inf"),
    ("'=already", "''=already"),  # a guard already there gets one more, so that reading back gives it again
    ("''@twice", "'''@twice"),
    ("'plain", "'plain"),  # nothing formula-like behind it: left alone
    ("tent = 2 person", "tent = 2 person"),
    ("-1", "-1"), ("-0.5", "-0.5"), ("1e-05", "1e-05"), ("-1.5E+07", "-1.5E+07"), ("-.5", "-.5"),  # plain numbers stay numbers
    (-3, "-3"), (-0.25, "-0.25"), (None, ""), ("", ""),
    (390.35 + 0.1, "390.45"), (0.1 + 0.2, "0.3"), (2 / 3, "0.666666666666667"), (1e-20, "1e-20"), (5.0, "5.0"),  # no float noise
])
def test_a_formula_like_cell_gets_a_quote_and_a_plain_number_stays_a_number(value, cell):
    assert guard_cell(value) == cell
    if isinstance(value, str):
        assert unguard_cell(cell) == value


def test_quepid_cells_take_quepids_guard_a_leading_space():
    assert guard_cell("=x", " ") == " =x"
    assert guard_cell(" =x", " ") == "  =x"
    assert guard_cell(" x", " ") == " x"
    assert [unguard_cell(cell, " ") for cell in ("  =x", " =x", " x", "-1")] == [" =x", "=x", " x", "-1"]


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from("=+-@\t\r' .0123456789eEax")), st.sampled_from(["'", " "]))
def test_every_value_comes_back_exactly_and_no_guarded_cell_starts_like_a_formula(value, guard):
    cell = guard_cell(value, guard)
    assert unguard_cell(cell, guard) == value
    assert cell == value or cell == guard + value
    assert not cell.startswith(FORMULA_STARTS) or cell.startswith("-") and _is_number(cell)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.text(), min_size=1, max_size=4), max_size=6), st.integers(1, 50))
def test_csv_chunks_write_rows_any_csv_reader_reads_back(rows, chunk_chars):
    text = "".join(csv_chunks(rows, chunk_chars=chunk_chars))
    read = list(csv.reader(io.StringIO(text, newline="")))
    assert [[unguard_cell(cell) for cell in row] for row in read] == rows


def test_a_carriage_return_stays_inside_its_cell():
    text = "".join(csv_chunks([["a", "b\r=cmd"], ["c", "d"]]))
    assert text == '"a","b\r=cmd"\nc,d\n'
    assert list(csv.reader(io.StringIO(text, newline=""))) == [["a", "b\r=cmd"], ["c", "d"]]


# ------------------------------------------------------------------------------------ every download


def _cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text, newline="")) for cell in row]


def _no_formula_cell(text: str) -> None:
    unsafe = [cell for cell in _cells(text) if cell.startswith(FORMULA_STARTS) and guard_cell(cell) != cell]
    assert not unsafe


def _body(response) -> str:
    assert response.status_code == 200, response.content[:500] if not response.streaming else response
    return b"".join(response.streaming_content).decode() if response.streaming else response.content.decode()


@pytest.fixture
def hostile_round(people):
    """A round graded by two raters (one named '+carl') whose query ids, texts, segments and doc ids, and
    its runs' names, are formula-like."""
    carl = make_user("+carl")
    add_member(people.project, carl, Role.RATER)
    pairs = {"=1+1": ["@d1", "-d2", "+d3"], "@SUM(1)": ["=d4", "d5", "-1"], "-2+3": ["d6", "+d7", "@d8"]}
    round = make_round(people.project, people.lead, [people.rater, carl], pairs, raters_per_pair=2, overlap_share=0)
    for query, text in zip(Query.objects.filter(collection=round.pool.query_set).order_by("pk"), HOSTILE):
        query.text, query.segment = text, "@seg"
        query.save()
    for n, item in enumerate(round.items.order_by("pk")):
        grading.record(item, people.rater, Verdict(grade=n % 4))
        grading.record(item, carl, Verdict(grade=(n + n // 3) % 4))
    StoredRun.objects.filter(project=people.project).update(name='=HYPERLINK("run")')
    reversed_run = {qid: list(reversed(docs)) for qid, docs in pairs.items()}
    import_run(people.project, trec_run(reversed_run, "b"), "b.run", name="-B", system="+hybrid")
    return round


def test_every_csv_download_guards_every_formula_like_cell(people, hostile_round):
    round, client, slug = hostile_round, people.client("lead"), people.project.slug
    downloads = {}
    for fmt in ("quepid-csv", "long-csv", "consensus-csv"):
        downloads[fmt] = _body(client.get(reverse("judgments:round-export", args=[slug, round.uuid]), {"format": fmt}))
    collection = round.pool.query_set
    downloads["queries.csv"] = _body(client.get(reverse("judgments:query-set-csv", args=[slug, collection.uuid])))

    client.post(reverse("judgments:round-agreement-compute", args=[slug, round.uuid]))
    client.post(reverse("evaluation:evaluation-create", args=[slug]),
                {"round": round.uuid, "runs": list(StoredRun.objects.values_list("uuid", flat=True)), "measures": "P@1 nDCG@3",
                 "relevance_level": "1"})
    assert [job.state for job in run_queued_jobs()] == [Job.State.SUCCEEDED] * 2
    downloads["agreement report"] = _body(client.get(reverse("judgments:round-agreement-download", args=[slug, round.uuid, "csv"])))
    evaluation = round.evaluations.get()
    for what in ("aggregate", "per-query", "breakdown", "comparison"):
        downloads[what] = _body(client.get(reverse("evaluation:download", args=[slug, evaluation.uuid, what, "csv"])))

    for name, text in downloads.items():
        _no_formula_cell(text)
    assert " =HYPERLINK(\"x\")" in _cells(downloads["quepid-csv"]) and " @d1" in _cells(downloads["quepid-csv"])
    assert " +carl" in _cells(downloads["quepid-csv"])[:4]
    for name in ("long-csv", "consensus-csv", "queries.csv"):
        assert {"'=1+1", "'@SUM(1)", "'-2+3", "'=HYPERLINK(\"x\")"} <= set(_cells(downloads[name])), name
    assert "'+carl" in _cells(downloads["long-csv"]) and "'@d1" in _cells(downloads["consensus-csv"])
    assert "'@seg" in _cells(downloads["queries.csv"])
    assert {"'=1+1", "'+carl"} <= set(_cells(downloads["agreement report"]))
    assert "'=HYPERLINK(\"run\")" in _cells(downloads["aggregate"]) and "'-B" in _cells(downloads["comparison"])
    assert {"'=1+1", "'=HYPERLINK(\"run\") P@1"} <= set(_cells(downloads["per-query"]))
    assert "'@seg" in _cells(downloads["breakdown"])


# --------------------------------------------------------------------------------------- round trips


def test_a_query_set_download_imports_back_to_the_same_queries_and_the_same_bytes(people):
    rows = [{"query_id": qid, "query": text, "information_need": need, "tier": "head", "segment": "@en", "traffic": "=1+1"}
            for qid, text, need in zip(["=1", "+2", "@3", "-4", "'=5", "-6", "''+7", "8"],
                                       [*HOSTILE[:4], "'=already", "-1", "''@twice", "plain"],
                                       ["=cmd", "", "-need", "@x", "", "'+x", "", "need"])]
    jsonl = "".join(json.dumps(row) + "\n" for row in rows).encode()  # JSONL keeps every character as it is
    original, _ = import_queries(people.project, jsonl, "hostile.jsonl", name="Hostile")
    url = lambda collection: reverse("judgments:query-set-csv", args=[people.project.slug, collection.uuid])  # noqa: E731
    client = people.client("lead")
    first = _body(client.get(url(original)))
    _no_formula_cell(first)
    response = client.post(reverse("judgments:query-set-import", args=[people.project.slug]),
                           {"file": upload("hostile.csv", first.encode()), "name": "Again"})
    assert response.status_code == 302
    run_queued_jobs()
    again = QueryCollection.objects.get(name="Again")
    fields = ("query_id", "text", "information_need", "tier", "segment")
    assert list(again.queries.order_by("pk").values_list(*fields)) == list(original.queries.order_by("pk").values_list(*fields))
    assert _body(client.get(url(again))) == first


def test_the_query_set_reader_takes_the_guard_off_csv_only():
    guarded = read_queries("query_id,query\n'=1,'@SUM(1)\n''=2,'plain\n".encode(), "q.csv").queries
    assert [(q.query_id, q.text) for q in guarded] == [("=1", "@SUM(1)"), ("'=2", "'plain")]
    tsv = read_queries("query_id\tquery\n'=1\t'@x\n".encode(), "q.tsv").queries
    assert [(q.query_id, q.text) for q in tsv] == [("'=1", "'@x")]

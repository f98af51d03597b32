"""Exports mark machine grades: Quepid CSV a column per judge (skipped on import), the long CSV a source column,
qrels the raters' labels, a judge's grades, or the raters' with the judge's where they gave none."""

import csv
import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from judgments.models import Judgment
from judgments.ops import grading
from judgments.ops.automatic import run_judge
from judgments.ops.grading import Verdict
from judgments.ops.judgment_files import ExportOptions, export, import_judgments
from tests.judgments.test_automatic_judges import overlap_judge, reference_round

pytestmark = pytest.mark.django_db


@pytest.fixture
def round(people):
    """q1's four pairs graded 1 by a rater; an overlap judge graded every pair (3 for d?1, 0 for the rest) but
    could not judge q3, which has no reference."""
    round = reference_round(people)
    round.pool.query_set.queries.filter(query_id="q3").update(references=[])
    for item in round.items.filter(query__query_id="q1"):
        grading.record(item, people.rater, Verdict(grade=1))
    run_judge(overlap_judge(round))
    return round


def text(round, fmt, **options) -> str:
    return "".join(export(round, fmt, ExportOptions(**options)))


def qrels_of(body: str) -> dict:
    return {(line.split()[0], line.split()[2]): int(line.split()[3]) for line in body.splitlines()}


def test_qrels_take_human_judge_or_filled_labels(round):
    human = qrels_of(text(round, "qrels"))
    assert human == {("q1", f"d1{d}"): 1 for d in range(1, 5)}
    judge = qrels_of(text(round, "qrels", source="judge", judge="overlap"))
    assert judge == {(f"q{q}", f"d{q}{d}"): 3 if d == 1 else 0 for q in (1, 2) for d in range(1, 5)}  # q3: could not judge
    filled = qrels_of(text(round, "qrels", source="fill", judge="overlap"))
    assert filled == {**judge, **human} and len(filled) == 8
    with pytest.raises(ValueError, match="no judge named 'gpt'"):
        text(round, "qrels", source="judge", judge="gpt")


def test_the_quepid_csv_has_a_column_per_judge_that_imports_skip(round, people):
    body = text(round, "quepid-csv")
    rows = list(csv.reader(io.StringIO(body)))
    assert rows[0] == ["query", "docid", "ravi", "judge:overlap"]
    assert rows[1:] == [["query q1", f"d1{d}", "1", "3" if d == 1 else "0"] for d in range(1, 5)]
    report = import_judgments(round, body.encode(), "book.csv", dry_run=True)
    assert report.raters == {"ravi": 4} and report.unchanged == 4
    import_judgments(round, body.encode(), "book.csv")
    assert Judgment.objects.count() == 4


def test_the_long_csv_marks_each_row_human_or_judge(round):
    rows = list(csv.DictReader(io.StringIO(text(round, "long-csv"))))
    assert [row["source"] for row in rows] == ["human"] * 4 + ["judge"] * 12
    judged = [row for row in rows if row["source"] == "judge"]
    assert {row["rater"] for row in judged} == {"overlap"}
    d11 = next(row for row in judged if row["doc_id"] == "d11")
    assert d11["grade"] == "3" and "texts are equal" in d11["note"]
    q3 = [row for row in judged if row["query_id"] == "q3"]
    assert len(q3) == 4 and all(row["grade"] == "" and "no reference texts" in row["note"] for row in q3)


def test_the_export_page_and_command_choose_the_labels(round, people, tmp_path):
    url = f"/p/{round.project.slug}/rounds/{round.uuid}/export/"
    page = people.client("viewer").get(url).content.decode()
    assert "judge:NAME" in page and '<option value="overlap">overlap</option>' in page
    response = people.client("viewer").get(url, {"format": "qrels", "source": "fill", "judge": "overlap"})
    assert len(b"".join(response.streaming_content).decode().splitlines()) == 8
    refused = people.client("viewer").get(url, {"format": "qrels", "source": "judge"})
    assert refused.status_code == 200 and "Choose the judge" in refused.content.decode()
    call_command("export_judgments", str(round.uuid), "--labels", "judge", "--judge", "overlap", "--output", str(tmp_path / "j.qrels"))
    assert len((tmp_path / "j.qrels").read_text().splitlines()) == 8
    with pytest.raises(CommandError, match="needs --judge"):
        call_command("export_judgments", str(round.uuid), "--labels", "fill")


def test_each_label_source_downloads_under_a_name_of_its_own(round, people, tmp_path):
    """The raters' qrels, a judge's and the raters' filled by a judge: three files, three names, from the export page,
    the command and (the raters' labels only) the API; no two different files share a name."""
    from tests.api.conftest import token_for

    overlap_judge(round, name="Overlap")  # slugifies as "overlap" too: its files must still not take overlap's names
    url = f"/p/{round.project.slug}/rounds/{round.uuid}/export/"
    client = people.client("viewer")
    files: dict[str, set[str]] = {}

    def page(**params) -> str:
        response = client.get(url, {"format": "qrels", **params})
        assert response.status_code == 200 and response.streaming, response.content[:300]
        name = response["Content-Disposition"].split('filename="')[1].rstrip('"')
        files.setdefault(name, set()).add(b"".join(response.streaming_content).decode())
        return name

    stem = "round-1_guidelines-v1_qrels"
    assert page() == f"{stem}-graded.qrels"
    assert page(source="judge", judge="overlap") == f"{stem}-graded_judge-overlap.qrels"
    assert page(source="fill", judge="overlap") == f"{stem}-graded_judge-filled-overlap.qrels"
    assert page(source="fill", judge="overlap", threshold=2) == f"{stem}-binary-ge2_judge-filled-overlap.qrels"
    assert page(source="fill", judge="overlap", consensus="mean") == f"{stem}-graded_judge-filled-overlap_mean.qrels"
    assert page(source="judge", judge="overlap", consensus="mean") == f"{stem}-graded_judge-overlap.qrels"  # no consensus in a judge's grades
    other = round.judges.get(name="Overlap")
    assert page(source="judge", judge="Overlap") == f"{stem}-graded_judge-overlap-{other.uuid.hex[:8]}.qrels"
    assert all(len(bodies) == 1 for bodies in files.values()), {name: len(bodies) for name, bodies in files.items()}
    bodies = {name: next(iter(bodies)) for name, bodies in files.items()}
    # What each holds: q1's four raters' labels; the judge's eight grades; both, the raters' first.
    assert len(bodies[f"{stem}-graded.qrels"].splitlines()) == 4
    assert len(bodies[f"{stem}-graded_judge-overlap.qrels"].splitlines()) == 8
    assert qrels_of(bodies[f"{stem}-graded_judge-filled-overlap.qrels"]) == {
        **qrels_of(bodies[f"{stem}-graded_judge-overlap.qrels"]), **qrels_of(bodies[f"{stem}-graded.qrels"])}
    assert len(set(bodies.values())) == len(bodies) - 1  # the judge's grades by another rule are the same file

    folder = tmp_path / "exports"
    folder.mkdir()
    for labels in ("human", "judge", "fill"):
        call_command("export_judgments", str(round.uuid), "--labels", labels, *(["--judge", "overlap"] if labels != "human" else []),
                     "--output", str(folder))
    assert sorted(path.name for path in folder.iterdir()) == sorted(
        [f"{stem}-graded.qrels", f"{stem}-graded_judge-overlap.qrels", f"{stem}-graded_judge-filled-overlap.qrels"])
    for path in folder.iterdir():
        assert path.read_text() == bodies[path.name]

    from django.test import Client

    api = Client()
    api.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token_for(people.lead, people.project)}"
    response = api.get(f"/api/v1/projects/{round.project.slug}/rounds/{round.uuid}/judgments.qrels")
    assert response["Content-Disposition"].split('filename="')[1].rstrip('"') == f"{stem}-graded.qrels"
    assert b"".join(response.streaming_content).decode() == bodies[f"{stem}-graded.qrels"]  # the raters' labels, as its name says

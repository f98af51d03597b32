"""Stored runs: validated by the engine's reader, stored once as Parquet, listed with coverage."""

import json
import re

import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from judgments.models import Job, StoredRun
from judgments.ops.imports import import_queries
from tests.factory import run_queued_jobs, trec_run, upload

RUN = trec_run({"q1": ["d3", "d1", "d2"], "q2": ["d9"]}, tag="bm25")


def upload_run(people, data: bytes, name: str = "bm25", filename: str = "bm25.run") -> Job:
    people.client("lead").post(
        reverse("judgments:run-upload", args=[people.project.slug]),
        {"file": upload(filename, data), "name": name, "system": "BM25", "description": "baseline"},
    )
    [job] = run_queued_jobs()
    return job


def test_a_run_is_stored_once_as_parquet_in_ranking_order_with_its_facts(people):
    shuffled = b"q1 Q0 d1 2 5.0 bm25\nq1 Q0 d2 1 5.0 bm25\nq1 Q0 d3 3 9.5 bm25\nq2 Q0 d9 1 1 bm25\n"
    job = upload_run(people, shuffled)
    assert job.state == Job.State.SUCCEEDED, job.error
    run = StoredRun.objects.get(project=people.project)
    assert (run.name, run.system, run.n_queries, run.n_rows, run.n_documents, run.depth, run.run_tag) == ("bm25", "BM25", 2, 4, 4, 3, "bm25")
    assert len(run.sha256) == 64 and run.uploaded_by == people.lead
    with run.file.open("rb") as handle:
        table = pq.read_table(handle).to_pydict()
    # score descending, ties by doc id descending (trec_eval); the rank column is ignored
    assert table["doc_id"][:3] == ["d3", "d2", "d1"]
    assert table["rank"][:3] == [1, 2, 3]


def test_the_same_bytes_uploaded_twice_are_recognised(people):
    upload_run(people, RUN)
    job = upload_run(people, RUN, name="bm25 again")
    assert job.state == Job.State.SUCCEEDED
    assert "already stored as 'bm25'" in job.result["outcome"]
    assert StoredRun.objects.count() == 1


def test_a_json_run_is_accepted(people):
    job = upload_run(people, json.dumps({"q1": {"d1": 2.0, "d2": 1.5}}).encode(), filename="dense.json")
    assert job.state == Job.State.SUCCEEDED, job.error
    assert StoredRun.objects.get().n_rows == 2


@pytest.mark.parametrize(
    "data,message",
    [
        (b"q1 Q0 d1 1 2.0 bm25\nq1 Q0 d2 2 bm25\n", "bm25.run:2"),
        (b"q1 Q0 d1 1 high bm25\n", "bm25.run:1"),
        (b"q1 Q0 d1 1 2.0 bm25\nq1 Q0 d1 2 1.0 bm25\n", "bm25.run:2"),
        (b"\n\n", "bm25.run"),
    ],
)
def test_a_bad_run_fails_with_its_line_and_stores_nothing(people, data, message):
    job = upload_run(people, data)
    assert job.state == Job.State.FAILED
    assert message in job.error
    assert not StoredRun.objects.exists()


def test_an_empty_file_is_refused_by_the_form(people):
    response = people.client("lead").post(
        reverse("judgments:run-upload", args=[people.project.slug]),
        {"file": upload("empty.run", b""), "name": "x", "system": "X"},
    )
    assert "The submitted file is empty." in response.content.decode()
    assert not Job.objects.exists()


def test_runs_are_listed_with_their_coverage_of_a_query_set(people):
    import_queries(people.project, b"query_id,query\nq1,tent\nq2,boots\nq3,stove\n", "q.csv", name="Set")
    upload_run(people, RUN)
    page = people.client("viewer").get(reverse("judgments:runs", args=[people.project.slug])).content.decode()
    assert "bm25" in page
    assert 'title="q3"' in page  # the missing query is named


def test_a_runs_top_results_can_be_browsed_with_document_titles(people):
    from judgments.ops.imports import import_corpus
    import io

    import_corpus(people.project, io.BytesIO(b'{"doc_id": "d3", "title": "Ultralight tent"}\n'), "docs.jsonl")
    upload_run(people, RUN)
    run = StoredRun.objects.get()
    page = people.client("lead").get(run.get_absolute_url(), {"query": "q1", "k": "2"}).content.decode()
    assert "Ultralight tent" in page
    # Only the top 2; cells, not bare ids, which a random CSRF token can contain.
    assert "<td>d1 <small" in page and "<td>d2 " not in page
    assert "not in the corpus" in page


def test_the_import_run_command(people, tmp_path, capsys):
    path = tmp_path / "bm25.run"
    path.write_bytes(RUN)
    call_command("import_run", people.project.slug, str(path), "--system", "BM25")
    assert "Run 'bm25' (BM25): 2 queries, 4 rows, depth 3" in capsys.readouterr().out
    call_command("import_run", people.project.slug, str(path), "--system", "BM25", "--name", "other")
    assert "already stored as run 'bm25'" in capsys.readouterr().out
    bad = tmp_path / "bad.run"
    bad.write_bytes(b"q1 Q0 d1 1\n")
    with pytest.raises(CommandError, match="bad.run:1"):
        call_command("import_run", people.project.slug, str(bad), "--system", "X")


def test_a_run_that_is_not_utf8_fails_with_its_line(people):
    job = upload_run(people, b"q1 Q0 d1 1 2.0 bm25\nq1 Q0 d\xe92 2 1.0 bm25\n")
    assert job.state == Job.State.FAILED
    assert "bm25.run:2" in job.error
    assert not StoredRun.objects.exists()


@pytest.mark.parametrize("url_name", ["judgments:run-upload", "judgments:corpus-import"])
def test_an_oversized_run_or_corpus_is_refused_before_anything_is_stored(people, settings, url_name):
    settings.UPLOAD_MAX_BYTES = 1024
    response = people.client("lead").post(
        reverse(url_name, args=[people.project.slug]),
        {"file": upload("big.run", b"q1 Q0 d1 1 2.0 x\n" * 100), "name": "big", "system": "X"},
    )
    assert "UPLOAD_MAX_BYTES" in response.content.decode()
    assert not Job.objects.exists()


def selected_set(page: str) -> str:
    return re.search(r'<option value="[^"]*" selected>([^<]*)</option>', page).group(1)


def why_this_set(page: str) -> str:
    return " ".join(re.search(r'id="coverage-set-why">(.*?)</p>', page, re.S).group(1).split())


def test_the_run_list_shows_the_set_most_runs_answer_not_the_newest_and_says_why(people):
    import_queries(people.project, b"query_id,query\nq1,tent\nq2,boots\nq3,stove\n", "q.csv", name="Launch")
    upload_run(people, RUN)
    upload_run(people, trec_run({"q2": ["d1"]}, tag="dense"), name="dense", filename="dense.run")
    import_queries(people.project, b"query_id,query\na1,what does it cost\n", "a.csv", name="Questions")  # newer, no run answers it
    client = people.client("viewer")
    page = client.get(reverse("judgments:runs", args=[people.project.slug])).content.decode()
    assert selected_set(page) == "Launch"
    assert why_this_set(page).startswith("The query set most of the project's runs answer: 2 of 2 runs have results for at least one of its 3 queries.")
    asked = client.get(reverse("judgments:runs", args=[people.project.slug]), {"query_set": people.project.query_sets.get(name="Questions").uuid})
    page = asked.content.decode()
    assert selected_set(page) == "Questions" and why_this_set(page).startswith("The set you chose: 0 of 2 runs have results")


def test_on_a_project_whose_runs_answer_no_set_the_newest_is_shown_and_the_page_says_so(people):
    import_queries(people.project, b"query_id,query\nx1,tent\n", "x.csv", name="Old")
    import_queries(people.project, b"query_id,query\ny1,tent\n", "y.csv", name="New")
    upload_run(people, RUN)
    page = people.client("viewer").get(reverse("judgments:runs", args=[people.project.slug])).content.decode()
    assert selected_set(page) == "New" and why_this_set(page).startswith("No run has results for a query of any query set")


def test_a_run_list_without_query_sets_shows_the_runs_without_coverage(people):
    upload_run(people, RUN)
    page = people.client("viewer").get(reverse("judgments:runs", args=[people.project.slug])).content.decode()
    assert "bm25" in page and "coverage-set-why" not in page and "Missing" not in page
    page = people.client("viewer").get(reverse("judgments:answer-runs", args=[people.project.slug])).content.decode()
    assert "No answer runs stored yet." in page

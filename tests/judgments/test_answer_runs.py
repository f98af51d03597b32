"""Answer runs and reference answers: validated by the engine's readers, stored once as Parquet (answer runs)
or on the queries (references), all or nothing, listed with coverage; raters never see them."""

import html
import json

import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from evaluation.engine.answers import Answer
from judgments.models import AnswerRun, Job, Query
from judgments.ops.answers import read_answer_run
from judgments.ops.imports import import_queries
from tests.factory import answers_file, run_queued_jobs, upload

ANSWERS = answers_file({"q1": "Paris is the capital", "q2": ("Boots, size 42", ["d9", "d3"])})


def upload_answers(people, data: bytes, name: str = "rag-a", filename: str = "rag-a.jsonl") -> Job:
    people.client("lead").post(
        reverse("judgments:answer-run-upload", args=[people.project.slug]),
        {"file": upload(filename, data), "name": name, "system": "RAG A", "description": "first try"},
    )
    [job] = run_queued_jobs()
    return job


def make_set(people, name: str = "Set"):
    collection, _ = import_queries(people.project, b"query_id,query\nq1,capital of france\nq2,boots\nq3,stove\n", "q.csv", name=name)
    return collection


def test_an_answer_run_is_stored_once_as_parquet_with_its_facts(people):
    job = upload_answers(people, ANSWERS)
    assert job.state == Job.State.SUCCEEDED, job.error
    run = AnswerRun.objects.get(project=people.project)
    assert (run.name, run.system, run.description, run.n_queries, run.n_citing) == ("rag-a", "RAG A", "first try", 2, 1)
    assert len(run.sha256) == 64 and run.uploaded_by == people.lead and run.original_name == "rag-a.jsonl"
    assert run.file.name == f"answers/{people.project.slug}/{run.sha256}.parquet"
    with run.file.open("rb") as handle:
        table = pq.read_table(handle)
    assert table.column_names == ["query_id", "answer", "cites"]
    assert table.to_pydict() == {"query_id": ["q1", "q2"], "answer": ["Paris is the capital", "Boots, size 42"], "cites": [[], ["d9", "d3"]]}
    assert read_answer_run(run) == {"q1": Answer("Paris is the capital"), "q2": Answer("Boots, size 42", ("d9", "d3"))}
    assert job.result["link"] == run.get_absolute_url()


def test_a_tsv_answer_run_is_accepted(people):
    job = upload_answers(people, b"q1\tParis\nq2\tBoots\n", filename="answers.tsv")
    assert job.state == Job.State.SUCCEEDED, job.error
    assert read_answer_run(AnswerRun.objects.get()) == {"q1": Answer("Paris"), "q2": Answer("Boots")}


def test_the_same_bytes_uploaded_twice_are_refused_with_the_run_that_has_them(people):
    upload_answers(people, ANSWERS)
    job = upload_answers(people, ANSWERS, name="rag-a again")
    assert job.state == Job.State.SUCCEEDED
    assert "already stored as 'rag-a'" in job.result["outcome"]
    assert AnswerRun.objects.count() == 1


@pytest.mark.parametrize("data,message", [
    (b'{"query_id": "q1", "answer": "x"}\n{"query_id": "q1", "answer": "y"}\n', "rag-a.jsonl:2"),
    (b'{"query_id": "q1", "answer": "x"}\n{"query_id": "q2"}\n', "rag-a.jsonl:2"),
    (b'{"query_id": "q1", "answer": "x"}\n{"query_id": "q2", "answer": "y", "cites": "d1"}\n', "rag-a.jsonl:2"),
    (b'{"query_id": "q1", "answer": "x"}\nnot json\n', "rag-a.jsonl:2"),
    (b"\n\n", "rag-a.jsonl"),
])
def test_a_bad_answer_file_fails_with_its_line_and_stores_nothing(people, data, message):
    job = upload_answers(people, data)
    assert job.state == Job.State.FAILED
    assert message in job.error
    assert not AnswerRun.objects.exists()


def test_a_name_already_taken_is_refused_by_the_form(people):
    upload_answers(people, ANSWERS)
    response = people.client("lead").post(reverse("judgments:answer-run-upload", args=[people.project.slug]),
                                           {"file": upload("b.jsonl", answers_file({"q1": "x"})), "name": "rag-a", "system": "B"})
    assert "already has an answer run with this name" in response.content.decode()
    assert Job.objects.count() == 1


def test_answer_runs_are_listed_with_their_coverage_of_a_query_sets_references(people):
    collection = make_set(people)
    Query.objects.filter(collection=collection, query_id__in=["q1", "q3"]).update(references=["Paris"])
    upload_answers(people, ANSWERS)
    response = people.client("viewer").get(reverse("judgments:answer-runs", args=[people.project.slug]), {"query_set": collection.uuid})
    assert response.status_code == 200
    [(run, coverage)] = response.context["rows"]
    assert coverage == {"with_references": 2, "answered": 1, "missing": 1, "missing_examples": ["q3"]}
    assert "rag-a" in response.content.decode()


def test_the_run_page_shows_each_answer_beside_its_references_a_page_at_a_time(people):
    collection = make_set(people)
    Query.objects.filter(collection=collection, query_id="q1").update(references=["Paris", "City of Paris"])
    upload_answers(people, answers_file({f"q{i}": f"answer {i}" for i in range(1, 61)}))
    run = AnswerRun.objects.get()
    url = run.get_absolute_url()
    response = people.client("viewer").get(url, {"query_set": collection.uuid})
    assert response.status_code == 200
    page = response.context["page"]
    assert len(page) == 50 and page.paginator.count == 60
    first = page[0]
    assert (first["query_id"], first["answer"], first["references"], first["text"]) == ("q1", "answer 1", ["Paris", "City of Paris"], "capital of france")
    assert "City of Paris" in response.content.decode()
    second = people.client("viewer").get(url, {"query_set": collection.uuid, "page": 2})
    assert [row["query_id"] for row in second.context["page"]] == [f"q{i}" for i in range(51, 61)]


def test_raters_never_see_answer_runs_and_outsiders_get_404(people):
    upload_answers(people, ANSWERS)
    run = AnswerRun.objects.get()
    slug = people.project.slug
    for url in (reverse("judgments:answer-runs", args=[slug]), run.get_absolute_url()):
        assert people.client("rater").get(url).status_code == 403
        assert people.client("outsider").get(url).status_code == 404
    assert people.client("viewer").get(reverse("judgments:answer-run-upload", args=[slug])).status_code == 403
    assert people.client("rater").post(reverse("judgments:answer-run-upload", args=[slug])).status_code == 403
    assert people.client("outsider").get(reverse("judgments:answer-run-upload", args=[slug])).status_code == 404


def test_the_import_answers_command_stores_a_run_and_refuses_the_same_bytes(people, tmp_path):
    path = tmp_path / "rag-b.jsonl"
    path.write_bytes(ANSWERS)
    call_command("import_answers", people.project.slug, str(path), "--system", "RAG B")
    run = AnswerRun.objects.get()
    assert (run.name, run.system, run.n_queries) == ("rag-b", "RAG B", 2)
    with pytest.raises(CommandError, match="already stored as the answer run 'rag-b'"):
        call_command("import_answers", people.project.slug, str(path), "--system", "RAG B", "--name", "other")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"query_id": "q1", "answer": 3}\n')
    with pytest.raises(CommandError, match="bad.jsonl:1"):
        call_command("import_answers", people.project.slug, str(bad), "--system", "X")
    assert AnswerRun.objects.count() == 1


# ------------------------------------------------------------------------------------- references


def post_references(people, collection, data: bytes, filename: str = "refs.jsonl", replace: bool = False, who: str = "lead"):
    url = reverse("judgments:query-set-references", args=[people.project.slug, collection.uuid])
    return people.client(who).post(url, {"file": upload(filename, data), **({"replace": "on"} if replace else {})}, follow=True)


def references(collection) -> dict:
    return dict(collection.queries.values_list("query_id", "references"))


def test_reference_answers_are_added_to_a_query_sets_queries_and_unknown_ids_are_reported(people):
    collection = make_set(people)
    Query.objects.filter(collection=collection, query_id="q1").update(references=["Paris"])
    data = (json.dumps({"query_id": "q1", "answers": ["Paris", "City of Paris"]}) + "\n"
            + json.dumps({"query_id": "q2", "answers": ["boots"]}) + "\n" + json.dumps({"query_id": "q99", "answers": ["x"]}) + "\n").encode()
    response = post_references(people, collection, data)
    assert response.status_code == 200
    assert references(collection) == {"q1": ["Paris", "City of Paris"], "q2": ["boots"], "q3": []}
    text = response.content.decode()
    assert "Reference answers for 2 queries" in text and "q99" in text


def test_reference_answers_can_replace_and_come_as_tsv(people):
    collection = make_set(people)
    Query.objects.filter(collection=collection, query_id="q1").update(references=["Paris"])
    post_references(people, collection, b"q1\tCity of Paris\nq1\tParis, France\n", filename="refs.tsv", replace=True)
    assert references(collection)["q1"] == ["City of Paris", "Paris, France"]


def test_a_bad_references_file_changes_nothing_and_names_its_line(people):
    collection = make_set(people)
    data = json.dumps({"query_id": "q1", "answers": ["Paris"]}).encode() + b'\n{"query_id": "q2", "answers": []}\n'
    response = post_references(people, collection, data)
    assert "refs.jsonl:2" in response.content.decode()
    assert references(collection) == {"q1": [], "q2": [], "q3": []}
    response = post_references(people, collection, b'{"query_id": "nope", "answers": ["x"]}\n')
    assert "none of its 1 query ids" in response.content.decode()


def test_only_leads_upload_references(people):
    collection = make_set(people)
    assert post_references(people, collection, b"q1\tParis\n", who="viewer").status_code == 403
    assert post_references(people, collection, b"q1\tParis\n", who="outsider").status_code == 404
    assert people.client("lead").get(reverse("judgments:query-set-references", args=[people.project.slug, collection.uuid])).status_code == 405
    assert references(collection)["q1"] == []


def test_the_import_references_command_adds_or_replaces(people, tmp_path):
    collection = make_set(people)
    path = tmp_path / "refs.tsv"
    path.write_bytes(b"q1\tParis\nq9\tnowhere\n")
    call_command("import_references", people.project.slug, "Set", str(path))
    call_command("import_references", people.project.slug, str(collection.uuid), str(path))
    assert references(collection)["q1"] == ["Paris"]
    path.write_bytes(b"q1\tCity of Paris\n")
    call_command("import_references", people.project.slug, "Set", str(path), "--replace")
    assert references(collection)["q1"] == ["City of Paris"]
    with pytest.raises(CommandError, match="no query set named"):
        call_command("import_references", people.project.slug, "Nope", str(path))


def test_the_pages_refuse_the_wrong_method_and_the_upload_form_shows_for_leads(people):
    upload_answers(people, ANSWERS)
    run = AnswerRun.objects.get()
    slug = people.project.slug
    assert people.client("lead").post(reverse("judgments:answer-runs", args=[slug])).status_code == 405
    assert people.client("lead").post(run.get_absolute_url()).status_code == 405
    form = people.client("lead").get(reverse("judgments:answer-run-upload", args=[slug]))
    assert form.status_code == 200 and "Upload an answer run" in form.content.decode()


def test_the_query_set_page_offers_leads_the_references_upload_and_counts_each_querys_references(people):
    collection = make_set(people)
    Query.objects.filter(collection=collection, query_id="q1").update(references=["Paris", "City of Paris"])
    lead = people.client("lead").get(collection.get_absolute_url()).content.decode()
    assert "Upload reference answers" in lead
    assert "Upload reference answers" not in people.client("viewer").get(collection.get_absolute_url()).content.decode()


# ------------------------------------------------------------------------------------- hostile files


HOSTILE = [
    (b'{"query_id": "q1", "answer": "x"}\n{"query_id": "q2", "answer": "' + b"t" * 9000 + b'"}\n', "rag-a.jsonl:2: line longer than 8,192 bytes"),
    (b'{"query_id": "q1", "answer": "x"}\n{"query_id": "' + b"q" * 600 + b'", "answer": "y"}\n', "rag-a.jsonl:2:"),
    (b'{"query_id": "q1", "answer": "x", "cites": ["' + b"d" * 600 + b'"]}\n', "rag-a.jsonl:1:"),
    (b'{"query_id": "q1", "answer": "x"}\n' + b"[" * 3000 + b"]" * 3000 + b"\n", "rag-a.jsonl:2:"),
    ('{"query_id": "q1", "answer": "x"}\n'.encode("utf-16"), "rag-a.jsonl"),
]


@pytest.mark.parametrize("data,message", HOSTILE)
def test_a_hostile_answer_file_fails_its_job_with_the_line_and_the_command_says_the_same(people, settings, tmp_path, data, message):
    settings.INPUT_LINE_MAX_BYTES = 8192
    job = upload_answers(people, data)
    assert job.state == Job.State.FAILED and message in job.error and "Traceback" not in job.error
    path = tmp_path / "rag-a.jsonl"
    path.write_bytes(data)
    with pytest.raises(CommandError, match=message.replace("(", r"\(")):
        call_command("import_answers", people.project.slug, str(path), "--system", "X")
    assert not AnswerRun.objects.exists()


@pytest.mark.parametrize("data,message", [
    (b'{"query_id": "q1", "answers": ["' + b"t" * 9000 + b'"]}\n', "refs.jsonl:1: line longer than 8,192 bytes"),
    (b'{"query_id": "q1", "answers": [1]}\n', "refs.jsonl:1:"),
    (b"[" * 3000 + b"]" * 3000 + b"\n", "refs.jsonl:1:"),
])
def test_a_hostile_references_file_changes_nothing_and_names_its_line(people, settings, data, message):
    settings.INPUT_LINE_MAX_BYTES = 8192
    collection = make_set(people)
    response = post_references(people, collection, data)
    assert response.status_code == 200 and message in html.unescape(response.content.decode())
    assert references(collection) == {"q1": [], "q2": [], "q3": []}

"""Uploads through the API: runs (TREC, JSON, Parquet), answer runs, query sets, corpus and reference answers are
imported by the app's importers; bad files are 400 with the reader's `file:line: problem` and leave nothing in the
database, the storage or the temporary folder; a big upload is spooled to a temporary file, never held in memory;
limits give 413; names in use 409; pool builds are jobs (202)."""

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile, TemporaryUploadedFile
from django.test import Client

from api import uploads
from evaluation.engine import read_run
from judgments.models import AnswerRun, Document, Job, Pool, QueryCollection, StoredRun
from judgments.ops.imports import load_run
from tests.api.conftest import token_for
from tests.factory import answers_file, make_round, parquet_bytes, run_queued_jobs, trec_run

pytestmark = pytest.mark.django_db

RANKING = {"q1": ["d11", "d12", "d13"], "q2": ["d21", "d22"]}


@pytest.fixture
def lead(people, settings, tmp_path):
    """The lead's write token as a client; uploads spool to a temporary folder the tests can look into."""
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "spool")
    os.makedirs(settings.FILE_UPLOAD_TEMP_DIR)
    client = Client(raise_request_exception=False)
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token_for(people.lead, people.project)}"
    return client


def url(people, tail: str) -> str:
    return f"/api/v1/projects/{people.project.slug}/{tail}"


def post_file(client, path: str, filename: str, data: bytes, **fields):
    return client.post(path, {"file": SimpleUploadedFile(filename, data), **fields})


def stored_files(settings) -> list[str]:
    media = Path(settings.MEDIA_ROOT)
    return sorted(str(path.relative_to(media)) for path in media.rglob("*") if path.is_file()) if media.exists() else []


def assert_nothing_left(settings, before_files: list[str]) -> None:
    assert stored_files(settings) == before_files
    assert os.listdir(settings.FILE_UPLOAD_TEMP_DIR) == []


def test_a_trec_run_is_stored_as_the_engine_reads_it(people, lead):
    response = post_file(lead, url(people, "runs"), "bm25.txt", trec_run(RANKING, "bm25"), name="BM25", system="bm25")

    assert response.status_code == 201, response.content
    body = response.json()
    run = StoredRun.objects.get(uuid=body["uuid"])
    assert (body["name"], body["n_queries"], body["n_lines"], body["sha256"]) == ("BM25", 2, 5, run.sha256)
    assert body["url"].endswith(url(people, f"runs/{run.uuid}"))
    assert load_run(run).to_dict() == read_run(trec_run(RANKING, "bm25")).to_dict()


def test_the_same_bytes_again_give_the_stored_run_and_a_taken_name_is_a_conflict(people, lead):
    first = post_file(lead, url(people, "runs"), "a.txt", trec_run(RANKING), name="A").json()

    again = post_file(lead, url(people, "runs"), "copy.txt", trec_run(RANKING), name="A copy")
    taken = post_file(lead, url(people, "runs"), "b.txt", trec_run({"q1": ["d13"]}), name="A")

    assert again.status_code == 200 and again.json()["uuid"] == first["uuid"]
    assert taken.status_code == 409 and taken.json() == {"detail": "b.txt: the project already has a run named 'A'", "code": "conflict"}
    assert people.project.runs.count() == 1


def test_json_and_parquet_runs_are_read_by_their_format(people, lead):
    as_json = json.dumps({"q1": {"d11": 3.0, "d12": 2.0}}).encode()
    table = pa.table({"query_id": ["q1", "q1"], "doc_id": ["d11", "d12"], "score": [3.0, 2.0]})

    json_run = post_file(lead, url(people, "runs"), "upload.dat", as_json, name="J", format="json")
    parquet_run = post_file(lead, url(people, "runs"), "upload.bin", parquet_bytes(table), name="P", format="parquet")
    guessed = post_file(lead, url(people, "runs"), "run.parquet", parquet_bytes(table.slice(0, 1)), name="G")

    assert (json_run.status_code, parquet_run.status_code, guessed.status_code) == (201, 201, 201)
    stored = {name: load_run(people.project.runs.get(name=name)).to_dict() for name in "JPG"}
    assert stored == {"J": {"q1": {"d11": 3.0, "d12": 2.0}}, "P": {"q1": {"d11": 3.0, "d12": 2.0}}, "G": {"q1": {"d11": 3.0}}}


BAD_RUNS = [
    ("run.txt", "trec", b"q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 2.0 t\nq1 Q0 d3 3 abc t\n", "run.txt:3:"),
    ("run.txt", "trec", b"q1 Q0 d1 1 2.0 t\nq1 Q0 d1 2 1.0 t\n", "run.txt:2:"),
    ("run.json", "json", b'{"q1": {"d1": 1.0,\n "d2": "high"}}\n', "run.json"),
    ("run.json", "json", b'{"q1": {"d1": 1.0,\n "d2": }}\n', "run.json:2:"),
    ("run.parquet", "parquet", b"PAR1 this is not a parquet file", "run.parquet"),
    ("run.parquet", "parquet", parquet_bytes(pa.table({"query_id": ["q1"], "doc": ["d1"], "score": [1.0]})), "run.parquet"),
]


@pytest.mark.parametrize("filename, format, data, where", BAD_RUNS, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD_RUNS)])
def test_a_bad_run_file_is_refused_with_its_line_and_nothing_is_stored(people, lead, settings, filename, format, data, where):
    before = stored_files(settings)

    response = post_file(lead, url(people, "runs"), filename, data, name="Bad", format=format)

    assert response.status_code == 400, response.content
    assert response.json()["code"] == "bad_file" and response.json()["detail"].startswith(where), response.json()
    assert not StoredRun.objects.filter(name="Bad").exists()
    assert_nothing_left(settings, before)


def test_the_parquet_bomb_and_runs_of_structs_or_lists_are_400s_naming_the_file_never_a_server_path(
        people, lead, settings, parquet_bomb):
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1024  # the bomb is spooled to a file, the others are copied to one
    cases = {
        "bomb.parquet": (parquet_bomb.read_bytes(),
                         "bomb.parquet: column 'doc_id' holds a value longer than 512 bytes (row group 1 of 1: 1 row, "),
        "struct.parquet": (parquet_bytes(pa.table({"query_id": ["q1"], "doc_id": pa.array([{"id": "d1"}]), "score": [1.0]})),
                           "struct.parquet: column 'doc_id' holds 'struct<id: string>', not text or numbers"),
        "list.parquet": (parquet_bytes(pa.table({"query_id": ["q1"], "doc_id": [["d1", "d2"]], "score": [1.0]})),
                         "list.parquet: column 'doc_id' holds 'list<element: string>', not text or numbers"),
        "junk.parquet": (b"PAR1 this is not a parquet file", "junk.parquet: not a readable Parquet file (not Parquet, or damaged)"),
    }
    before = stored_files(settings)

    for filename, (data, message) in cases.items():
        response = post_file(lead, url(people, "runs"), filename, data, name=filename)

        assert response.status_code == 400, response.content
        assert response.json()["detail"].startswith(message) and "/" not in response.json()["detail"]
    assert not StoredRun.objects.exists()
    assert_nothing_left(settings, before)


def test_a_big_upload_is_spooled_to_a_temporary_file_and_read_from_there(people, lead, settings, monkeypatch):
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1024
    data = trec_run({f"q{q}": [f"d{q}-{r}" for r in range(20)] for q in range(50)})
    assert len(data) > settings.FILE_UPLOAD_MAX_MEMORY_SIZE
    seen = []
    spooled = uploads.local_path

    def spying(upload, suffix=None):
        seen.append((type(upload), upload.temporary_file_path() if hasattr(upload, "temporary_file_path") else None))
        return spooled(upload, suffix)

    monkeypatch.setattr(uploads, "local_path", spying)
    response = post_file(lead, url(people, "runs"), "big.txt", data, name="Big")

    assert response.status_code == 201
    [(kind, path)] = seen
    assert kind is TemporaryUploadedFile and Path(path).parent == Path(settings.FILE_UPLOAD_TEMP_DIR)
    assert os.listdir(settings.FILE_UPLOAD_TEMP_DIR) == []  # gone with the request
    assert people.project.runs.get(name="Big").n_rows == 1000


def test_a_body_over_the_upload_limit_is_refused_before_it_is_read(people, lead, settings):
    settings.UPLOAD_MAX_BYTES = 2048
    response = post_file(lead, url(people, "runs"), "big.txt", b"q1 Q0 d1 1 1 t\n" * 10 + b" " * (2 << 20), name="Big")

    assert response.status_code == 413
    assert response.json()["code"] == "too_large" and "UPLOAD_MAX_BYTES" in response.json()["detail"]
    assert not StoredRun.objects.exists()


def test_a_file_over_the_upload_limit_within_the_form_allowance_is_refused(people, lead, settings):
    settings.UPLOAD_MAX_BYTES = 2048
    response = post_file(lead, url(people, "runs"), "big.txt", b"q1 Q0 d1 1 1 t\n" * 200, name="Big")

    assert response.status_code == 413, response.content
    assert response.json()["code"] == "too_large" and not StoredRun.objects.exists()


def test_answer_runs_upload_with_their_conflicts(people, lead, settings):
    data = answers_file({"q1": ("Paris", ["d1"]), "q2": "Lyon"})

    created = post_file(lead, url(people, "answer-runs"), "rag.jsonl", data, name="RAG", system="rag")
    again = post_file(lead, url(people, "answer-runs"), "copy.jsonl", data, name="RAG copy")
    taken = post_file(lead, url(people, "answer-runs"), "other.jsonl", answers_file({"q1": "Nice"}), name="RAG")
    before = stored_files(settings)
    bad = post_file(lead, url(people, "answer-runs"), "bad.jsonl", data + b'{"query_id": "q3"\n', name="Bad")

    assert created.status_code == 201 and (created.json()["n_queries"], created.json()["n_citing"]) == (2, 1)
    assert again.status_code == 200 and again.json()["uuid"] == created.json()["uuid"]
    assert taken.status_code == 409
    assert bad.status_code == 400 and bad.json()["detail"].startswith("bad.jsonl:3:"), bad.json()
    assert list(AnswerRun.objects.values_list("name", flat=True)) == ["RAG"]
    assert_nothing_left(settings, before)


def test_a_query_set_is_imported_and_a_bad_one_names_its_line(people, lead):
    created = post_file(lead, url(people, "query-sets"), "queries.csv", b"query_id,query\nq1,tent\nq2,boots\n", name="Sample")
    taken = post_file(lead, url(people, "query-sets"), "queries.csv", b"query_id,query\nq3,hat\n", name="Sample")
    bad = post_file(lead, url(people, "query-sets"), "dup.csv", b"query_id,query\nq1,tent\nq1,boots\n", name="Dup")

    assert created.status_code == 201 and created.json()["n_queries"] == 2
    assert QueryCollection.objects.get(uuid=created.json()["uuid"]).queries.count() == 2
    assert taken.status_code == 409
    assert bad.status_code == 400 and bad.json()["detail"].startswith("dup.csv:3:"), bad.json()
    assert not QueryCollection.objects.filter(name="Dup").exists()


def test_corpus_documents_are_added_then_updated_and_a_bad_file_changes_nothing(people, lead):
    first = post_file(lead, url(people, "corpus"), "docs.jsonl", b'{"doc_id": "a", "t": 1}\n{"doc_id": "b", "t": 2}\n')
    second = post_file(lead, url(people, "corpus"), "docs.jsonl", b'{"doc_id": "a", "t": 1}\n{"doc_id": "b", "t": 3}\n{"doc_id": "c"}\n')
    bad = post_file(lead, url(people, "corpus"), "bad.jsonl", b'{"doc_id": "d"}\n{"doc_id": "a", "t": 9}\n{"t": 1}\n')

    assert first.json() == {"created": 2, "updated": 0, "unchanged": 0}
    assert second.json() == {"created": 1, "updated": 1, "unchanged": 1}
    assert bad.status_code == 400 and bad.json()["detail"].startswith("bad.jsonl:3:"), bad.json()
    assert sorted(Document.objects.values_list("doc_id", flat=True)) == ["a", "b", "c"]
    assert [Document.objects.get(doc_id=doc).fields["t"] for doc in "ab"] == [1, 3]


def test_reference_answers_are_added_to_the_set(people, lead):
    collection = QueryCollection.objects.get(uuid=post_file(lead, url(people, "query-sets"), "q.csv", b"query_id,query\nq1,capital\n",
                                                            name="S").json()["uuid"])
    path = url(people, f"query-sets/{collection.uuid}/references")

    added = post_file(lead, path, "refs.jsonl", b'{"query_id": "q1", "answers": ["Paris"]}\n{"query_id": "zz", "answers": ["x"]}\n')
    bad = post_file(lead, path, "refs.jsonl", b'{"query_id": "q1", "answers": ["Lyon"]}\n{"query_id": 1\n')

    assert added.json() == {"n_references": 1, "queries": 1, "changed": 1, "unknown": ["zz"]}
    assert bad.status_code == 400 and bad.json()["detail"].startswith("refs.jsonl:2:"), bad.json()
    assert collection.queries.get().references == ["Paris"]


def test_a_pool_build_is_a_job_that_ends_with_the_pool_s_url(people, lead):
    round = make_round(people.project, people.lead, [people.rater])
    query_set, run = round.pool.query_set, people.project.runs.get()
    body = {"name": "API pool", "query_set": str(query_set.uuid), "runs": [str(run.uuid)], "depth": 2}

    response = lead.post(url(people, "pools"), json.dumps(body), content_type="application/json")

    assert response.status_code == 202, response.content
    started = response.json()
    assert response["Location"] == started["job"]["url"] and started["job"]["state"] == "queued"
    assert started["pool"]["state"] == "building" and started["job"]["result_url"] is None
    run_queued_jobs()
    job = lead.get(started["job"]["url"]).json()
    pool = Pool.objects.get(name="API pool")
    assert (job["state"], job["progress"], job["kind"]) == ("done", 1.0, "build_pool")
    assert job["result_url"].endswith(url(people, f"pools/{pool.uuid}"))
    assert lead.get(job["result_url"]).json()["n_pairs"] == pool.pairs.count() == 6


def test_a_pool_build_is_refused_as_the_pool_form_refuses_it(people, lead):
    round = make_round(people.project, people.lead, [people.rater])
    query_set, run = round.pool.query_set, people.project.runs.get()
    other = post_file(lead, url(people, "runs"), "o.txt", trec_run({"zz": ["d1"]}), name="Elsewhere").json()

    def build(**changes):
        body = {"name": "P", "query_set": str(query_set.uuid), "runs": [str(run.uuid)], "depth": 2, **changes}
        return lead.post(url(people, "pools"), json.dumps(body), content_type="application/json")

    assert build(name=round.pool.name).status_code == 409
    nothing = build(runs=[other["uuid"]])
    assert nothing.status_code == 400 and nothing.json()["detail"].startswith("runs: "), nothing.json()
    deep = build(depth=5000)
    assert deep.status_code == 400 and deep.json()["detail"].startswith("depth: "), deep.json()
    assert not Pool.objects.filter(name="P").exists() and not Job.objects.filter(kind="build_pool", state="queued").exists()


def test_a_null_character_in_a_name_is_refused_not_a_server_error(people, lead):
    round = make_round(people.project, people.lead, [people.rater])
    pool = {"name": "P\x00", "query_set": str(round.pool.query_set.uuid), "runs": [str(people.project.runs.get().uuid)]}

    answers = [post_file(lead, url(people, "runs"), "r.txt", trec_run(RANKING), name="A\x00"),
               post_file(lead, url(people, "runs"), "r.txt", trec_run(RANKING), name="A", system="S\x00"),
               post_file(lead, url(people, "query-sets"), "q.csv", b"query_id,query\nq1,a\n", name="Q", description="\x00"),
               lead.post(url(people, "pools"), json.dumps(pool), content_type="application/json")]

    assert [(answer.status_code, answer.json()["detail"].split(":")[0]) for answer in answers] == [
        (400, "name"), (400, "system"), (400, "description"), (400, "name")]

"""Hostile and careless files through every import the app offers: the upload page and its job, and the
command. The person sees `file:line: problem` (never a traceback or a 500) and nothing is stored."""

import gzip
import html
import io
import json
import tracemalloc
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from judgments.models import Document, Job, Judgment, PoolPair, Query, QueryCollection, QueryLog, StoredRun
from judgments.ops.imports import import_corpus, import_queries, import_run
from tests.factory import make_pool, make_round, parquet_bytes, run_queued_jobs, trec_run, upload
from tests.hostile import long_line_file

CR_ONLY = "lines end in CR only (old Mac style); save the file with LF or CRLF line ends"
DEEP = b"[" * 100_000 + b"]" * 100_000  # deeper than Python's JSON parser goes
DEEP_LINE = b"[" * 3000 + b"]" * 3000  # the same, on a line shorter than the limit below


@pytest.fixture
def small_limits(settings):
    settings.INPUT_LINE_MAX_BYTES = 8192
    settings.CORPUS_FIELD_MAX_BYTES = 2048
    settings.DECOMPRESSED_MAX_BYTES = 1 << 20
    return settings


def failed_job(client, url: str, data: dict) -> Job:
    response = client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:1000]
    [job] = run_queued_jobs()
    assert job.state == Job.State.FAILED
    assert "Traceback" not in job.error.split("\n\n")[0]
    return job


def command_error(*args) -> str:
    with pytest.raises(CommandError) as caught:
        call_command(*args)
    return str(caught.value)


# ---------------------------------------------------------------------------------------------- runs


RUN_CASES = [
    (b"q1 Q0 d1 1 2.0 bm25\nq1 Q0 d2 2 1.0 " + b"t" * 9000 + b"\n", "bm25.run:2: line longer than 8,192 bytes"),
    (b"q1 Q0 d1 1 2.0 bm25\nq1 Q0 d2 2 inf bm25\n", "bm25.run:2: score is not a finite number: 'inf'"),
    (b"q1 Q0 d1 1 2.0 bm25\nq1 Q0 d2 2 1e400 bm25\n", "bm25.run:2: score is not a finite number: '1e400'"),
    (b"q1 Q0 d1 1 2.0 bm25\nq1 Q0 " + b"d" * 600 + b" 2 1.0 bm25\n", "bm25.run:2: doc id longer than 512 bytes: 'ddd"),
    ("q1 Q0 d1 1 2.0 bm25\n".encode("utf-16"), "bm25.run: the file is UTF-16 text; save it as UTF-8"),
]


@pytest.mark.parametrize("data,message", RUN_CASES)
def test_a_hostile_run_upload_fails_its_job_with_the_line_and_stores_nothing(people, small_limits, data, message):
    job = failed_job(people.client("lead"), reverse("judgments:run-upload", args=[people.project.slug]),
                     {"file": upload("bm25.run", data), "name": "bm25", "system": "BM25"})
    assert message in job.error
    assert not StoredRun.objects.exists()


@pytest.mark.parametrize("data,message", RUN_CASES)
def test_the_import_run_command_says_the_same(people, small_limits, tmp_path, data, message):
    path = tmp_path / "bm25.run"
    path.write_bytes(data)
    assert command_error("import_run", people.project.slug, str(path), "--system", "BM25").startswith(message)
    assert not StoredRun.objects.exists()


def test_deeply_nested_json_runs_are_refused_with_their_line(people, tmp_path):
    path = tmp_path / "dense.json"
    path.write_bytes(b'{"q1": {"d1": 1.0},\n "q2": ' + DEEP + b"}\n")
    assert command_error("import_run", people.project.slug, str(path), "--system", "dense") == (
        "dense.json:2: JSON nested too deeply")


def test_a_run_import_reports_progress_in_every_phase(people, tmp_path):
    path = tmp_path / "bm25.run"
    path.write_bytes(trec_run({f"q{i}": [f"d{j}" for j in range(50)] for i in range(40)}))
    heard = []
    import_run(people.project, path, "bm25.run", name="bm25", system="BM25",
               progress=lambda done, total=None, message="": heard.append(message))
    assert list(dict.fromkeys(heard)) == ["Checking whether these bytes are already stored", "Reading",
                                          "Checking ids and duplicates", "Ranking", "Writing Parquet",
                                          "Storing the Parquet file", "Stored"]


# ------------------------------------------------------------------------------------- Parquet runs


def test_the_parquet_bomb_fails_its_job_from_the_files_footer_and_stores_nothing(people, parquet_bomb):
    job = failed_job(people.client("lead"), reverse("judgments:run-upload", args=[people.project.slug]),
                     {"file": upload("bomb.parquet", parquet_bomb.read_bytes()), "name": "bomb", "system": "BM25"})
    assert "bomb.parquet: column 'doc_id' holds a value longer than 512 bytes (row group 1 of 1: 1 row, " in job.error
    assert not StoredRun.objects.exists()


def damaged_parquet() -> bytes:
    """A Parquet run whose footer is sound but whose doc ids are zeroed inside their first page."""
    data = bytearray(parquet_bytes(pa.table({"query_id": [f"q{i % 7}" for i in range(2000)],
                                             "doc_id": [f"doc-{i * 7919 % 10007}" for i in range(2000)],
                                             "score": [float(i) for i in range(2000)]})))
    chunk = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0).column(1)
    start = (chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset) + 40
    data[start:start + 200] = bytes(200)
    return bytes(data)


PARQUET_CASES = [
    (pa.table({"query_id": ["q1"], "doc_id": pa.array([{"id": "d1"}]), "score": [1.0]}),
     "run.parquet: column 'doc_id' holds 'struct<id: string>', not text or numbers"),
    (pa.table({"query_id": [["q1"]], "doc_id": ["d1"], "score": [1.0]}),
     "run.parquet: column 'query_id' holds 'list<element: string>', not text or numbers"),
    (pa.table({"query_id": ["q1"], "doc_id": ["d1"], "score": pa.array([{"bm25": 1.0}])}),
     "run.parquet: column 'score' holds 'struct<bm25: double>', not text or numbers"),
    (pa.table({"query_id": ["q1"], "doc": ["d1"], "score": [1.0]}), "run.parquet: missing column 'doc_id' (columns: query_id, doc, score)"),
    (b"PAR1 this is not a parquet file", "run.parquet: not a readable Parquet file (not Parquet, or damaged)"),
    (damaged_parquet, "run.parquet: the Parquet file is damaged in row group 1 of 1"),
]


def parquet_case(data) -> bytes:
    return parquet_bytes(data) if isinstance(data, pa.Table) else data() if callable(data) else data


@pytest.mark.parametrize("data,message", PARQUET_CASES)
def test_a_bad_parquet_run_fails_its_job_naming_the_file_never_a_server_path(people, data, message):
    job = failed_job(people.client("lead"), reverse("judgments:run-upload", args=[people.project.slug]),
                     {"file": upload("run.parquet", parquet_case(data)), "name": "bad", "system": "BM25"})
    assert job.error == message
    assert not StoredRun.objects.exists()


@pytest.mark.parametrize("data,message", PARQUET_CASES)
def test_the_import_run_command_says_the_same_of_parquet(people, tmp_path, data, message):
    path = tmp_path / "run.parquet"
    path.write_bytes(parquet_case(data))
    assert command_error("import_run", people.project.slug, str(path), "--system", "BM25") == message
    assert not StoredRun.objects.exists()


# -------------------------------------------------------------------------------------------- corpus


CORPUS_CASES = [
    (b'{"doc_id": "d1"}\n{"doc_id": "d2", "body": "' + b"b" * 9000 + b'"}\n', "docs.jsonl:2: line longer than 8,192 bytes"),
    (b'{"doc_id": "d1"}\n{"doc_id": "d2", "price": NaN}\n', "docs.jsonl:2: the number 'NaN' is not finite"),
    (b'{"doc_id": "d1"}\n{"doc_id": "d2", "x": ' + DEEP_LINE + b"}\n", "docs.jsonl:2: JSON nested too deeply"),
    (b'{"doc_id": "' + b"d" * 600 + b'"}\n', "docs.jsonl:1: doc_id longer than 512 bytes"),
    ('{"doc_id": "d1"}\n'.encode("utf-16"), "docs.jsonl: the file is UTF-16 text; save it as UTF-8"),
]


@pytest.mark.parametrize("data,message", CORPUS_CASES)
def test_a_hostile_corpus_upload_fails_its_job_with_the_line_and_stores_nothing(people, small_limits, data, message):
    job = failed_job(people.client("lead"), reverse("judgments:corpus-import", args=[people.project.slug]),
                     {"file": upload("docs.jsonl", data)})
    assert message in job.error
    assert not Document.objects.exists()


@pytest.mark.parametrize("data,message", CORPUS_CASES)
def test_the_import_corpus_command_says_the_same(people, small_limits, tmp_path, data, message):
    path = tmp_path / "docs.jsonl"
    path.write_bytes(data)
    assert command_error("import_corpus", people.project.slug, str(path)).startswith(message)
    assert not Document.objects.exists()


def test_a_corpus_field_over_the_limit_fails_the_job(people, settings):
    settings.CORPUS_FIELD_MAX_BYTES = 1024
    data = json.dumps({"doc_id": "d1", "title": "Tent", "body": "é" * 600}, ensure_ascii=False).encode()
    job = failed_job(people.client("lead"), reverse("judgments:corpus-import", args=[people.project.slug]),
                     {"file": upload("docs.jsonl", data)})
    assert "docs.jsonl:1: field 'body' holds 1,200 bytes; the most a field may hold is 1,024 bytes" in job.error
    assert not Document.objects.exists()


# ------------------------------------------------------------------------------------------- queries


QUERY_CASES = [
    (b"query_id,query\nq1,tent\nq2," + b"x" * 9000 + b"\n", "queries.csv:3: line longer than 8,192 bytes"),
    (b"query_id,query,weight\nq1,tent,1e400\n", "queries.csv:2: weight '1e400' must be a finite number >= 0"),
    (b"query_id,query,tier\nq1,tent," + b"t" * 40 + b"\n", "queries.csv:2: tier longer than 32 characters"),
    ("query_id,query\nq1,tent\n".encode("utf-16"), "queries.csv: the file is UTF-16 text; save it as UTF-8"),
]


@pytest.mark.parametrize("data,message", QUERY_CASES)
def test_a_hostile_query_set_upload_fails_its_job_and_stores_nothing(people, small_limits, data, message):
    job = failed_job(people.client("lead"), reverse("judgments:query-set-import", args=[people.project.slug]),
                     {"file": upload("queries.csv", data), "name": "Launch set"})
    assert message in job.error
    assert not QueryCollection.objects.exists()


@pytest.mark.parametrize("data,message", QUERY_CASES)
def test_the_import_queries_command_says_the_same(people, small_limits, tmp_path, data, message):
    path = tmp_path / "queries.csv"
    path.write_bytes(data)
    assert command_error("import_queries", people.project.slug, str(path)).startswith(message)
    assert not Query.objects.exists()


# ---------------------------------------------------------------------------------------- query logs


def endless_log(tmp_path):
    """A small .gz log whose third line never ends (32 MiB of it)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    path = tmp_path / "searches.csv.gz"
    with path.open("wb") as handle:
        handle.write(packer.compress(b"query\ntent\n"))
        for _ in range(32):
            handle.write(packer.compress(b"x" * (1 << 20)))
        handle.write(packer.flush())
    return path


def test_an_endless_line_in_an_uploaded_log_fails_the_job_at_its_line_and_keeps_nothing(people, tmp_path):
    client = people.client("lead")
    response = client.post(reverse("judgments:query-log-upload", args=[people.project.slug]),
                           {"file": upload("searches.csv.gz", endless_log(tmp_path).read_bytes())})
    assert response.status_code == 302
    job = failed_job(client, response["Location"], {
        "name": "October", "query_column": "query", "time_column": "", "count_column": "", "nfkc": "on",
        "casefold": "on", "collapse_whitespace": "on", "trim_punctuation": "on", "drop_personal": "on",
        "max_bad_percent": "5"})
    assert "searches.csv.gz:3: line longer than 1,048,576 bytes" in job.error
    assert not QueryLog.objects.exists()


def test_a_parquet_log_holding_a_value_over_the_line_limit_is_refused_from_its_footer_before_the_mapping(people,
                                                                                                         small_limits):
    client = people.client("lead")
    data = parquet_bytes(pa.table({"query": ["tent", "x" * (3 << 20)]}))
    assert len(data) < 1 << 20
    response = client.post(reverse("judgments:query-log-upload", args=[people.project.slug]),
                           {"file": upload("searches.parquet", data)})
    page = html.unescape(client.get(response["Location"], follow=True).content.decode())
    assert "searches.parquet: column 'query' holds a value longer than 8,192 bytes (row group 1 of 1: 2 rows, " in page
    assert not Job.objects.exists()


def test_a_log_import_reports_progress_in_every_phase(people, tmp_path):
    from judgments.lib.querylog import ColumnMapping
    from judgments.ops.log_sampling import import_query_log

    path = tmp_path / "searches.csv"
    path.write_bytes(b"query\n" + b"tent\nboots\n" * 1000)
    heard = []
    import_query_log(people.project, path, "searches.csv", name="October", mapping=ColumnMapping("query"),
                     progress=lambda done, total=None, message="": heard.append(message))
    assert list(dict.fromkeys(heard)) == ["Reading and counting the log",
                                          "Fingerprinting the file (SHA-256), to recognise it if uploaded again", "Storing the counts"]


def test_the_import_query_log_command_stops_a_gzip_bomb(people, small_limits, tmp_path):
    assert command_error("import_query_log", people.project.slug, str(endless_log(tmp_path))) == (
        "searches.csv.gz:3: line longer than 8,192 bytes")
    bomb = tmp_path / "bomb.csv.gz"
    bomb.write_bytes(gzip.compress(b"query\n" + b"tent\n" * 300_000))
    assert command_error("import_query_log", people.project.slug, str(bomb)).startswith(
        "bomb.csv.gz: the file unpacks to more than 1,048,576 bytes")
    assert not QueryLog.objects.exists()


# ---------------------------------------------------------------------------------------- judgments


JUDGMENT_CASES = [
    ("deep.json", b'[\n{"query_id": "q1", "ratings": []},\n{"query_id": "q2", "ratings": ' + DEEP_LINE + b"}\n]",
     "deep.json:3: JSON nested too deeply"),
    ("long.json", b'[\n{"query_id": "q1", "ratings": []},\n{"query_id": "q2", "ratings": ' + DEEP + b"}\n]",
     "long.json:3: line longer than 8,192 bytes"),
    ("long.qrels", b"q1 0 d11 2\nq1 0 d12 " + b"1" * 9000 + b"\n", "long.qrels:2: line longer than 8,192 bytes"),
    ("id.qrels", b"q1 0 " + b"d" * 600 + b" 1\n", "id.qrels:1: doc id longer than 512 bytes"),
    ("wide.qrels", "q1 0 d11 2\n".encode("utf-16"), "wide.qrels: the file is UTF-16 text; save it as UTF-8"),
    ("mac.qrels", b"q1 0 d11 2\rq1 0 d12 1\r", f"mac.qrels:1: {CR_ONLY}"),
    ("mac.csv", b"query,docid,ravi\rtent,d11,2\r", f"mac.csv:1: {CR_ONLY}"),
]


@pytest.mark.parametrize("name,data,message", JUDGMENT_CASES)
def test_a_hostile_judgment_file_on_the_round_import_page_is_refused_and_nothing_imported(people, small_limits, name, data, message):
    round = make_round(people.project, people.lead, [people.rater])
    response = people.client("lead").post(reverse("judgments:round-import", args=[people.project.slug, round.uuid]),
                                          {"file": upload(name, data), "dry_run": ""}, follow=True)
    assert response.status_code == 200
    assert f"Nothing was imported: {message}" in html.unescape(response.content.decode())
    assert not Judgment.objects.exists()


@pytest.mark.parametrize("name,data,message", JUDGMENT_CASES)
def test_the_import_judgments_command_says_the_same(people, small_limits, tmp_path, name, data, message):
    round = make_round(people.project, people.lead, [people.rater])
    path = tmp_path / name
    path.write_bytes(data)
    assert command_error("import_judgments", str(round.uuid), str(path)).startswith(message)
    assert not Judgment.objects.exists()


# ------------------------------------------------------------------------------ long lines, streamed


def test_each_import_command_refuses_a_32_mb_line_holding_no_more_than_a_few_blocks(people, tmp_path):
    """The commands hand the importers the open file, which they stream: the line is never held whole."""
    round = make_round(people.project, people.lead, [people.rater])
    import_queries(people.project, b"query_id,query\nq1,tent\n", "q.csv", name="Set")
    sets = QueryCollection.objects.count()
    limit = "line longer than 1,048,576 bytes"
    cases = [
        (("import_queries", people.project.slug), "queries.csv", b"query_id,query\nq1,tent\nq2,", b"\n", f"queries.csv:3: {limit}"),
        (("import_references", people.project.slug, "Set"), "refs.tsv", b"q1\tParis\nq2\t", b"\n", f"refs.tsv:2: {limit}"),
        (("import_judgments", str(round.uuid)), "labels.qrels", b"q1 0 d11 2\nq1 0 ", b" 1\n", f"labels.qrels:2: {limit}"),
    ]
    for command, name, head, tail, message in cases:
        path = long_line_file(tmp_path / name, head, tail, 32)
        tracemalloc.start()
        try:
            assert command_error(*command, str(path)) == message
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 8 << 20, (command[0], peak)
        path.unlink()
    assert QueryCollection.objects.count() == sets and not Judgment.objects.exists()
    assert not any(Query.objects.exclude(references=[]).values_list("references", flat=True))


# ----------------------------------------------------------------------------------- 512-byte ids


def test_ids_of_512_bytes_are_stored_everywhere_and_longer_ones_refused(people):
    query_id, doc_id = "q" * 512, "é" * 256  # 512 bytes each; the second is 256 characters
    import io

    import_corpus(people.project, io.BytesIO(json.dumps({"doc_id": doc_id, "title": "t"}).encode()), "docs.jsonl")
    import_queries(people.project, f"query_id,query\n{query_id},tent\n".encode(), "q.csv", name="Long ids")
    pool = make_pool(people.project, {query_id: [doc_id, "d2"]}, name="Long")
    assert set(PoolPair.objects.filter(pool=pool).values_list("doc_id", flat=True)) == {doc_id, "d2"}
    assert Document.objects.filter(doc_id=doc_id).exists() and Query.objects.filter(query_id=query_id).exists()
    with pytest.raises(Exception, match="doc id longer than 512 bytes"):
        import_run(people.project, trec_run({"q1": ["d" * 513]}), "r.run", name="too long", system="BM25")


def test_an_evaluation_reads_the_apps_own_qrels_whatever_the_length_of_a_typed_id(people):
    """The upload limits are for files people bring: a query id typed into the query form (up to 512
    characters, more than 512 bytes) still evaluates."""
    from evaluation.evaluations import create_evaluation, run_evaluation
    from judgments.models import RoundItem
    from judgments.ops import grading
    from judgments.ops.grading import Verdict

    round = make_round(people.project, people.lead, [people.rater], {"q1": ["d1", "d2"]})
    Query.objects.filter(query_id="q1").update(query_id="é" * 300)  # 600 bytes, as the form allows
    for item in RoundItem.objects.filter(round=round):
        grading.record(item, people.rater, Verdict(grade=2))
    evaluation = run_evaluation(create_evaluation(round, list(StoredRun.objects.all()), measures=["P@1"], queue=False))
    assert [row["run"] for row in evaluation.results["runs"]] == ["Round 1 pool run"]
    assert evaluation.results["runs"][0]["mean"]["P@1"] is None  # (the stored run still says "q1")

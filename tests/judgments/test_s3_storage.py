"""Every file Verdict keeps, in an S3-compatible bucket: a real server on a loopback port (moto's server mode),
the app's storage configured by STORAGE_BACKEND=s3 and the S3_* variables. Upload, read, delete, a file
uploaded in parts, Parquet read by ranges, and the app's flows: a run uploaded and evaluated, a list version
published and downloaded, a query log imported and sampled."""

import hashlib
import io
import os
from datetime import timedelta

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.files.base import ContentFile, File
from django.core.files.storage import default_storage
from django.urls import reverse
from django.utils import timezone

from evaluation.engine import evaluate, read_qrels, read_run
from evaluation.engine.answers import Answer
from judgments.core.storage import S3RangeReader, open_stored
from judgments.models import AnswerRun, Job, JudgmentListVersion, QueryLog, StoredRun
from judgments.ops import judgment_files
from judgments.ops.answers import answered_query_ids, read_answer_run
from judgments.ops.imports import clean_uploads, stash_upload
from judgments.ops.jobs import execute_job, start_job
from tests.evaluation.test_evaluations import DOCS, evaluated, setup  # noqa: F401 (a fixture)
from tests.factory import run_queued_jobs, trec_run, upload
from tests.judgments.test_answer_runs import ANSWERS, upload_answers
from tests.judgments.test_list_versions import FIRST, body, graded, publish_over_http  # noqa: F401 (a fixture)
from tests.judgments.test_query_logs import SETTINGS, imported_log
from tests.judgments.test_runs import upload_run

pytestmark = pytest.mark.django_db


def test_a_file_is_written_read_and_deleted_in_the_bucket_under_the_prefix(s3_bucket):
    name = default_storage.save("notes/hello.txt", ContentFile(b"hello, bucket\n"))
    assert name == "notes/hello.txt"
    assert s3_bucket.keys() == ["verdict/notes/hello.txt"]
    assert default_storage.exists(name) and default_storage.size(name) == 14
    with default_storage.open(name, "rb") as handle:
        assert handle.read() == b"hello, bucket\n"
    with open_stored(name) as handle:
        assert handle.read() == b"hello, bucket\n"
    default_storage.delete(name)
    assert not default_storage.exists(name) and s3_bucket.keys() == []


def test_a_second_file_under_a_taken_name_gets_a_new_name_as_on_a_file_system(s3_bucket):
    first = default_storage.save("runs/a.parquet", ContentFile(b"first"))
    second = default_storage.save("runs/a.parquet", ContentFile(b"second"))
    assert first != second
    with open_stored(first) as handle:
        assert handle.read() == b"first"


def test_a_missing_file_raises_file_not_found_as_on_a_file_system(s3_bucket):
    with pytest.raises(FileNotFoundError):
        open_stored("nothing/here.parquet")


def test_a_file_larger_than_a_part_is_uploaded_in_parts_and_read_back_whole(s3_bucket, tmp_path):
    data = np.random.default_rng(7).bytes(20 << 20)  # 20 MiB with S3_PART_SIZE_MB=5: four parts
    local = tmp_path / "big.bin"
    local.write_bytes(data)
    with local.open("rb") as handle:
        name = default_storage.save("big/big.bin", File(handle))
    head = s3_bucket.head(f"verdict/{name}")
    assert head["ContentLength"] == len(data)
    assert head["ETag"].strip('"').endswith("-4")  # S3's ETag of a multipart upload ends with its number of parts
    with open_stored(name) as handle:
        assert hashlib.sha256(handle.read()).digest() == hashlib.sha256(data).digest()
        handle.seek(-5, os.SEEK_END)
        assert handle.read() == data[-5:]
        handle.seek(12345)
        assert handle.read(10) == data[12345:12355]


def test_parquet_is_read_by_ranges_fetching_the_footer_and_the_columns_asked_for(s3_bucket):
    rng = np.random.default_rng(3)
    rows = 400_000
    table = pa.table({"query_id": [f"q{i % 1000}" for i in range(rows)],
                      "payload": pa.array(np.frombuffer(rng.bytes(rows * 32), dtype="S32").astype(object)),
                      "score": rng.random(rows)})
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd", row_group_size=100_000)
    name = default_storage.save("runs/wide.parquet", ContentFile(buffer.getvalue()))
    size = default_storage.size(name)
    with open_stored(name) as handle:
        read = pq.read_table(handle, columns=["score"])
        raw = handle.raw
    assert isinstance(raw, S3RangeReader)
    assert read.column("score").to_pylist() == table.column("score").to_pylist()
    assert raw.bytes_fetched < size / 4, (raw.bytes_fetched, size)  # the payload column is most of the file


def test_a_run_uploaded_over_http_is_stored_in_the_bucket_and_evaluated_from_it(s3_bucket, people, setup):  # noqa: F811
    round, run_a, run_b, folder = setup
    run_c = {q: docs[2:] + docs[:2] for q, docs in DOCS.items()}
    job = upload_run(people, trec_run(run_c, "c"), name="C", filename="c.run")
    assert job.state == Job.State.SUCCEEDED, job.error
    stored = StoredRun.objects.get(name="C")
    assert f"verdict/{stored.file.name}" in s3_bucket.keys("verdict/runs/")
    assert s3_bucket.keys("verdict/uploads/") == []  # the stashed upload went once imported
    (folder / "c.run").write_bytes(trec_run(run_c, "c"))
    evaluation = evaluated(people, round, [run_a, stored])
    assert s3_bucket.keys("verdict/evaluations/") == [f"verdict/{evaluation.per_query_file}"]
    (folder / "round.qrels").write_text("".join(judgment_files.export(round, "qrels")))
    qrels = read_qrels(folder / "round.qrels")
    for run, filename in ((run_a, "a.run"), (stored, "c.run")):
        expected = evaluate(qrels, read_run(folder / filename), ["nDCG@5", "AP"]).aggregate
        means = next(row for row in evaluation.results["runs"] if row["run"] == run.name)["mean"]
        assert means["nDCG@5"] == pytest.approx(expected["nDCG@5"]) and means["AP"] == pytest.approx(expected["AP"])
    page = people.client("viewer").get(reverse("evaluation:comparison", args=[round.project.slug, evaluation.uuid]))
    assert page.status_code == 200  # per-query values read back from the bucket


def test_a_list_version_is_published_to_the_bucket_and_downloaded_from_it(s3_bucket, client, people, graded):  # noqa: F811
    publish_over_http(client, people, graded, note="", threshold="")
    [job] = run_queued_jobs()
    assert job.state == Job.State.SUCCEEDED, job.error
    version = JudgmentListVersion.objects.get()
    assert s3_bucket.keys("verdict/versions/") == [f"verdict/{version.file.name}"]
    with open_stored(version.file.name) as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == version.sha256
    response = client.get(reverse("judgments:list-version-download", args=[people.project.slug, version.uuid, "qrels"]))
    lines = body(response).decode().splitlines()
    assert sorted(lines) == sorted(f"{q} 0 {d} {grade}" for (q, d), grade in FIRST.items())


def test_a_query_log_is_imported_into_the_bucket_and_sampled_from_it(s3_bucket, people):
    log = imported_log(people)
    assert (log.rows_read, log.n_queries) == (824, 40)
    assert s3_bucket.keys(f"verdict/{log.folder}/") == [f"verdict/{log.folder}/{which}.parquet" for which in ("daily", "rows", "variants")]
    assert s3_bucket.keys("verdict/uploads/") == []
    page = people.client("lead").get(log.get_absolute_url(), SETTINGS).content.decode()
    assert "Sample with seed 11" in page
    assert QueryLog.objects.count() == 1


def test_abandoned_uploads_are_listed_and_removed_from_the_bucket(s3_bucket, people, settings):
    settings.UPLOAD_ABANDONED_AFTER_HOURS = 1
    name = stash_upload(people.project, upload("left.csv", b"query\ntent\n"))
    assert clean_uploads(now=timezone.now()) == []  # too young
    [removed] = clean_uploads(now=timezone.now() + timedelta(hours=2))
    assert removed.name == name and removed.size == 11
    assert s3_bucket.keys() == []


def test_an_answer_run_is_stored_in_the_bucket_and_read_back(s3_bucket, people):
    job = upload_answers(people, ANSWERS)
    assert job.state == Job.State.SUCCEEDED, job.error
    run = AnswerRun.objects.get(project=people.project)
    assert s3_bucket.keys("verdict/answers/") == [f"verdict/{run.file.name}"]
    assert read_answer_run(run) == {"q1": Answer("Paris is the capital"), "q2": Answer("Boots, size 42", ("d9", "d3"))}
    assert answered_query_ids(run) == {"q1", "q2"}


def test_the_worker_self_check_writes_reads_and_deletes_in_the_bucket(s3_bucket, people):
    finished = execute_job(start_job(kind="selfcheck", project=people.project, owner=people.lead).pk)
    assert finished.state == Job.State.SUCCEEDED, finished.error
    assert finished.result["storage"] == "storages.backends.s3.S3Storage"
    assert s3_bucket.keys() == []

"""Judgment lists carry a strong ETag; a client holding the same labels gets 304 and no body."""

import hashlib

from django.core.files.base import ContentFile

from judgments.models import RoundItem
from judgments.ops import grading

from .test_read_endpoints import body

ROUND_QRELS = "/api/v1/projects/{slug}/rounds/{round}/judgments.qrels"
VERSION_QRELS = "/api/v1/projects/{slug}/versions/{version}/labels.qrels"


def test_a_round_s_etag_is_the_digest_of_its_bytes_and_a_match_is_a_304(world):
    client = world.client("viewer")
    first = client.get(world.path(ROUND_QRELS))
    content = body(first)
    etag = first["ETag"]
    assert etag == f'"{hashlib.sha256(content).hexdigest()}"'  # strong: no W/ prefix
    again = client.get(world.path(ROUND_QRELS), headers={"If-None-Match": etag})
    assert again.status_code == 304 and again["ETag"] == etag and body(again) == b""
    listed = client.get(world.path(ROUND_QRELS), headers={"If-None-Match": f'"stale", {etag}'})
    assert listed.status_code == 304
    assert client.get(world.path(ROUND_QRELS), headers={"If-None-Match": '"stale"'}).status_code == 200


def test_a_new_grade_changes_the_round_s_etag(world, people):
    client = world.client("lead")
    etag = client.get(world.path(ROUND_QRELS))["ETag"]
    item = RoundItem.objects.select_related("round", "query", "document").get(round__uuid=world.objects["round"], query__query_id="q2",
                                                                             document__doc_id="d21")
    grading.record(item, people.lead, grading.Verdict(grade=3))
    changed = client.get(world.path(ROUND_QRELS), headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed["ETag"] != etag
    assert "q2 0 d21 3" in body(changed).decode()


def test_each_format_has_its_own_etag(world):
    client = world.client("lead")
    tags = {fmt: client.get(world.path(f"/api/v1/projects/{{slug}}/rounds/{{round}}/judgments.{fmt}"))["ETag"] for fmt in ("qrels", "json", "csv")}
    assert len(set(tags.values())) == 3


def test_a_version_s_etag_is_stable_and_answers_304_without_reading_its_file(world, people, monkeypatch):
    client = world.client("viewer")
    first = client.get(world.path(VERSION_QRELS))
    etag = first["ETag"]
    assert not etag.startswith("W/") and etag == client.get(world.path(VERSION_QRELS))["ETag"]
    assert etag != client.get(world.path("/api/v1/projects/{slug}/versions/{version}/labels.csv"))["ETag"]

    from judgments.ops import versions

    monkeypatch.setattr(versions, "read", lambda version: (_ for _ in ()).throw(AssertionError("the file was read")))
    again = client.get(world.path(VERSION_QRELS), headers={"If-None-Match": etag})
    assert again.status_code == 304 and again["ETag"] == etag


def test_a_version_s_file_is_written_once_then_served_from_storage(world, monkeypatch):
    client = world.client("viewer")
    first = body(client.get(world.path(VERSION_QRELS)))

    from judgments.ops import versions

    monkeypatch.setattr(versions, "export", lambda version, fmt: (_ for _ in ()).throw(AssertionError("written again")))
    again = client.get(world.path(VERSION_QRELS))
    assert again.status_code == 200 and body(again) == first
    assert again["Content-Disposition"].startswith("attachment") and again["ETag"]


def test_a_round_s_list_is_rendered_once_per_state_of_its_labels(world, people, monkeypatch):
    from django.core.files.storage import default_storage

    from api import files
    from judgments.ops import judgment_files

    rendered = []
    export = judgment_files.export
    monkeypatch.setattr(judgment_files, "export", lambda round, fmt, *args: rendered.append(fmt) or export(round, fmt, *args))
    client = world.client("lead")
    first = client.get(world.path(ROUND_QRELS))
    assert client.get(world.path(ROUND_QRELS), headers={"If-None-Match": first["ETag"]}).status_code == 304
    assert body(client.get(world.path(ROUND_QRELS))) == body(first) and rendered == ["qrels"]

    item = RoundItem.objects.select_related("round", "query", "document").get(round__uuid=world.objects["round"], query__query_id="q2",
                                                                             document__doc_id="d21")
    grading.record(item, people.lead, grading.Verdict(grade=3))
    changed = client.get(world.path(ROUND_QRELS), headers={"If-None-Match": first["ETag"]})
    assert changed.status_code == 200 and rendered == ["qrels", "qrels"]
    kept = default_storage.listdir(f"{files.RENDERED_DIR}/rounds/{world.objects['round']}")[1]
    assert kept == [f"qrels-{changed['ETag'].strip(chr(34))}"]  # the older state's file is gone


def test_a_file_is_rendered_by_one_request_while_the_others_wait_for_it():
    import threading
    import time

    from api.files import _once

    made, results = [], []
    done = {}

    def make():
        time.sleep(0.3)
        made.append(1)
        done["value"] = "digest"
        return "digest"

    threads = [threading.Thread(target=lambda: results.append(_once("test-once", lambda: done.get("value"), make))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert made == [1] and results == ["digest"] * 8


def test_kept_files_of_rounds_and_versions_that_are_gone_are_cleaned_hourly(world, people, settings):
    from django.core.files.storage import default_storage

    from api import files, tasks
    from judgments.models import JudgmentListVersion, LabelsChange, Round
    from judgments.ops.judgment_files import prune_labels_changes

    client = world.client("lead")
    round_file = f"{files.RENDERED_DIR}/rounds/{world.objects['round']}/qrels-{client.get(world.path(ROUND_QRELS))['ETag'].strip(chr(34))}"
    version = JudgmentListVersion.objects.get(uuid=world.objects["version"])
    body(client.get(world.path(VERSION_QRELS)))
    version_file = f"{files.RENDERED_DIR}/{version.sha256}.qrels"
    gone = [f"{files.RENDERED_DIR}/rounds/00000000-0000-0000-0000-000000000000/qrels-{'0' * 64}", f"{files.RENDERED_DIR}/{'f' * 64}.qrels"]
    for name in gone:
        default_storage.save(name, ContentFile(b"q 0 d 1\n"))
    assert settings.CELERY_BEAT_SCHEDULE["clean-rendered"] == {"task": "api.tasks.clean_rendered", "schedule": 3600.0}
    assert settings.CELERY_BEAT_SCHEDULE["prune-labels-changes"] == {"task": "judgments.tasks.prune_labels_changes", "schedule": 3600.0}

    assert tasks.clean_rendered() == 2
    assert not any(default_storage.exists(name) for name in gone)
    assert default_storage.exists(round_file) and default_storage.exists(version_file)

    round = Round.objects.get(uuid=world.objects["round"])  # the round goes (its versions first: they keep it)
    round_pk = round.pk
    JudgmentListVersion.objects.filter(round=round).delete()
    round.delete()
    assert files.clean_rendered() == [round_file, version_file]
    assert LabelsChange.objects.filter(round_id=round_pk).exists()  # its judgments' deletion was a change too
    prune_labels_changes()
    assert not LabelsChange.objects.filter(round_id=round_pk).exists()


RUN_FILE = "/api/v1/projects/{slug}/runs/{run}/download"
QUERIES_CSV = "/api/v1/projects/{slug}/query-sets/{query_set}/queries.csv"


def test_a_run_s_file_has_the_digest_of_its_bytes_as_etag_and_a_match_reads_nothing(world, monkeypatch):
    from judgments.models import StoredRun

    client = world.client("viewer")
    first = client.get(world.path(RUN_FILE))
    assert first["ETag"] == f'"{hashlib.sha256(body(first)).hexdigest()}"'

    monkeypatch.setattr(type(StoredRun.objects.get(uuid=world.objects["run"]).file), "open",
                        lambda *args: (_ for _ in ()).throw(AssertionError("the file was read")))
    again = client.get(world.path(RUN_FILE), headers={"If-None-Match": first["ETag"]})
    assert again.status_code == 304 and again["ETag"] == first["ETag"] and body(again) == b""


def test_a_query_set_s_csv_has_a_strong_etag_that_changes_with_its_queries(world):
    from judgments.models import QueryCollection

    client = world.client("lead")
    first = client.get(world.path(QUERIES_CSV))
    content = body(first)
    assert first["ETag"] == f'"{hashlib.sha256(content).hexdigest()}"' and "query_id" in content.decode()
    assert client.get(world.path(QUERIES_CSV), headers={"If-None-Match": first["ETag"]}).status_code == 304

    QueryCollection.objects.get(uuid=world.objects["query_set"]).queries.update(text="changed")
    changed = client.get(world.path(QUERIES_CSV), headers={"If-None-Match": first["ETag"]})
    assert changed.status_code == 200 and changed["ETag"] != first["ETag"] and "changed" in body(changed).decode()

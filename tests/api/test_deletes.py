"""Deleting runs, answer runs and evaluations through the API (files too), refused with 409 while something uses
them; the retention of the runs the CI gate uploads (origin=gate), promotion, and the sweep that deletes them."""

import io
import json
from datetime import timedelta

import pytest
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.utils import timezone

from evaluation.models import Evaluation
from judgments.models import AnswerRun, Project, StoredRun
from judgments.ops.imports import import_run
from judgments.ops.removal import delete_expired_runs
from judgments.tasks import delete_expired_runs as delete_expired_runs_task
from tests.api import bodies
from tests.factory import trec_run

P = "/api/v1/projects/{slug}"


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """Calls a function and then what waited for its transaction's commit (the files' deletion), as production does."""
    def call(function, *args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return function(*args, **kwargs)
    return call


def spare_run(world, name="Spare", origin=StoredRun.Origin.UPLOAD, days_old=0) -> StoredRun:
    run, _ = import_run(world.people.project, trec_run({"q1": ["d11", name]}, name), f"{name}.run", name=name, system=name, origin=origin)
    if days_old:
        StoredRun.objects.filter(pk=run.pk).update(uploaded_at=timezone.now() - timedelta(days=days_old))
        run.refresh_from_db()
    return run


def test_an_unused_run_is_deleted_with_its_file(world, committed):
    run = spare_run(world)
    name = run.file.name
    assert default_storage.exists(name)
    response = committed(world.client("lead").delete, world.path(P + f"/runs/{run.uuid}"))
    assert response.status_code == 200
    assert not StoredRun.objects.filter(pk=run.pk).exists() and not default_storage.exists(name)


def test_a_run_in_use_is_refused_naming_each_user(world):
    bodies.evaluation(world)
    run = world.people.project.runs.get(uuid=world.objects["run"])
    response = world.client("lead").delete(world.path(P + "/runs/{run}"))
    assert response.status_code == 409 and response.json()["code"] == "conflict"
    detail = response.json()["detail"]
    assert "pool “Round 1 pool”" in detail and "evaluation “Evaluation on" in detail, detail
    assert StoredRun.objects.filter(pk=run.pk).exists() and default_storage.exists(run.file.name)


def test_an_evaluation_is_deleted_with_its_per_query_file_and_frees_its_runs(world, committed):
    bodies.evaluation(world)
    evaluation = Evaluation.objects.get(uuid=world.objects["evaluation"])
    other = evaluation.runs.get(name="Other run")
    assert default_storage.exists(evaluation.per_query_file)
    lead = world.client("lead")
    assert lead.delete(world.path(P + f"/runs/{other.uuid}")).status_code == 409
    assert committed(lead.delete, world.path(P + "/evaluations/{evaluation}")).status_code == 200
    assert not Evaluation.objects.filter(pk=evaluation.pk).exists() and not default_storage.exists(evaluation.per_query_file)
    assert lead.delete(world.path(P + f"/runs/{other.uuid}")).status_code == 200


def test_an_evaluation_being_computed_is_refused(world):
    bodies.evaluation(world)
    Evaluation.objects.filter(uuid=world.objects["evaluation"]).update(state=Evaluation.State.QUEUED)
    response = world.client("lead").delete(world.path(P + "/evaluations/{evaluation}"))
    assert response.status_code == 409 and "still being computed" in response.json()["detail"]


def test_an_answer_run_is_deleted_unless_a_pool_uses_it(world, committed):
    run = AnswerRun.objects.get(uuid=world.objects["answer_run"])
    pool = world.people.project.pools.get(uuid=world.objects["pool"])
    pool.answer_runs.add(run)
    lead = world.client("lead")
    refused = lead.delete(world.path(P + "/answer-runs/{answer_run}"))
    assert refused.status_code == 409 and "pool “Round 1 pool”" in refused.json()["detail"]
    pool.answer_runs.remove(run)
    assert committed(lead.delete, world.path(P + "/answer-runs/{answer_run}")).status_code == 200
    assert not AnswerRun.objects.filter(pk=run.pk).exists() and not default_storage.exists(run.file.name)


def test_deleting_another_project_s_run_is_a_404(world, people):
    other = people.outsider.memberships.get().project
    run, _ = import_run(other, trec_run({"q": ["d"]}), "x.run", name="Theirs", system="x")
    assert world.client("lead").delete(f"/api/v1/projects/{other.slug}/runs/{run.uuid}").status_code == 404
    assert world.client("lead").delete(world.path(P + f"/runs/{run.uuid}")).status_code == 404
    assert StoredRun.objects.filter(pk=run.pk).exists()


def gate_upload(world, name="Gate run"):
    return world.client("lead").post(world.path(P + "/runs"), data={
        "file": io.BytesIO(trec_run({"q1": ["d12", "d11"]}, name)), "name": name, "origin": "gate"})


def test_a_gate_upload_expires_after_the_project_s_days_unless_promoted(world):
    lead = world.client("lead")
    assert gate_upload(world).json()["expires_at"] is None  # no retention set: kept
    changed = lead.patch(world.path(P), data=json.dumps({"gate_run_days": 14}), content_type="application/json")
    assert changed.status_code == 200 and changed.json()["gate_run_days"] == 14
    run = StoredRun.objects.get(name="Gate run")
    listed = lead.get(world.path(P + "/runs") + "?name=Gate+run").json()["items"][0]
    assert listed["origin"] == "gate" and listed["expires_at"].startswith(str((run.uploaded_at + timedelta(days=14)).date()))
    promoted = lead.post(world.path(P + f"/runs/{run.uuid}/promote"))
    assert promoted.status_code == 200 and promoted.json()["expires_at"] is None and promoted.json()["promoted_at"]


def test_an_unknown_origin_and_bad_retention_are_400(world):
    response = world.client("lead").post(world.path(P + "/runs"), data={"file": io.BytesIO(trec_run({"q1": ["d1"]})), "name": "x",
                                                                         "origin": "cron"})
    assert response.status_code == 400 and "origin" in response.json()["detail"]
    for days in (0, 3651, "many"):
        bad = world.client("lead").patch(world.path(P), data=json.dumps({"gate_run_days": days}), content_type="application/json")
        assert bad.status_code == 400 and "gate_run_days" in bad.json()["detail"]
    assert Project.objects.get(pk=world.people.project.pk).gate_run_days is None


def test_the_sweep_deletes_expired_unused_unpromoted_gate_runs_only(world, committed):
    Project.objects.filter(pk=world.people.project.pk).update(gate_run_days=7)
    expired = spare_run(world, "expired", StoredRun.Origin.GATE, days_old=8)
    fresh = spare_run(world, "fresh", StoredRun.Origin.GATE, days_old=6)
    promoted = spare_run(world, "promoted", StoredRun.Origin.GATE, days_old=30)
    promoted.promote()
    uploaded = spare_run(world, "uploaded", days_old=30)
    used = spare_run(world, "used", StoredRun.Origin.GATE, days_old=30)
    world.people.project.pools.get(uuid=world.objects["pool"]).runs.add(used)
    dry = delete_expired_runs(dry_run=True)
    assert dry.deleted == [f"{world.people.project.slug}/expired"] and StoredRun.objects.filter(pk=expired.pk).exists()
    sweep = committed(delete_expired_runs)
    assert sweep.deleted == [f"{world.people.project.slug}/expired"] and "used: used by 1 (pool" in sweep.kept[0]
    assert set(world.people.project.runs.filter(pk__in=[r.pk for r in (expired, fresh, promoted, uploaded, used)])
               .values_list("name", flat=True)) == {"fresh", "promoted", "uploaded", "used"}
    assert not default_storage.exists(expired.file.name)


def test_the_beat_task_and_the_command_are_twins(world):
    Project.objects.filter(pk=world.people.project.pk).update(gate_run_days=1)
    spare_run(world, "old one", StoredRun.Origin.GATE, days_old=2)
    out = io.StringIO()
    call_command("delete_expired_runs", "--dry-run", stdout=out)
    assert "would delete shop-search/old one" in out.getvalue() and "1 expired run(s) would delete" in out.getvalue()
    assert delete_expired_runs_task() == 1
    assert not StoredRun.objects.filter(name="old one").exists()


@pytest.mark.parametrize("what", ["run", "answer_run"])
def test_a_delete_removes_the_object_from_the_s3_bucket(world, s3_bucket, committed, what):
    if what == "run":
        found, path = spare_run(world, "On S3"), P + "/runs/{uuid}"
    else:
        world.objects.pop("answer_run")
        response = world.client("lead").post(world.path(P + "/answer-runs"), **bodies.answer_run_upload(world))
        found, path = AnswerRun.objects.get(uuid=response.json()["uuid"]), P + "/answer-runs/{uuid}"
    key = f"verdict/{found.file.name}"
    assert key in s3_bucket.keys()
    assert committed(world.client("lead").delete, world.path(path.replace("{uuid}", str(found.uuid)))).status_code == 200
    assert key not in s3_bucket.keys()

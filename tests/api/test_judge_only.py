"""Judge-only evaluations through the API: started (202, the job's URL), read back marked "judge-only (uncalibrated)"
with the values the app stored, listed with the same mark; the form's refusals name their field."""

import json

import pytest

from evaluation.engine.judge_only import UNCALIBRATED
from evaluation.models import JudgeOnlyEvaluation
from tests.api.conftest import kept
from tests.evaluation.test_judge_only_evaluations import SETTINGS, setup  # noqa: F401 (query set with references, runs good and poor)
from tests.factory import run_queued_jobs

pytestmark = pytest.mark.django_db

KIND = "judge-only (uncalibrated)"


def start(lead, people, **body):
    return lead.post(f"/api/v1/projects/{people.project.slug}/judge-only-evaluations", json.dumps(body), content_type="application/json")


def test_a_judge_only_evaluation_started_and_fetched_is_marked_uncalibrated(people, lead, setup):  # noqa: F811
    collection, good, poor = setup
    response = start(lead, people, query_set=str(collection.uuid), runs=[str(poor.uuid), str(good.uuid)], judge_settings=SETTINGS, ks=[1, 3])
    assert response.status_code == 202, response.content
    started = response.json()
    assert started["kind"] == KIND and response["Location"] == started["job"]["url"]
    run_queued_jobs()
    job = lead.get(started["job"]["url"]).json()
    assert job["state"] == "done" and job["result_url"] == started["url"]
    found = lead.get(started["url"]).json()
    stored = JudgeOnlyEvaluation.objects.get()
    assert found["kind"] == KIND and found["note"] == UNCALIBRATED and found["results"]["note"] == UNCALIBRATED
    assert [run["name"] for run in found["runs"]] == ["poor", "good"] and found["ks"] == [1, 3]
    assert found["results"]["runs"] == stored.results["runs"] and not kept(stored.results, found["results"])
    listed = lead.get(f"/api/v1/projects/{people.project.slug}/judge-only-evaluations").json()
    assert [(item["uuid"], item["kind"]) for item in listed["items"]] == [(str(stored.uuid), KIND)]
    assert "results" not in listed["items"][0]


def test_the_forms_refusals_name_their_field(people, lead, setup):  # noqa: F811
    collection, good, _poor = setup
    response = start(lead, people, query_set=str(collection.uuid), runs=[str(good.uuid)], ks=[0])
    assert response.status_code == 400 and "ks:" in response.json()["detail"]
    response = start(lead, people, query_set=str(collection.uuid), runs=[str(good.uuid)], judge_settings={"overlap_ratio": 7})
    assert response.status_code == 400 and "overlap_ratio" in response.json()["detail"]
    assert not JudgeOnlyEvaluation.objects.exists()

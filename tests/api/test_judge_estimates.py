"""Estimates with a judge through the API: started (202, the job's URL), read back with the values the app stored and
each comparison's verdict, listed; the form's refusals name their field and the app's refusals (a round without a random
sample, a judge of another round) say why, with nothing made."""

import json

import pytest

from evaluation.models import JudgeEstimate
from judgments.models import HumanSample
from tests.api.conftest import kept
from tests.evaluation.test_judge_estimates import grade_sample, make_planned_round, overlap_judge_on_every_pair
from tests.factory import run_queued_jobs

pytestmark = pytest.mark.django_db


@pytest.fixture
def planned(people):
    round, runs = make_planned_round(people.project, people.lead, [people.rater])
    grade_sample(round, people.rater)
    return round, runs, overlap_judge_on_every_pair(round)


def start(lead, people, **body):
    return lead.post(f"/api/v1/projects/{people.project.slug}/judge-estimates", json.dumps(body), content_type="application/json")


def test_an_estimate_started_and_fetched_carries_the_stored_results_and_verdicts(people, lead, planned):
    round, runs, judge = planned
    response = start(lead, people, round=str(round.uuid), judge=str(judge.uuid), runs=[str(run.uuid) for run in reversed(runs)],
                     measures=["nDCG@3", "AP"])
    assert response.status_code == 202, response.content
    started = response.json()
    assert response["Location"] == started["job"]["url"]
    run_queued_jobs()
    job = lead.get(started["job"]["url"]).json()
    assert job["state"] == "done" and job["result_url"] == started["url"]
    found = lead.get(started["url"]).json()
    stored = JudgeEstimate.objects.get()
    assert [run["name"] for run in found["runs"]] == ["poor", "mid", "good"] and found["measures"] == ["nDCG@3", "AP"]
    assert found["results"]["runs"] == stored.results["runs"] and found["results"]["comparisons"] == stored.results["comparisons"]
    assert found["verdicts"] == stored.results["verdicts"] and found["judge_name"] == "overlap"
    assert not kept(stored.results, found["results"])
    assert found["human_qrels_sha256"] == stored.human_qrels_sha256 and found["results"]["inputs"]["sample"]["seed"] == round.human_sample.seed
    listed = lead.get(f"/api/v1/projects/{people.project.slug}/judge-estimates").json()
    assert [item["uuid"] for item in listed["items"]] == [str(stored.uuid)] and "results" not in listed["items"][0]


def test_the_refusals_name_their_field_or_say_why(people, lead, planned):
    round, runs, judge = planned
    response = start(lead, people, round=str(round.uuid), judge=str(judge.uuid), runs=[str(runs[0].uuid)], measures=["nDCG@x"])
    assert response.status_code == 400 and response.json()["detail"].startswith("measures:")
    other, _ = make_planned_round(people.project, people.lead, [people.rater], name="Other")
    stranger = overlap_judge_on_every_pair(other)
    response = start(lead, people, round=str(round.uuid), judge=str(stranger.uuid), runs=[str(runs[0].uuid)])
    assert response.status_code == 400 and "belongs to another round" in response.json()["detail"]
    HumanSample.objects.filter(round=round).delete()
    response = start(lead, people, round=str(round.uuid), judge=str(judge.uuid), runs=[str(runs[0].uuid)])
    assert response.status_code == 400 and "must be a random sample drawn by Verdict" in response.json()["detail"]
    assert not JudgeEstimate.objects.exists()

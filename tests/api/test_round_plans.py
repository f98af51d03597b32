"""A round's plan for prediction-powered estimates through the API: read it, set it with N or from a target
width, refusals in JSON, and an opened round's sample left as it was."""

import json

import pytest
from django.test import Client

from evaluation.engine.ppi import plan_sample_size
from judgments.lib.sampling import draw_human_sample
from judgments.models import HumanSample
from judgments.ops import rounds
from tests.factory import make_round
from tests.judgments.test_round_plans import LARGE, calibrated_judge, oracle_variances

pytestmark = pytest.mark.django_db
DRAFT = {f"p{q:02d}": [f"p{q:02d}-d1", f"p{q:02d}-d2"] for q in range(1, 13)}


@pytest.fixture
def draft(world):
    people = world.people
    round = make_round(people.project, people.lead, [people.rater], DRAFT, open=False, name="Draft to plan")
    world.objects["draft_round"] = round.uuid
    return round


def put(world, body: dict, who: str = "lead"):
    return world.client(who).put(world.path("/api/v1/projects/{slug}/rounds/{draft_round}/plan"), json.dumps(body),
                                 content_type="application/json")


def test_an_unplanned_round_reads_as_such(world, draft):
    body = world.client("viewer").get(world.path("/api/v1/projects/{slug}/rounds/{draft_round}/plan")).json()
    assert body["planned"] is False and body["editable"] is True and body["n_queries"] == 12 and body["size"] is None


def test_a_lead_plans_with_n_and_reads_the_sample_back(world, draft):
    response = put(world, {"size": 4, "seed": 9})
    assert response.status_code == 200
    body = response.json()
    assert body["planned"] and (body["size"], body["seed"], body["by_tier"]) == (4, 9, False)
    assert body["query_ids"] == draw_human_sample(DRAFT, 4, 9).query_ids and body["suggested_from"] == {}
    assert body["created_by"] == "lena"
    assert world.client("viewer").get(world.path("/api/v1/projects/{slug}/rounds/{draft_round}/plan")).json() == body
    rounds.open_round(draft)
    assert {q: need for q, need in draft.items.values_list("query__query_id", "required")} == {
        q: int(q in body["query_ids"]) for q in DRAFT}


def test_n_comes_from_a_target_width_when_absent(world):
    people = world.people
    draft = make_round(people.project, people.lead, [people.rater], LARGE, open=False, name="Large draft")
    world.objects["draft_round"] = draft.uuid
    judge = calibrated_judge(people)
    variances = oracle_variances(judge)
    expected = plan_sample_size(n_queries=200, half_width=0.1, var_residual=variances["var_residual"], var_judge=variances["var_judge"])
    response = put(world, {"half_width": 0.1, "measure": "nDCG@10", "judge": str(judge.uuid),
                           "run": str(judge.round.pool.runs.get().uuid), "seed": 2})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["size"] == expected and body["suggested_from"]["judge"] == "overlap" and body["suggested_from"]["queries"] == 30


def test_without_evidence_for_a_suggestion_n_must_be_given(world, draft):
    response = put(world, {"half_width": 0.05})
    assert response.status_code == 400 and response.json()["code"] == "insufficient_evidence"
    assert "no judge of the project has a calibration report" in response.json()["detail"]
    assert not HumanSample.objects.filter(round=draft).exists()


def test_bad_input_is_a_400_naming_the_field(world, draft):
    response = put(world, {"size": 13})
    assert response.status_code == 400
    assert "size: Raters can label between 1 and the round's 12 queries; 13 asked" in response.json()["detail"]
    response = put(world, {"size": 3, "by_tier": True})
    assert response.status_code == 400 and "no tiers" in response.json()["detail"]
    response = put(world, {"size": 3, "measure": "nope"})
    assert response.status_code == 400 and response.json()["detail"].startswith("measure:")


def test_an_opened_rounds_plan_cannot_change_nor_go(world, draft):
    put(world, {"size": 4, "seed": 9})
    rounds.open_round(draft)
    response = put(world, {"size": 5, "seed": 1})
    assert response.status_code == 409 and "cannot change once the round has opened" in response.json()["detail"]
    response = world.client("lead").delete(world.path("/api/v1/projects/{slug}/rounds/{draft_round}/plan"))
    assert response.status_code == 409
    assert HumanSample.objects.get(round=draft).size == 4


def test_a_lead_removes_a_drafts_plan(world, draft):
    put(world, {"size": 4, "seed": 9})
    response = world.client("lead").delete(world.path("/api/v1/projects/{slug}/rounds/{draft_round}/plan"))
    assert response.status_code == 200 and response.json()["planned"] is False
    assert not HumanSample.objects.filter(round=draft).exists()


def test_the_plan_endpoints_are_in_the_openapi_schema(world):
    paths = Client().get("/api/openapi.json").json()["paths"]
    operations = paths["/api/v1/projects/{slug}/rounds/{uuid}/plan"]
    assert set(operations) == {"get", "put", "delete"}
    assert "409" in operations["put"]["responses"] and "409" in operations["delete"]["responses"]

"""Evaluations through the API: started (202, the job's URL), followed, and read back with values equal to the
engine's direct evaluation of the same qrels and run files; per-query values read back; comparisons with the stored
baseline and with another; the evaluation form's refusals, each naming its field."""

import json

import pytest

from evaluation import evaluations
from evaluation.engine import evaluate, read_qrels, read_run
from evaluation.engine.significance import compare_many
from evaluation.models import Evaluation
from judgments.ops import versions
from judgments.ops.imports import import_run
from tests.api.conftest import kept
from tests.evaluation.test_evaluations import setup  # noqa: F401 (the round graded with runs A and B)
from tests.evaluation.test_judge_fill import evaluate as evaluate_with_judge, partly_graded  # noqa: F401 (a fixture)
from tests.factory import run_queued_jobs, trec_run

pytestmark = pytest.mark.django_db

MEASURES = ["nDCG@5", "AP", "P@1", "RR"]


def start(lead, people, **body):
    return lead.post(f"/api/v1/projects/{people.project.slug}/evaluations", json.dumps(body), content_type="application/json")


def body_for(round, runs, **changes) -> dict:
    return {"round": str(round.uuid), "runs": [str(run.uuid) for run in runs], "measures": MEASURES, "resamples": 1000, **changes}


def test_an_evaluation_started_and_fetched_has_the_engine_s_values(people, lead, setup):  # noqa: F811
    round, run_a, run_b, folder = setup

    started = start(lead, people, **body_for(round, [run_b, run_a]))

    assert started.status_code == 202, started.content
    job_url = started.json()["job"]["url"]
    assert started["Location"] == job_url and started.json()["state"] == "queued"
    assert lead.get(job_url).json()["state"] == "queued" and lead.get(started.json()["url"]).json()["results"] is None
    run_queued_jobs()
    job = lead.get(job_url).json()
    assert (job["state"], job["progress"], job["result_url"]) == ("done", 1.0, started.json()["url"])
    fetched = lead.get(job["result_url"]).json()
    assert [run["name"] for run in fetched["runs"]] == ["B", "A"] and fetched["measures"] == MEASURES

    qrels_bytes, _ = evaluations.round_qrels(round, round.consensus_rule)
    qrels = read_qrels(qrels_bytes)
    engine = {name: evaluate(qrels, read_run(folder / f"{name.lower()}.run"), MEASURES) for name in ("A", "B")}
    for row in fetched["results"]["runs"]:
        assert row["mean"] == pytest.approx(engine[row["run"]].aggregate, abs=1e-12)
    per_query = lead.get(f"{job['result_url']}/per-query", {"run": str(run_a.uuid), "measure": "nDCG@5"})
    items = per_query.json()["items"]
    assert {item["query_id"]: item["value"] for item in items} == pytest.approx(engine["A"].per_query["nDCG@5"], abs=1e-12)
    assert {(item["run"], item["measure"]) for item in items} == {("A", "nDCG@5")}


def test_a_comparison_with_another_baseline_is_computed_by_the_engine(people, lead, setup):  # noqa: F811
    round, run_a, run_b, folder = setup
    run_c, _ = import_run(people.project, trec_run({"h1": ["h1-d3", "h1-d1"], "t1": ["t1-d2"]}, "c"), "c.run", name="C", system="c")
    (folder / "c.run").write_bytes(trec_run({"h1": ["h1-d3", "h1-d1"], "t1": ["t1-d2"]}, "c"))
    url = start(lead, people, **body_for(round, [run_a, run_b, run_c])).json()["url"]
    run_queued_jobs()
    evaluation = Evaluation.objects.get()

    stored = lead.get(f"{url}/comparison").json()
    other = lead.get(f"{url}/comparison", {"baseline": str(run_b.uuid)}).json()

    assert stored["baseline"] == "A"
    assert [{k: v for k, v in row.items() if k != "verdict"} for row in stored["rows"]] == [
        {"candidate": name, **row} for name, rows in evaluation.results["comparisons"].items() for row in rows]
    assert {row["verdict"]["state"] for row in stored["rows"] + other["rows"]} == {"insufficient"}  # 4 queries
    qrels = read_qrels(evaluations.round_qrels(round, round.consensus_rule)[0])
    values = {name: evaluate(qrels, read_run(folder / f"{name.lower()}.run"), MEASURES).per_query for name in "ABC"}
    expected = compare_many(values["B"], {"A": values["A"], "C": values["C"]}, resamples=1000, seed=42)
    assert other["baseline"] == "B"
    assert [(row["candidate"], row["measure"]) for row in other["rows"]] == [(name, c.measure) for name, rows in expected.items() for c in rows]
    for row, (name, comparison) in zip(other["rows"], [(n, c) for n, rows in expected.items() for c in rows]):
        wanted = comparison.as_dict()
        assert set(row) == {"candidate", "verdict", *wanted}
        for field, value in wanted.items():
            assert row[field] == (pytest.approx(value, abs=1e-12, nan_ok=True) if isinstance(value, float) else value), field
    assert lead.get(f"{url}/comparison", {"baseline": "00000000-0000-0000-0000-000000000000"}).status_code == 400


def test_a_pinned_version_is_evaluated_and_an_unpublished_number_is_refused(people, lead, setup):  # noqa: F811
    round, run_a, _run_b, _folder = setup
    version = versions.publish(round, user=people.lead)

    pinned = start(lead, people, **body_for(round, [run_a], version=version.number))
    missing = start(lead, people, **body_for(round, [run_a], version=version.number + 1))

    assert pinned.status_code == 202 and Evaluation.objects.get().list_version == version
    assert missing.status_code == 400
    assert missing.json()["detail"] == f"version: {round.name}'s judgment list has no published version 2 (published: v1)."


def test_refusals_name_their_field_and_store_nothing(people, lead, setup):  # noqa: F811
    round, run_a, _run_b, _folder = setup
    elsewhere = people.outsider.memberships.get().project

    foreign, _ = import_run(elsewhere, trec_run({"h1": ["x"]}), "f.run", name="Foreign", system="f")
    cases = {"measures": body_for(round, [run_a], measures=["nDCG@5", "Bogus@3"]),
             "runs": body_for(round, [run_a, foreign]),
             "round": body_for(foreign, [run_a]) | {"round": "00000000-0000-0000-0000-000000000000"}}
    for field, body in cases.items():
        response = start(lead, people, **body)
        assert response.status_code == 400, (field, response.content)
        assert response.json()["detail"].startswith(f"{field}: "), (field, response.json())
    assert start(lead, people, round=str(round.uuid), runs=[]).json()["detail"].startswith("runs: ")
    assert not Evaluation.objects.exists()


def test_an_unfinished_evaluation_has_no_values_yet(people, lead, setup):  # noqa: F811
    round, run_a, run_b, _folder = setup
    url = start(lead, people, **body_for(round, [run_a, run_b])).json()["url"]

    for tail in ("/per-query", "/comparison"):
        response = lead.get(url + tail)
        assert response.status_code == 409 and response.json()["code"] == "not_done"
    listed = lead.get(f"/api/v1/projects/{people.project.slug}/evaluations").json()["items"]
    assert [(item["url"], item["state"]) for item in listed] == [(url, "queued")] and "results" not in listed[0]


def test_a_job_says_when_it_failed_or_was_cancelled(people, lead, setup):  # noqa: F811
    from judgments.models import Job
    from judgments.ops.jobs import cancel_job

    round, run_a, run_b, _folder = setup
    failing = start(lead, people, **body_for(round, [run_a])).json()["job"]["url"]
    cancelled = start(lead, people, **body_for(round, [run_b])).json()["job"]
    cancel_job(Job.objects.get(uuid=cancelled["uuid"]))
    type(run_a).objects.filter(pk=run_a.pk).update(sha256="0" * 64)  # the file no longer has the bytes it was picked with
    run_queued_jobs()

    failed = lead.get(failing).json()
    assert (failed["state"], failed["result_url"]) == ("failed", None)
    assert failed["message"] == "run 'A' no longer has the bytes it was picked with"
    assert (lead.get(cancelled["url"]).json()["state"], lead.get(cancelled["url"]).json()["message"]) == ("cancelled", "Cancelled before it started.")


def test_measure_names_are_checked_as_an_evaluation_checks_them(people, lead):
    path = f"/api/v1/projects/{people.project.slug}/measures"
    checked = lead.get(path, {"name": ["ndcg_cut.10", "AP", "nDCG@10", "P(rel=2)@5"]})
    assert checked.status_code == 200
    assert checked.json() == {"measures": evaluations.measure_strings(["ndcg_cut.10", "AP", "nDCG@10", "P(rel=2)@5"])}
    assert checked.json()["measures"][0] == "nDCG@10" and len(checked.json()["measures"]) == 3  # one name, once

    refused = lead.get(path, {"name": ["nDCG@10", "nDGC@10"]})
    assert refused.status_code == 400 and "nDGC@10" in refused.json()["detail"]

    every = lead.get(path).json()["measures"]
    assert {"nDCG@10", "AP", "RR"} <= set(every)


def test_the_typed_results_keep_every_stored_field(people, lead, setup):  # noqa: F811
    round, run_a, run_b, _folder = setup
    url = start(lead, people, **body_for(round, [run_a, run_b])).json()["url"]
    run_queued_jobs()

    returned = lead.get(url).json()["results"]

    stored = Evaluation.objects.get().results
    assert {"runs", "queries", "baseline", "comparisons"} <= set(stored) and stored["runs"][0]["by_tier"]
    assert not kept(stored, returned)
    stored["runs"][0]["added_later"] = {"by": "a job of a later release"}  # undeclared: still sent, never dropped
    Evaluation.objects.update(results=stored)
    assert lead.get(url).json()["results"]["runs"][0]["added_later"] == {"by": "a job of a later release"}



def test_a_judge_filled_evaluation_s_typed_results_keep_the_fill_and_its_gate(people, lead, partly_graded):  # noqa: F811
    round, judge = partly_graded
    filled = evaluate_with_judge(round, judge)

    returned = lead.get(f"/api/v1/projects/{people.project.slug}/evaluations/{filled.uuid}").json()

    assert returned["labels_source"] == "judge_filled" and returned["results"]["fill"]["gate"]["passed"]
    assert not kept(filled.results, returned["results"])

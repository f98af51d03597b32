"""Per-query values through the API: a page at a time (limit, offset, next), filtered by run and by measures (any
spelling the engine reads, repeated), each value equal to pytrec_eval's; a run or measure the evaluation does not
have is a 400 naming it."""

import pytest
import pytrec_eval

from evaluation import evaluations
from tests.api.test_evaluations import body_for, start
from tests.evaluation.test_evaluations import setup  # noqa: F401 (the round graded with runs A and B)
from tests.factory import run_queued_jobs

pytestmark = pytest.mark.django_db


@pytest.fixture
def evaluated(people, lead, setup):  # noqa: F811
    round, run_a, run_b, folder = setup
    url = start(lead, people, **body_for(round, [run_a, run_b], measures=["nDCG@5", "AP"])).json()["url"]
    run_queued_jobs()
    return url, round, run_a, run_b, folder


def oracle(round, folder, run_name: str, measure: str) -> dict[str, float]:
    """pytrec_eval's per-query values of the run file against the round's qrels."""
    qrels, run = {}, {}
    for line in evaluations.round_qrels(round, round.consensus_rule)[0].decode().splitlines():
        query, _, doc, grade = line.split()
        qrels.setdefault(query, {})[doc] = int(grade)
    for line in (folder / f"{run_name.lower()}.run").read_text().splitlines():
        query, _, doc, _, score, _ = line.split()
        run.setdefault(query, {})[doc] = float(score)
    return {query: values[measure] for query, values in pytrec_eval.RelevanceEvaluator(qrels, {measure}).evaluate(run).items()}


def all_pages(client, url: str, params: dict) -> tuple[list[dict], int]:
    items, pages = [], 0
    while url:
        answer = client.get(url, params)
        assert answer.status_code == 200, answer.content
        items += answer.json()["items"]
        url, params, pages = answer.json()["next"], {}, pages + 1
    return items, pages


def test_values_come_a_page_at_a_time_and_equal_pytrec_eval_s(lead, evaluated):
    url, round, run_a, _run_b, folder = evaluated
    whole = lead.get(f"{url}/per-query", {"run": "A", "measure": "AP", "limit": 500}).json()

    paged, pages = all_pages(lead, f"{url}/per-query", {"run": "A", "measure": "AP", "limit": 1})

    assert whole["next"] is None and whole["labels_source"] == "human" and whole["judge_label_share"] == 0
    assert paged == whole["items"] and pages == len(whole["items"]) > 1
    assert {item["query_id"]: item["value"] for item in paged} == pytest.approx(oracle(round, folder, "A", "map"), abs=1e-12)
    assert {(item["run"], item["measure"]) for item in paged} == {("A", "AP")}
    second = lead.get(f"{url}/per-query", {"run": str(run_a.uuid), "measure": "AP", "limit": 1, "offset": 1}).json()
    assert second["items"] == whole["items"][1:2]


def test_measures_repeat_in_any_spelling_the_engine_reads(lead, evaluated):
    url, round, _run_a, _run_b, folder = evaluated

    items = lead.get(f"{url}/per-query", {"run": "B", "measure": ["ndcg_cut.5", "map"], "limit": 500}).json()["items"]

    assert {item["measure"] for item in items} == {"nDCG@5", "AP"}
    ndcg = {item["query_id"]: item["value"] for item in items if item["measure"] == "nDCG@5"}
    assert ndcg == pytest.approx(oracle(round, folder, "B", "ndcg_cut_5"), abs=1e-12)


def test_without_filters_every_stored_value_is_listed_once(lead, evaluated):
    url = evaluated[0]
    items, _ = all_pages(lead, f"{url}/per-query", {"limit": 7})
    keys = [(item["run"], item["measure"], item["query_id"]) for item in items]
    assert len(keys) == len(set(keys)) and {run for run, _, _ in keys} == {"A", "B"}
    shares = list(evaluations.unjudged_measures(["nDCG@5"]).values())
    assert {measure for _, measure, _ in keys} == {"nDCG@5", "AP", *shares}
    share = lead.get(f"{url}/per-query", {"measure": shares[0], "run": "A"}).json()["items"]
    assert share and {item["measure"] for item in share} == {shares[0]}


@pytest.mark.parametrize(("params", "detail"), [
    ({"measure": ["AP", "nDGC@5"]}, "nDGC@5"),
    ({"measure": "P@10"}, "measure: the evaluation has no values of P@10"),
    ({"run": "Z"}, "run: the evaluation has no run 'Z'"),
    ({"limit": 501}, "limit: Input should be a whole number from 1 to 500"),
])
def test_a_run_or_measure_it_does_not_have_is_a_400_naming_it(lead, evaluated, params, detail):
    response = lead.get(f"{evaluated[0]}/per-query", params)
    assert response.status_code == 400 and response.json()["code"] == "bad_request"
    assert detail in response.json()["detail"]


def test_an_offset_past_the_end_is_an_empty_last_page(lead, evaluated):
    answer = lead.get(f"{evaluated[0]}/per-query", {"offset": 2**63 - 1, "limit": 500}).json()
    assert (answer["items"], answer["next"]) == ([], None)

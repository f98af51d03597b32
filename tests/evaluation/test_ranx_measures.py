"""ranx's F1, DCG and exponential-gain nDCG wherever the app takes or shows measures: the evaluation form (with
cutoffs for bare names), the evaluation page, the per-query and trec downloads, the API's measure check and per-query
values; every value equal to the engine's on the round's exported qrels."""

import csv
import io
import json

import pytest
from django.urls import reverse

from evaluation.engine import evaluate, read_qrels, read_run
from judgments.ops import judgment_files
from tests.api.conftest import token_for
from tests.evaluation.test_evaluations import evaluated, setup  # noqa: F401 (the round graded with runs A and B)

pytestmark = pytest.mark.django_db

NEW = ["F1@1", "F1@5", "DCG@1", "DCG@5", "nDCG_burges@1", "nDCG_burges@5", "F1@3", "DCG_burges@3"]


@pytest.fixture
def scored(people, setup):  # noqa: F811
    """An evaluation of A and B asked for as ranx names them: bare names take the form's cutoffs 1 and 5."""
    round, run_a, run_b, folder = setup
    evaluation = evaluated(people, round, [run_a, run_b], measures=("f1", "dcg", "ndcg_burges", "f1@3", "dcg_burges@3"),
                           ks="1 5")
    (folder / "round.qrels").write_text("".join(judgment_files.export(round, "qrels")))
    qrels = read_qrels(folder / "round.qrels")
    engine = {name: evaluate(qrels, read_run(folder / f"{name.lower()}.run"), NEW) for name in "AB"}
    return evaluation, engine


def test_the_form_takes_ranx_names_and_the_means_equal_the_engine(scored):
    evaluation, engine = scored
    assert evaluation.measures == NEW
    for row in evaluation.results["runs"]:
        assert row["mean"] == pytest.approx(engine[row["run"]].aggregate, abs=1e-12)
    assert engine["B"].aggregate["nDCG_burges@5"] < engine["A"].aggregate["nDCG_burges@5"]


def test_the_per_query_downloads_and_trec_text_carry_them(people, scored):
    evaluation, engine = scored
    client, slug = people.client("viewer"), evaluation.project.slug

    def download(what, fmt):
        response = client.get(reverse("evaluation:download", args=[slug, evaluation.uuid, what, fmt]))
        assert response.status_code == 200
        return b"".join(response.streaming_content if response.streaming else [response.content]).decode()

    table = list(csv.DictReader(io.StringIO(download("per-query", "csv"))))
    assert {row["query_id"]: float(row["A nDCG_burges@5"]) for row in table} == pytest.approx(
        engine["A"].per_query["nDCG_burges@5"], abs=1e-12)
    records = json.loads(download("per-query", "json"))
    # pandas writes this JSON with 10 decimals
    assert {row["query_id"]: row["B F1@3"] for row in records} == pytest.approx(engine["B"].per_query["F1@3"], abs=1e-10)
    trec = download("trec-A", "txt")
    assert f"{'DCG@5':<22}\tall\t{engine['A'].aggregate['DCG@5']:6.4f}\n" in trec
    assert f"{'F1@1':<22}\th1\t" in trec


def test_the_evaluation_page_shows_a_new_measure_query_by_query(people, scored):
    evaluation, engine = scored
    page = people.client("viewer").get(evaluation.get_absolute_url(), {"measure": "nDCG_burges@5"})
    assert page.status_code == 200
    html = page.content.decode()
    assert "nDCG_burges@5" in html and f"{engine['A'].aggregate['nDCG_burges@5']:.3f}" in html


def test_the_api_checks_their_names_and_serves_their_values(people, scored):
    evaluation, engine = scored
    client = people.client("viewer")
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token_for(people.lead, people.project)}"
    path = f"/api/v1/projects/{people.project.slug}/measures"
    checked = client.get(path, {"name": ["f1@10", "ndcg_burges@10", "nDCG(dcg='exp-log2')@10", "dcg", "DCG_burges@3"]})
    assert checked.status_code == 200
    assert checked.json() == {"measures": ["F1@10", "nDCG_burges@10", "DCG", "DCG_burges@3"]}
    every = client.get(path).json()["measures"]
    assert {"F1", "F1@10", "DCG", "DCG@10", "DCG_burges@10", "nDCG_burges", "nDCG_burges@10"} <= set(every)
    refused = client.get(path, {"name": ["nDCG(dcg=exp)@10"]})
    assert refused.status_code == 400 and "exp-log2" in refused.json()["detail"]

    response = client.get(f"/api/v1/projects/{people.project.slug}/evaluations/{evaluation.uuid}/per-query",
                          {"run": "B", "measure": "DCG@5"})
    items = response.json()["items"]
    assert {item["query_id"]: item["value"] for item in items} == pytest.approx(engine["B"].per_query["DCG@5"], abs=1e-12)

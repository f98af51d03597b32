"""Judge-only evaluations in the app: a lead scores stored runs from a query set's reference answers with an automatic
judge, the job's numbers equal the engine's (itself checked against Evret's evaluator), every page and download says
"judge-only (uncalibrated)", the calibration round is built from the evaluated runs, and access: outsiders 404,
raters 403, viewers read but do not start."""

import csv
import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from evaluation import judge_only_evaluations
from evaluation.engine.judge_only import UNCALIBRATED, QueryAnswers, evaluate_judge_only, judge_matcher
from evaluation.models import JudgeOnlyEvaluation
from judgments.judges import make_judge
from judgments.lib.scales import BINARY
from judgments.models import Job, Round
from judgments.ops.actions import ActionRefused, save_guidelines
from judgments.ops.answers import import_references
from judgments.ops.imports import import_corpus, import_queries, import_run
from tests.factory import run_queued_jobs, trec_run

pytestmark = pytest.mark.django_db

KIND = "judge-only (uncalibrated)"
QUERIES = {"q1": "how do vector databases index embeddings", "q2": "why rerank retrieved passages",
           "q3": "what does bm25 not capture", "q4": "a query without references"}
REFERENCES = {
    "q1": ["vector databases index embeddings with approximate nearest neighbour graphs such as hnsw",
           "product quantization compresses embeddings so the index fits in memory"],
    "q2": ["a cross encoder reranker reads the query and passage together and scores relevance precisely"],
    "q3": ["bm25 does not capture synonyms or paraphrases of the query terms"],
}
DOCUMENTS = {
    "p1": "Most vector databases index embeddings with approximate nearest neighbour graphs such as HNSW.",
    "p2": "Product quantization compresses embeddings so that the whole index fits in memory on one machine.",
    "p3": "HNSW graphs link each embedding to its nearest neighbours on several layers.",
    "p4": "A cross-encoder reranker reads the query and the passage together and scores their relevance precisely.",
    "p5": "BM25 captures synonyms and paraphrases of the query terms.",
    "p6": "BM25 does not capture synonyms or paraphrases of the query terms, which dense retrievers do.",
}
GOOD = {"q1": ["p1", "p2", "p3"], "q2": ["p4", "p5"], "q3": ["p6", "p5"], "q4": ["p3"]}
POOR = {"q1": ["p3", "p5", "p9"], "q2": ["p5", "p6", "p4"]}  # p9 is not in the corpus: judged by its id alone
SETTINGS = {"min_tokens": 3, "overlap_ratio": 0.5}


@pytest.fixture
def setup(people):
    project = people.project
    text = "query_id,query\n" + "".join(f"{qid},{query}\n" for qid, query in QUERIES.items())
    collection, _ = import_queries(project, text.encode(), "queries.csv", name="Answers")
    data = "".join(json.dumps({"query_id": q, "answers": refs}) + "\n" for q, refs in REFERENCES.items())
    import_references(collection, data.encode(), original_name="refs.jsonl")
    corpus = "".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in DOCUMENTS.items())
    import_corpus(project, io.BytesIO(corpus.encode()), "corpus.jsonl")
    good, _ = import_run(project, trec_run(GOOD, "good"), "good.trec", name="good", system="dense")
    poor, _ = import_run(project, trec_run(POOR, "poor"), "poor.trec", name="poor", system="bm25")
    return collection, good, poor


def start(people, collection, runs, who="lead", **extra):
    return people.client(who).post(reverse("evaluation:judge-only-create", args=[people.project.slug]), {
        "query_set": collection.uuid, "runs": [run.uuid for run in runs], "judge": "token_overlap",
        "settings": json.dumps(SETTINGS), "ks": "1 3 5", **extra})


def evaluated(people, collection, runs) -> JudgeOnlyEvaluation:
    response = start(people, collection, runs)
    assert response.status_code == 302, response.content.decode()[:3000]
    [job] = run_queued_jobs()
    assert job.state == Job.State.SUCCEEDED, job.error
    return JudgeOnlyEvaluation.objects.get()


def test_the_jobs_numbers_equal_the_engines_on_the_same_data(people, setup):
    collection, good, poor = setup
    evaluation = evaluated(people, collection, [good, poor])
    assert evaluation.state == JudgeOnlyEvaluation.State.DONE and evaluation.ks == [1, 3, 5]
    assert evaluation.n_queries == 3 and evaluation.results["queries"]["in_set"] == 4
    assert evaluation.results["queries"]["documents_without_text"] == 1
    queries = {qid: QueryAnswers(QUERIES[qid], tuple(refs)) for qid, refs in REFERENCES.items()}
    expected = evaluate_judge_only(queries, {"good": GOOD, "poor": POOR}, DOCUMENTS,
                                   judge_matcher(make_judge("token_overlap", SETTINGS)), ks=(1, 3, 5))
    for name in ("good", "poor"):
        assert evaluation.results["runs"][name]["mean"] == pytest.approx(expected.runs[name].mean, abs=1e-15)
        for measure, values in expected.runs[name].per_query.items():
            assert evaluation.results["runs"][name]["per_query"][measure] == pytest.approx(values, abs=1e-15)
    assert evaluation.results["runs"]["good"]["mean"]["recall@3"] == pytest.approx(1.0)
    assert evaluation.results["runs"]["poor"]["mean"]["recall@3"] < 1
    assert evaluation.results["note"] == UNCALIBRATED and evaluation.results["judge"]["settings"]["min_tokens"] == 3
    assert [link.sha256 for link in evaluation.run_links.all()] == [good.sha256, poor.sha256]


def test_the_page_and_every_download_say_the_scores_are_uncalibrated(people, setup):
    collection, good, poor = setup
    evaluation = evaluated(people, collection, [good, poor])
    page = people.client("viewer").get(evaluation.get_absolute_url()).content.decode()
    assert KIND in page and "no rater has checked" in page and "recall@3" in page
    assert f"{evaluation.results['runs']['good']['mean']['ndcg@5']:.4f}" in page
    assert "3 queries scored" in page and "Calibrate: build a round" not in page  # a viewer cannot calibrate
    assert "Calibrate: build a round" in people.client("lead").get(evaluation.get_absolute_url()).content.decode()
    slug = people.project.slug
    scores = people.client("viewer").get(reverse("evaluation:judge-only-download", args=[slug, evaluation.uuid, "scores", "csv"]))
    rows = list(csv.reader(io.StringIO(scores.content.decode())))
    assert rows[0] == ["scores", "run", "measure", "mean", "queries"] and len(rows) == 1 + 2 * 18
    assert all(row[0] == KIND for row in rows[1:])
    per_query = people.client("viewer").get(reverse("evaluation:judge-only-download", args=[slug, evaluation.uuid, "per-query", "csv"]))
    rows = list(csv.reader(io.StringIO(per_query.content.decode())))
    assert len(rows) == 1 + 2 * 18 * 3 and all(row[0] == KIND for row in rows[1:])
    document = people.client("viewer").get(reverse("evaluation:judge-only-download", args=[slug, evaluation.uuid, "scores", "json"])).json()
    assert document["kind"] == KIND and document["note"] == UNCALIBRATED
    assert people.client("viewer").get(reverse("evaluation:judge-only-download", args=[slug, evaluation.uuid, "x", "csv"])).status_code == 404
    listing = people.client("viewer").get(reverse("evaluation:judge-only-evaluations", args=[slug])).content.decode()
    assert KIND in listing and "Evaluate runs with a judge only" not in listing  # a viewer cannot start one


def test_the_htmx_request_gets_only_the_partial(people, setup):
    collection, good, _poor = setup
    evaluation = evaluated(people, collection, [good])
    response = people.client("lead").get(evaluation.get_absolute_url(), headers={"HX-Request": "true", "HX-Target": "evaluation-body"})
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="evaluation-body"') and "<nav" not in body


def test_access_outsiders_404_raters_403_viewers_read_only(people, setup):
    collection, good, _poor = setup
    slug = people.project.slug
    assert start(people, collection, [good], who="outsider").status_code == 404
    assert start(people, collection, [good], who="rater").status_code == 403
    assert start(people, collection, [good], who="viewer").status_code == 403
    assert not JudgeOnlyEvaluation.objects.exists()
    evaluation = evaluated(people, collection, [good])
    calibrate = reverse("evaluation:judge-only-calibrate", args=[slug, evaluation.uuid])
    download = reverse("evaluation:judge-only-download", args=[slug, evaluation.uuid, "scores", "json"])
    for url in (evaluation.get_absolute_url(), download, reverse("evaluation:judge-only-evaluations", args=[slug])):
        assert people.client("outsider").get(url).status_code == 404
        assert people.client("rater").get(url).status_code == 403
        assert people.client("viewer").get(url).status_code == 200
    assert people.client("outsider").post(calibrate).status_code == 404
    assert people.client("rater").post(calibrate).status_code == 403
    assert people.client("viewer").post(calibrate).status_code == 403
    assert people.client("lead").get(calibrate).status_code == 405
    assert people.client("lead").put(reverse("evaluation:judge-only-create", args=[slug])).status_code == 405
    assert Round.objects.count() == 0


def test_it_refuses_a_query_set_without_reference_answers_and_bad_settings(people, setup):
    _collection, good, _poor = setup
    bare, _ = import_queries(people.project, b"query_id,query\nz1,nothing here\n", "bare.csv", name="Bare")
    response = start(people, bare, [good])
    assert response.status_code == 200 and "has reference answers" in response.content.decode()
    response = start(people, setup[0], [good], settings='{"overlap_ratio": 7}')
    assert response.status_code == 200 and "overlap_ratio" in response.content.decode()
    for ks in ("0 5", "²", "1 101"):
        assert "whole numbers from 1 to 100" in start(people, setup[0], [good], ks=ks).content.decode()
    assert not JudgeOnlyEvaluation.objects.exists()


def test_calibrate_builds_a_pool_of_the_runs_a_binary_round_and_attaches_the_same_judge(people, setup):
    collection, good, poor = setup
    evaluation = evaluated(people, collection, [good, poor])
    calibrate = reverse("evaluation:judge-only-calibrate", args=[people.project.slug, evaluation.uuid])
    response = people.client("lead").post(calibrate, follow=True)
    assert "Write the project&#x27;s guidelines first" in response.content.decode()
    save_guidelines(people.project, "Relevant: the document contains the answer.", author=people.lead)
    response = people.client("lead").post(calibrate)
    evaluation.refresh_from_db()
    round = evaluation.calibration_round
    assert response.status_code == 302 and response["Location"] == round.get_absolute_url()
    assert round.grading_scale == BINARY and round.pool.depth == 5 and round.pool.query_set == collection
    assert set(round.pool.runs.all()) == {good, poor}
    expected_pairs = {(q, d) for run in (GOOD, POOR) for q, docs in run.items() for d in docs[:5]}
    assert {(pair.query.query_id, pair.doc_id) for pair in round.pool.pairs.select_related("query")} == expected_pairs
    [judge] = round.judges.all()
    assert judge.kind == "token_overlap" and judge.settings["min_tokens"] == 3 and judge.settings["overlap_ratio"] == 0.5
    people.client("lead").post(calibrate)  # asked again: the same round
    assert Round.objects.count() == 1
    page = people.client("lead").get(evaluation.get_absolute_url()).content.decode()
    assert round.name in page


def test_a_cancelled_job_stores_nothing(people, setup):
    collection, good, _poor = setup
    assert start(people, collection, [good]).status_code == 302
    evaluation = JudgeOnlyEvaluation.objects.get()
    with pytest.raises(ActionRefused, match="Cancelled"):
        judge_only_evaluations.run_judge_only_evaluation(evaluation, cancel=lambda: True)
    evaluation.refresh_from_db()
    assert evaluation.state == JudgeOnlyEvaluation.State.QUEUED and evaluation.results == {}


def test_the_command_twin_stores_the_same_numbers_and_says_they_are_uncalibrated(people, setup, tmp_path):
    collection, good, poor = setup
    out = io.StringIO()
    call_command("evaluate_judge_only", people.project.slug, collection.name, "good", "poor", "--judge-settings", json.dumps(SETTINGS),
                 "--k", "1,3,5", "--json", str(tmp_path / "out.json"), stdout=out)
    text = out.getvalue()
    assert text.splitlines()[0] == UNCALIBRATED and "recall@3" in text and "3 queries with reference answers scored, of 4" in text
    stored = JudgeOnlyEvaluation.objects.get()
    assert start(people, collection, [good, poor]).status_code == 302
    [job] = run_queued_jobs()
    by_job = JudgeOnlyEvaluation.objects.exclude(pk=stored.pk).get()
    assert job.state == Job.State.SUCCEEDED and by_job.results["runs"] == stored.results["runs"]
    assert json.loads((tmp_path / "out.json").read_text())["runs"]["good"]["mean"] == stored.results["runs"]["good"]["mean"]
    with pytest.raises(CommandError, match="no run named 'nope'"):
        call_command("evaluate_judge_only", people.project.slug, collection.name, "nope")

"""Seed 000 end to end: a project with reference answers and no human labels gets a judge-only evaluation of its runs
in a few clicks, marked "judge-only (uncalibrated)", and the lead builds the round that calibrates the judge."""

import io
import json
import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from evaluation.models import JudgeOnlyEvaluation
from judgments.models import Job
from judgments.ops.actions import save_guidelines
from judgments.ops.answers import import_references
from judgments.ops.imports import import_corpus, import_queries, import_run
from judgments.ops.jobs import execute_job
from tests.factory import PASSWORD, make_project, make_user, trec_run

from .conftest import log_in, screenshots

pytestmark = pytest.mark.browser

SHOTS = os.environ.get("VERDICT_SCREENSHOTS")

# The seed's example: a query with two expected answers, and documents a retriever returned.
QUERIES = "query_id,query\nq1,What is RAG?\nq2,What do vector databases store?\n"
REFERENCES = {"q1": ["RAG combines retrieval with generation for better accuracy",
                     "Retrieval-augmented generation improves LLM responses"],
              "q2": ["Vector databases store embeddings"]}
DOCUMENTS = {"doc_123": "RAG is a technique that combines retrieval with generation",
             "doc_456": "Vector databases store embeddings",
             "doc_789": "RAG combines retrieval with generation for better accuracy, the survey says",
             "doc_999": "Retrieval-augmented generation improves LLM responses by grounding them in documents"}
RUNS = {"dense": {"q1": ["doc_789", "doc_999", "doc_456"], "q2": ["doc_456", "doc_123"]},
        "bm25": {"q1": ["doc_456", "doc_123", "doc_789"], "q2": ["doc_123"]}}


@pytest.fixture
def seed_project(transactional_db):
    lead = make_user("lead")
    project = make_project(lead, name="RAG retriever")
    collection, _ = import_queries(project, QUERIES.encode(), "queries.csv", name="RAG questions")
    import_references(collection, "".join(json.dumps({"query_id": q, "answers": a}) + "\n" for q, a in REFERENCES.items()).encode(),
                      original_name="answers.jsonl")
    import_corpus(project, io.BytesIO("".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in DOCUMENTS.items()).encode()),
                  "corpus.jsonl")
    for name, rows in RUNS.items():
        import_run(project, trec_run(rows, name), f"{name}.trec", name=name, system=name)
    save_guidelines(project, "Relevant: the document gives the expected answer.", author=lead)
    return project


def test_a_lead_gets_a_judge_only_evaluation_of_the_runs_marked_uncalibrated_and_a_calibration_round(seed_project, live_server, page):
    log_in(page, live_server, "lead", PASSWORD)
    page.goto(f"{live_server.url}{seed_project.get_absolute_url()}")
    page.get_by_text("Data", exact=True).click()
    page.get_by_role("link", name="Judge-only evaluations").click()
    expect(page.get_by_role("heading", name="Judge-only evaluations")).to_be_visible()
    page.get_by_role("button", name="Evaluate runs with a judge only").click()
    page.get_by_label("dense").check()
    page.get_by_label("bm25").check()
    expect(page.get_by_label("Judge:", exact=True)).to_have_value("token_overlap")
    page.get_by_role("button", name="Evaluate").click()
    expect(page.get_by_role("heading", name="Judge-only evaluation on RAG questions")).to_be_visible()
    execute_job(Job.objects.get(kind="evaluate_judge_only").pk)  # stands in for the worker
    page.reload()
    expect(page.get_by_role("heading", name="Scores · judge-only (uncalibrated)")).to_be_visible()
    expect(page.get_by_role("note")).to_contain_text("judge-only (uncalibrated): scores rest on an automatic judge no rater has checked")
    evaluation = JudgeOnlyEvaluation.objects.get()
    dense, bm25 = (evaluation.results["runs"][name]["mean"] for name in ("dense", "bm25"))
    # Evret's default judge: doc_789 contains the first answer, doc_999 the second and doc_456 is the q2 answer itself.
    assert dense["recall@3"] == 1.0 and bm25["recall@3"] == pytest.approx(0.25)
    expect(page.get_by_role("row", name="recall@3")).to_contain_text("1.0000")
    expect(page.get_by_role("row", name="recall@3")).to_contain_text("0.2500")
    expect(page.get_by_text("2 queries scored")).to_be_visible()

    if SHOTS:
        screenshots(page, live_server, Path(SHOTS), {
            "judge-only-list": f"/p/{seed_project.slug}/judge-only/", "judge-only-form": f"/p/{seed_project.slug}/judge-only/new/",
            "judge-only": evaluation.get_absolute_url()})
    page.get_by_role("button", name="Calibrate: build a round for raters").click()
    expect(page.get_by_text("Calibration round")).to_be_visible()
    evaluation.refresh_from_db()
    assert evaluation.calibration_round.judges.get().kind == "token_overlap"

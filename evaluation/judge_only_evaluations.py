"""Judge-only evaluations in the app: stored runs scored with no relevance labels, Evret's way, from a query set's
reference answers and an automatic judge (the engine: evaluation/engine/judge_only.py). Its twins are
`evaluations.py` (runs against raters' labels) and `answer_evaluations.py` (generated answers).

Every number these produce is "judge-only (uncalibrated)": it rests on a judge no rater has checked. To check it,
`build_calibration_round` pools the evaluated runs to depth max(k) and opens a binary round on that pool with the
same judge attached, so that raters grade the pairs and the judge's calibration report says whether it can be trusted.
"""

import time

from django.db import transaction
from django.utils import timezone

from judgments import judges
from judgments.core import outbound_policy
from judgments.core.secrets import SecretUnreadable
from judgments.lib.scales import BINARY
from judgments.models import Document, LLMEndpoint, Project, QueryCollection, Round, StoredRun
from judgments.ops.actions import ActionRefused
from judgments.ops.automatic import DatabaseReplyCache, add_judge, document_text
from judgments.ops.imports import load_run
from judgments.ops.jobs import Job, Progress, cancel_requested, job_kind, latest_job, start_job
from judgments.ops.pools import add_runs_to_pool, create_pool
from judgments.ops.rounds import create_round

from .engine.judge_only import DEFAULT_KS, KIND, UNCALIBRATED, QueryAnswers, evaluate_judge_only, judge_matcher, rankings_of
from .evaluations import EvaluationRefused, check_runs, failed_on_error
from .models import JudgeOnlyEvaluation, JudgeOnlyRun

JOB_KIND = "evaluate_judge_only"
MAX_K = 100


def judge_kinds(project: Project) -> list[tuple[str, str]]:
    """The judges a project can pick: token overlap (Evret's default), semantic, and its LLM endpoint when set."""
    kinds = [("token_overlap", "Token overlap (Evret's default judge)"), ("semantic", "Semantic (all-MiniLM-L6-v2 cosine)")]
    endpoint = LLMEndpoint.objects.filter(project=project).first()
    if endpoint is not None:
        kinds.append(("llm", f"LLM: the project's endpoint ({endpoint.model})"))
    return kinds


@transaction.atomic
def create_judge_only_evaluation(query_set: QueryCollection, runs: list[StoredRun], *, judge_kind: str = "token_overlap",
                                 judge_settings: dict | None = None, ks=DEFAULT_KS, user=None, queue: bool = True) -> JudgeOnlyEvaluation:
    """Record a judge-only evaluation and queue its job (`queue=False`: the caller runs it in-process)."""
    project = query_set.project
    check_runs(runs, project)
    ks = sorted(set(ks))
    if not ks or any(k < 1 or k > MAX_K for k in ks):
        raise EvaluationRefused(f"Each cutoff k must be between 1 and {MAX_K}.")
    if judge_kind not in dict(judge_kinds(project)):
        raise EvaluationRefused(f"Unknown judge {judge_kind!r}: pick one of {', '.join(dict(judge_kinds(project)))}.")
    if not query_set.queries.exclude(references=[]).exists():
        raise EvaluationRefused(f"No query of {query_set.name!r} has reference answers: the judge matches documents to them. "
                                "Upload queries with references on the query set's page.")
    settings = dict(judge_settings or {})
    try:
        settings = dict(make_judge(project, judge_kind, settings).settings)
    except judges.JudgeSettingsError as problem:
        raise EvaluationRefused(f"The judge's settings: {problem}.") from None
    for key in ("base_url", "model"):  # the LLM endpoint's are the project's, read when the job runs
        settings.pop(key, None)
    evaluation = JudgeOnlyEvaluation.objects.create(project=project, query_set=query_set, judge_kind=judge_kind,
                                                    judge_settings=settings, ks=ks, created_by=user)
    JudgeOnlyRun.objects.bulk_create(JudgeOnlyRun(evaluation=evaluation, run=run, position=i, sha256=run.sha256)
                                     for i, run in enumerate(runs))
    if queue:
        start_job(kind=JOB_KIND, project=project, owner=user, params={"judge_only_evaluation": str(evaluation.uuid)})
    return evaluation


def make_judge(project: Project, kind: str, settings: dict) -> judges.Judge:
    """The judge for `kind` with `settings`; an LLM judge gets the project's endpoint, key and the reply cache.
    EvaluationRefused when it cannot run in this installation, or without an endpoint."""
    availability = judges.availability(kind)
    if not availability.available:
        raise EvaluationRefused(f"This installation cannot run {kind} judges: {availability.reason}. Install with: {availability.install}")
    if kind != "llm":
        return judges.make_judge(kind, settings)
    endpoint = LLMEndpoint.objects.filter(project=project).first()
    if endpoint is None:
        raise EvaluationRefused("Set the project's LLM endpoint (base URL and model) before using an LLM judge.")
    try:
        key = endpoint.api_key()
    except SecretUnreadable as problem:
        raise EvaluationRefused(f"The project's LLM API key: {str(problem).rstrip('.')}.") from None
    return judges.make_judge(kind, {**settings, "base_url": endpoint.base_url, "model": endpoint.model}, api_key=key,
                             cache=DatabaseReplyCache(project), policy=outbound_policy.policy())


def run_judge_only_evaluation(evaluation: JudgeOnlyEvaluation, progress=None, cancel=None) -> JudgeOnlyEvaluation:
    """Ask the judge about every run's top max(k) documents against the references, score, store (the job's work)."""
    report = progress or (lambda *args, **kwargs: None)
    started = time.perf_counter()
    links = list(evaluation.run_links.select_related("run").order_by("position"))
    report(0, None, "Reading the reference answers and the runs")
    queries = {qid: QueryAnswers(text, tuple(refs)) for qid, text, refs in
               evaluation.query_set.queries.exclude(references=[]).values_list("query_id", "text", "references")}
    if not queries:
        raise EvaluationRefused(f"No query of {evaluation.query_set.name!r} has reference answers")
    depth = max(evaluation.ks)
    rankings = {}
    for link in links:
        if link.run.sha256 != link.sha256:
            raise EvaluationRefused(f"run {link.run.name!r} no longer has the bytes it was picked with")
        ranked = rankings_of(load_run(link.run), depth)
        rankings[link.run.name] = {qid: ranked.get(qid, []) for qid in queries}
    doc_ids = sorted({doc for ranked in rankings.values() for docs in ranked.values() for doc in docs})
    template = evaluation.project.display_template()
    corpus = Document.objects.corpus().filter(project=evaluation.project)
    documents = {}
    for start in range(0, len(doc_ids), 900):  # SQLite's limit on query parameters
        documents.update((doc_id, document_text(fields, template)) for doc_id, fields in
                         corpus.filter(doc_id__in=doc_ids[start:start + 900]).values_list("doc_id", "fields"))
    judge = make_judge(evaluation.project, evaluation.judge_kind, evaluation.judge_settings)
    matcher = judge_matcher(judge, progress=lambda done, total, message="": report(done, total, f"Judging: {message}"),
                            cancel=cancel)
    result = evaluate_judge_only(queries, rankings, documents, matcher, ks=evaluation.ks, judge=judge.describe())
    if cancel is not None and cancel():
        raise ActionRefused("Cancelled: the judge stopped before every (answer, document) pair was asked; nothing was stored.")
    results = result.to_json()
    results["runs_order"] = [link.run.name for link in links]
    results["queries"].update({"in_set": evaluation.query_set.queries.count(),
                               "documents_without_text": sum(1 for d in doc_ids if not documents.get(d, "").strip())})
    evaluation.results, evaluation.n_queries = results, len(queries)
    evaluation.state, evaluation.finished_at = JudgeOnlyEvaluation.State.DONE, timezone.now()
    evaluation.seconds = time.perf_counter() - started
    evaluation.save()
    report(1, 1, "Done")
    return evaluation


@job_kind(JOB_KIND, "Judge-only evaluation (uncalibrated)", cancellable=True)
def evaluate_judge_only_job(job: Job, progress: Progress) -> dict:
    evaluation = JudgeOnlyEvaluation.objects.select_related("query_set", "project").get(
        uuid=job.params["judge_only_evaluation"], project=job.project)
    with failed_on_error(evaluation):
        run_judge_only_evaluation(evaluation, progress, cancel=lambda: cancel_requested(job))
    questions = evaluation.results["questions"]
    return {"kind": KIND, "runs": len(evaluation.results["runs"]), "queries with references": evaluation.n_queries,
            "questions asked": questions["asked"], "could not judge": questions["could_not_judge"],
            "seconds": round(evaluation.seconds, 2), "link": evaluation.get_absolute_url()}


def job_of(evaluation: JudgeOnlyEvaluation) -> Job | None:
    return latest_job(JOB_KIND, "judge_only_evaluation", evaluation.uuid)


def score_table(evaluation: JudgeOnlyEvaluation) -> list[dict]:
    """Rows of measure x k, one cell per run, in the order the runs were picked."""
    runs = evaluation.results["runs"]
    names = evaluation.results.get("runs_order") or list(runs)
    return [{"measure": measure, "cells": [runs[name]["mean"][measure] for name in names]} for measure in evaluation.results["measures"]]


@transaction.atomic
def build_calibration_round(evaluation: JudgeOnlyEvaluation, user=None) -> Round:
    """A pool of the evaluated runs' top max(k) over the query set, a draft binary round on it with the project's latest
    guidelines, and the evaluation's judge attached to the round: raters grade the pairs, then the judge's calibration
    report compares it with them. Made once per evaluation: asked again, it returns the round it made."""
    if evaluation.calibration_round is not None:
        return evaluation.calibration_round
    if evaluation.state != JudgeOnlyEvaluation.State.DONE:
        raise EvaluationRefused("The evaluation has not finished: calibrate its judge once it has scores.")
    project = evaluation.project
    guidelines = project.guideline_versions.first()
    if guidelines is None:
        raise EvaluationRefused("Write the project's guidelines first: raters grade the calibration round by them.")
    name = f"Calibration of judge-only evaluation {evaluation.uuid.hex[:8]}"
    pool = create_pool(project, name=name, query_set=evaluation.query_set, depth=max(evaluation.ks), strategy="best_rank", user=user)
    add_runs_to_pool(pool, evaluation.ordered_runs())
    round = create_round(project, name=name, pool=pool, guidelines=guidelines, scale=BINARY, user=user)
    add_judge(round, name=f"{evaluation.judge_kind} (from judge-only {evaluation.uuid.hex[:8]})", kind=evaluation.judge_kind,
              settings=evaluation.judge_settings, user=user)
    evaluation.calibration_round = round
    evaluation.save(update_fields=["calibration_round"])
    return round


__all__ = ["UNCALIBRATED", "build_calibration_round", "create_judge_only_evaluation", "judge_kinds", "run_judge_only_evaluation",
           "score_table"]

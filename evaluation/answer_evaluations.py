"""Scoring answer runs against a query set's reference answers: the job, its stored results, comparisons and
the leaderboard. Every number comes from the engine (evaluation/engine/answers.py). Its twin for ranked runs
is `evaluations.py`, whose per-query storage, comparisons and result shape this module shares.

An answer evaluation keeps what reproduces it: each answer run's sha256, the sha256 of the references it
scored against, the measures, -c and the tokenizer. The same inputs give the same numbers.
"""

import hashlib
import json
import time
from dataclasses import dataclass

import pandas as pd
from django.db import transaction
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from judgments.lib.jsonable import jsonable
from judgments.lib.verdicts import INSUFFICIENT, Verdict
from judgments.models import AnswerMetricsReport, AnswerRun, QueryCollection
from judgments.ops import answer_metrics
from judgments.ops.answers import read_answer_run, references_of
from judgments.ops.jobs import Job, Progress, job_kind, start_job

from .engine.answers import ANSWER_MEASURES, TOKENIZERS, aggregate, normalize_text, parse_answer_measures, score_answer, score_answers
from .engine.significance import compare_many
from .evaluations import EvaluationRefused, failed_on_error, per_query_frame, query_groups, store_per_query, traffic_weights
from .models import AnswerEvaluation, EvaluatedAnswerRun

DEFAULT_MEASURE = "f1"  # what the pages show first: the token overlap every RAG tool reports


@transaction.atomic
def create_answer_evaluation(query_set: QueryCollection, runs: list[AnswerRun], *, measures=ANSWER_MEASURES, user=None,
                             all_queries: bool = False, tokenizer: str = "ultrarag", resamples: int = 10_000, seed: int = 42,
                             queue: bool = True) -> AnswerEvaluation:
    """Record an answer evaluation and queue its job (commands and the demo run it in-process: `queue=False`)."""
    if not runs:
        raise EvaluationRefused("Pick at least one answer run.")
    foreign = [run.name for run in runs if run.project_id != query_set.project_id]
    if foreign:
        raise EvaluationRefused(f"These answer runs belong to another project: {', '.join(foreign)}.")
    if len(set(run.pk for run in runs)) != len(runs):
        raise EvaluationRefused("Pick each answer run once.")
    if tokenizer not in TOKENIZERS:
        raise EvaluationRefused(f"Unknown tokenizer {tokenizer!r}: {' or '.join(TOKENIZERS)}.")
    try:
        names = parse_answer_measures(list(measures))
    except ValueError as problem:
        raise EvaluationRefused(str(problem)) from None
    if not query_set.queries.exclude(references=[]).exists():
        raise EvaluationRefused(f"No query of {query_set.name!r} has reference answers: upload some on the query set's page.")
    evaluation = AnswerEvaluation.objects.create(project=query_set.project, query_set=query_set, measures=names, all_queries=all_queries,
                                                 tokenizer=tokenizer, resamples=resamples, seed=seed, created_by=user)
    EvaluatedAnswerRun.objects.bulk_create(EvaluatedAnswerRun(evaluation=evaluation, run=run, position=i, sha256=run.sha256)
                                           for i, run in enumerate(runs))
    if queue:
        start_job(kind="evaluate_answers", project=query_set.project, owner=user, params={"answer_evaluation": str(evaluation.uuid)})
    return evaluation


def references_digest(references: dict[str, list[str]]) -> str:
    return hashlib.sha256(json.dumps(references, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def run_answer_evaluation(evaluation: AnswerEvaluation, progress=None) -> AnswerEvaluation:
    """Score every answer run of the evaluation and store the results (the job's work)."""
    report = progress or (lambda *args, **kwargs: None)
    started = time.perf_counter()
    links = list(evaluation.run_links.select_related("run").order_by("position"))
    steps = len(links) + 2
    report(0, steps, "Reading the reference answers")
    references = references_of(evaluation.query_set)
    if not references:
        raise EvaluationRefused(f"No query of {evaluation.query_set.name!r} has reference answers")
    queries = {q["query_id"]: q for q in evaluation.query_set.queries.values("query_id", "text", "tier", "segment", "weight")}
    results = {"runs": [], "queries": {"in_set": len(queries), "with_references": len(references)}}
    per_query, frames = {}, []
    for index, link in enumerate(links, start=1):
        run = link.run
        if run.sha256 != link.sha256:  # answer runs never change; a mismatch means the file was replaced
            raise EvaluationRefused(f"answer run {run.name!r} no longer has the bytes it was picked with")
        report(index, steps, f"Scoring {run.name} (answer run {index} of {len(links)})", milestone=True)
        message = f"Scoring {run.name} (answer run {index} of {len(links)})"
        scores = score_answers(references, read_answer_run(run), evaluation.measures, tokenizer=evaluation.tokenizer,
                               all_queries=evaluation.all_queries,
                               progress=lambda done, total, message=message, index=index: report(index, steps, f"{message}: {done:,} of {total:,} queries"))
        per_query[run.name] = scores
        frames.append(_long_frame(run.name, scores))
        results["runs"].append(_run_results(run, scores, evaluation.measures, queries))
    report(len(links) + 1, steps, "Comparing answer runs" if len(links) > 1 else "Saving", milestone=True)
    if len(links) > 1:
        baseline = links[0].run.name
        # As for ranked runs: a query one run answers and the other does not scores 0 in the other.
        compared = compare_many(per_query[baseline], {link.run.name: per_query[link.run.name] for link in links[1:]},
                                resamples=evaluation.resamples, seed=evaluation.seed)
        results["baseline"] = baseline
        results["comparisons"] = {name: [c.as_dict() for c in comparisons] for name, comparisons in compared.items()}
    name = store_per_query(evaluation, pd.concat(frames, ignore_index=True))
    evaluation.references_sha256, evaluation.n_references = references_digest(references), len(references)
    evaluation.results, evaluation.per_query_file = jsonable(results), name
    evaluation.state, evaluation.finished_at = AnswerEvaluation.State.DONE, timezone.now()
    evaluation.seconds = time.perf_counter() - started
    evaluation.save()
    report(steps, steps, "Done")
    return evaluation


def _long_frame(run_name: str, scores: dict[str, dict[str, float]]) -> pd.DataFrame:
    rows = [(run_name, qid, measure, value) for measure, values in scores.items() for qid, value in values.items()]
    frame = pd.DataFrame(rows, columns=["run", "query_id", "measure", "value"])
    frame["run"] = frame["run"].astype("category")
    return frame


def _run_results(run: AnswerRun, scores: dict[str, dict[str, float]], measures: list[str], queries: dict) -> dict:
    """An answer run's plain and traffic-weighted means, and its means by tier and by segment."""
    scored = list(scores[measures[0]]) if measures else []
    weights = traffic_weights(scored, queries)
    weighted, weighted_reason = None, ""
    if scored and len(weights) == len(scored):
        weighted = aggregate(scores, weights)
    else:
        weighted_reason = f"{len(scored) - len(weights)} of {len(scored)} scored queries have no traffic weight"
    by = {}
    for key in ("tier", "segment"):
        by[key] = {value: {"queries": len(ids), "mean": aggregate({m: {q: scores[m][q] for q in ids} for m in measures})}
                   for value, ids in query_groups(scored, queries, key)}
    return {"run": run.name, "run_uuid": str(run.uuid), "system": run.system, "sha256": run.sha256, "queries": len(scored),
            "mean": aggregate(scores), "weighted": weighted, "weighted_reason": weighted_reason,
            "by_tier": by["tier"], "by_segment": by["segment"]}


def query_coverage(evaluation: AnswerEvaluation) -> dict:
    """What the scores were computed over: the queries scored (per run), those with references, those in the set."""
    stored = evaluation.results.get("queries") or {}
    scored = {row["run"]: row["queries"] for row in evaluation.results.get("runs", [])}
    counts = sorted(set(scored.values()))
    with_references, in_set = stored.get("with_references", 0), stored.get("in_set", 0)
    return {"set": evaluation.query_set.name, "in_set": in_set, "with_references": with_references, "scored": scored,
            "scored_text": "–" if not counts else f"{counts[0]:,}" if len(counts) == 1 else f"{counts[0]:,} to {counts[-1]:,}",
            "warning": f"Only {with_references:,} of the {in_set:,} queries in the set have reference answers: these scores describe "
                       f"those queries, not the whole set." if with_references * 2 < in_set else ""}


def coverage_lines(evaluation: AnswerEvaluation) -> list[str]:
    coverage = query_coverage(evaluation)
    line = (f"Queries scored: {coverage['scored_text']}, of {coverage['with_references']:,} with reference answers, of "
            f"{coverage['in_set']:,} in the query set {coverage['set']!r}")
    return [line] + ([f"Warning: {coverage['warning']}"] if coverage["warning"] else [])


# ----------------------------------------------------------------------------------- shared tokens


def _tokens(text: str) -> set[str]:
    return set(normalize_text(text).split())


def marked(text: str, shared: set[str]) -> SafeString:
    """`text`, escaped, each word whose normalised tokens meet `shared` wrapped in <mark>."""
    words = []
    for word in text.split():
        hit = bool(shared) and bool(_tokens(word) & shared)
        words.append(f"<mark>{escape(word)}</mark>" if hit else escape(word))
    return mark_safe(" ".join(words))


def answer_beside_references(answer: str | None, references: list[str], tokenizer: str = "ultrarag") -> dict:
    """The answer and its references with the normalised tokens shared with the best reference (highest token
    F1 against the answer) marked, in both; `best` is that reference's index."""
    if answer is None or not references:
        return {"answer": answer, "references": [escape(r) for r in references], "best": None}
    f1 = [score_answer(answer, [ref], ["f1"], tokenizer=tokenizer)["f1"] for ref in references]
    best = max(range(len(references)), key=lambda i: f1[i])
    shared = _tokens(answer) & _tokens(references[best])
    return {"answer": marked(answer, shared), "best": best,
            "references": [marked(ref, shared) if i == best else escape(ref) for i, ref in enumerate(references)]}


# ------------------------------------------------------------------------------------- leaderboard


def evaluated_measures(query_set: QueryCollection) -> list[str]:
    done = AnswerEvaluation.objects.filter(query_set=query_set, state=AnswerEvaluation.State.DONE).order_by("created_at")
    return list(dict.fromkeys(measure for measures in done.values_list("measures", flat=True) for measure in measures))


def leaderboard(project, query_set: QueryCollection, measure: str) -> list[dict]:
    """Every answer run evaluated on the query set (its latest evaluation with the measure), best first."""
    best: dict[str, dict] = {}
    for evaluation in AnswerEvaluation.objects.filter(project=project, query_set=query_set,
                                                      state=AnswerEvaluation.State.DONE).order_by("created_at"):
        if measure not in evaluation.measures:
            continue
        for row in evaluation.results.get("runs", []):
            best[row["run"]] = {"run": row["run"], "system": row["system"], "value": row["mean"].get(measure), "queries": row["queries"],
                                "weighted": (row["weighted"] or {}).get(measure), "evaluation": evaluation}
    return sorted(best.values(), key=lambda r: (r["value"] is None, -(r["value"] or 0), r["run"]))


def leaderboard_caveats(rows: list[dict]) -> list[str]:
    """Why the leaderboard's means may not be comparable, from its rows (`leaderboard`): runs scored over
    different numbers of queries without -c (an unanswered query is left out, not scored 0), and rows from
    evaluations with different options."""
    caveats = []
    counts = {row["queries"] for row in rows}
    left_out = [row for row in rows if not row["evaluation"].all_queries]
    if len(counts) > 1 and left_out:
        each = ", ".join(f"{row['run']} {row['queries']:,}" for row in rows)
        caveats.append(f"The means cover different numbers of queries ({each}). Without -c a query a run "
                       "does not answer is left out rather than scored 0, which flatters a run that skips questions; "
                       "evaluate the runs together with -c to compare them on the same queries.")
    options = {(row["evaluation"].all_queries, row["evaluation"].tokenizer) for row in rows}
    if len(options) > 1:
        caveats.append("The rows come from evaluations with different options ("
                       + "; ".join(f"{row['run']}: {'-c' if row['evaluation'].all_queries else 'no -c'}, tokenizer {row['evaluation'].tokenizer}"
                                   for row in rows) + "): their means are not measured alike.")
    return caveats


@dataclass(frozen=True)
class Ranking:
    """The measure the answer leaderboard ranks by, and why: `source` is "chosen" (the lead picked it),
    "report" (the metric the newest "which answer metric agrees with the raters" report of an answer round
    over the set names, with enough evidence) or "default" (no such report, its verdict is not a pass, or no
    evaluation scored its metric). `report`: that newest report, whichever the source."""

    measure: str
    source: str
    report: AnswerMetricsReport | None

    @property
    def verdict(self) -> Verdict | None:
        """The report's verdict on its best metric (`metric_agreement.verdict`); a report kept before verdicts
        has none, and counts as not enough evidence until it is opened again."""
        if self.report is None:
            return None
        decision = self.report.data["verdict"].get("decision")
        if decision is None:
            return Verdict(INSUFFICIENT, ("the report was made before it checked its evidence",),
                           ("open the report again to recompute it",))
        return Verdict.from_json(decision)

    @property
    def best(self) -> str | None:
        """The metric the report names, when its verdict passes."""
        return self.report.best if self.verdict is not None and self.verdict.passed and self.report.best else None

    @property
    def tied(self) -> list[str]:
        """The metrics the report finds tied with the one that agrees best."""
        return list(self.report.data["verdict"].get("tied", [])) if self.report else []


def ranking(query_set: QueryCollection | None, asked: str | None, available: list[str]) -> Ranking:
    """The leaderboard's measure: the one asked for, else the one the raters' report names when its verdict
    passes and an evaluation of the set scored it, else f1 (or the first measure scored, without f1)."""
    report = answer_metrics.latest_report(query_set) if query_set is not None else None
    if asked:
        return Ranking(asked, "chosen", report)
    found = Ranking(DEFAULT_MEASURE if DEFAULT_MEASURE in available or not available else available[0], "default", report)
    if found.best and found.best in available:
        return Ranking(found.best, "report", report)
    return found


@job_kind("evaluate_answers", "Evaluate answer runs")
def evaluate_answers_job(job: Job, progress: Progress) -> dict:
    evaluation = AnswerEvaluation.objects.select_related("query_set", "project").get(uuid=job.params["answer_evaluation"])
    with failed_on_error(evaluation):
        run_answer_evaluation(evaluation, progress)
    return {"answer runs": len(evaluation.results["runs"]), "queries with references": evaluation.n_references,
            "seconds": round(evaluation.seconds, 2), "link": evaluation.get_absolute_url()}


__all__ = ["answer_beside_references", "create_answer_evaluation", "leaderboard", "leaderboard_caveats", "per_query_frame", "ranking", "run_answer_evaluation"]

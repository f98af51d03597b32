"""Estimates with a judge: runs scored by prediction-powered inference (evaluation/engine/ppi.py). Raters label a random
sample of a round's queries (the round's `HumanSample`, drawn by Verdict); an automatic judge of the round labels every
query; the engine corrects the judge's mean by the mean human-minus-judge difference on the sample. Its twins are
`evaluations.py` (raters' labels alone, or judge-filled) and `judge_only_evaluations.py` (a judge alone, uncalibrated).

The per-query values come from the metric engine with trec_eval's -c (a query a run returns nothing for scores 0):
under the raters' final labels on the sampled queries they have fully labelled (unrateable pairs left out, as the
round's exports leave them), and under the judge's grades on every query of the set (pairs it could not judge are
unjudged, as in trec_eval). A sampled query whose pairs are not all graded yet counts as judge-only and is named.
"""

import hashlib
import time
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Count, F, Q
from django.urls import reverse
from django.utils import timezone

from judgments.lib import judgment_formats
from judgments.lib.jsonable import jsonable
from judgments.lib.judgment_formats import Label
from judgments.lib.verdicts import decide
from judgments.models import HumanSample, Round, RoundJudge, StoredRun
from judgments.ops import judgment_files
from judgments.ops.imports import load_run
from judgments.ops.jobs import Job, Progress, job_kind, latest_job, start_job

from .comparisons import SIGNIFICANCE_WORDS
from .engine import evaluate, read_qrels
from .engine.ppi import MIN_LABELLED, estimate
from .evaluations import EvaluationRefused, check_runs, failed_on_error, measure_strings
from .models import JudgeEstimate, JudgeEstimateRun

JOB_KIND = "estimate_with_judge"
DEFAULT_MEASURES = ("nDCG@10", "AP", "P@10")
JUDGE_MARK = "judge"  # every number that rests on the judge's labels alone carries it


class NoHumanSample(EvaluationRefused):
    """The round's labelled queries were not drawn at random by Verdict; `link` (URL, text) is where to plan a sample:
    the round's plan page while it is a draft, else a new round (a sample is drawn before any label is seen)."""

    def __init__(self, round: Round):
        draft = round.status == Round.Status.DRAFT
        super().__init__(f"The labelled queries must be a random sample drawn by Verdict: plan the round with a random sample of "
                         f"queries for raters (the judge labels the rest). Round {round.name!r} was not planned with one, so its "
                         f"labelled queries may be hand-picked and no interval would be valid"
                         + ("." if draft else "; it has opened, so plan a new round."))
        slug = round.project.slug
        self.link = ((reverse("judgments:round-plan", args=[slug, round.uuid]), f"Plan a random sample for {round.name}") if draft
                     else (reverse("judgments:round-create", args=[slug]), "Start a new round to plan with a random sample"))


@dataclass(frozen=True)
class JudgeCoverage:
    """What a judge of a round has graded: pairs with a verdict of any outcome, those it judged (a grade), and the
    round's pairs it has not been asked about yet, with their queries."""

    pairs: int
    graded: int
    judged: int
    ungraded_queries: int

    @property
    def could_not_judge(self) -> int:
        return self.graded - self.judged

    @property
    def ungraded(self) -> int:
        return self.pairs - self.graded


def judge_coverage(judge: RoundJudge) -> JudgeCoverage:
    items = judge.round.items.annotate(verdicts=Count("machine_grades", filter=Q(machine_grades__judge=judge)),
                                       grades=Count("machine_grades", filter=Q(machine_grades__judge=judge, machine_grades__grade__isnull=False)))
    counts = items.aggregate(pairs=Count("pk"), graded=Count("pk", filter=Q(verdicts__gt=0)), judged=Count("pk", filter=Q(grades__gt=0)))
    ungraded_queries = items.filter(verdicts=0).values("query").distinct().count()
    return JudgeCoverage(counts["pairs"], counts["graded"], counts["judged"], ungraded_queries)


def check_inputs(round: Round, judge: RoundJudge | None, runs: list[StoredRun]) -> HumanSample:
    """The round's sample when an estimate of `runs` with `judge` can be made; else EvaluationRefused saying why."""
    check_runs(runs, round.project)
    sample = HumanSample.objects.filter(round=round).first()
    if sample is None:
        raise NoHumanSample(round)
    if judge is None:
        raise EvaluationRefused(f"Pick an automatic judge of round {round.name!r}: it labels the queries raters did not.")
    if judge.round_id != round.pk:
        raise EvaluationRefused(f"Judge {judge.name!r} belongs to another round ({judge.round.name!r}): pick a judge of {round.name!r}, "
                                "whose pairs it graded.")
    coverage = judge_coverage(judge)
    if coverage.ungraded:
        raise EvaluationRefused(f"Judge {judge.name!r} has not graded {coverage.ungraded:,} of the round's {coverage.pairs:,} pairs "
                                f"(on {coverage.ungraded_queries:,} queries): it must label every query. Run it on all pairs on its page first.")
    if coverage.judged == 0:
        raise EvaluationRefused(f"Judge {judge.name!r} could not judge any of the round's {coverage.pairs:,} pairs: there is nothing to "
                                "estimate with. Its page says why.")
    return sample


@transaction.atomic
def create_judge_estimate(round: Round, judge: RoundJudge | None, runs: list[StoredRun], *, measures=DEFAULT_MEASURES,
                          alpha: float = 0.05, consensus_rule: str | None = None, user=None, queue: bool = True) -> JudgeEstimate:
    """Record an estimate with a judge and queue its job (`queue=False`: the caller runs it in-process)."""
    check_inputs(round, judge, runs)
    if not 0 < alpha < 1:
        raise EvaluationRefused(f"alpha must be between 0 and 1 (0.05 gives 95% intervals), not {alpha}.")
    estimate_row = JudgeEstimate.objects.create(
        project=round.project, round=round, judge=judge, measures=measure_strings(measures, top_grade=round.grading_scale.highest),
        alpha=alpha, consensus_rule=consensus_rule or round.consensus_rule, created_by=user)
    JudgeEstimateRun.objects.bulk_create(JudgeEstimateRun(estimate=estimate_row, run=run, position=i, sha256=run.sha256)
                                         for i, run in enumerate(runs))
    if queue:
        start_job(kind=JOB_KIND, project=round.project, owner=user, params={"judge_estimate": str(estimate_row.uuid)})
    return estimate_row


# --------------------------------------------------------------------------------------------------- the labels


def sample_state(round: Round, sample: HumanSample) -> tuple[list[str], list[str]]:
    """The sampled queries raters have fully labelled (every pair graded or flagged unrateable as many times as it
    needs, or adjudicated), and those still being graded."""
    items = round.items.filter(query__query_id__in=sample.query_ids)
    pending = items.filter(Q(n_judged__lt=F("required")) | Q(n_judged=0)).filter(adjudication__isnull=True)
    grading = set(pending.values_list("query__query_id", flat=True))
    return [qid for qid in sample.query_ids if qid not in grading], sorted(grading)


def qrels_bytes(labels: list[Label]) -> tuple[bytes, str]:
    text = "".join(judgment_formats.qrels(sorted(labels, key=lambda label: (label.query_id, label.doc_id)))).encode()
    return text, hashlib.sha256(text).hexdigest()


def human_labels(round: Round, rule: str, queries: set[str]) -> list[Label]:
    """The round's final labels (its exports' rule: adjudication first, unrateable-only pairs left out) on `queries`."""
    return [Label(f.query_id, f.doc_id, f.label) for f in judgment_files.final_labels(round, rule) if f.query_id in queries]


def judge_labels(judge: RoundJudge) -> list[Label]:
    """The judge's grade of each pair it judged; a pair it could not judge has none (unjudged, as in trec_eval)."""
    grades = judge.grades.filter(grade__isnull=False).values_list("item__query__query_id", "item__document__doc_id", "grade")
    return [Label(query_id, doc_id, grade) for query_id, doc_id, grade in grades.iterator(chunk_size=5000)]


def per_query(qrels: bytes, name: str, rankings: dict, measures: list[str]) -> dict[str, dict[str, dict[str, float]]]:
    """{run: {measure: {query_id: value}}} over every query of `qrels`, a query a run lacks scoring 0 (-c)."""
    parsed = read_qrels(qrels, name=name, max_id_bytes=None, max_line_bytes=None)
    return {run: evaluate(parsed, ranking, measures, all_queries=True).per_query for run, ranking in rankings.items()}


# --------------------------------------------------------------------------------------------------- the job


@dataclass(frozen=True)
class Labels:
    """The two sides' labels as qrels, with their sha256, and which queries each covers: `labelled` are the sampled
    queries raters fully labelled that the judge labelled too; `grading` the sampled queries still being graded."""

    human: bytes
    human_sha256: str
    human_count: int
    judge: bytes
    judge_sha256: str
    judge_count: int
    judged_queries: frozenset[str]
    complete: list[str]
    grading: list[str]
    labelled: list[str]


def read_labels(found: JudgeEstimate, sample: HumanSample) -> Labels:
    """The raters' final labels on the fully labelled sampled queries and the judge's on every pair; EvaluationRefused
    when no sampled query has both yet."""
    complete, grading = sample_state(found.round, sample)
    human_list = human_labels(found.round, found.consensus_rule, set(complete))
    judge_list = judge_labels(found.judge)
    judged_queries = frozenset(label.query_id for label in judge_list)
    by_raters = {label.query_id for label in human_list}
    labelled = sorted(q for q in complete if q in by_raters and q in judged_queries)
    if not labelled:
        raise EvaluationRefused(f"None of the {len(sample.query_ids):,} sampled queries has raters' labels on every pair and a judge's "
                                f"label yet ({len(grading):,} are still being graded): grade the sample first.")
    return Labels(*qrels_bytes(human_list), len(human_list), *qrels_bytes(judge_list), len(judge_list), judged_queries, complete,
                  grading, labelled)


def run_judge_estimate(found: JudgeEstimate, progress=None) -> JudgeEstimate:
    """Build the human and judge qrels, score every run under both, estimate, store (the job's work)."""
    report = progress or (lambda *args, **kwargs: None)
    started = time.perf_counter()
    round, judge = found.round, found.judge
    links = list(found.run_links.select_related("run").order_by("position"))
    steps = len(links) + 2
    report(0, steps, "Reading the sample, the raters' labels and the judge's")
    sample = check_inputs(round, judge, [link.run for link in links])
    labels = read_labels(found, sample)
    rankings = {}
    for index, link in enumerate(links, start=1):
        if link.run.sha256 != link.sha256:
            raise EvaluationRefused(f"run {link.run.name!r} no longer has the bytes it was picked with")
        report(index, steps, f"Reading {link.run.name} (run {index} of {len(links)})", milestone=True)
        rankings[link.run.name] = load_run(link.run)
    report(len(links) + 1, steps, "Scoring the runs under both labels and estimating", milestone=True)
    chosen = set(labels.labelled)
    human_values = {run: {m: {q: v for q, v in values.items() if q in chosen} for m, values in by_measure.items()}
                    for run, by_measure in per_query(labels.human, f"{round.name} raters.qrels", rankings, found.measures).items()}
    judge_values = per_query(labels.judge, f"{round.name} {judge.name}.qrels", rankings, found.measures)
    queries = {row["query_id"]: row for row in round.pool.query_set.queries.values("query_id", "tier", "weight")}
    result = estimate(human_values, judge_values, labelled=labels.labelled, alpha=found.alpha,
                      **_weights_and_tiers(queries, labels.judged_queries, sample))
    results = result.to_json()
    # The engine says what each comparison rests on; `decide` is the app's one rule that turns it into the verdict.
    results["verdicts"] = {measure: [decide(**c.evidence().as_dict()).to_json() for c in found_comparisons]
                           for measure, found_comparisons in result.comparisons.items()}
    results["inputs"] = _inputs(found, sample, labels, queries) | {"runs_order": [link.run.name for link in links]}
    found.human_qrels_sha256, found.judge_qrels_sha256 = labels.human_sha256, labels.judge_sha256
    found.results = jsonable(results)
    found.state, found.finished_at = JudgeEstimate.State.DONE, timezone.now()
    found.seconds = time.perf_counter() - started
    found.save()
    report(steps, steps, "Done")
    return found


def _inputs(found: JudgeEstimate, sample: HumanSample, labels: Labels, queries: dict) -> dict:
    """What reproduces the estimate and what the page says it covers: the sample, what was left out and why, the judge."""
    coverage = judge_coverage(found.judge)
    return {
        "query_set": found.round.pool.query_set.name, "in_set": len(queries),
        "sample": {"size": sample.size, "seed": sample.seed, "by_tier": sample.by_tier, "drawn_at": sample.created_at.isoformat(),
                   "query_ids": list(sample.query_ids), "tier_shares": sample.tier_shares, "sampled": len(sample.query_ids)},
        "still_grading": labels.grading, "fully_labelled": len(labels.complete), "labelled_ids": labels.labelled,
        "sampled_without_labels": sorted(set(labels.complete) - set(labels.labelled)),
        "human_labels": labels.human_count, "judge_labels": labels.judge_count,
        "judge": {"name": found.judge.name, "kind": found.judge.kind, "pairs": coverage.pairs, "judged": coverage.judged,
                  "could_not_judge": coverage.could_not_judge, "queries": len(labels.judged_queries),
                  "queries_without_label": len(set(queries) - labels.judged_queries)},
        "min_labelled": MIN_LABELLED,
    }


def _weights_and_tiers(queries: dict, judged: set[str], sample: HumanSample) -> dict:
    """The engine's traffic weights and tiers over the judged queries: weights when any query has one (the engine
    says which lack one), tiers when any has one, and the tiers' shares of the set when the sample was drawn by tier."""
    rows = [queries[q] for q in judged if q in queries]
    weights = {row["query_id"]: row["weight"] for row in rows if row["weight"] is not None}
    options = {"weights": weights or None}
    if sample.by_tier or any(row["tier"] for row in rows):
        options["tiers"] = {row["query_id"]: row["tier"] or "" for row in rows}
    if sample.by_tier and sample.tier_shares:
        options["tier_shares"] = dict(sample.tier_shares)
    return options


@job_kind(JOB_KIND, "Estimate with a judge")
def estimate_with_judge_job(job: Job, progress: Progress) -> dict:
    found = JudgeEstimate.objects.select_related("round__pool__query_set", "judge", "project").get(
        uuid=job.params["judge_estimate"], project=job.project)
    with failed_on_error(found):
        run_judge_estimate(found, progress)
    return {"runs": len(found.results["runs"]), "labelled queries": found.results["labelled"],
            "judge-only queries": found.results["unlabelled"], "seconds": round(found.seconds, 2), "link": found.get_absolute_url()}


def job_of(found: JudgeEstimate) -> Job | None:
    return latest_job(JOB_KIND, "judge_estimate", found.uuid)


# --------------------------------------------------------------------------------------------------- what pages show


def level(found: JudgeEstimate) -> str:
    """The intervals' confidence level as people write it: "95%"."""
    return f"{(1 - found.alpha) * 100:.4g}%"


def interval_kind(found: JudgeEstimate) -> str:
    """How the engine drew the stored intervals: Student's t (its estimates carry degrees of freedom) or normal."""
    first = found.results["runs"][0]["measures"][found.measures[0]]["ppi"] if found.results.get("runs") else {}
    return "normal-approximation" if first.get("df") is None else "Student's t (degrees of freedom from the labelled queries)"


def measure_tables(found: JudgeEstimate) -> list[dict]:
    """Per measure: a row per run (the PPI estimate, the raters-only one, the judge's own mean, what the judge was
    worth) and its comparisons, each with its stored verdict and how many more labelled queries would be expected to
    make it significant."""
    results = found.results
    tables = []
    for measure in found.measures:
        rows = [{"run": row["run"], **row["measures"][measure]} for row in results["runs"]]
        compared = [c | {"verdict": verdict, "more": more_needed(c)}
                    for c, verdict in zip(results["comparisons"].get(measure, []), results["verdicts"].get(measure, []))]
        tables.append({"measure": measure, "rows": rows, "comparisons": compared,
                       "weighted": any(row.get("weighted") for row in rows),
                       "weighted_reason": next((row.get("weighted_reason") for row in rows if row.get("weighted_reason")), "")})
    return tables


def more_needed(comparison: dict) -> str:
    """How many more randomly drawn labelled queries would be expected to make a comparison significant, in words."""
    if comparison["state"] == "significant":
        return "none: it is significant"
    needed, labelled = comparison["queries_needed"], comparison["ppi"]["n_labelled"]
    if needed is None:
        return comparison["queries_needed_reason"] or "no number of labelled queries within the set would be expected to"
    return f"{max(needed - labelled, 0):,} more ({needed:,} labelled in all)"


ESTIMATE_COLUMNS = ["labels", "run", "measure", "mean", "low", "high", "se", "labelled_queries", "judge_only_queries", "lambda",
                    "weighted", "tier"]
COMPARISON_COLUMNS = ["measure", "run_a", "run_b", "labels", "difference", "low", "high", "p", "p_holm", "verdict", "reason",
                      "labelled_queries", "to_make_it_significant"]
SOURCES = {"ppi": "raters' sample + judge (PPI)", "human": "raters only, same labelled queries"}


def _estimate_cells(estimate: dict) -> list:
    return [estimate["mean"], estimate["low"], estimate["high"], estimate["se"], estimate["n_labelled"], estimate["n_unlabelled"],
            estimate["lam"]]


def estimate_rows(found: JudgeEstimate) -> list[list]:
    """The estimates as CSV rows (ESTIMATE_COLUMNS): per run and measure the PPI and raters-only estimates (plain, traffic-
    weighted when there are weights, by tier) and the judge's own mean, marked as the judge's."""
    rows = [ESTIMATE_COLUMNS]
    for run in found.results["runs"]:
        for measure, values in run["measures"].items():
            for key, source in SOURCES.items():
                rows.append([source, run["run"], measure, *_estimate_cells(values[key]), "no", ""])
                if values.get("weighted"):
                    rows.append([source, run["run"], measure, *_estimate_cells(values["weighted"][key]), "yes", ""])
                for tier, parts in sorted((values.get("by_tier") or {}).items()):
                    rows.append([source, run["run"], measure, *_estimate_cells(parts[key]), "no", tier])
            n = found.results["labelled"] + found.results["unlabelled"]
            rows.append([f"{JUDGE_MARK} only: its mean over every query", run["run"], measure, values["judge_mean"], "", "", "", 0, n, "", "no", ""])
    return rows


def comparison_rows(found: JudgeEstimate) -> list[list]:
    """The comparisons as CSV rows (COMPARISON_COLUMNS), each with its verdict and the labelled queries it would need."""
    rows = [COMPARISON_COLUMNS]
    for table in measure_tables(found):
        for c in table["comparisons"]:
            for key, source in SOURCES.items():
                ppi = key == "ppi"  # the p-values, the verdict and the queries needed are the PPI test's
                rows.append([table["measure"], c["a"], c["b"], source, c[key]["mean"], c[key]["low"], c[key]["high"],
                             c["p"] if ppi else "", c["p_adjusted"] if ppi else "", SIGNIFICANCE_WORDS[c["verdict"]["state"]] if ppi else "",
                             "; ".join(c["verdict"]["reasons"]) if ppi else "", c[key]["n_labelled"], c["more"] if ppi else ""])
    return rows

"""Scoring stored runs against a round's labels: the job, its stored results, comparisons, and the
unjudged pairs that send a run back to the raters. Every number comes from the metric engine.

An evaluation keeps what reproduces it: each run's sha256, the round, its guidelines version, the
consensus rule, the sha256 of the qrels it built from the labels, the engine options (-c, -J, -l, -M)
and the measure strings. The same inputs give the same numbers.
"""

import dataclasses
import hashlib
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from judgments.core.storage import open_stored
from judgments.lib import judgment_formats
from judgments.lib.jsonable import jsonable
from judgments.lib.judgment_formats import Label
from judgments.models import JudgmentListVersion, Pool, Round, RoundJudge, StoredRun
from judgments.ops import automatic, judgment_files, pools, rounds, versions
from judgments.ops.actions import ActionRefused, first_free
from judgments.ops.imports import load_run, load_run_table
from judgments.ops.jobs import Job, Progress, job_kind, start_job

from .engine import Evaluation as EngineEvaluation
from .engine import UnknownMeasureError, evaluate, parse_measure, parse_measures, read_qrels
from .engine.significance import compare_many
from .models import EvaluatedRun, Evaluation

CUTOFFS = (1, 5, 10, 20, 50, 100)
# What RAG evaluation tools report by default: MRR and MAP over the ranking, recall, precision and nDCG at each cutoff.
DEFAULT_MEASURES = ("RR", "AP", *(f"{name}@{k}" for name in ("R", "P", "nDCG") for k in CUTOFFS))
WARN_UNJUDGED, STALE_UNJUDGED = 0.20, 0.30
WHOLE_RANKING_KEY = "all"  # the unjudged share of measures without a cutoff (AP, RR, Rprec...): any rank can change them


class EvaluationRefused(ActionRefused):
    """The evaluation cannot be made as asked; the message says why."""


_WHOLE_RANKING = {"rr", "mrr", "recip_rank", "ap", "map"}  # reported over the whole ranking, as RAG tools do


def measure_strings(texts: Iterable[str], ks: Iterable[int] | None = None, *, top_grade: int | None = None) -> list[str]:
    """Canonical measure strings, in order, without repeats. With `ks`, a bare family name (``nDCG``,
    ``P``, ``recall``) gets each cutoff; MRR and MAP stay over the whole ranking. With `top_grade` (the
    round's scale), ERR without a max takes it: ``ERR@10`` is ``ERR(max=3)@10`` on a 0-3 scale, whatever
    grades the raters happened to use."""
    ks = list(ks or ())
    names = []
    for text in texts:
        bare = ks and not any(mark in text for mark in "@.(") and text.lower() not in _WHOLE_RANKING
        for measure in parse_measures([f"{text}@{k}" for k in ks] if bare else [text]):
            if measure.family.aggregate == "none":
                raise UnknownMeasureError(text, (), detail=f"{measure.canonical} is text per query (trec_eval's "
                                          "relstring), not a score an evaluation can hold")
            if top_grade is not None and measure.name == "ERR" and measure.param is None:
                measure = dataclasses.replace(measure, param=float(top_grade))
            names.append(measure.canonical)
    return list(dict.fromkeys(names))


def check_runs(runs: list[StoredRun], project) -> None:
    """Refuse (EvaluationRefused, saying why) runs that cannot be scored together in `project`: none, another
    project's, or one picked twice."""
    if not runs:
        raise EvaluationRefused("Pick at least one run.")
    foreign = [run.name for run in runs if run.project_id != project.pk]
    if foreign:
        raise EvaluationRefused(f"These runs belong to another project: {', '.join(foreign)}.")
    if len({run.pk for run in runs}) != len(runs):
        raise EvaluationRefused("Pick each run once.")


@transaction.atomic
def create_evaluation(round: Round, runs: list[StoredRun], *, measures: list[str], user=None, consensus_rule: str | None = None,
                      relevance_level: int = 1, all_queries: bool = False, judged_only: bool = False,
                      max_docs: int | None = None, resamples: int = 10_000, seed: int = 42, queue: bool = True,
                      fill_judge: RoundJudge | None = None, list_version: JudgmentListVersion | None = None) -> Evaluation:
    """Record an evaluation and queue its job (commands and the demo run it in-process: `queue=False`). With
    `fill_judge`, the judge's grades label the pairs the raters did not grade, if its calibration passed its gate. With
    `list_version`, a published version of the round's list gives the labels (its own consensus rule), not the round."""
    check_runs(runs, round.project)
    if fill_judge is not None:
        if fill_judge.round_id != round.pk:
            raise EvaluationRefused(f"Judge {fill_judge.name!r} belongs to another round.")
        try:
            automatic.check_gate(fill_judge)
        except ActionRefused as refusal:
            raise EvaluationRefused(str(refusal)) from None
    if list_version is not None:
        if list_version.lineage_id != versions.lineage_of(round).pk:
            raise EvaluationRefused(f"Version v{list_version.number} is not a version of {round.name}'s judgment list.")
        if fill_judge is not None:
            raise EvaluationRefused("A published version is evaluated as it was published: it cannot be filled with a judge's grades.")
        consensus_rule = list_version.consensus_rule
    evaluation = Evaluation.objects.create(
        project=round.project, round=round, measures=measure_strings(measures, top_grade=round.grading_scale.highest),
        consensus_rule=consensus_rule or round.consensus_rule, list_version=list_version,
        relevance_level=relevance_level, all_queries=all_queries, judged_only=judged_only, max_docs=max_docs,
        resamples=resamples, seed=seed, created_by=user, fill_judge=fill_judge)
    EvaluatedRun.objects.bulk_create(EvaluatedRun(evaluation=evaluation, run=run, position=i, sha256=run.sha256)
                                     for i, run in enumerate(runs))
    if queue:
        start_job(kind="evaluate_runs", project=round.project, owner=user, params={"evaluation": str(evaluation.uuid)})
    return evaluation


def round_qrels(round: Round, rule: str) -> tuple[bytes, str]:
    """The round's labels as the qrels its export writes, and their sha256."""
    text = "".join(judgment_files.export(round, "qrels", judgment_files.ExportOptions(rule=rule))).encode()
    return text, hashlib.sha256(text).hexdigest()


def unjudged_cutoff(measure: str) -> str:
    """The key of the unjudged share that goes with a measure: its cutoff, or WHOLE_RANKING_KEY without one."""
    cutoff = parse_measure(measure).cutoff
    return WHOLE_RANKING_KEY if cutoff is None else str(cutoff)


def share_measure(key: str) -> str:
    """The engine's measure for an unjudged share: the share of the top min(k, retrieved) documents without a
    label (UnjudgedShare@k, not trec_eval's unj, which divides by k), or of every retrieved document."""
    return "UnjudgedShare" if key == WHOLE_RANKING_KEY else f"UnjudgedShare@{key}"


def unjudged_measures(measures: Iterable[str] = ()) -> dict[str, str]:
    """The unjudged shares an evaluation reports, by key: at CUTOFFS and every cutoff of `measures`, and over
    the whole ranking."""
    cutoffs = sorted(set(CUTOFFS) | {parse_measure(m).cutoff for m in measures} - {None})
    return {key: share_measure(key) for key in [*map(str, cutoffs), WHOLE_RANKING_KEY]}


def depth_label(key: str) -> str:
    return "whole ranking" if key == WHOLE_RANKING_KEY else f"@{key}"


def in_depth_order(keys: Iterable[str]) -> list[str]:
    """Unjudged-share keys shallow to deep, the whole ranking last (PostgreSQL's jsonb does not keep their order)."""
    return sorted(keys, key=lambda key: (key == WHOLE_RANKING_KEY, int(key) if key != WHOLE_RANKING_KEY else 0))


def run_evaluation(evaluation: Evaluation, progress=None) -> Evaluation:
    """Score every run of the evaluation and store the results (the job's work)."""
    report = progress or (lambda *args, **kwargs: None)
    started = time.perf_counter()
    round = evaluation.round
    links = list(evaluation.run_links.select_related("run").order_by("position"))
    steps = len(links) + 2
    if evaluation.list_version is not None:
        report(0, steps, f"Reading the labels of version v{evaluation.list_version.number}")
        qrels_bytes = "".join(versions.export(evaluation.list_version, "qrels")).encode()
        digest = hashlib.sha256(qrels_bytes).hexdigest()
    else:
        report(0, steps, "Building the qrels from the round's labels")
        qrels_bytes, digest = round_qrels(round, evaluation.consensus_rule)
    filled = {}
    if evaluation.fill_judge is not None:  # checked again: the judge may have graded or been recalibrated since
        gate = automatic.check_gate(evaluation.fill_judge)
        labelled = {(label.query_id, label.doc_id) for label in judgment_files.final_labels(round, evaluation.consensus_rule)}
        filled = automatic.judge_fill(evaluation.fill_judge, labelled)
        qrels_bytes += "".join(judgment_formats.qrels(Label(q, d, grade) for (q, d), grade in sorted(filled.items()))).encode()
        digest = hashlib.sha256(qrels_bytes).hexdigest()
    # The app wrote these qrels from its own labels: ids typed into a form may be longer than an upload's.
    qrels = read_qrels(qrels_bytes, name=f"{round.name}.qrels", max_id_bytes=None, max_line_bytes=None)
    queries = {q["query_id"]: q for q in round.pool.query_set.queries.values("query_id", "text", "tier", "segment", "weight")}
    shares = unjudged_measures(evaluation.measures)
    measures = list(evaluation.measures)
    if not evaluation.judged_only:
        measures += [m for m in shares.values() if m not in measures]
    options = {"relevance_level": evaluation.relevance_level, "all_queries": evaluation.all_queries,
               "judged_only": evaluation.judged_only, "max_docs": evaluation.max_docs}
    results, per_query, frames = {"runs": [], "queries": {"in_set": len(queries), "labelled": len(qrels.query_ids)}}, {}, []
    for index, link in enumerate(links, start=1):
        run = link.run
        if run.sha256 != link.sha256:  # stored runs never change; a mismatch means the file was replaced
            raise EvaluationRefused(f"run {run.name!r} no longer has the bytes it was picked with")
        report(index, steps, f"Scoring {run.name} (run {index} of {len(links)})", milestone=True)
        ranking = load_run(run)
        result = unjudged = evaluate(qrels, ranking, measures, **options)
        frames.append(_long_frame(run.name, result))
        if evaluation.judged_only:  # -J drops unjudged documents before scoring; the shares are about the run's ranking
            unjudged = evaluate(qrels, ranking, list(shares.values()), **(options | {"judged_only": False}))
            frames.append(_long_frame(run.name, unjudged, skip=result.measures))
        results["runs"].append(_run_results(run, result, evaluation.measures, queries, unjudged, shares))
        if evaluation.fill_judge is not None:
            results["runs"][-1]["judge_labels"] = judge_labels(run, filled, result.query_ids, shares)
        per_query[run.name] = result.per_query
    report(len(links) + 1, steps, "Comparing runs" if len(links) > 1 else "Saving", milestone=True)
    if len(links) > 1:
        baseline = links[0].run.name
        others = {link.run.name: {m: per_query[link.run.name][m] for m in evaluation.measures} for link in links[1:]}
        compared = compare_many({m: per_query[baseline][m] for m in evaluation.measures}, others,
                                resamples=evaluation.resamples, seed=evaluation.seed)
        results["baseline"] = baseline
        results["comparisons"] = {name: [c.as_dict() for c in comparisons] for name, comparisons in compared.items()}
    if evaluation.fill_judge is not None:
        results["fill"] = {"judge": evaluation.fill_judge.name, "labels": len(filled), "human_labels": len(qrels) - len(filled),
                           "share": len(filled) / len(qrels) if len(qrels) else None, "gate": gate}
    name = store_per_query(evaluation, pd.concat(frames, ignore_index=True))
    evaluation.guidelines_number = evaluation.list_version.guidelines_number if evaluation.list_version else round.guidelines.number
    evaluation.labels_sha256, evaluation.n_labels = digest, len(qrels)
    evaluation.results, evaluation.per_query_file = jsonable(results), name
    evaluation.state, evaluation.finished_at = Evaluation.State.DONE, timezone.now()
    evaluation.seconds = time.perf_counter() - started
    evaluation.save()
    report(steps, steps, "Done")
    return evaluation


def judge_labels(run: StoredRun, filled: dict, query_ids: list[str], shares: dict[str, str]) -> dict:
    """How many of the run's documents were labelled by the judge, at each depth of `shares` (its top k, or the
    whole ranking), over the evaluated queries: ``total`` by depth, and ``queries`` by depth and query (queries
    with none left out)."""
    table = load_run_table(run, columns=["query_id", "doc_id", "rank"]).to_pandas()
    table = table[table["query_id"].isin(set(query_ids))]
    pairs = pd.MultiIndex.from_tuples(list(filled), names=["query_id", "doc_id"]) if filled else None
    marked = table[table.set_index(["query_id", "doc_id"]).index.isin(pairs)] if pairs is not None else table.iloc[:0]
    total, by_query = {}, {}
    for key in shares:
        within = marked if key == WHOLE_RANKING_KEY else marked[marked["rank"] <= int(key)]
        counts = within.groupby("query_id").size()
        total[key] = int(counts.sum())
        by_query[key] = {str(query_id): int(n) for query_id, n in counts.items() if n}
    return {"total": total, "queries": by_query}


def traffic_weights(query_ids, queries: dict) -> dict[str, float]:
    """The traffic weight of each of `query_ids` that has one (`queries`: each query's fields by its id)."""
    return {qid: queries[qid]["weight"] for qid in query_ids if qid in queries and queries[qid]["weight"] is not None}


def query_groups(query_ids, queries: dict, key: str) -> list[tuple[str, list[str]]]:
    """`query_ids` grouped by their `key` ("tier" or "segment") in `queries`, by value; a query without one is in no group."""
    groups: dict[str, list[str]] = {}
    for qid in query_ids:
        value = (queries.get(qid) or {}).get(key) or ""
        if value:
            groups.setdefault(value, []).append(qid)
    return sorted(groups.items())


def _run_results(run: StoredRun, result: EngineEvaluation, measures: list[str], queries: dict, unjudged: EngineEvaluation,
                 shares: dict[str, str]) -> dict:
    """A run's aggregates: plain and traffic-weighted means, by tier and by segment, each with its unjudged
    shares (`shares`, scored in `unjudged`)."""
    evaluated = result.query_ids
    weights = traffic_weights(evaluated, queries)
    weighted, weighted_reason = None, ""
    if evaluated and len(weights) == len(evaluated):
        weighted = _pick(result.aggregate_over(weights=weights), measures)
    else:
        weighted_reason = f"{len(evaluated) - len(weights)} of {len(evaluated)} evaluated queries have no traffic weight"
    by = {}
    for key in ("tier", "segment"):
        by[key] = {}
        for value, ids in query_groups(evaluated, queries, key):
            means = result.aggregate_over(ids)
            there = means if unjudged is result else unjudged.aggregate_over(ids)
            by[key][value] = {"queries": len(ids), "mean": _pick(means, measures), "unjudged": _shares(there, shares)}
    overall = _shares(unjudged.aggregate, shares)
    for key, name in shares.items():
        overall[key]["queries_over_20"] = int(np.sum(unjudged.values[name] > WARN_UNJUDGED))
    return {"run": run.name, "run_uuid": str(run.uuid), "system": run.system, "sha256": run.sha256, "queries": len(evaluated),
            "mean": _pick(result.aggregate, measures), "weighted": weighted, "weighted_reason": weighted_reason,
            "by_tier": by["tier"], "by_segment": by["segment"], "unjudged": overall}


def query_coverage(evaluation: Evaluation) -> dict:
    """What the scores were computed over: the queries scored (per run), those with labels and those in the
    round's query set; `under_half` when fewer than half the set's queries have labels. Evaluations stored
    before the labelled count was kept have `labelled` None."""
    query_set = evaluation.round.pool.query_set
    stored = evaluation.results.get("queries") or {}
    in_set = stored.get("in_set", query_set.queries.count())
    labelled = stored.get("labelled")
    scored = {row["run"]: row["queries"] for row in evaluation.results.get("runs", [])}
    counts = sorted(set(scored.values()))
    under_half = labelled is not None and labelled * 2 < in_set
    return {"set": query_set.name, "in_set": in_set, "labelled": labelled, "scored": scored,
            "judge_filled": evaluation.fill_judge_id is not None,
            "scored_text": "–" if not counts else f"{counts[0]:,}" if len(counts) == 1 else f"{counts[0]:,} to {counts[-1]:,}",
            "warning": f"Only {labelled:,} of the {in_set:,} queries in the set have labels: these scores describe those "
                       f"queries, not the whole set. Grade more of the round before reading them as the set's." if under_half else ""}


def coverage_lines(evaluation: Evaluation) -> list[str]:
    """The coverage as the commands print it: one line, and the warning when under half are labelled."""
    coverage = query_coverage(evaluation)
    labelled = "an unrecorded number" if coverage["labelled"] is None else f"{coverage['labelled']:,}"
    line = (f"Queries scored: {coverage['scored_text']}, of {labelled} with labels, of {coverage['in_set']:,} in "
            f"the query set {coverage['set']!r}")
    return [line] + ([f"Warning: {coverage['warning']}"] if coverage["warning"] else [])


def _shares(aggregate: dict, shares: dict[str, str]) -> dict:
    return {key: {"share": aggregate[name], "level": level_of(aggregate[name])} for key, name in shares.items()}


def level_of(share: float | None) -> str:
    """How far to trust a run's scores given its unjudged share at a cutoff."""
    if share is None or share != share:
        return ""
    if share > STALE_UNJUDGED:
        return "stale"
    return "warn" if share > WARN_UNJUDGED else "ok"


def _pick(aggregate: dict, measures: list[str]) -> dict:
    return {m: aggregate[m] for m in measures}


def _long_frame(run_name: str, result: EngineEvaluation, skip: Iterable[str] = ()) -> pd.DataFrame:
    measures = [m for m in result.measures if m not in skip]
    n = len(result.query_ids)
    return pd.DataFrame({
        "run": pd.Categorical([run_name] * (n * len(measures))),
        "query_id": np.tile(np.array(result.query_ids, dtype=object), len(measures)),
        "measure": np.repeat(np.array(measures, dtype=object), n),
        "value": np.concatenate([result.values[m] for m in measures]) if measures else np.zeros(0),
    })


def store_per_query(evaluation: Evaluation, frame: pd.DataFrame) -> str:
    with tempfile.TemporaryFile() as parquet:
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), parquet, compression="zstd")
        parquet.seek(0)
        return default_storage.save(f"evaluations/{evaluation.project.slug}/{evaluation.uuid.hex}.parquet", File(parquet))


def per_query_frame(evaluation: Evaluation, measure: str | None = None) -> pd.DataFrame:
    """Per-query values, one row per query, a column per (run, measure) or, with `measure`, per run."""
    if not evaluation.per_query_file:
        return pd.DataFrame()
    with open_stored(evaluation.per_query_file) as handle:
        table = pq.read_table(handle, filters=[("measure", "=", measure)] if measure else None)
    frame = table.to_pandas()
    if measure:
        return frame.pivot(index="query_id", columns="run", values="value")
    return frame.pivot_table(index="query_id", columns=["run", "measure"], values="value", observed=True)


def trec_text(evaluation: Evaluation, run_name: str) -> str:
    """One run's results as ``trec_eval -q`` prints them (trec_eval's measure names), written by the engine
    from the stored per-query values and aggregates."""
    frame = per_query_frame(evaluation)[run_name]
    summary = next(row for row in evaluation.results["runs"] if row["run"] == run_name)["mean"]
    measures = [parse_measure(name) for name in evaluation.measures]
    result = EngineEvaluation(measures, [str(q) for q in frame.index], {m.canonical: frame[m.canonical].to_numpy() for m in measures},
                              {m.canonical: float("nan") if summary[m.canonical] is None else summary[m.canonical] for m in measures})
    return result.to_trec_text(per_query=True, run_id=run_name)


@contextmanager
def failed_on_error(found) -> Iterator[None]:
    """Whatever goes wrong inside marks `found` (an evaluation of any kind, or an estimate) failed, then goes on
    (the job fails with it)."""
    try:
        yield
    except Exception:
        type(found).objects.filter(pk=found.pk).update(state=found.State.FAILED)
        raise


@job_kind("evaluate_runs", "Evaluate runs")
def evaluate_runs_job(job: Job, progress: Progress) -> dict:
    evaluation = Evaluation.objects.select_related("round__guidelines", "round__pool", "project").get(uuid=job.params["evaluation"])
    with failed_on_error(evaluation):
        run_evaluation(evaluation, progress)
    return {"runs": len(evaluation.results["runs"]), "labels": evaluation.n_labels,
            "seconds": round(evaluation.seconds, 2), "link": evaluation.get_absolute_url()}


# ------------------------------------------------------------------------------------- unjudged pairs


def unjudged_pairs(evaluation: Evaluation, run: StoredRun, k: int) -> pd.DataFrame:
    """The run's top-k documents without a label in the evaluation's round: query_id, doc_id, rank."""
    table = load_run_table(run, columns=["query_id", "doc_id", "rank"], filters=[("rank", "<=", k)]).to_pandas()
    labelled = pd.DataFrame([(f.query_id, f.doc_id) for f in judgment_files.final_labels(evaluation.round, evaluation.consensus_rule)],
                            columns=["query_id", "doc_id"])
    known = set(evaluation.round.pool.query_set.queries.values_list("query_id", flat=True))
    table = table[table["query_id"].isin(known)]
    merged = table.merge(labelled, on=["query_id", "doc_id"], how="left", indicator=True)
    return merged[merged["_merge"] == "left_only"][["query_id", "doc_id", "rank"]].reset_index(drop=True)


@transaction.atomic
def queue_unjudged(evaluation: Evaluation, run: StoredRun, k: int, *, into: Round | None = None, user=None) -> tuple[Round, int]:
    """Send the run's unjudged top-k pairs to raters: into `into` (its pool gains them and the round
    takes them in) or, without it, into a new draft round over a new pool of just those pairs. ActionRefused
    (nothing changed) when there are none to start a new round with, or `into` cannot take them."""
    missing = unjudged_pairs(evaluation, run, k)
    if into is None:
        if missing.empty:
            raise ActionRefused(f"The top {k} of {run.name} has no unjudged pairs in the round “{evaluation.round.name}”: "
                                "there is nothing to start a new round with.")
        source = evaluation.round
        name = f"Unjudged top {k} of {run.name}"
        pool = Pool.objects.create(project=source.project, name=first_free(source.project.pools, name), query_set=source.pool.query_set,
                                   depth=k, strategy=source.pool.strategy, created_by=user)
        added = pools.add_pairs(pool, run, missing)
        target = rounds.create_round(source.project, name=first_free(source.project.rounds, name), pool=pool,
                                     guidelines=source.project.guideline_versions.first(), scale=source.grading_scale,
                                     raters=list(source.raters.all()), user=user, seed=source.seed,
                                     raters_per_pair=source.raters_per_pair, overlap_share=source.overlap_share)
        return target, added
    added = pools.add_pairs(into.pool, run, missing)
    if into.status != Round.Status.DRAFT:
        rounds.add_pool_pairs(into)
    return into, added


def evaluated_measures(round: Round) -> list[str]:
    """Every measure some finished evaluation of the round scored, in the order they were first asked for."""
    done = Evaluation.objects.filter(round=round, state=Evaluation.State.DONE).order_by("created_at")
    return list(dict.fromkeys(measure for measures in done.values_list("measures", flat=True) for measure in measures))


RATERS_ONLY, WITH_JUDGE_FILLED = "raters", "all"  # the leaderboard's `labels` choice
LEADERBOARD_LABELS = {RATERS_ONLY: "Raters' labels only", WITH_JUDGE_FILLED: "Include judge-filled evaluations"}


def leaderboard(project, round: Round, measure: str, labels: str = RATERS_ONLY) -> list[dict]:
    """Every run evaluated on the round (its latest evaluation with the measure), best first, with its
    unjudged share at the measure's cutoff (over the whole ranking for a measure without one). With `labels`
    RATERS_ONLY (the default), only evaluations on the raters' labels count; WITH_JUDGE_FILLED counts those an
    automatic judge filled too, each row with its label source and how many of the run's documents at the
    measure's depth carry the judge's label."""
    if labels not in LEADERBOARD_LABELS:
        raise ValueError(f"unknown leaderboard labels {labels!r}; choose one of {', '.join(LEADERBOARD_LABELS)}")
    found = Evaluation.objects.filter(project=project, round=round, state=Evaluation.State.DONE).select_related("fill_judge")
    if labels == RATERS_ONLY:
        found = found.filter(fill_judge__isnull=True)
    depth = None
    best: dict[str, dict] = {}
    for evaluation in found.order_by("created_at"):
        if measure not in evaluation.measures:
            continue
        depth = depth or unjudged_cutoff(measure)
        for row in evaluation.results.get("runs", []):
            best[row["run"]] = {"run": row["run"], "system": row["system"], "value": row["mean"].get(measure), "queries": row["queries"],
                                "weighted": (row["weighted"] or {}).get(measure), "evaluation": evaluation,
                                "label_source": evaluation.label_source, "unjudged": row["unjudged"].get(depth),
                                "judge_labelled": (row.get("judge_labels") or {}).get("total", {}).get(depth)}
    return sorted(best.values(), key=lambda r: (r["value"] is None, -(r["value"] or 0), r["run"]))


def judge_filled_only(project, round: Round, measure: str) -> list[str]:
    """The runs that only judge-filled evaluations scored `measure` on the round: a raters-only leaderboard
    leaves them out."""
    raters = {row["run"] for row in leaderboard(project, round, measure)}
    return sorted({row["run"] for row in leaderboard(project, round, measure, WITH_JUDGE_FILLED)} - raters)

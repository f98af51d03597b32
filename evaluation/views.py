"""Evaluations in the browser: start one, read its scores, compare runs, follow a query to its ranked
list, send unjudged documents to raters, and the leaderboard. Leads and viewers only: raters never see
scores, which would bias their grading."""

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.text import slugify
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HTMX_STOP_POLLING

from judgments import access
from judgments.forms import errors_text, page_of, query_params
from judgments.lib import charts
from judgments.lib.fileformats import csv_chunks
from judgments.models import Job, Round
from judgments.ops import judgment_files
from judgments.ops.actions import ActionRefused
from judgments.ops.imports import load_run_table
from judgments.ops.jobs import latest_job
from judgments.views import downloads

from . import evaluations
from .comparisons import SIGNIFICANCE_WORDS, covered, with_verdicts
from .forms import (ComparisonParams, EvaluationForm, LeaderboardParams, NewEvaluationParams, QueueUnjudgedForm,
                    RankedListParams, ResultsParams)
from .models import Evaluation

PAGE = 100


@require_GET
def evaluations_list(request: HttpRequest, slug: str) -> TemplateResponse:
    project, membership = access.project_for_user(request.user, slug, "can_read_reports")
    context = {"project": project, "membership": membership,
               "evaluations": project.evaluations.select_related("round", "fill_judge").prefetch_related("runs")}
    return TemplateResponse(request, "evaluation/evaluations.html", context)


@require_http_methods(["GET", "POST"])
def evaluation_create(request: HttpRequest, slug: str) -> HttpResponse:
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    chosen = query_params(NewEvaluationParams(request.GET, project=project))["round"]
    form = EvaluationForm(request.POST or None, project=project, initial={"round": chosen})
    return start_page(request, form, lambda data: evaluations.create_evaluation(
        data["round"], data["runs"], measures=data["measures"], user=request.user, consensus_rule=data["consensus_rule"] or None,
        relevance_level=data["relevance_level"], all_queries=data["all_queries"], judged_only=data["judged_only"],
        max_docs=data["max_docs"], fill_judge=data["fill_judge"], list_version=data["list_version"]),
        "evaluation/evaluation_form.html", project=project, membership=membership)


def start_page(request: HttpRequest, form, start: Callable[[dict], Any], template: str, **context) -> HttpResponse:
    """The form that starts an evaluation (of runs, answer runs, a judge alone) or an estimate: posted and valid,
    `start(cleaned_data)` and on to what it made; refused, the form again with the refusal as its error, and the
    refusal's `link` (the step that would let it start) where it has one."""
    if request.method == "POST" and form.is_valid():
        try:
            return redirect(start(form.cleaned_data))
        except evaluations.EvaluationRefused as problem:
            form.add_error(None, str(problem))
            if hasattr(problem, "link"):
                context["link"] = problem.link
    return TemplateResponse(request, template, context | {"form": form})


def _job_of(evaluation: Evaluation) -> Job | None:
    return latest_job("evaluate_runs", "evaluation", evaluation.uuid)


def job_page(request: HttpRequest, found, membership, job: Job | None, template: str, *, results: Callable[[], dict],
             target: str = "evaluation-body", **context) -> TemplateResponse:
    """The page of an evaluation (of runs, answer runs, a judge alone) or an estimate that a job fills: `results()`
    once `found` is done; while `job` runs, its progress (each of the context's `runs`, where it has them), polled
    (htmx, the `target` region of `template`) until the results replace it."""
    polling = found.state != found.State.DONE and job is not None and not job.is_finished
    context |= {"project": found.project, "membership": membership, "job": job, "polling": polling,
                "run_states": _run_states(job, context["runs"]) if polling and "runs" in context else []}
    if found.state == found.State.DONE:
        context.update(results())
    if request.htmx.target == target:
        return TemplateResponse(request, f"{template}#body", context, status=200 if polling else HTMX_STOP_POLLING)
    return TemplateResponse(request, template, context)


@require_GET
def evaluation(request: HttpRequest, slug: str, evaluation_uuid: UUID) -> TemplateResponse:
    """An evaluation's scores; while its job runs, each run's progress, polled (htmx) until the scores replace it."""
    found, membership = access.evaluation_for_user(request.user, slug, evaluation_uuid)

    def results() -> dict:
        queue = {"queue_form": QueueUnjudgedForm(evaluation=found)} if membership.can_manage else {}
        return _results(request, found) | queue

    return job_page(request, found, membership, _job_of(found), "evaluation/evaluation.html", results=results,
                    evaluation=found, runs=found.ordered_runs())


def _run_states(job: Job, runs: list) -> list[tuple]:
    """Each run with "scored", "scoring" or "waiting": the job reports step i while it scores the i-th run."""
    step = job.progress_done if job.state == Job.State.RUNNING else 0
    return [(run, "scored" if step > i else "scoring" if step == i else "waiting") for i, run in enumerate(runs, start=1)]


def _results(request: HttpRequest, found: Evaluation) -> dict:
    results = found.results
    params = query_params(ResultsParams(request.GET, evaluation=found))
    runs = results["runs"]
    names, measure = [row["run"] for row in runs], params["measure"]
    key = evaluations.unjudged_cutoff(measure)
    aggregate = [{"measure": m, "cells": [(row["mean"][m], (row["weighted"] or {}).get(m), row["unjudged"].get(evaluations.unjudged_cutoff(m)))
                                          for row in runs]} for m in found.measures]
    tiers = sorted({tier for row in runs for tier in row["by_tier"]}, key=_tier_order)
    segments = sorted({segment for row in runs for segment in row["by_segment"]})
    by_tier = [{"name": tier, "cells": [_group_cell(row["by_tier"].get(tier), measure, key) for row in runs]} for tier in tiers]
    by_segment = [{"name": segment, "cells": [_group_cell(row["by_segment"].get(segment), measure, key) for row in runs]} for segment in segments]
    depths = evaluations.in_depth_order(runs[0]["unjudged"])
    return {"names": names, "measure": measure, "aggregate": aggregate, "by_tier": by_tier, "by_segment": by_segment,
            "any_weighted": any(row["weighted"] for row in runs), "per_query": _per_query_page(request, found, params, names),
            "tier_chart": charts.grouped_bars({t["name"]: {n: (c or {}).get("value") for n, c in zip(names, t["cells"])}
                                              for t in by_tier}, names) if by_tier else None,
            "measure_depth": evaluations.depth_label(key), "unjudged_depths": [evaluations.depth_label(depth) for depth in depths],
            "unjudged_rows": [{"run": row["run"], "cells": [row["unjudged"].get(depth) for depth in depths]} for row in runs],
            "unjudged_warnings": _unjudged_warnings(runs), "coverage": evaluations.query_coverage(found),
            "judge_rows": [{"run": row["run"], "cells": [row["judge_labels"]["total"].get(depth) for depth in depths]}
                           for row in runs if "judge_labels" in row],
            "unjudged_over_k": any(evaluations.WHOLE_RANKING_KEY not in row["unjudged"] for row in runs)}


def _group_cell(cell: dict | None, measure: str, key: str) -> dict | None:
    """A tier's or segment's mean of `measure` with its queries and its unjudged share at the measure's depth."""
    return cell and {"queries": cell["queries"], "value": cell["mean"].get(measure), "unjudged": cell.get("unjudged", {}).get(key)}


def _unjudged_warnings(runs: list[dict]) -> list[dict]:
    """Where the unjudged share makes the list stale (over 30%) and where it asks for care (over 20%), as phrases
    ("at @50, @100 and over the whole ranking"), with the runs they hold for: runs alike share one warning."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for row in runs:
        depths = evaluations.in_depth_order(row["unjudged"])
        where = tuple(_where([depth for depth in depths if row["unjudged"][depth]["level"] == level]) for level in ("stale", "warn"))
        if any(where):
            grouped.setdefault(where, []).append(row["run"])
    return [{"runs": ", ".join(names), "stale": stale, "warn": warn} for (stale, warn), names in grouped.items()]


def _where(depths: list[str]) -> str:
    places = [f"@{depth}" for depth in depths if depth != evaluations.WHOLE_RANKING_KEY]
    places += ["over the whole ranking"] if evaluations.WHOLE_RANKING_KEY in depths else []
    if not places:
        return ""
    listed = places[0] if len(places) == 1 else ", ".join(places[:-1]) + " and " + places[-1]
    return listed if listed.startswith("over") else "at " + listed


def _tier_order(tier: str) -> tuple:
    return ({"head": 0, "torso": 1, "tail": 2}.get(tier, 3), tier)


def _per_query_page(request: HttpRequest, found: Evaluation, params: dict, names: list[str]):
    measure = params["measure"]
    frame = evaluations.per_query_frame(found, measure)
    unjudged = evaluations.per_query_frame(found, evaluations.share_measure(evaluations.unjudged_cutoff(measure)))
    queries = {q["query_id"]: q for q in found.round.pool.query_set.queries.values("query_id", "text", "tier", "segment", "weight")}
    depth = evaluations.unjudged_cutoff(measure)
    judged_by_machine = {row["run"]: row["judge_labels"]["queries"].get(depth, {}) for row in found.results["runs"] if "judge_labels" in row}
    rows = []
    for query_id, values in frame.iterrows():
        if (fields := query_fields(queries, query_id, params)) is None:
            continue
        shares = unjudged.loc[query_id] if query_id in unjudged.index else {}
        rows.append({"query_id": query_id, **fields, "values": [values.get(name) for name in names],
                     "cells": [(values.get(name), shares.get(name), evaluations.level_of(shares.get(name)),
                                judged_by_machine.get(name, {}).get(query_id, 0)) for name in names]})
    sort_rows(rows, names, params["sort"])
    return page_of(request, rows, PAGE)


def query_fields(queries: dict, query_id: str, params: dict) -> dict | None:
    """A per-query row's text, tier, segment and weight of the query (`queries`: their fields by id), or None when the
    query is not in the tier and segment `params` ask for."""
    info = queries.get(query_id, {})
    if (params["tier"] and info.get("tier") != params["tier"]) or (params["segment"] and info.get("segment") != params["segment"]):
        return None
    return {"text": info.get("text", ""), "tier": info.get("tier", ""), "segment": info.get("segment", ""),
            "weight": info.get("weight")}


def sort_rows(rows: list[dict], names: list[str], sort: str) -> None:
    """Per-query rows by the values of the run `sort` names, the queries it has no value for last; unsorted without one."""
    if sort:
        position = names.index(sort)
        rows.sort(key=lambda r: (r["values"][position] is None, r["values"][position]))


@require_GET
def comparison(request: HttpRequest, slug: str, evaluation_uuid: UUID) -> TemplateResponse:
    found, membership = access.evaluation_for_user(request.user, slug, evaluation_uuid)
    if found.state != Evaluation.State.DONE or "comparisons" not in found.results:
        raise Http404("This evaluation has no comparison: it needs two runs or more, scored")
    params = query_params(ComparisonParams(request.GET, evaluation=found))
    baseline = found.results["baseline"]
    shares = {row["run"]: row["unjudged"] for row in found.results["runs"]}
    comparisons = {name: [c | {"unjudged": shares[name].get(evaluations.unjudged_cutoff(c["measure"])),
                               "unjudged_baseline": shares[baseline].get(evaluations.unjudged_cutoff(c["measure"]))} for c in rows]
                   for name, rows in comparisons_of(found).items()}
    context = comparison_context(found, membership, comparisons, params["measure"], params["run"])
    context["coverage"] = evaluations.query_coverage(found)
    return TemplateResponse(request, "evaluation/comparison.html", context)


def comparison_context(found, membership, comparisons: dict[str, list[dict]], measure: str, other: str) -> dict:
    """What the comparison pages of evaluations and answer evaluations share: the runs' names, the baseline, each run's
    `comparisons` with what they cover, and the chart of `other`'s per-query differences from the baseline on `measure`."""
    frame = evaluations.per_query_frame(found, measure)
    baseline = found.results["baseline"]
    differences = (frame[other].fillna(0) - frame[baseline].fillna(0)).to_dict()
    return {"project": found.project, "membership": membership, "evaluation": found, "baseline": baseline,
            "names": [row["run"] for row in found.results["runs"]], "comparisons": comparisons, "measure": measure, "other": other,
            "covered": {name: covered(rows) for name, rows in comparisons.items()},
            "difference_chart": charts.sorted_differences(differences)}


@require_GET
def ranked_list(request: HttpRequest, slug: str, evaluation_uuid: UUID, query_id: str) -> TemplateResponse:
    """A run's ranking for one query with the round's labels, unjudged documents marked, each document by
    its title (whole on demand)."""
    found, membership = access.evaluation_for_user(request.user, slug, evaluation_uuid)
    runs = found.ordered_runs()
    params = query_params(RankedListParams(request.GET, runs=runs))
    run, k = params["run"], params["k"]
    table = load_run_table(run, columns=["query_id", "doc_id", "rank", "score"], filters=[("query_id", "=", query_id), ("rank", "<=", k)])
    labels = {(f.query_id, f.doc_id): f for f in judgment_files.final_labels(found.round, found.consensus_rule, query_id=query_id)}
    query = found.round.pool.query_set.queries.filter(query_id=query_id).first()
    if query is None:
        raise Http404("No such query in the round's query set")
    ranked = sorted(zip(table["doc_id"].to_pylist(), table["rank"].to_pylist(), table["score"].to_pylist()), key=lambda r: r[1])
    documents = {d.doc_id: d for d in found.project.documents.corpus().filter(doc_id__in=[doc for doc, _, _ in ranked])}
    rows = [{"rank": rank, "doc_id": doc, "document": documents.get(doc), "score": score, "label": labels.get((query_id, doc))}
            for doc, rank, score in ranked]
    context = {"project": found.project, "membership": membership, "evaluation": found, "query": query, "run": run, "runs": runs,
               "rows": rows, "k": k, "unjudged": sum(1 for r in rows if r["label"] is None)}
    return TemplateResponse(request, "evaluation/ranked_list.html", context)


@require_POST
def queue_unjudged(request: HttpRequest, slug: str, evaluation_uuid: UUID) -> HttpResponse:
    found, _membership = access.evaluation_for_user(request.user, slug, evaluation_uuid, "can_manage")
    form = QueueUnjudgedForm(request.POST, evaluation=found)
    if not form.is_valid():
        messages.error(request, "Nothing queued: " + errors_text(form))
        return redirect(found)
    data = form.cleaned_data
    try:
        target, added = evaluations.queue_unjudged(found, data["run"], data["k"], into=data["into"], user=request.user)
    except ActionRefused as refusal:
        messages.error(request, f"Nothing queued: {refusal}")
        return redirect(found)
    messages.success(request, f"{added} unjudged pair{'s' * (added != 1)} from the top {data['k']} of {data['run'].name} "
                              f"queued in round “{target.name}”" + (" (a draft: open it to start grading)." if target.status == Round.Status.DRAFT else "."))
    return redirect(target)


@require_GET
def download(request: HttpRequest, slug: str, evaluation_uuid: UUID, what: str, fmt: str) -> HttpResponse:
    """aggregate.csv|json, per-query.csv|json, breakdown.csv (tiers, segments and unjudged shares, one long table),
    comparison.csv|json (UltraRAG fields), trec-<run name>.txt (trec_eval -q). Every CSV and JSON says where the
    labels came from (`labels_source`, `judge`, `judge_label_share`), and a judge-filled evaluation's file names say
    so too."""
    found, _membership = access.evaluation_for_user(request.user, slug, evaluation_uuid)
    if found.state != Evaluation.State.DONE:
        raise Http404("The evaluation has not finished")
    source = found.label_source
    stem = f"{judgment_files.file_stem(found.round)}_evaluation-{found.uuid.hex[:8]}"
    if source.filled:
        stem += f"_judge-filled-{slugify(source.judge) or 'judge'}"
    fields = {name: source.as_dict()[name] for name in SOURCE_FIELDS}
    if what.startswith("trec-") and fmt == "txt":
        name = what[5:]
        if name not in [row["run"] for row in found.results["runs"]]:
            raise Http404("No such run in this evaluation")
        return downloads.download(evaluations.trec_text(found, name), f"{stem}_{what}.txt", "text/plain")
    if (what, fmt) == ("aggregate", "json"):
        return downloads.download(json.dumps(_provenance(found) | found.results, indent=2), f"{stem}_aggregate.json", "application/json")
    if (what, fmt) == ("aggregate", "csv"):
        rows = [["run", "measure", "mean", "weighted_mean", "queries", *fields]] + [
            [row["run"], m, row["mean"][m], (row["weighted"] or {}).get(m, ""), row["queries"], *fields.values()]
            for row in found.results["runs"] for m in found.measures]
        return downloads.download(_csv(rows), f"{stem}_aggregate.csv", "text/csv")
    if what == "per-query" and fmt in ("csv", "json"):
        frame = evaluations.per_query_frame(found)
        frame.columns = [f"{run} {measure}" for run, measure in frame.columns]
        frame = frame.reset_index()
        for name, value in fields.items():
            frame[name] = value
        if fmt == "json":
            return downloads.download(frame.to_json(orient="records", indent=1), f"{stem}_per-query.json", "application/json")
        frame = frame.astype(object)
        rows = [list(frame.columns), *frame.where(frame.notna(), None).itertuples(index=False)]
        return downloads.download(_csv(rows), f"{stem}_per-query.csv", "text/csv")
    if (what, fmt) == ("breakdown", "csv"):
        return downloads.download(_csv(breakdown_rows(found, fields)), f"{stem}_breakdown.csv", "text/csv")
    return comparison_download(found, what, fmt, stem, fields)


SOURCE_FIELDS = ("labels_source", "judge", "judge_label_share")  # of LabelSource.as_dict, in every CSV row
BREAKDOWN_COLUMNS = ["run", "group", "group_value", "queries", "measure", "value", "queries_over_20_percent"]


def breakdown_rows(found: Evaluation, fields: dict) -> list[list]:
    """The tiers, segments and unjudged shares as one long table, one number per row: each run's mean of every
    measure and its unjudged share at every depth (the engine's UnjudgedShare@k, UnjudgedShare for the whole
    ranking) over all its queries (`group` "all"), each tier and each segment, with the queries it covers; the
    overall shares with how many queries are over 20%. `fields` (the label source) end every row."""
    rows = [BREAKDOWN_COLUMNS + list(fields)]
    for row in found.results["runs"]:
        groups = [("all", "", row["queries"], row["mean"], row["unjudged"])]
        groups += [(kind, value, cell["queries"], cell["mean"], cell.get("unjudged") or {})
                   for kind in ("tier", "segment") for value, cell in row[f"by_{kind}"].items()]
        for group, value, queries, means, shares in groups:
            body = [[m, means.get(m), ""] for m in found.measures]
            body += [[evaluations.share_measure(key), shares[key]["share"],
                      shares[key].get("queries_over_20", "") if group == "all" else ""] for key in evaluations.in_depth_order(shares)]
            rows += [[row["run"], group, value, queries, *cells, *fields.values()] for cells in body]
    return rows


COMPARISON_FIELDS = ["measure", "A_mean", "B_mean", "diff", "p_value", "t_p_value", "p_corrected", "ci_low", "ci_high",
                     "significant", "significant_corrected", "wins", "ties", "losses", "n_queries", "missing_a", "missing_b"]


def comparisons_of(found) -> dict[str, list[dict]]:
    """An evaluation's (or answer evaluation's) stored comparisons, each with its three-state verdict."""
    return with_verdicts(found.results["comparisons"], resamples=found.resamples)


def comparison_download(found, what: str, fmt: str, stem: str, extra: dict | None = None) -> HttpResponse:
    """The comparison of an evaluation's runs (or answer runs) with its baseline as CSV or JSON, each row with
    its verdict ("significant", "not significant" or "not enough evidence", and why) and `extra` fields (columns
    of every CSV row); 404 for any other download, or when the evaluation compared nothing."""
    results = found.results
    if what != "comparison" or "comparisons" not in results:
        raise Http404("No such download")
    compared = comparisons_of(found)
    extra = extra or {}
    if fmt == "csv":
        rows = [["run", "baseline", *COMPARISON_FIELDS, "verdict", "verdict_reasons", *extra]] + [
            [name, results["baseline"], *(c[f] for f in COMPARISON_FIELDS), SIGNIFICANCE_WORDS[c["verdict"]["state"]],
             " ".join(c["verdict"]["reasons"]), *extra.values()]
            for name, comparisons in compared.items() for c in comparisons]
        return downloads.download(_csv(rows), f"{stem}_comparison.csv", "text/csv")
    if fmt == "json":
        body = {**extra, "baseline": results["baseline"], "comparisons": compared}
        return downloads.download(json.dumps(body, indent=2), f"{stem}_comparison.json", "application/json")
    raise Http404("No such download")


def _provenance(found: Evaluation) -> dict:
    return {"round": found.round.name, "guidelines": found.guidelines_number, "consensus_rule": found.consensus_rule,
            "labels_sha256": found.labels_sha256, **found.label_source.as_dict(), "labels": found.n_labels,
            "options": {"-l": found.relevance_level, "-c": found.all_queries, "-J": found.judged_only, "-M": found.max_docs},
            "measures": found.measures, "runs": {link.run.name: link.sha256 for link in found.run_links.select_related("run")},
            "evaluated_at": found.finished_at.isoformat(timespec="milliseconds") if found.finished_at else None}


def _csv(rows) -> str:
    return "".join(csv_chunks(rows))


@require_GET
def leaderboard(request: HttpRequest, slug: str) -> TemplateResponse:
    project, membership = access.project_for_user(request.user, slug, "can_read_reports")
    rounds = project.rounds.exclude(status=Round.Status.DRAFT).exclude(pool__kind="answers").order_by("-created_at")  # runs rank documents
    params = query_params(LeaderboardParams(request.GET, rounds=rounds))
    chosen, measure, labels = params["round"], params["measure"], params["labels"]
    rows = evaluations.leaderboard(project, chosen, measure, labels) if chosen else []
    left_out = evaluations.judge_filled_only(project, chosen, measure) if chosen and labels == evaluations.RATERS_ONLY else []
    depth = evaluations.depth_label(evaluations.unjudged_cutoff(measure)) if rows else ""  # rows: a stored, hence parseable, measure
    evaluated = set(Round.objects.filter(pk__in=rounds, evaluations__state=Evaluation.State.DONE).values_list("pk", flat=True))
    context = {"project": project, "membership": membership, "rounds": [(r, r.pk in evaluated) for r in rounds], "chosen": chosen,
               "measure": measure, "measures": params["measures"], "measure_missing": params["measure_missing"], "rows": rows,
               "labels": labels, "label_choices": evaluations.LEADERBOARD_LABELS.items(),
               "raters_only": labels == evaluations.RATERS_ONLY,
               "left_out": left_out, "any_filled": any(row["label_source"].filled for row in rows),
               "other_labels_url": "?" + urlencode({**({"round": chosen.uuid} if chosen else {}), "measure": measure,
                                                    "labels": evaluations.WITH_JUDGE_FILLED if labels == evaluations.RATERS_ONLY
                                                    else evaluations.RATERS_ONLY}),
               "depth": depth, "url": reverse("evaluation:leaderboard", args=[slug]),
               "coverage": evaluations.query_coverage(max((r["evaluation"] for r in rows), key=lambda e: e.created_at)) if rows else None}
    return TemplateResponse(request, "evaluation/leaderboard.html", context)

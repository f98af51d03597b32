"""Answer evaluations in the browser: start one, read its scores with each answer beside its references,
compare answer runs, the leaderboard and downloads. Leads and viewers only, as for run evaluations: raters
never see scores. Their twin for ranked runs is `views.py`, whose helpers and templates these share."""

import json
from uuid import UUID

from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from judgments import access
from judgments.forms import page_of, query_params
from judgments.lib import charts
from judgments.models import Job, Pool
from judgments.ops.answers import load_answer_table
from judgments.ops.jobs import latest_job
from judgments.views import downloads

from . import answer_evaluations
from .evaluations import per_query_frame
from .forms import AnswerComparisonParams, AnswerEvaluationForm, AnswerLeaderboardParams, AnswerResultsParams
from .models import AnswerEvaluation
from .views import (PAGE, _csv, _tier_order, comparison_context, comparison_download, comparisons_of, job_page, query_fields,
                    sort_rows, start_page)


@require_GET
def answer_evaluations_list(request: HttpRequest, slug: str) -> TemplateResponse:
    project, membership = access.project_for_user(request.user, slug, "can_read_reports")
    context = {"project": project, "membership": membership,
               "evaluations": project.answer_evaluations.select_related("query_set").prefetch_related("answer_runs")}
    return TemplateResponse(request, "evaluation/answer_evaluations.html", context)


@require_http_methods(["GET", "POST"])
def answer_evaluation_create(request: HttpRequest, slug: str) -> HttpResponse:
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    form = AnswerEvaluationForm(request.POST or None, project=project)
    return start_page(request, form, lambda data: answer_evaluations.create_answer_evaluation(
        data["query_set"], data["runs"], measures=data["measures"], user=request.user, all_queries=data["all_queries"],
        tokenizer=data["tokenizer"]), "evaluation/evaluation_form.html", project=project, membership=membership,
        title="Evaluate answer runs")


def _job_of(evaluation: AnswerEvaluation) -> Job | None:
    return latest_job("evaluate_answers", "answer_evaluation", evaluation.uuid)


@require_GET
def answer_evaluation(request: HttpRequest, slug: str, answer_evaluation_uuid: UUID) -> TemplateResponse:
    """An answer evaluation's scores; while its job runs, each answer run's progress, polled (htmx)."""
    found, membership = access.answer_evaluation_for_user(request.user, slug, answer_evaluation_uuid)
    return job_page(request, found, membership, _job_of(found), "evaluation/answer_evaluation.html",
                    results=lambda: _results(request, found), evaluation=found, runs=found.ordered_runs())


def _results(request: HttpRequest, found: AnswerEvaluation) -> dict:
    runs = found.results["runs"]
    params = query_params(AnswerResultsParams(request.GET, evaluation=found))
    names, measure = [row["run"] for row in runs], params["measure"]
    aggregate = [{"measure": m, "cells": [(row["mean"].get(m), (row["weighted"] or {}).get(m)) for row in runs]} for m in found.measures]
    tiers = sorted({tier for row in runs for tier in row["by_tier"]}, key=_tier_order)
    segments = sorted({segment for row in runs for segment in row["by_segment"]})

    def cells(key: str, group: str) -> list:
        return [(lambda cell: cell and {"queries": cell["queries"], "value": cell["mean"].get(measure)})(row[key].get(group)) for row in runs]

    by_tier = [{"name": tier, "cells": cells("by_tier", tier)} for tier in tiers]
    by_segment = [{"name": segment, "cells": cells("by_segment", segment)} for segment in segments]
    return {"names": names, "measure": measure, "aggregate": aggregate, "by_tier": by_tier, "by_segment": by_segment,
            "any_weighted": any(row["weighted"] for row in runs), "shown_run": params["run"],
            "per_query": _per_query_page(request, found, params, names), "coverage": answer_evaluations.query_coverage(found),
            "tier_chart": charts.grouped_bars({t["name"]: {n: (c or {}).get("value") for n, c in zip(names, t["cells"])}
                                              for t in by_tier}, names) if by_tier else None}


def _per_query_page(request: HttpRequest, found: AnswerEvaluation, params: dict, names: list[str]):
    frame = per_query_frame(found, params["measure"])
    queries = {q["query_id"]: q for q in found.query_set.queries.values("query_id", "text", "tier", "segment", "weight")}
    columns = [frame[name].tolist() if name in frame.columns else [None] * len(frame) for name in names]
    rows = []
    for position, query_id in enumerate(frame.index):
        if (fields := query_fields(queries, query_id, params)) is not None:
            rows.append({"query_id": query_id, **fields, "values": [_number(column[position]) for column in columns]})
    sort_rows(rows, names, params["sort"])
    page = page_of(request, rows, PAGE)
    shown = next(run for run in found.ordered_runs() if run.name == params["run"])
    ids = [row["query_id"] for row in page]
    table = load_answer_table(shown, filters=[("query_id", "in", ids)]) if ids else None
    answers = dict(zip(table["query_id"].to_pylist(), table["answer"].to_pylist())) if table is not None else {}
    references = dict(found.query_set.queries.filter(query_id__in=ids).values_list("query_id", "references"))  # JSON: the page's only
    for row in page:
        row["references"] = references.get(row["query_id"]) or []
        row.update(answer_evaluations.answer_beside_references(answers.get(row["query_id"]), row["references"], found.tokenizer))
    return page


def _number(value) -> float | None:
    """A per-query value, None where the run has none (the pivot's NaN)."""
    return None if value is None or value != value else float(value)


@require_GET
def answer_comparison(request: HttpRequest, slug: str, answer_evaluation_uuid: UUID) -> TemplateResponse:
    found, membership = access.answer_evaluation_for_user(request.user, slug, answer_evaluation_uuid)
    if found.state != AnswerEvaluation.State.DONE or "comparisons" not in found.results:
        raise Http404("This answer evaluation has no comparison: it needs two answer runs or more, scored")
    params = query_params(AnswerComparisonParams(request.GET, evaluation=found))
    context = comparison_context(found, membership, comparisons_of(found), params["measure"], params["run"])
    context["coverage"] = answer_evaluations.query_coverage(found)
    return TemplateResponse(request, "evaluation/answer_comparison.html", context)


@require_GET
def answer_download(request: HttpRequest, slug: str, answer_evaluation_uuid: UUID, what: str, fmt: str) -> HttpResponse:
    """aggregate.csv|json, per-query.csv|json, breakdown.csv, comparison.csv|json."""
    found, _membership = access.answer_evaluation_for_user(request.user, slug, answer_evaluation_uuid)
    if found.state != AnswerEvaluation.State.DONE:
        raise Http404("The answer evaluation has not finished")
    stem = f"answer-evaluation-{found.uuid.hex[:8]}"
    runs = found.results["runs"]
    if (what, fmt) == ("aggregate", "json"):
        return downloads.download(json.dumps(_provenance(found) | found.results, indent=2), f"{stem}_aggregate.json", "application/json")
    if (what, fmt) == ("aggregate", "csv"):
        rows = [["run", "measure", "mean", "weighted_mean", "queries"]] + [
            [row["run"], m, row["mean"].get(m), (row["weighted"] or {}).get(m, ""), row["queries"]] for row in runs for m in found.measures]
        return downloads.download(_csv(rows), f"{stem}_aggregate.csv", "text/csv")
    if what == "per-query" and fmt in ("csv", "json"):
        frame = per_query_frame(found)
        frame.columns = [f"{run} {measure}" for run, measure in frame.columns]
        if fmt == "json":
            return downloads.download(frame.reset_index().to_json(orient="records", indent=1), f"{stem}_per-query.json", "application/json")
        frame = frame.reset_index().astype(object)
        rows = [list(frame.columns), *frame.where(frame.notna(), None).itertuples(index=False)]
        return downloads.download(_csv(rows), f"{stem}_per-query.csv", "text/csv")
    if (what, fmt) == ("breakdown", "csv"):
        rows = [["run", "group", "value", "queries"] + found.measures]
        for row in runs:
            for kind in ("tier", "segment"):
                rows += [[row["run"], kind, value, cell["queries"]] + [cell["mean"].get(m) for m in found.measures]
                         for value, cell in row[f"by_{kind}"].items()]
        return downloads.download(_csv(rows), f"{stem}_breakdown.csv", "text/csv")
    return comparison_download(found, what, fmt, stem)


def _provenance(found: AnswerEvaluation) -> dict:
    return {"query_set": found.query_set.name, "references_sha256": found.references_sha256, "queries_with_references": found.n_references,
            "options": {"-c": found.all_queries, "tokenizer": found.tokenizer, "resamples": found.resamples, "seed": found.seed},
            "measures": found.measures, "answer_runs": {link.run.name: link.sha256 for link in found.run_links.select_related("run")},
            "evaluated_at": found.finished_at.isoformat(timespec="milliseconds") if found.finished_at else None}


@require_GET
def answer_leaderboard(request: HttpRequest, slug: str) -> TemplateResponse:
    project, membership = access.project_for_user(request.user, slug, "can_read_reports")
    query_sets = project.query_sets.order_by("-created_at")
    params = query_params(AnswerLeaderboardParams(request.GET, query_sets=query_sets))
    chosen = params["query_set"]
    ranking = answer_evaluations.ranking(chosen, params["measure"], params["measures"])
    measure = ranking.measure
    rows = answer_evaluations.leaderboard(project, chosen, measure) if chosen else []
    evaluated = set(query_sets.filter(answer_evaluations__state=AnswerEvaluation.State.DONE).values_list("pk", flat=True))
    latest = max((r["evaluation"] for r in rows), key=lambda e: e.created_at) if rows else None
    # Only sets with answer evaluations are offered (and the one asked for): the others would rank nothing.
    offered = [s for s in query_sets if s.pk in evaluated or s == chosen]
    context = {"project": project, "membership": membership, "query_sets": [(s, s.pk in evaluated) for s in offered], "chosen": chosen,
               "measure": measure, "measures": params["measures"], "measure_missing": params["measure_missing"], "rows": rows,
               "ranking": ranking, "answer_rounds": _answer_rounds(chosen) if ranking.report is None else [],
               "caveats": answer_evaluations.leaderboard_caveats(rows),
               "url": reverse("evaluation:answer-leaderboard", args=[slug]),
               "coverage": answer_evaluations.query_coverage(latest) if latest else None}
    return TemplateResponse(request, "evaluation/answer_leaderboard.html", context)


def _answer_rounds(query_set) -> list:
    """The answer rounds over the set's answers, newest first: where a report on which metric agrees with
    the raters would come from."""
    if query_set is None:
        return []
    return list(query_set.project.rounds.filter(pool__query_set=query_set, pool__kind=Pool.Kind.ANSWERS).order_by("-created_at")[:5])

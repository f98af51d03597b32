"""Judge-only evaluations in the browser: start one, read its scores (always marked "judge-only (uncalibrated)"),
download them, and build the round that calibrates its judge. Leads and viewers read them; leads start and
calibrate; raters never see scores. Its twins are `views.py` (runs against labels) and `answer_views.py`."""

import json
from uuid import UUID

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from judgments import access
from judgments.views import downloads

from . import judge_only_evaluations
from .engine.judge_only import COULD_NOT_JUDGE_RULE, KIND, UNCALIBRATED
from .evaluations import EvaluationRefused
from .forms import JudgeOnlyEvaluationForm
from .models import JudgeOnlyEvaluation
from .views import _csv, job_page, start_page


@require_GET
def judge_only_list(request: HttpRequest, slug: str) -> TemplateResponse:
    project, membership = access.project_for_user(request.user, slug, "can_read_reports")
    context = {"project": project, "membership": membership, "kind": KIND, "note": UNCALIBRATED,
               "evaluations": project.judge_only_evaluations.select_related("query_set").prefetch_related("runs")}
    return TemplateResponse(request, "evaluation/judge_only_evaluations.html", context)


@require_http_methods(["GET", "POST"])
def judge_only_create(request: HttpRequest, slug: str) -> HttpResponse:
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    form = JudgeOnlyEvaluationForm(request.POST or None, project=project)
    return start_page(request, form, lambda data: judge_only_evaluations.create_judge_only_evaluation(
        data["query_set"], list(data["runs"]), judge_kind=data["judge"], judge_settings=data["settings"], ks=data["ks"],
        user=request.user), "evaluation/judge_only_form.html", project=project, membership=membership, note=UNCALIBRATED)


@require_GET
def judge_only_evaluation(request: HttpRequest, slug: str, evaluation_uuid: UUID) -> TemplateResponse:
    """The scores, marked uncalibrated, and the way to calibrate; while the job runs, its progress, polled (htmx)."""
    found, membership = access.judge_only_evaluation_for_user(request.user, slug, evaluation_uuid)
    return job_page(request, found, membership, judge_only_evaluations.job_of(found), "evaluation/judge_only_evaluation.html",
                    results=lambda: {"names": found.results.get("runs_order") or list(found.results["runs"]),
                                     "table": judge_only_evaluations.score_table(found),
                                     "judge_settings": json.dumps(found.results["judge"].get("settings", {}), sort_keys=True)},
                    evaluation=found, kind=KIND, note=UNCALIBRATED, rule=COULD_NOT_JUDGE_RULE)


@require_POST
def judge_only_calibrate(request: HttpRequest, slug: str, evaluation_uuid: UUID) -> HttpResponse:
    found, _membership = access.judge_only_evaluation_for_user(request.user, slug, evaluation_uuid, "can_manage")
    try:
        round = judge_only_evaluations.build_calibration_round(found, user=request.user)
    except EvaluationRefused as problem:
        messages.error(request, str(problem))
        return redirect(found)
    messages.success(request, f"Calibration round “{round.name}” made with the judge attached: add raters and open it, and once they "
                              "have graded, run the judge with “Calibrate” on its page.")
    return redirect(round)


@require_GET
def judge_only_download(request: HttpRequest, slug: str, evaluation_uuid: UUID, what: str, fmt: str) -> HttpResponse:
    """scores.json (everything, per query too), scores.csv (means), per-query.csv; each says the scores are uncalibrated."""
    found, _membership = access.judge_only_evaluation_for_user(request.user, slug, evaluation_uuid)
    if found.state != JudgeOnlyEvaluation.State.DONE:
        raise Http404("The judge-only evaluation has not finished")
    stem = f"judge-only-uncalibrated-{found.uuid.hex[:8]}"
    runs = found.results["runs"]
    names = found.results.get("runs_order") or list(runs)
    if (what, fmt) == ("scores", "json"):
        document = {**found.results, "query_set": found.query_set.name, "runs_sha256": {link.run.name: link.sha256 for link in found.run_links.select_related("run")},
                    "evaluated_at": found.finished_at.isoformat(timespec="milliseconds") if found.finished_at else None}
        return downloads.download(json.dumps(document, indent=2), f"{stem}.json", "application/json")
    if (what, fmt) == ("scores", "csv"):
        rows = [["scores", "run", "measure", "mean", "queries"]] + [
            [KIND, name, measure, runs[name]["mean"][measure], found.n_queries] for name in names for measure in found.results["measures"]]
        return downloads.download(_csv(rows), f"{stem}.csv", "text/csv")
    if (what, fmt) == ("per-query", "csv"):
        rows = [["scores", "run", "query_id", "measure", "value"]] + [
            [KIND, name, qid, measure, value] for name in names for measure, values in runs[name]["per_query"].items()
            for qid, value in values.items()]
        return downloads.download(_csv(rows), f"{stem}_per-query.csv", "text/csv")
    raise Http404("No such download")

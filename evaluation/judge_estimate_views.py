"""Estimates with a judge in the browser: start one, follow its job, read the prediction-powered estimates beside the
raters-only ones and the judge's own means (marked as the judge's), the comparisons' verdicts, and download them. Leads
and viewers read them; leads start them; raters never see them. Its twins are `views.py` (runs against raters' labels)
and `judge_only_views.py` (a judge alone)."""

import json
from uuid import UUID

from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_http_methods

from judgments import access
from judgments.views import downloads

from . import judge_estimates
from .forms import JudgeEstimateForm
from .models import JudgeEstimate
from .views import _csv, job_page, start_page


@require_GET
def judge_estimate_list(request: HttpRequest, slug: str) -> TemplateResponse:
    project, membership = access.project_for_user(request.user, slug, "can_read_reports")
    context = {"project": project, "membership": membership,
               "estimates": project.judge_estimates.select_related("round", "judge").prefetch_related("runs")}
    return TemplateResponse(request, "evaluation/judge_estimates.html", context)


@require_http_methods(["GET", "POST"])
def judge_estimate_create(request: HttpRequest, slug: str) -> HttpResponse:
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    form = JudgeEstimateForm(request.POST or None, project=project)
    return start_page(request, form, lambda data: judge_estimates.create_judge_estimate(
        data["round"], data["judge"], list(data["runs"]), measures=data["measures"], alpha=data["alpha"],
        consensus_rule=data["consensus_rule"] or None, user=request.user),
        "evaluation/judge_estimate_form.html", project=project, membership=membership, link=None)


@require_GET
def judge_estimate(request: HttpRequest, slug: str, estimate_uuid: UUID) -> TemplateResponse:
    """The estimates and comparisons once the job is done; while it runs, its progress, polled (htmx)."""
    found, membership = access.judge_estimate_for_user(request.user, slug, estimate_uuid)
    return job_page(request, found, membership, judge_estimates.job_of(found), "evaluation/judge_estimate.html",
                    results=lambda: {"tables": judge_estimates.measure_tables(found), "inputs": found.results["inputs"],
                                     "interval_kind": judge_estimates.interval_kind(found),
                                     "total": found.results["labelled"] + found.results["unlabelled"]},
                    target="estimate-body", estimate=found, level=judge_estimates.level(found), mark=judge_estimates.JUDGE_MARK)


@require_GET
def judge_estimate_download(request: HttpRequest, slug: str, estimate_uuid: UUID, what: str, fmt: str) -> HttpResponse:
    """estimate.json (the engine's result and what reproduces it), estimates.csv and comparisons.csv."""
    found, _membership = access.judge_estimate_for_user(request.user, slug, estimate_uuid)
    if found.state != JudgeEstimate.State.DONE:
        raise Http404("The estimate has not finished")
    stem = f"estimate-with-judge-{found.uuid.hex[:8]}"
    if (what, fmt) == ("estimate", "json"):
        document = {**found.results, "round": found.round.name, "judge": found.judge.name, "measures": found.measures,
                    "consensus_rule": found.consensus_rule, "human_qrels_sha256": found.human_qrels_sha256,
                    "judge_qrels_sha256": found.judge_qrels_sha256,
                    "runs_sha256": {link.run.name: link.sha256 for link in found.run_links.select_related("run")},
                    "estimated_at": found.finished_at.isoformat(timespec="milliseconds") if found.finished_at else None}
        return downloads.download(json.dumps(document, indent=2), f"{stem}.json", "application/json")
    if (what, fmt) == ("estimates", "csv"):
        return downloads.download(_csv(judge_estimates.estimate_rows(found)), f"{stem}.csv", "text/csv")
    if (what, fmt) == ("comparisons", "csv"):
        return downloads.download(_csv(judge_estimates.comparison_rows(found)), f"{stem}_comparisons.csv", "text/csv")
    raise Http404("No such download")

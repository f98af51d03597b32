"""Estimates with a judge through the API (evaluation/judge_estimates.py): start one (202 with its job), list and read
them. The results are the engine's prediction-powered estimates with what reproduces them; every number that rests on
the judge's labels alone is the judge's (`judge_mean`). Leads start them; leads and viewers read them; raters never see
them. Starting one is validated by the app's form, then refused as the page refuses it (a round without a random sample,
a judge of another round or one that has not graded every pair), each with its message."""

from datetime import datetime
from uuid import UUID

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import Field, Query, Router, Schema

from evaluation import judge_estimates
from evaluation.evaluations import EvaluationRefused
from evaluation.forms import JudgeEstimateForm
from evaluation.models import JudgeEstimate
from judgments import access

from .auth import object_access, project_access
from .errors import ApiError
from .evaluations import RunRef
from .jobs import JobOut, accepted, form_error, job_out
from .paging import Page, PageParams, page
from .results import JudgeEstimateResultsOut, VerdictOut
from .schemas import ERRORS

router = Router(tags=["estimates with a judge"])


class JudgeEstimateIn(Schema):
    round: UUID = Field(description="A round planned with a random sample of queries for raters")
    judge: UUID = Field(description="An automatic judge of that round that has graded every pair")
    runs: list[UUID] = Field(description="Stored runs; each pair is compared, the earlier one first")
    measures: list[str] = Field(list(judge_estimates.DEFAULT_MEASURES), description="Engine measure names")
    consensus_rule: str = Field("", description="How raters' grades become a label; empty: the round's rule")
    alpha: float = Field(0.05, description="Intervals at level 1 - alpha; significant below alpha after Holm")


class JudgeEstimateSummary(Schema):
    uuid: UUID
    state: str = Field(description="queued, done or failed")
    round: UUID
    judge: UUID
    judge_name: str
    measures: list[str]
    alpha: float
    consensus_rule: str
    runs: list[RunRef]
    created_at: datetime
    url: str


class JudgeEstimateOut(JudgeEstimateSummary):
    human_qrels_sha256: str
    judge_qrels_sha256: str
    results: JudgeEstimateResultsOut | None = Field(description="The engine's result (null until it is done): per run and "
                                                                "measure the `ppi` and `human` estimates with intervals, "
                                                                "`judge_mean` (the judge's labels alone), `effective_labelled`, "
                                                                "`weighted`, `by_tier`; per measure every pair's comparison; "
                                                                "and `inputs`, what reproduces it")
    verdicts: dict[str, list[VerdictOut]] = Field(description="Per measure, each comparison's verdict: pass (significant), "
                                                              "fail (not significant) or insufficient (not enough evidence)")


class JudgeEstimateStarted(Schema):
    uuid: UUID
    state: str
    url: str
    job: JobOut


def estimate_out(request: HttpRequest, found: JudgeEstimate, *, results: bool = True) -> dict:
    out = {"uuid": found.uuid, "state": found.state, "round": found.round.uuid, "judge": found.judge.uuid, "judge_name": found.judge.name,
           "measures": found.measures, "alpha": found.alpha, "consensus_rule": found.consensus_rule,
           "runs": [{"uuid": run.uuid, "name": run.name, "sha256": run.sha256} for run in found.ordered_runs()],
           "created_at": found.created_at, "url": _url(request, found)}
    if results:
        done = found.state == JudgeEstimate.State.DONE
        out |= {"human_qrels_sha256": found.human_qrels_sha256, "judge_qrels_sha256": found.judge_qrels_sha256, "results": found.results or None,
                "verdicts": {t["measure"]: [c["verdict"] for c in t["comparisons"]] for t in judge_estimates.measure_tables(found)} if done else {}}
    return out


def _url(request: HttpRequest, found: JudgeEstimate) -> str:
    return request.build_absolute_uri(reverse("api:get_judge_estimate", args=[found.project.slug, found.uuid]))


@router.post("/{slug}/judge-estimates", response={202: JudgeEstimateStarted, **ERRORS}, summary="Start an estimate with a judge (a job)",
             description="Prediction-powered estimates of runs from the raters' labels on a round's random sample of queries and a "
                         "judge's labels on every query. Validated as the app's form validates it (400 naming the field), then "
                         "refused as the page refuses it (400 with the reason); 202 with the job's URL (also in Location).")
def start_judge_estimate(request: HttpRequest, response: HttpResponse, slug: str, body: JudgeEstimateIn):
    project, _ = project_access(request, slug, "can_manage")
    form = JudgeEstimateForm({"round": body.round, "judge": body.judge, "runs": body.runs, "measures": " ".join(body.measures),
                              "consensus_rule": body.consensus_rule, "alpha": body.alpha}, project=project)
    if not form.is_valid():
        raise form_error(form)
    data = form.cleaned_data
    position = {uuid: i for i, uuid in enumerate(body.runs)}
    try:
        found = judge_estimates.create_judge_estimate(
            data["round"], data["judge"], sorted(data["runs"], key=lambda run: position[run.uuid]), measures=data["measures"],
            alpha=data["alpha"], consensus_rule=data["consensus_rule"] or None, user=request.auth[0].user)
    except EvaluationRefused as refusal:
        raise ApiError(400, str(refusal)) from None
    job = judge_estimates.job_of(found)
    return accepted(request, response, {"uuid": found.uuid, "state": found.state, "url": _url(request, found), "job": job_out(request, job)}, job)


@router.get("/{slug}/judge-estimates", response={200: Page[JudgeEstimateSummary], **ERRORS},
            summary="The project's estimates with a judge, newest first")
def list_judge_estimates(request: HttpRequest, slug: str, params: Query[PageParams]):
    project, _ = project_access(request, slug, "can_read_reports")
    found = project.judge_estimates.select_related("round", "judge", "project").order_by("-created_at", "pk")
    return page(request, found, params, lambda row: estimate_out(request, row, results=False))


@router.get("/{slug}/judge-estimates/{uuid}", response={200: JudgeEstimateOut, **ERRORS}, url_name="get_judge_estimate",
            summary="An estimate with a judge with its results and verdicts")
def get_judge_estimate(request: HttpRequest, slug: str, uuid: UUID):
    return estimate_out(request, object_access(request, slug, access.judge_estimate_for_user, uuid, "can_read_reports"))

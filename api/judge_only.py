"""Judge-only evaluations through the API (evaluation/judge_only_evaluations.py): start one (202 with its job), list
and read them. Every answer that carries scores says they are "judge-only (uncalibrated)": they rest on an automatic
judge no rater has checked. Leads start them; leads and viewers read them; raters never see scores.
Starting one is validated by the app's form, so the refusals are the page's, each naming its field."""

import json
from datetime import datetime
from typing import Any
from uuid import UUID

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import Field, Query, Router, Schema

from evaluation import judge_only_evaluations
from evaluation.engine.judge_only import DEFAULT_KS, KIND, UNCALIBRATED
from evaluation.evaluations import EvaluationRefused
from evaluation.forms import JudgeOnlyEvaluationForm
from evaluation.models import JudgeOnlyEvaluation
from judgments import access

from .auth import object_access, project_access
from .errors import ApiError
from .evaluations import RunRef
from .jobs import JobOut, accepted, form_error, job_out
from .paging import Page, PageParams, page
from .results import JudgeOnlyResultsOut
from .schemas import ERRORS

router = Router(tags=["judge-only evaluations"])


class JudgeOnlyIn(Schema):
    query_set: UUID = Field(description="The query set whose queries' reference answers the judge matches documents to")
    runs: list[UUID] = Field(description="Stored runs")
    judge: str = Field("token_overlap", description="token_overlap (Evret's default), semantic, or llm (the project's endpoint)")
    judge_settings: dict[str, Any] = Field({}, description="The judge's settings; empty: its defaults (Evret's)")
    ks: list[int] = Field(list(DEFAULT_KS), description="Cutoffs k, 1 to 100")


class JudgeOnlySummary(Schema):
    uuid: UUID
    kind: str = Field(description=f'Always "{KIND}"')
    note: str = Field(description="What the kind means: the scores rest on an automatic judge no rater has checked")
    state: str = Field(description="queued, done or failed")
    query_set: UUID
    judge: str
    ks: list[int]
    runs: list[RunRef]
    calibration_round: UUID | None = Field(description="The round built to calibrate the judge, once a lead asked for it")
    created_at: datetime
    url: str


class JudgeOnlyOut(JudgeOnlySummary):
    results: JudgeOnlyResultsOut | None = Field(description="The engine's result (null until it is done): kind and note "
                                                            "again, the judge's provenance, ks, measures, queries scored, "
                                                            "questions asked / matched / could not judge, and per run its means "
                                                            "and per-query values")


class JudgeOnlyStarted(Schema):
    uuid: UUID
    kind: str
    state: str
    url: str
    job: JobOut


def judge_only_out(request: HttpRequest, evaluation: JudgeOnlyEvaluation, *, results: bool = True) -> dict:
    out = {"uuid": evaluation.uuid, "kind": KIND, "note": UNCALIBRATED, "state": evaluation.state, "query_set": evaluation.query_set.uuid,
           "judge": evaluation.judge_kind, "ks": evaluation.ks,
           "runs": [{"uuid": run.uuid, "name": run.name, "sha256": run.sha256} for run in evaluation.ordered_runs()],
           "calibration_round": evaluation.calibration_round.uuid if evaluation.calibration_round_id else None,
           "created_at": evaluation.created_at, "url": _url(request, evaluation)}
    if results:
        out["results"] = evaluation.results or None
    return out


def _url(request: HttpRequest, evaluation: JudgeOnlyEvaluation) -> str:
    return request.build_absolute_uri(reverse("api:get_judge_only_evaluation", args=[evaluation.project.slug, evaluation.uuid]))


@router.post("/{slug}/judge-only-evaluations", response={202: JudgeOnlyStarted, **ERRORS}, summary="Start a judge-only evaluation (a job)",
             description="Runs scored with no relevance labels, Evret's way; the scores are judge-only (uncalibrated). Validated as "
                         "the app's form validates it (400 naming the field); 202 with the job's URL (also in Location).")
def start_judge_only(request: HttpRequest, response: HttpResponse, slug: str, body: JudgeOnlyIn):
    project, _ = project_access(request, slug, "can_manage")
    form = JudgeOnlyEvaluationForm({"query_set": body.query_set, "runs": body.runs, "judge": body.judge,
                                    "settings": json.dumps(body.judge_settings), "ks": " ".join(map(str, body.ks))}, project=project)
    if not form.is_valid():
        raise form_error(form)
    data = form.cleaned_data
    position = {uuid: i for i, uuid in enumerate(body.runs)}
    try:
        evaluation = judge_only_evaluations.create_judge_only_evaluation(
            data["query_set"], sorted(data["runs"], key=lambda run: position[run.uuid]), judge_kind=data["judge"],
            judge_settings=data["settings"], ks=data["ks"], user=request.auth[0].user)
    except EvaluationRefused as refusal:
        raise ApiError(400, str(refusal)) from None
    job = judge_only_evaluations.job_of(evaluation)
    return accepted(request, response, {"uuid": evaluation.uuid, "kind": KIND, "state": evaluation.state, "url": _url(request, evaluation),
                                        "job": job_out(request, job)}, job)


@router.get("/{slug}/judge-only-evaluations", response={200: Page[JudgeOnlySummary], **ERRORS},
            summary="The project's judge-only (uncalibrated) evaluations, newest first")
def list_judge_only(request: HttpRequest, slug: str, params: Query[PageParams]):
    project, _ = project_access(request, slug, "can_read_reports")
    found = project.judge_only_evaluations.select_related("query_set", "project", "calibration_round").order_by("-created_at", "pk")
    return page(request, found, params, lambda evaluation: judge_only_out(request, evaluation, results=False))


@router.get("/{slug}/judge-only-evaluations/{uuid}", response={200: JudgeOnlyOut, **ERRORS}, url_name="get_judge_only_evaluation",
            summary="A judge-only (uncalibrated) evaluation with its results")
def get_judge_only(request: HttpRequest, slug: str, uuid: UUID):
    return judge_only_out(request, object_access(request, slug, access.judge_only_evaluation_for_user, uuid, "can_read_reports"))

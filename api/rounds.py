"""Rounds: list and progress (raters see only the rounds they grade, and only their own progress), the serving
settings a lead may change (order, judging order), the round's judgment list with a strong ETag, its stored
agreement report's summary, and its plan for prediction-powered estimates (the sample of queries raters label;
the judge labels the rest)."""

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from django.http import Http404, HttpRequest
from ninja import Field, Query, Router, Schema

from judgments import access
from judgments.forms import PlanForm
from judgments.models import AgreementReport, HumanSample, Round, RoundTotals
from judgments.ops import judgment_files, planning, reports, rounds
from judgments.ops.actions import ActionRefused

from .auth import object_access, object_with, project_access
from .errors import ApiError
from .files import file_doc, labels_export
from .jobs import form_error
from .paging import NameParam, Page, PageParams, page
from .schemas import ERRORS, ErrorOut

router = Router(tags=["rounds"])

# The API's three judgment-list formats, as the app's export formats.
EXPORT_FORMATS = {"qrels": "qrels", "json": "json", "csv": "consensus-csv"}


class RoundOut(Schema):
    uuid: UUID
    name: str
    state: str = Field(description="draft, open or closed")
    scale: dict[str, Any] = Field(description="kind and grades ({value, label, cue})")
    n_pairs: int
    judged_pairs: int = Field(description="Pairs with every judgment they need")
    progress: float = Field(description="Judgments made over judgments needed, 0..1")
    order: Literal["grouped", "shuffled"] = Field(description="grouped: a rater stays on one query for a while; shuffled: pairs "
                                                             "from every query at random")
    judging_order: Literal["pool", "random", "mtf", "mmns"] = Field(
        description="Which of a query's pairs is served first (grouped order only): pool priority, seeded random, "
                    "Move-To-Front, or the MM-NS bandit (the runs that gave relevant documents so far first)")
    pool_depth: int = Field(description="How deep its pool took each pooled run: below it, any run's documents are unjudged "
                                        "by design (the CI gate reads unjudged shares of measures without a cutoff there)")


class RoundSettingsIn(Schema):
    order: Literal["grouped", "shuffled"] | None = Field(None, description="Left as it is when absent")
    judging_order: Literal["pool", "random", "mtf", "mmns"] | None = Field(
        None, description="Left as it is when absent. Any order but pool needs grouped serving (400 otherwise)")


class RaterProgress(Schema):
    rater: str
    graded: int
    unrateable: int
    later: int = Field(description="Pairs put off for later")
    last_judged_at: datetime | None


class RoundDetail(RoundOut):
    judgments_done: int
    judgments_needed: int
    raters: list[RaterProgress] = Field(description="Per rater (a rater's token sees only its owner's row)")


class AgreementStatistic(Schema):
    value: float | None
    low: float | None = Field(description="Bootstrap interval")
    high: float | None
    band: str | None


class AgreementOut(Schema):
    computed_at: datetime
    n_judgments: int = Field(description="Grades of pairs graded at least twice, which the statistics are computed over")
    n_items: int = Field(description="Pairs graded at least twice")
    raters: int = Field(description="Raters who graded a pair graded at least twice")
    gate: dict[str, Any] = Field(description="statistic, value, threshold, n_items, and the verdict: state pass, fail or "
                                             "insufficient (not enough evidence: the statistic is undefined), with its reasons "
                                             "and steps; passed is true, false, or null when insufficient")
    statistics: dict[str, AgreementStatistic] = Field(description="kappa, alpha and the others, each with its interval")


class RoundFilter(PageParams):
    name: NameParam = None


def visible_rounds(request: HttpRequest, slug: str):
    """The rounds the token's owner may see: all for leads and viewers, the ones they grade for raters."""
    project, membership = project_access(request, slug, None)
    found = project.rounds.all()
    if not membership.can_read_reports:
        found = found.filter(raters=membership.user_id)
    return found, membership


def _totals(round_pks) -> dict[int, RoundTotals]:
    return {totals.round_id: totals for totals in RoundTotals.objects.filter(round_id__in=round_pks)}


def _round_out(round: Round, totals: RoundTotals | None) -> dict:
    totals = totals or RoundTotals()
    return {"uuid": round.uuid, "name": round.name, "state": round.status, "scale": round.scale, "n_pairs": totals.pairs,
            "judged_pairs": totals.complete, "progress": totals.done / totals.needed if totals.needed else 0.0,
            "order": round.order, "judging_order": round.judging_order, "pool_depth": round.pool.depth}


@router.get("/{slug}/rounds", response={200: Page[RoundOut], **ERRORS}, summary="The rounds this token may see, with progress")
def list_rounds(request: HttpRequest, slug: str, params: Query[RoundFilter]):
    found, _ = visible_rounds(request, slug)
    if params.name is not None:
        found = found.filter(name=params.name)
    result = page(request, found.select_related("pool").order_by("-created_at", "pk"), params)
    totals = _totals([round.pk for round in result["items"]])
    result["items"] = [_round_out(round, totals.get(round.pk)) for round in result["items"]]
    return result


@router.get("/{slug}/rounds/{uuid}", response={200: RoundDetail, **ERRORS}, summary="A round and each rater's progress")
def get_round(request: HttpRequest, slug: str, uuid: UUID):
    found, membership = visible_rounds(request, slug)
    round = found.filter(uuid=uuid).first()
    if round is None:
        raise Http404("No such round")
    totals = _totals([round.pk]).get(round.pk) or RoundTotals()
    raters = [{"rater": row["rater"].username, "graded": row["graded"], "unrateable": row["unrateable"], "later": row["later"],
               "last_judged_at": row["last"]}
              for row in rounds.rater_report(round) if membership.can_read_reports or row["rater"].pk == membership.user_id]
    return {**_round_out(round, totals), "judgments_done": totals.done, "judgments_needed": totals.needed, "raters": raters}


@router.patch("/{slug}/rounds/{uuid}", response={200: RoundOut, **ERRORS}, summary="Change how a round serves its pairs (leads)",
              description="The serving order and the judging order within a query; the pairs still to judge are "
                          "ranked again at once. A judging order other than pool with shuffled serving is 400.")
def update_round_settings(request: HttpRequest, slug: str, uuid: UUID, body: RoundSettingsIn):
    round = object_access(request, slug, access.round_for_user, uuid, "can_manage")
    try:
        round = rounds.update_round(round, user=request.user, **body.dict(exclude_none=True))
    except ActionRefused as refusal:
        raise ApiError(400, str(refusal)) from None
    return _round_out(round, _totals([round.pk]).get(round.pk))


@router.get("/{slug}/rounds/{uuid}/judgments.{fmt}", response=ERRORS,
            openapi_extra=file_doc("text/plain", "application/json", "text/csv", etag=True),
            summary="The round's judgment list now: final labels as TREC qrels, JSON or CSV")
def round_judgments(request: HttpRequest, slug: str, uuid: UUID, fmt: Literal["qrels", "json", "csv"]):
    round, (newest_change,) = object_with(request, slug, "can_read_reports", Round, "guidelines", uuid, judgment_files.NEWEST_LABELS_CHANGE)
    export_format = EXPORT_FORMATS[fmt]
    try:
        return labels_export(request, round, export_format, judgment_files.export_filename(round, export_format),
                             newest_change=newest_change)
    except ValueError as problem:
        raise ApiError(400, str(problem)) from None


@router.get("/{slug}/rounds/{uuid}/agreement", response={200: AgreementOut, **ERRORS},
            summary="The summary of the round's stored agreement report (404 no_report until one is computed)")
def round_agreement(request: HttpRequest, slug: str, uuid: UUID):
    round = object_access(request, slug, access.round_for_user, uuid, "can_read_reports")
    report = AgreementReport.objects.filter(round=round).first()
    if report is None:
        raise ApiError(404, "This round has no agreement report yet: compute one on the round's agreement page.", "no_report")
    data = report.data
    summary = data["summary"]
    return {"computed_at": report.computed_at, "n_judgments": summary["n_judgments"], "n_items": summary["n_items"],
            "raters": len(summary["raters"]), "gate": reports.gate(round, summary).to_json(), "statistics": summary["statistics"]}


class PlanOut(Schema):
    planned: bool = Field(description="Whether raters label a random sample of the queries (false: they label every query)")
    editable: bool = Field(description="Whether the plan may still change: only while the round is a draft")
    n_queries: int = Field(description="The round's queries (M): its pool's queries with a pair whose document is in the corpus")
    size: int | None = Field(description="Queries raters label (N); the judge labels the other M - N")
    seed: int | None
    by_tier: bool | None = Field(description="Drawn within each tier, in proportion to the tier's size")
    query_ids: list[str] | None = Field(description="The sampled queries' ids, sorted")
    tier_shares: dict[str, float] | None = Field(description="Tier -> share of the round's queries, when drawn by tier")
    suggested_from: dict[str, Any] | None = Field(description="How N was suggested: judge (automatic), its round, run, measure, "
                                                              "half_width, var_residual, var_judge, queries; {} when N was typed")
    created_at: datetime | None
    created_by: str | None


class PlanIn(Schema):
    size: int | None = Field(None, description="Queries raters label (N). Absent: the N suggested from half_width, judge and run")
    half_width: float | None = Field(None, description="Target half-width of the 95% interval of the measure's mean")
    measure: str = Field("nDCG@10", description="The measure the target is for")
    judge: UUID | None = Field(None, description="A judge of the project with a calibration report")
    run: UUID | None = Field(None, description="A run of the pool of the judge's round, scored under both labellings")
    by_tier: bool = Field(False, description="Draw within each tier of the query set")
    seed: int | None = Field(None, description="The seed of the draw (absent: a random one)")


def _plan_out(round: Round) -> dict:
    sample = HumanSample.objects.filter(round=round).select_related("created_by").first()
    fields = {"size": None, "seed": None, "by_tier": None, "query_ids": None, "tier_shares": None, "suggested_from": None,
              "created_at": None, "created_by": None}
    if sample is not None:
        fields = {name: getattr(sample, name) for name in fields if name != "created_by"}
        fields["created_by"] = sample.created_by.username if sample.created_by else None
    return {"planned": sample is not None, "editable": round.status == Round.Status.DRAFT,
            "n_queries": planning.count_round_queries(round), **fields}


@router.get("/{slug}/rounds/{uuid}/plan", response={200: PlanOut, **ERRORS},
            summary="The round's plan for prediction-powered estimates: the sample of queries raters label")
def get_plan(request: HttpRequest, slug: str, uuid: UUID):
    return _plan_out(object_access(request, slug, access.round_for_user, uuid, "can_read_reports"))


@router.put("/{slug}/rounds/{uuid}/plan", response={200: PlanOut, 409: ErrorOut, **ERRORS},
            summary="Plan a draft round: raters label a random sample of N queries, an automatic judge the rest (leads)",
            description="N as given, or suggested from half_width, measure, judge and run as the plan page suggests it "
                        "(400 with what is missing when there is not enough evidence to suggest N). A draft's earlier "
                        "plan is replaced; an opened round's sample cannot change (409); a size outside the round's queries is 400.")
def put_plan(request: HttpRequest, slug: str, uuid: UUID, body: PlanIn):
    round = object_access(request, slug, access.round_for_user, uuid, "can_manage")
    judges = planning.calibrated_judges(round.project)
    form = PlanForm({"size": body.size, "half_width": body.half_width, "measure": body.measure, "judge": body.judge or "",
                     "run": body.run or "", "by_tier": body.by_tier, "seed": body.seed,
                     **({"plan": "1"} if body.size else {"suggest": "1"})}, project=round.project, judges=judges)
    if not form.is_valid():
        raise form_error(form)
    data = form.cleaned_data
    suggestion = planning.suggest_size(round, half_width=data["half_width"], measure=data["measure"], judge=data["judge"],
                                       run=data["run"]) if form.wants_suggestion or not body.size else None
    size = body.size or suggestion.n
    if size is None:
        raise ApiError(400, "Not enough evidence to suggest N: " + "; ".join(suggestion.verdict.reasons) + ". Give size.",
                       "insufficient_evidence")
    grounds = suggestion.grounds if suggestion is not None and suggestion.n == size else {}
    try:
        planning.plan_round(round, size=size, by_tier=data["by_tier"], seed=data["seed"], suggested_from=grounds,
                            user=request.auth[0].user)
    except ActionRefused as refusal:
        raise ApiError(409, str(refusal)) from None
    except ValueError as problem:  # ActionRefused is one too, and caught first
        raise ApiError(400, f"size: {problem}") from None
    return _plan_out(round)


@router.delete("/{slug}/rounds/{uuid}/plan", response={200: PlanOut, 409: ErrorOut, **ERRORS},
               summary="Remove a draft round's plan: raters label every query again (leads; 409 once the round has opened)")
def delete_plan(request: HttpRequest, slug: str, uuid: UUID):
    round = object_access(request, slug, access.round_for_user, uuid, "can_manage")
    try:
        planning.remove_plan(round)
    except ActionRefused as refusal:
        raise ApiError(409, str(refusal)) from None
    return _plan_out(round)

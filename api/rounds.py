"""Rounds: list and progress (raters see only the rounds they grade, and only their own progress), the serving
settings a lead may change (order, judging order), the round's judgment list with a strong ETag, and its stored
agreement report's summary."""

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from django.http import Http404, HttpRequest
from ninja import Field, Query, Router, Schema

from judgments import access, judgment_files, reports, rounds
from judgments.actions import ActionRefused
from judgments.models import AgreementReport, Round, RoundTotals

from .auth import object_access, object_with, project_access
from .errors import ApiError
from .files import file_doc, labels_export
from .paging import NameParam, Page, PageParams, page
from .schemas import ERRORS

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
            "order": round.order, "judging_order": round.judging_order}


@router.get("/{slug}/rounds", response={200: Page[RoundOut], **ERRORS}, summary="The rounds this token may see, with progress")
def list_rounds(request: HttpRequest, slug: str, params: Query[RoundFilter]):
    found, _ = visible_rounds(request, slug)
    if params.name is not None:
        found = found.filter(name=params.name)
    result = page(request, found.order_by("-created_at", "pk"), params)
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

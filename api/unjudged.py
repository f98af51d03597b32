"""An evaluation's unjudged pairs: a run's top-k documents that the round's labels do not cover (what Elasticsearch's
`_rank_eval` returns as `unrated_docs`), listed by page, and sent to a round so that raters grade them next (as the
evaluation page's "Queue unjudged pairs" form does: `evaluation.evaluations.queue_unjudged`)."""

from uuid import UUID

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema, Status

from evaluation.evaluations import queue_unjudged, unjudged_pairs
from evaluation.forms import QueueUnjudgedForm
from judgments import access
from judgments.ops.actions import ActionRefused

from .auth import object_access
from .errors import ApiError
from .jobs import form_error
from .paging import Page, PageParams, page, whole_number
from .round_setup import round_out
from .rounds import RoundOut
from .schemas import ERRORS, ErrorOut

router = Router(tags=["evaluations"])

K = whole_number(1, 1000, "The cutoff: the run's documents ranked 1 to k")


class UnjudgedParams(PageParams):
    run: UUID = Field(description="One of the evaluation's runs")
    k: K


class UnjudgedPair(Schema):
    query_id: str
    doc_id: str
    rank: int


class UnjudgedPage(Page[UnjudgedPair]):
    run: UUID
    k: int
    total: int = Field(description="Unjudged pairs in the run's top k, over all pages")
    queries: int = Field(description="Queries with at least one unjudged pair in the run's top k")


class QueueIn(Schema):
    run: UUID = Field(description="One of the evaluation's runs")
    k: K
    into: UUID | None = Field(None, description="A round of the project over a pool of documents, not closed: its pool gains "
                                                "the pairs and, when open, its raters get them at once. Absent: a new draft "
                                                "round over a new pool of just these pairs, with the evaluation round's "
                                                "scale, raters and policy")


class Queued(Schema):
    round: RoundOut
    added: int = Field(description="Pairs the round's pool gained (pairs it had already are not added twice)")


def _checked(request: HttpRequest, slug: str, uuid: UUID, need: str, run: UUID, k: int, into: UUID | None = None):
    """The evaluation and the form's cleaned run, k and round, validated as the evaluation page validates them."""
    evaluation = object_access(request, slug, access.evaluation_for_user, uuid, need)
    form = QueueUnjudgedForm({"run": str(run), "k": k, "into": str(into) if into else ""}, evaluation=evaluation)
    if not form.is_valid():
        raise form_error(form)
    return evaluation, form.cleaned_data


@router.get("/{slug}/evaluations/{uuid}/unjudged", response={200: UnjudgedPage, **ERRORS},
            summary="A run's unjudged pairs at a cutoff: its top-k documents without a label in the evaluation's round",
            description="Against the round's labels now (a pair graded since the evaluation ran is judged). Ordered by "
                        "query id, then rank; paged. A run that is not one of the evaluation's, or k outside 1 to 1000, is 400.")
def list_unjudged(request: HttpRequest, slug: str, uuid: UUID, params: Query[UnjudgedParams]):
    evaluation, data = _checked(request, slug, uuid, "can_read_reports", params.run, params.k)
    pairs = unjudged_pairs(evaluation, data["run"], data["k"]).sort_values(["query_id", "rank"], kind="stable")
    rows = pairs.to_records(index=False)
    found = page(request, rows, params, lambda row: {"query_id": row.query_id, "doc_id": row.doc_id, "rank": int(row.rank)})
    return {**found, "run": params.run, "k": params.k, "total": len(rows), "queries": pairs["query_id"].nunique()}


@router.post("/{slug}/evaluations/{uuid}/unjudged", response={200: Queued, 201: Queued, 409: ErrorOut, **ERRORS},
             summary="Send a run's unjudged top-k pairs to raters, into a round or a new draft round (leads)",
             description="201 with a new draft round (open it with POST .../rounds/{uuid}/open); 200 with `into`, whose "
                         "pool gains the pairs it lacks. 409 saying why when there is nothing to start a new round with, "
                         "or `into` cannot take them (nothing changes then).")
def send_unjudged(request: HttpRequest, slug: str, uuid: UUID, body: QueueIn):
    evaluation, data = _checked(request, slug, uuid, "can_manage", body.run, body.k, body.into)
    try:
        target, added = queue_unjudged(evaluation, data["run"], data["k"], into=data["into"], user=request.auth[0].user)
    except ActionRefused as refusal:
        raise ApiError(409, str(refusal)) from None
    return Status(200 if data["into"] else 201, {"round": round_out(target), "added": added})

"""Published judgment-list versions: list, and their labels as files with a strong ETag. Versions never
change, so the ETag is the stored file's SHA-256 and a 304 reads nothing; each format is written once and
kept in storage for later downloads."""

from datetime import datetime
from typing import Literal
from uuid import UUID

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema

from judgments.models import JudgmentListVersion
from judgments.ops import versions

from .auth import object_with, project_access
from .files import etagged_immutable, file_doc
from .paging import Page, PageParams, page
from .schemas import ERRORS

router = Router(tags=["judgment-list versions"])


class VersionOut(Schema):
    uuid: UUID
    number: int
    round: UUID = Field(description="The round whose labels were published")
    lineage: str = Field(description="The lineage's name (its first round); numbers count along it")
    n_labels: int
    n_queries: int
    threshold: int | None = Field(description="qrels: grade >= threshold is relevant; null for graded qrels")
    sha256: str
    created_at: datetime


class VersionFilter(PageParams):
    round: UUID | None = Field(None, description="Only the versions published from this round.")


def _version_out(version: JudgmentListVersion) -> dict:
    return {"uuid": version.uuid, "number": version.number, "round": version.round.uuid, "lineage": version.lineage.name,
            "n_labels": version.n_pairs, "n_queries": version.n_queries, "threshold": version.threshold, "sha256": version.sha256,
            "created_at": version.created_at}


@router.get("/{slug}/versions", response={200: Page[VersionOut], **ERRORS}, summary="The project's published judgment lists")
def list_versions(request: HttpRequest, slug: str, params: Query[VersionFilter]):
    project, _ = project_access(request, slug, "can_read_reports")
    found = project.list_versions.select_related("round", "lineage")
    if params.round is not None:
        found = found.filter(round__uuid=params.round)
    return page(request, found.order_by("-created_at", "pk"), params, _version_out)


@router.get("/{slug}/versions/{uuid}/labels.{fmt}", response=ERRORS,
            openapi_extra=file_doc("text/plain", "application/json", "text/csv", etag=True),
            summary="A published version's labels as TREC qrels, JSON or CSV")
def version_labels(request: HttpRequest, slug: str, uuid: UUID, fmt: Literal["qrels", "json", "csv"]):
    version, _ = object_with(request, slug, "can_read_reports", JudgmentListVersion, "lineage", uuid)
    return etagged_immutable(request, f"{version.sha256}.{fmt}", lambda: versions.export(version, fmt), versions.filename(version, fmt),
                             versions.VERSION_FORMATS[fmt][1])

"""Stored runs and answer runs: list, one, and a stored run's file. Leads and viewers only: raters never see
system outputs. (Uploads add their POST operations to these routers, in uploads.py.)"""

from datetime import datetime
from uuid import UUID

from django.http import HttpRequest
from django.urls import reverse
from django.utils.text import slugify
from ninja import Field, Query, Router, Schema

from judgments import access
from judgments.models import AnswerRun, StoredRun

from .auth import object_access, project_access
from .files import etagged_stored, file_doc
from .paging import NameParam, Page, PageParams, page
from .schemas import ERRORS

router = Router(tags=["runs"])
answers_router = Router(tags=["answer runs"])


class RunOut(Schema):
    uuid: UUID
    name: str
    system: str
    n_queries: int
    n_lines: int = Field(description="Result lines stored (after duplicates were refused).")
    sha256: str
    created_at: datetime
    url: str
    origin: StoredRun.Origin = Field(description="upload, or gate: under the project's retention (gate_run_days)")
    promoted_at: datetime | None = Field(None, description="When a lead kept this gate run for good")
    expires_at: datetime | None = Field(None, description="When retention deletes it, unless promoted or in use; null: kept")


class AnswerRunOut(Schema):
    uuid: UUID
    name: str
    system: str
    n_queries: int = Field(description="Answers: one per query.")
    n_citing: int = Field(description="Answers citing at least one document.")
    sha256: str
    created_at: datetime
    url: str


class NameFilter(PageParams):
    name: NameParam = None


def run_out(request: HttpRequest, run: StoredRun) -> dict:
    return {"uuid": run.uuid, "name": run.name, "system": run.system, "n_queries": run.n_queries, "n_lines": run.n_rows,
            "sha256": run.sha256, "created_at": run.uploaded_at, "origin": run.origin, "promoted_at": run.promoted_at,
            "expires_at": run.expires_at, "url": request.build_absolute_uri(reverse("api:get_run", args=[run.project.slug, run.uuid]))}


def answer_run_out(request: HttpRequest, run: AnswerRun) -> dict:
    return {"uuid": run.uuid, "name": run.name, "system": run.system, "n_queries": run.n_queries, "n_citing": run.n_citing,
            "sha256": run.sha256, "created_at": run.uploaded_at,
            "url": request.build_absolute_uri(reverse("api:get_answer_run", args=[run.project.slug, run.uuid]))}


def _named(objects, name: str | None):
    return (objects.filter(name=name) if name is not None else objects).select_related("project").order_by("-uploaded_at", "pk")


@router.get("/{slug}/runs", response={200: Page[RunOut], **ERRORS}, summary="The project's stored runs")
def list_runs(request: HttpRequest, slug: str, params: Query[NameFilter]):
    project, _ = project_access(request, slug, "can_read_reports")
    return page(request, _named(project.runs, params.name), params, lambda run: run_out(request, run))


@router.get("/{slug}/runs/{uuid}", response={200: RunOut, **ERRORS}, url_name="get_run", summary="A stored run")
def get_run(request: HttpRequest, slug: str, uuid: UUID):
    return run_out(request, object_access(request, slug, access.run_for_user, uuid, "can_read_reports"))


@router.get("/{slug}/runs/{uuid}/download", response=ERRORS, openapi_extra=file_doc("application/vnd.apache.parquet", etag=True),
            summary="A stored run's file, as stored (Parquet in the engine's ranking order), streamed")
def download_run(request: HttpRequest, slug: str, uuid: UUID):
    run = object_access(request, slug, access.run_for_user, uuid, "can_read_reports")
    return etagged_stored(request, run.file, f"run:{run.uuid}", f"{slugify(run.name) or 'run'}.parquet", "application/vnd.apache.parquet")


@answers_router.get("/{slug}/answer-runs", response={200: Page[AnswerRunOut], **ERRORS}, summary="The project's answer runs")
def list_answer_runs(request: HttpRequest, slug: str, params: Query[NameFilter]):
    project, _ = project_access(request, slug, "can_read_reports")
    return page(request, _named(project.answer_runs, params.name), params, lambda run: answer_run_out(request, run))


@answers_router.get("/{slug}/answer-runs/{uuid}", response={200: AnswerRunOut, **ERRORS}, url_name="get_answer_run",
                    summary="An answer run")
def get_answer_run(request: HttpRequest, slug: str, uuid: UUID):
    return answer_run_out(request, object_access(request, slug, access.answer_run_for_user, uuid, "can_read_reports"))

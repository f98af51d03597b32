"""Deleting runs, answer runs and evaluations (leads, write scope; 409 naming what uses them), promoting a run the
CI gate uploaded out of retention, and the project's retention setting. The operations go on the routers that
already serve these paths (see api.py)."""

from uuid import UUID

from django.db.models import F
from django.http import HttpRequest
from ninja import Field, Schema

from judgments import access
from judgments.models import Project
from judgments.ops import removal
from judgments.ops.actions import ActionRefused

from . import evaluations, projects, runs
from .auth import object_access, project_access
from .errors import ApiError
from .schemas import ERRORS, DeletedOut, ErrorOut

DELETED = {200: DeletedOut, **ERRORS, 409: ErrorOut}


def _deleted(delete, found) -> dict:
    name = getattr(found, "name", None) or str(found)
    try:
        delete(found)
    except ActionRefused as refusal:
        raise ApiError(409, str(refusal)) from None
    return {"uuid": found.uuid, "detail": f"“{name}” deleted, with its stored file."}


@runs.router.delete("/{slug}/runs/{uuid}", response=DELETED, summary="Delete a stored run and its file",
                    description="409 naming the evaluations, judge-only evaluations, estimates and pools that use it.")
def delete_run(request: HttpRequest, slug: str, uuid: UUID):
    return _deleted(removal.delete_run, object_access(request, slug, access.run_for_user, uuid, "can_manage"))


@runs.router.post("/{slug}/runs/{uuid}/promote", response={200: runs.RunOut, **ERRORS}, summary="Keep a run for good",
                  description="Takes a run the CI gate uploaded out of the project's retention; no change for any other run.")
def promote_run(request: HttpRequest, slug: str, uuid: UUID):
    run = object_access(request, slug, access.run_for_user, uuid, "can_manage")
    run.promote()
    return runs.run_out(request, run)


@runs.answers_router.delete("/{slug}/answer-runs/{uuid}", response=DELETED, summary="Delete an answer run and its file",
                            description="409 naming the answer evaluations and pools that use it.")
def delete_answer_run(request: HttpRequest, slug: str, uuid: UUID):
    return _deleted(removal.delete_answer_run, object_access(request, slug, access.answer_run_for_user, uuid, "can_manage"))


@evaluations.router.delete("/{slug}/evaluations/{uuid}", response=DELETED, summary="Delete an evaluation and its per-query file",
                           description="409 while its job is still computing it.")
def delete_evaluation(request: HttpRequest, slug: str, uuid: UUID):
    return _deleted(removal.delete_evaluation, object_access(request, slug, access.evaluation_for_user, uuid, "can_manage"))


class ProjectSettingsIn(Schema):
    gate_run_days: int | None = Field(description="Days the runs the CI gate uploads are kept unless promoted (1 to 3650); "
                                                  "null keeps them.", ge=1, le=3650)


@projects.router.patch("/{slug}", response={200: projects.ProjectOut, **ERRORS}, summary="Change the project's retention setting (leads)")
def update_project(request: HttpRequest, slug: str, body: ProjectSettingsIn):
    project, _ = project_access(request, slug, "can_manage")
    # Counted as an edit, so that a settings form loaded before this cannot silently put the old value back.
    Project.objects.filter(pk=project.pk).update(gate_run_days=body.gate_run_days, version=F("version") + 1)
    project.gate_run_days = body.gate_run_days
    return projects.get_project(request, slug)

"""Deleting a run, an answer run or an evaluation from its page, and promoting a gate run (leads). The rules are
judgments.ops.removal's; a refusal comes back to the object's page as a message naming what is in the way."""

from uuid import UUID

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from .. import access
from ..ops import removal
from ..ops.actions import ActionRefused


def delete_then_redirect(request: HttpRequest, delete, found, list_route: str) -> HttpResponse:
    """Delete `found` with `delete`, then to its list (`list_route`); on a refusal, back to its page saying why."""
    name = getattr(found, "name", None) or str(found)
    try:
        delete(found)
    except ActionRefused as refusal:
        messages.error(request, str(refusal))
        return redirect(found.get_absolute_url())
    messages.success(request, f"“{name}” deleted, with its stored file.")
    return redirect(list_route, found.project.slug)


@require_POST
def run_delete(request: HttpRequest, slug: str, run_uuid: UUID) -> HttpResponse:
    run, _ = access.run_for_user(request.user, slug, run_uuid, "can_manage")
    return delete_then_redirect(request, removal.delete_run, run, "judgments:runs")


@require_POST
def run_promote(request: HttpRequest, slug: str, run_uuid: UUID) -> HttpResponse:
    run, _ = access.run_for_user(request.user, slug, run_uuid, "can_manage")
    run.promote()
    messages.success(request, f"“{run.name}” is kept for good: retention no longer deletes it.")
    return redirect(run)


@require_POST
def answer_run_delete(request: HttpRequest, slug: str, answer_run_uuid: UUID) -> HttpResponse:
    run, _ = access.answer_run_for_user(request.user, slug, answer_run_uuid, "can_manage")
    return delete_then_redirect(request, removal.delete_answer_run, run, "judgments:answer-runs")


@require_POST
def evaluation_delete(request: HttpRequest, slug: str, evaluation_uuid: UUID) -> HttpResponse:
    evaluation, _ = access.evaluation_for_user(request.user, slug, evaluation_uuid, "can_manage")
    return delete_then_redirect(request, removal.delete_evaluation, evaluation, "evaluation:evaluations")

"""Judgment-list versions: publishing a round's labels, a version's page, its downloads and its changes.

Versions hold every label: leads and viewers read them, raters never do (they see only their own grades).
"""

from uuid import UUID

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_POST

from .. import access
from ..forms import PublishForm, RefreshForm, errors_text
from ..models import Judgment
from ..ops import rounds, versions
from ..ops.actions import ActionRefused
from ..ops.jobs import start_job
from .downloads import download

SHOWN_CHANGES = 200
SHOWN_QUERIES = 100


@require_POST
def round_publish(request: HttpRequest, slug: str, round_uuid: UUID) -> HttpResponse:
    """Publish the round's labels as the next version, in a job (a million labels take seconds)."""
    round, _ = access.round_for_user(request.user, slug, round_uuid, "can_manage")
    form = PublishForm(request.POST, round=round)
    if not form.is_valid():
        messages.error(request, "Nothing was published: " + errors_text(form))
        return redirect(round)
    if not Judgment.objects.filter(item__round=round, grade__isnull=False).exists():
        messages.error(request, f"Nothing was published: the round “{round.name}” has no labels yet. Grade some pairs first.")
        return redirect(round)
    job = start_job(kind="publish_list", project=round.project, owner=request.user,
                    params={"round": str(round.uuid), "note": form.cleaned_data["note"], "threshold": form.cleaned_data["threshold"]})
    return redirect(job)


@require_GET
def list_version(request: HttpRequest, slug: str, version_uuid: UUID) -> TemplateResponse:
    version, membership = access.list_version_for_user(request.user, slug, version_uuid)
    found = versions.difference(version)
    context = {"project": version.project, "membership": membership, "version": version, "formats": list(versions.VERSION_FORMATS),
               "difference": found, "shown_changes": SHOWN_CHANGES, "shown_queries": SHOWN_QUERIES,
               "refresh_form": RefreshForm() if membership.can_manage else None, "refreshes": version.refreshes.order_by("-created_at")}
    if found is not None:
        context["changes"] = found["changes"].head(SHOWN_CHANGES).to_dict("records")
        context["per_query"] = [{**row, "text": found["texts"].get(row["query_id"], "")}
                                for row in found["per_query"].head(SHOWN_QUERIES).to_dict("records")]
    return TemplateResponse(request, "judgments/list_version.html", context)


@require_POST
def list_version_refresh(request: HttpRequest, slug: str, version_uuid: UUID) -> HttpResponse:
    """Start a refresh round from the version: a draft over the same pool, on the latest guidelines, whose raters
    grade only the pairs the version does not label (and those the re-judge rule picks)."""
    version, _ = access.list_version_for_user(request.user, slug, version_uuid, "can_manage")
    form = RefreshForm(request.POST)
    if not form.is_valid():
        messages.error(request, "No round was started: " + errors_text(form))
        return redirect(version)
    try:
        refresh = rounds.create_refresh(version, user=request.user, rejudge=form.cleaned_data["rejudge"],
                                          share=form.cleaned_data["share"] / 100)
    except ActionRefused as refusal:
        messages.error(request, f"No round was started: {refusal}")
        return redirect(version)
    messages.success(request, f"New draft round “{refresh.name}” refreshes v{version.number}. Open it when ready: its raters get "
                              f"only the pairs v{version.number} does not label{'' if refresh.rejudge == 'keep' else ', and the old pairs picked for re-judging'}.")
    return redirect(refresh)


@require_GET
def list_version_download(request: HttpRequest, slug: str, version_uuid: UUID, fmt: str) -> HttpResponse:
    version, _ = access.list_version_for_user(request.user, slug, version_uuid)
    if fmt not in versions.VERSION_FORMATS:
        raise Http404("A version downloads as qrels, json or csv")
    return download(versions.export(version, fmt), versions.filename(version, fmt), versions.VERSION_FORMATS[fmt][1])


@require_GET
def list_version_changes(request: HttpRequest, slug: str, version_uuid: UUID) -> HttpResponse:
    version, _ = access.list_version_for_user(request.user, slug, version_uuid)
    found = versions.difference(version)
    if found is None:
        raise Http404("A lineage's first version has no previous version to differ from")
    return download(versions.difference_csv(found), versions.filename(version, "csv", suffix=f"-changes-from-v{found['previous'].number}"),
                    "text/csv")

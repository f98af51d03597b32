from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_http_methods

from .. import access
from ..forms import GuidelinesForm
from ..lib.guidelines import TEMPLATE, diff, render
from ..models import EditConflict
from ..ops import actions


@require_GET
def guidelines(request: HttpRequest, slug: str) -> TemplateResponse:
    """The current guidelines, for every member: raters read them before and while grading."""
    project, membership = access.project_for_user(request.user, slug)
    versions = project.guideline_versions.select_related("author")
    current = versions.first()
    context = {"project": project, "membership": membership, "current": current, "versions": versions,
               "html": render(current.text) if current else ""}
    return TemplateResponse(request, "judgments/guidelines.html", context)


@require_http_methods(["GET", "POST"])
def guidelines_edit(request: HttpRequest, slug: str) -> HttpResponse:
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    current = project.guideline_versions.first()
    form = GuidelinesForm(request.POST or None, current=current, initial={"text": current.text if current else TEMPLATE})
    if request.method == "POST" and form.is_valid():
        try:
            version, created = actions.save_guidelines(project, form.cleaned_data["text"], author=request.user,
                                                       note=form.cleaned_data["note"], based_on=form.cleaned_data["version"])
        except EditConflict as conflict:
            form.show_conflict(conflict.current)
            current = conflict.current
        else:
            if created:
                messages.success(request, f"Saved as version {version.number}.")
                open_rounds = project.rounds.filter(status="open").select_related("guidelines")
                if open_rounds:
                    names = ", ".join(f"“{r.name}” (v{r.guidelines.number})" for r in open_rounds)
                    messages.warning(request, f"Open rounds keep the version they started with: {names}. Grades under two "
                                              f"versions are not comparable; to grade under version {version.number}, start "
                                              f"a new round from the round's page.")
            else:
                messages.info(request, f"Nothing changed: the guidelines are still version {version.number}.")
            return redirect(version)
    context = {"project": project, "membership": membership, "form": form, "current": current}
    return TemplateResponse(request, "judgments/guidelines_form.html", context)


@require_GET
def guidelines_version(request: HttpRequest, slug: str, number: int) -> TemplateResponse:
    """One version as raters saw it, and what changed since the version before."""
    project, membership = access.project_for_user(request.user, slug)
    version = project.guideline_versions.select_related("author").filter(number=number).first()
    if version is None:
        raise Http404("No such guidelines version")
    previous = version.previous
    changes = diff(previous.text, version.text, f"version {previous.number}", f"version {version.number}") if previous else None
    context = {"project": project, "membership": membership, "version": version, "previous": previous,
               "html": render(version.text), "changes": changes}
    return TemplateResponse(request, "judgments/guidelines_version.html", context)

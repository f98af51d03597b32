from collections.abc import Callable

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse

from .. import access
from ..ops.imports import start_upload_job


def upload_view(request: HttpRequest, slug: str, *, make_form: Callable[..., forms.Form], kind: str, title: str) -> HttpResponse:
    """The upload pages' shared flow: a lead posts a file, the import runs as a job, the job page follows.

    Every form field but the file becomes a parameter of the job.
    """
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    form = make_form(request.POST or None, request.FILES or None, project)
    if request.method == "POST" and form.is_valid():
        params = {name: value for name, value in form.cleaned_data.items() if name != "file"}
        return redirect(start_upload_job(kind, project, request.user, form.cleaned_data["file"], **params))
    return TemplateResponse(request, "judgments/upload.html",
                            {"project": project, "membership": membership, "form": form, "title": title})

from uuid import UUID

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.urls import reverse
from django_htmx.http import HTMX_STOP_POLLING, HttpResponseClientRedirect

from .. import access, actions, grading, jobs
from ..forms import AddMemberForm, ProjectForm, RoleForm
from ..models import Membership, Role, Round


@require_GET
def projects(request: HttpRequest) -> TemplateResponse:
    memberships = Membership.objects.filter(user=request.user).select_related("project").order_by("project__name")
    return TemplateResponse(request, "judgments/projects.html", {"memberships": memberships})


@require_http_methods(["GET", "POST"])
def project_create(request: HttpRequest) -> HttpResponse:
    form = ProjectForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        project = actions.create_project(creator=request.user, **form.cleaned_data)
        messages.success(request, f"Project “{project.name}” created. You are its lead.")
        return redirect(project)
    return TemplateResponse(request, "judgments/project_form.html", {"form": form})


@require_GET
def project(request: HttpRequest, slug: str) -> TemplateResponse:
    project, membership = access.project_for_user(request.user, slug)
    recent_jobs = project.jobs.select_related("owner")[:10] if membership.can_read_reports else None
    context = {
        "project": project,
        "membership": membership,
        "member_count": project.memberships.count(),
        "recent_jobs": recent_jobs,
    }
    return TemplateResponse(request, "judgments/project.html", context)


@require_http_methods(["GET", "POST"])
def project_settings(request: HttpRequest, slug: str) -> HttpResponse:
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    form = ProjectForm(request.POST or None, instance=project)
    if request.method == "POST" and form.is_valid():
        project = form.save(commit=False)
        project.slug = form.cleaned_data["slug"] or slug
        project.save()
        messages.success(request, "Project settings saved.")
        return redirect(project)
    project.refresh_from_db()  # validating wrote the refused values (an empty slug) on the instance
    return TemplateResponse(request, "judgments/project_form.html", {"form": form, "project": project})


@require_GET
def members(request: HttpRequest, slug: str) -> TemplateResponse:
    project, membership = access.project_for_user(request.user, slug)
    return _members_page(request, project, membership, AddMemberForm())


def _members_page(request, project, membership, add_form) -> TemplateResponse:
    template = "judgments/members.html#member-list" if request.htmx else "judgments/members.html"
    context = {
        "project": project,
        "membership": membership,
        "members": project.memberships.select_related("user"),
        "add_form": add_form,
        "roles": Role.choices,
    }
    return TemplateResponse(request, template, context)


@require_POST
def member_add(request: HttpRequest, slug: str) -> HttpResponse:
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    form = AddMemberForm(request.POST)
    if form.is_valid():
        try:
            added = actions.add_member(project, form.cleaned_data["user"], form.cleaned_data["role"])
        except actions.ActionRefused as refusal:
            form.add_error("user", str(refusal))
        else:
            messages.success(request, f"{added.user.username} added as {added.get_role_display().lower()}.")
            if not request.htmx:
                return redirect("judgments:members", project.slug)
            form = AddMemberForm()
    return _members_page(request, project, membership, form)


@require_POST
def member_role(request: HttpRequest, slug: str, member: UUID) -> HttpResponse:
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    target = access.member_of_project(project, member)
    form = RoleForm(request.POST)
    if form.is_valid():
        _apply(request, actions.change_role, target, form.cleaned_data["role"])
    else:
        messages.error(request, "Choose one of the roles lead, rater or viewer.")
    return _after_member_change(request, project, membership)


@require_POST
def member_remove(request: HttpRequest, slug: str, member: UUID) -> HttpResponse:
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    target = access.member_of_project(project, member)
    _apply(request, actions.remove_member, target)
    if not Membership.objects.filter(pk=membership.pk).exists():  # the lead removed themselves
        if request.htmx:
            return HttpResponseClientRedirect(reverse("judgments:projects"))
        return redirect("judgments:projects")
    return _after_member_change(request, project, membership)


def _apply(request, action, *args) -> None:
    try:
        action(*args)
    except actions.ActionRefused as refusal:
        messages.error(request, str(refusal))
    else:
        messages.success(request, "Members updated.")


def _after_member_change(request, project, membership) -> HttpResponse:
    if request.htmx:
        membership.refresh_from_db()
        return _members_page(request, project, membership, AddMemberForm())
    return redirect("judgments:members", project.slug)


@require_GET
def project_jobs(request: HttpRequest, slug: str) -> TemplateResponse:
    project, membership = access.project_for_user(request.user, slug, "can_read_reports")
    context = {"project": project, "membership": membership, "jobs": project.jobs.select_related("owner")[:200]}
    return TemplateResponse(request, "judgments/jobs.html", context)


@require_GET
def job(request: HttpRequest, slug: str, job_uuid: UUID) -> TemplateResponse:
    job, membership = access.job_for_user(request.user, slug, job_uuid)
    return TemplateResponse(request, "judgments/job.html", {"job": job, "project": job.project, "membership": membership})


@require_GET
def job_status(request: HttpRequest, slug: str, job_uuid: UUID) -> TemplateResponse:
    """The progress fragment; pages poll it, and a finished job tells htmx to stop polling."""
    job, membership = access.job_for_user(request.user, slug, job_uuid)
    status = HTMX_STOP_POLLING if job.is_finished and request.htmx else 200
    context = {"job": job, "membership": membership}
    return TemplateResponse(request, "judgments/_job_progress.html", context, status=status)


@require_POST
def job_retry(request: HttpRequest, slug: str, job_uuid: UUID) -> HttpResponse:
    job, membership = access.job_for_user(request.user, slug, job_uuid, "can_manage")
    try:
        if not jobs.retry_job(job):
            messages.error(request, "Only a failed job can be retried.")
    except jobs.RetryRefused as refusal:
        messages.error(request, str(refusal))
    if request.htmx:
        job.refresh_from_db()
        return TemplateResponse(request, "judgments/_job_progress.html", {"job": job, "membership": membership})
    return redirect(job)


@require_POST
def selfcheck(request: HttpRequest, slug: str) -> HttpResponse:
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    job = jobs.start_job(kind="selfcheck", project=project, owner=request.user, params={"pause": 0.5})
    return redirect(job)


@require_GET
def my_queue(request: HttpRequest) -> TemplateResponse:
    """The open rounds the user grades in, with their own counts."""
    open_rounds = Round.objects.filter(raters=request.user, status=Round.Status.OPEN,
                                       project__memberships__user=request.user,
                                       project__memberships__role__in=[Role.LEAD, Role.RATER]).select_related("project")
    rows = [(r, grading.progress_of(r, request.user)) for r in open_rounds.order_by("project__name", "-opened_at")]
    return TemplateResponse(request, "judgments/my_queue.html", {"rows": rows})


@require_GET
def reports(request: HttpRequest) -> TemplateResponse:
    memberships = Membership.objects.filter(user=request.user, role__in=[Role.LEAD, Role.VIEWER]).select_related(
        "project"
    )
    return TemplateResponse(request, "judgments/reports.html", {"memberships": memberships})

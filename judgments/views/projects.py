from uuid import UUID

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django_htmx.http import HTMX_STOP_POLLING, HttpResponseClientRedirect

from evaluation.models import AnswerEvaluation, Evaluation

from .. import access, overview
from ..forms import InviteForm, ProjectForm, RoleForm
from ..models import AgreementReport, EditConflict, Invitation, Membership, Project, Role, Round
from ..ops import actions, grading, health, jobs
from ..ops import reports as reports_


@require_GET
def projects(request: HttpRequest) -> TemplateResponse:
    memberships = Membership.objects.filter(user=request.user).select_related("project").order_by("project__name")
    context = {"memberships": memberships, "may_create": access.may_create_projects(request.user)}
    return TemplateResponse(request, "judgments/projects.html", context)


@require_http_methods(["GET", "POST"])
def project_create(request: HttpRequest) -> HttpResponse:
    if not access.may_create_projects(request.user):
        raise PermissionDenied("Only staff create projects here: ask an administrator, or a lead to invite you.")
    form = ProjectForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        project = actions.create_project(creator=request.user, **form.cleaned_data)
        messages.success(request, f"Project “{project.name}” created. You are its lead.")
        return redirect(project)
    return TemplateResponse(request, "judgments/project_form.html", {"form": form})


@require_GET
def project(request: HttpRequest, slug: str) -> HttpResponse:
    """The project's home: where it stands. Raters, who see no reports, land on their work queue."""
    project, membership = access.project_for_user(request.user, slug)
    if not membership.can_read_reports:
        return redirect("judgments:my-queue")
    rows = overview.round_rows(project)
    context = {
        "project": project, "membership": membership, "member_count": project.memberships.count(),
        "rounds": rows, "attention": overview.needs_attention(project, rows), "agreement": overview.latest_agreement(rows),
        "evaluation": overview.latest_evaluation(project), "jobs": overview.jobs(project),
        "health": health.summary(project),
    }
    return TemplateResponse(request, "judgments/project.html", context)


@require_http_methods(["GET", "POST"])
def project_settings(request: HttpRequest, slug: str) -> HttpResponse:
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    # The form gets its own copy: validating writes the input into its instance, and the page around
    # the form (its menu, its links) must keep showing the project as saved.
    form = ProjectForm(request.POST or None, instance=Project.objects.get(pk=project.pk))
    if request.method == "POST" and form.is_valid():
        form.instance.slug = form.cleaned_data["slug"] or slug
        try:
            project = form.save_edit()
        except EditConflict as conflict:
            form.show_conflict(conflict.current)
            project = conflict.current
        else:
            messages.success(request, "Project settings saved.")
            return redirect(project)
    return TemplateResponse(request, "judgments/project_form.html", {"form": form, "project": project, "membership": membership})


@require_GET
def members(request: HttpRequest, slug: str) -> TemplateResponse:
    project, membership = access.project_for_user(request.user, slug)
    return _members_page(request, project, membership, InviteForm())


def _members_page(request, project, membership, invite_form) -> TemplateResponse:
    template = "judgments/members.html#member-list" if request.htmx else "judgments/members.html"
    context = {
        "project": project,
        "membership": membership,
        "members": project.memberships.select_related("user"),
        "roles": Role.choices,
        "project_tokens": project.api_tokens.of_project(),
    }
    if membership.can_manage:  # invitations name e-mail addresses: leads only
        pending = project.invitations.pending().select_related("invited_by")
        context.update(invite_form=invite_form, invitation_days=settings.INVITATION_DAYS, email_enabled=settings.EMAIL_ENABLED,
                       invitations=[(invitation, request.build_absolute_uri(invitation.get_absolute_url())) for invitation in pending])
    return TemplateResponse(request, template, context)


@require_POST
def invitation_create(request: HttpRequest, slug: str) -> HttpResponse:
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    form = InviteForm(request.POST)
    if form.is_valid():
        email = form.cleaned_data["email"]
        try:
            _invitation, mailed = actions.invite_member(project, email=email, role=form.cleaned_data["role"],
                                                        invited_by=request.user, absolute_url=request.build_absolute_uri)
        except actions.ActionRefused as refusal:
            form.add_error("email", str(refusal))
        else:
            if mailed:
                messages.success(request, f"Invitation for {email} created and sent by e-mail.")
            elif settings.EMAIL_ENABLED:
                messages.warning(request, f"Invitation for {email} created, but the mail could not be sent: share its link below.")
            else:
                messages.success(request, f"Invitation for {email} created: share its link below with them.")
            if not request.htmx:
                return redirect("judgments:members", project.slug)
            form = InviteForm()
    return _members_page(request, project, membership, form)


@require_POST
def invitation_revoke(request: HttpRequest, slug: str, invitation_uuid: UUID) -> HttpResponse:
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    invitation = access.invitation_of_project(project, invitation_uuid)
    try:
        actions.revoke_invitation(invitation)
    except actions.ActionRefused as refusal:
        messages.error(request, str(refusal))
    else:
        messages.success(request, f"Invitation for {invitation.email} revoked: its link no longer works.")
    return _after_member_change(request, project, membership)


@login_not_required
@never_cache  # a secret link's page, like a password reset link's: no cache keeps it for whoever comes next
@require_http_methods(["GET", "POST"])
def invitation(request: HttpRequest, token: str) -> HttpResponse:
    """An invitation's link: who invites whom to what; a logged-in person accepts it here. Expired, used
    or withdrawn links say so (410), unknown ones too (404)."""
    found = access.invitation_for_link(token)
    if found is None:
        return TemplateResponse(request, "judgments/invitation.html", {"invitation": None}, status=404)
    if request.method == "POST":
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        try:
            joined = actions.accept_invitation(found, request.user)
        except actions.ActionRefused:
            return redirect(request.path)  # the page says why
        messages.success(request, f"Welcome to {joined.project.name}: you joined as {joined.get_role_display().lower()}.")
        return redirect(joined.project)
    problem = actions.acceptance_problem(found, request.user)
    status = 200 if found.status == Invitation.Status.PENDING else 410
    return TemplateResponse(request, "judgments/invitation.html", {"invitation": found, "problem": problem}, status=status)


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
        return _members_page(request, project, membership, InviteForm())
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
            messages.error(request, "Only a failed job, or one that finished with failures, can be retried.")
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


REPORTS_SHOWN = 200


@require_GET
def reports(request: HttpRequest) -> TemplateResponse:
    """The agreement reports and evaluations of every project where the user reads reports, newest first.
    Raters read none: other raters' grades and the systems' scores would bias their grading."""
    readable = Project.objects.filter(memberships__user=request.user, memberships__role__in=[Role.LEAD, Role.VIEWER])
    agreement = (AgreementReport.objects.filter(round__project__in=readable).select_related("round__project")
                 .order_by("-computed_at"))
    evaluations = (Evaluation.objects.filter(project__in=readable).select_related("project", "round")
                   .annotate(n_runs=Count("runs", distinct=True)).order_by("-created_at"))
    answer_evaluations = (AnswerEvaluation.objects.filter(project__in=readable).select_related("project", "query_set")
                          .annotate(n_runs=Count("answer_runs", distinct=True)).order_by("-created_at"))
    context = {
        "readable": readable.exists(), "shown": REPORTS_SHOWN,
        "agreement": [(stored, reports_.gate(stored.round, stored.data["summary"])) for stored in agreement[:REPORTS_SHOWN]],
        "agreement_count": agreement.count(), "evaluations": evaluations[:REPORTS_SHOWN], "evaluation_count": evaluations.count(),
        "answer_evaluations": answer_evaluations[:REPORTS_SHOWN], "answer_evaluation_count": answer_evaluations.count(),
    }
    answer_rounds = Round.objects.filter(project__in=readable, pool__kind="answers").select_related("project").order_by("-created_at")
    context.update(answer_rounds=answer_rounds[:REPORTS_SHOWN], answer_round_count=answer_rounds.count())
    return TemplateResponse(request, "judgments/reports.html", context)

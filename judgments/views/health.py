"""A project's health: the staleness triggers of the latest check with their trends and remedies, checking now,
snoozing a trigger, the schedule and thresholds. Leads and viewers read it; only leads act. Raters get 403."""

from uuid import UUID

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from evaluation import evaluations

from .. import access
from ..forms import HealthSettingsForm, SnoozeForm, errors_text
from ..lib import staleness
from ..models import Round
from ..ops import health


def _page_url(project) -> str:
    return reverse("judgments:health", args=[project.slug])


@require_GET
def health_page(request: HttpRequest, slug: str) -> TemplateResponse:
    project, membership = access.project_for_user(request.user, slug, "can_read_reports")
    return _page(request, project, membership, HealthSettingsForm(instance=health.health_settings(project)))


def _page(request, project, membership, settings_form, status=200) -> TemplateResponse:
    latest, rows = health.page_rows(project, with_remedies=membership.can_manage)
    context = {"project": project, "membership": membership, "latest": latest, "rows": rows,
               "settings_form": settings_form if membership.can_manage else None, "snooze_form": SnoozeForm(),
               "found": health.health_settings(project), "checks": health.past_checks(project.health_checks.order_by("-at")[:12]),
               "counts": health.counts(latest.triggers) if latest else None, "firing_states": staleness.FIRING}
    return TemplateResponse(request, "judgments/health.html", context, status=status)


@require_POST
def health_check_now(request: HttpRequest, slug: str) -> HttpResponse:
    project, _ = access.project_for_user(request.user, slug, "can_manage")
    check = health.check_project(project)
    messages.success(request, f"Checked: {health.counts(check.triggers)['words']}.")
    return redirect(_page_url(project))


@require_POST
def health_settings(request: HttpRequest, slug: str) -> HttpResponse:
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    form = HealthSettingsForm(request.POST, instance=health.health_settings(project))
    if not form.is_valid():
        return _page(request, project, membership, form, status=400)
    form.save()
    messages.success(request, "Health check settings saved.")
    return redirect(_page_url(project))


@require_POST
def health_snooze(request: HttpRequest, slug: str, trigger: str) -> HttpResponse:
    project, _ = access.project_for_user(request.user, slug, "can_manage")
    if trigger not in staleness.TRIGGERS:
        messages.error(request, "No such trigger.")
        return redirect(_page_url(project))
    if "unsnooze" in request.POST:
        health.unsnooze(project, trigger)
        messages.success(request, f"{staleness.TITLES[trigger]} is no longer snoozed.")
        return redirect(_page_url(project))
    form = SnoozeForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not snoozed: " + errors_text(form))
        return redirect(_page_url(project))
    health.snooze(project, trigger, days=form.cleaned_data["days"], reason=form.cleaned_data["reason"], user=request.user)
    messages.success(request, f"{staleness.TITLES[trigger]} snoozed for {form.cleaned_data['days']} days.")
    return redirect(_page_url(project))


@require_POST
def health_evaluate(request: HttpRequest, slug: str, run_uuid: UUID) -> HttpResponse:
    """Evaluate a run never measured on the newest round, with the default measures."""
    run, _ = access.run_for_user(request.user, slug, run_uuid, "can_manage")
    round = run.project.rounds.exclude(status=Round.Status.DRAFT).exclude(pool__kind="answers").order_by("-created_at").first()
    if round is None:
        messages.error(request, "No round to evaluate against yet.")
        return redirect(_page_url(run.project))
    evaluation = evaluations.create_evaluation(round, [run], measures=list(evaluations.DEFAULT_MEASURES), user=request.user)
    messages.success(request, f"Evaluating {run.name} on {round.name}.")
    return redirect(evaluation)

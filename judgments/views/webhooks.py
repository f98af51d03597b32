"""The project's job webhooks (leads): add one (its secret shown once), remove one, and how their deliveries went."""

from uuid import UUID

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_http_methods, require_POST

from .. import access
from ..forms import WebhookForm
from ..models import WebhookDelivery
from ..ops import webhooks

RECENT_DELIVERIES = 20


@require_http_methods(["GET", "POST"])
def webhook_list(request: HttpRequest, slug: str) -> HttpResponse:
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    form = WebhookForm(request.POST or None)
    secret = None
    if request.method == "POST" and form.is_valid():
        _hook, secret = webhooks.add_webhook(project, form.cleaned_data["url"], user=request.user)
        form = WebhookForm()
    recent = WebhookDelivery.objects.filter(webhook__project=project).select_related("webhook", "job")[:RECENT_DELIVERIES]
    context = {"project": project, "membership": membership, "form": form, "secret": secret, "max_attempts": settings.WEBHOOK_MAX_ATTEMPTS,
               "webhooks": webhooks.with_last_delivery(project.webhooks.all()), "deliveries": recent}
    return TemplateResponse(request, "judgments/webhooks.html", context, status=201 if secret else 200)


@require_POST
def webhook_delete(request: HttpRequest, slug: str, webhook_uuid: UUID) -> HttpResponse:
    project, _ = access.project_for_user(request.user, slug, "can_manage")
    hook = project.webhooks.filter(uuid=webhook_uuid).first()
    if hook is None:
        raise Http404("No such webhook")
    hook.delete()
    messages.success(request, f"Webhook {hook.url} removed: it hears of no more jobs.")
    return redirect("judgments:webhooks", project.slug)

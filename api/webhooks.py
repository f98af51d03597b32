"""A project's job webhooks through the API (leads): list with their last delivery, add (the secret answered once),
remove. What is sent and how to verify it: judgments/ops/webhooks.py."""

from datetime import datetime
from uuid import UUID

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema
from ninja.responses import Status

from judgments.forms import WebhookForm
from judgments.ops import webhooks

from .auth import project_access
from .errors import ApiError
from .jobs import form_error
from .paging import Page, PageParams, page
from .schemas import ERRORS, DeletedOut

router = Router(tags=["webhooks"])


class DeliveryOut(Schema):
    uuid: UUID
    event: str
    state: str = Field(description="pending, delivered or failed")
    attempts: int
    status_code: int | None = Field(description="The receiver's last answer; null when none came")
    error: str
    created_at: datetime
    last_attempt_at: datetime | None


class WebhookOut(Schema):
    uuid: UUID
    url: str
    created_at: datetime
    last_delivery: DeliveryOut | None


class WebhookCreated(WebhookOut):
    secret: str = Field(description="The signing secret, in this answer only.")


class WebhookIn(Schema):
    url: str


def webhook_out(hook) -> dict:
    last = hook.last_delivery
    return {"uuid": hook.uuid, "url": hook.url, "created_at": hook.created_at,
            "last_delivery": last and {name: getattr(last, name) for name in DeliveryOut.model_fields}}


@router.get("/{slug}/webhooks", response={200: Page[WebhookOut], **ERRORS}, summary="The project's job webhooks (leads)")
def list_webhooks(request: HttpRequest, slug: str, params: Query[PageParams]):
    project, _ = project_access(request, slug, "can_manage")
    return page(request, webhooks.with_last_delivery(project.webhooks.all()), params, webhook_out)


@router.post("/{slug}/webhooks", response={201: WebhookCreated, **ERRORS}, summary="Add a job webhook",
             description="The URL must be one Verdict may call (a public address, or one the operator allows). The answer "
                         "holds the signing secret, once.")
def add_webhook(request: HttpRequest, slug: str, body: WebhookIn):
    project, _ = project_access(request, slug, "can_manage")
    form = WebhookForm({"url": body.url})
    if not form.is_valid():
        raise form_error(form)
    hook, secret = webhooks.add_webhook(project, form.cleaned_data["url"], user=request.auth[0].user)
    hook.last_delivery = None
    return Status(201, {**webhook_out(hook), "secret": secret})


@router.delete("/{slug}/webhooks/{uuid}", response={200: DeletedOut, **ERRORS}, summary="Remove a job webhook")
def remove_webhook(request: HttpRequest, slug: str, uuid: UUID):
    project, _ = project_access(request, slug, "can_manage")
    hook = project.webhooks.filter(uuid=uuid).first()
    if hook is None:
        raise ApiError(404, "No such webhook.")
    hook.delete()
    return {"uuid": uuid, "detail": f"Webhook {hook.url} removed, with its delivery records."}

"""Job webhooks: when a job ends, each of its project's webhooks gets a signed JSON event from the worker.

Each event is a `WebhookDelivery`, its body written once, so every try sends the same bytes. A try is one POST under
judgments.lib.outbound's rules (a public address or one the operator allows, no redirects, a total deadline); a network
error, a timeout, 408, 429 or a 5xx is tried again by the Celery task with a growing wait, up to
WEBHOOK_MAX_ATTEMPTS tries; another answer below 200 or from 300 up, or an address Verdict refuses, ends it as failed.

Signature, for receivers: `X-Verdict-Signature: sha256=<hex HMAC-SHA256, keyed with the webhook's secret, of
"<X-Verdict-Timestamp>.<the body's bytes>">`; the timestamp is the try's Unix time in seconds, so a receiver
recomputes the HMAC, compares it in constant time and refuses an old timestamp (a replay).
"""

import hashlib
import hmac
import http.client
import json
import logging
import secrets
import time

from django.conf import settings
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from ..core import outbound_policy
from ..core.queue import task
from ..lib import outbound
from ..models import Job, Webhook, WebhookDelivery

log = logging.getLogger(__name__)
WEBHOOK_TIMEOUT = 5  # seconds for connecting and for each read
WEBHOOK_DEADLINE = 10  # seconds for one try in all: with the waits, at most about 47 s of a worker's time
WEBHOOK_ANSWER_BYTES = 64 << 10  # read, never shown: only the status matters
EVENT = "job.ended"
RETRY_STATUSES = {408, 429}


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()


def event_body(job: Job) -> dict:
    return {"event": EVENT, "project": job.project.slug,
            "job": {"uuid": str(job.uuid), "kind": job.kind, "state": job.state, "error": job.error,
                    "created_at": job.created_at.isoformat(), "finished_at": job.finished_at and job.finished_at.isoformat(),
                    "path": job.get_absolute_url()}}


def job_ended(job_id: int) -> list[WebhookDelivery]:
    """Record the event of a job that has just ended for each webhook of its project, and queue their sending
    once this transaction commits (the job's end is committed with it)."""
    job = Job.objects.select_related("project").get(pk=job_id)
    hooks = list(job.project.webhooks.all())
    if not hooks:
        return []
    body = json.dumps(event_body(job), sort_keys=True)
    made = WebhookDelivery.objects.bulk_create([WebhookDelivery(webhook=hook, job=job, event=EVENT, body=body) for hook in hooks])
    for delivery in made:
        transaction.on_commit(lambda pk=delivery.pk: task("judgments.tasks.deliver_webhook").delay(pk))
    return made


def deliver(delivery_id: int) -> bool:
    """One try of a pending delivery; True when it should be tried again later (and tries are left)."""
    delivery = WebhookDelivery.objects.select_related("webhook").filter(pk=delivery_id, state=WebhookDelivery.State.PENDING).first()
    if delivery is None:  # delivered, failed or deleted meanwhile
        return False
    retry, status, error = _try(delivery)
    delivery.attempts += 1
    delivery.status_code, delivery.error, delivery.last_attempt_at = status, error[:300], timezone.now()
    if status is not None and 200 <= status < 300:
        delivery.state = WebhookDelivery.State.DELIVERED
    elif not retry or delivery.attempts >= settings.WEBHOOK_MAX_ATTEMPTS:
        delivery.state = WebhookDelivery.State.FAILED
    delivery.save(update_fields=["attempts", "status_code", "error", "last_attempt_at", "state"])
    return delivery.state == WebhookDelivery.State.PENDING


def _try(delivery: WebhookDelivery) -> tuple[bool, int | None, str]:
    """(worth retrying, the answer's status, what went wrong)."""
    timestamp, data = int(time.time()), delivery.body.encode()
    headers = {"Content-Type": "application/json", "User-Agent": "Verdict webhook", "X-Verdict-Event": delivery.event,
               "X-Verdict-Delivery": str(delivery.uuid), "X-Verdict-Timestamp": str(timestamp),
               "X-Verdict-Signature": signature(delivery.webhook.secret(), timestamp, data)}
    try:
        status = post_once(delivery.webhook.url, data, headers)
    except outbound.Refused as refused:
        return False, None, str(refused)
    except (OSError, http.client.HTTPException) as problem:
        log.info("Webhook %s: %s: %s", delivery.webhook.url, type(problem).__name__, problem)
        return True, None, f"{type(problem).__name__}: {problem}" if str(problem) else type(problem).__name__
    retry = status >= 500 or status in RETRY_STATUSES
    return retry, status, "" if 200 <= status < 300 else f"answered {status}"


def retry_wait(retries_done: int) -> int:
    """Seconds before the next try: WEBHOOK_RETRY_SECONDS, then four times longer each time."""
    return settings.WEBHOOK_RETRY_SECONDS * 4 ** retries_done


def add_webhook(project, url: str, *, user) -> tuple[Webhook, str]:
    """A new webhook of the project and its secret (shown to the lead once; kept sealed)."""
    secret = new_secret()
    hook = Webhook(project=project, url=url, created_by=user)
    hook.set_secret(secret)
    hook.save()
    return hook, secret


def with_last_delivery(hooks) -> list[Webhook]:
    """The webhooks, each with `last_delivery` (its newest delivery, or None) for the page and the API: two queries,
    however many webhooks."""
    newest = WebhookDelivery.objects.filter(webhook=OuterRef("pk")).order_by("-created_at", "-pk").values("pk")[:1]
    hooks = list(hooks.annotate(last_delivery_pk=Subquery(newest)))
    found = WebhookDelivery.objects.in_bulk([hook.last_delivery_pk for hook in hooks if hook.last_delivery_pk])
    for hook in hooks:
        hook.last_delivery = found.get(hook.last_delivery_pk)
    return hooks


def post_once(url: str, data: bytes, headers: dict[str, str]) -> int:
    """One POST (a job's webhook, the health webhook) under judgments.lib.outbound's rules, ended by WEBHOOK_DEADLINE; the answer's status."""
    parts = outbound.split_url(url)
    connection = outbound.Connection(url, outbound_policy.policy(), timeout=WEBHOOK_TIMEOUT)
    try:
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return connection.request("POST", target, body=data, headers=headers, deadline=WEBHOOK_DEADLINE,
                                  max_bytes=WEBHOOK_ANSWER_BYTES).status
    finally:
        connection.close()

"""Job webhooks: every job's end is POSTed, signed, to each webhook of its project by the worker's task, retried
with backoff (bounded), under the outbound-address rules, and recorded; the page and the API that manage them.
The receiver is a real HTTP server on a loopback port, allowed as an operator would allow a network."""

import hashlib
import hmac
import json
import socket
import threading
import time

import pytest
from django.urls import reverse

from judgments import tasks
from judgments.models import Webhook, WebhookDelivery
from judgments.ops import webhooks
from judgments.ops.jobs import cancel_job, execute_job, start_job
from tests.api.conftest import token_for
from tests.judgments.test_health import Receiver, receiver  # noqa: F401 (a fixture)


@pytest.fixture
def worker(monkeypatch):
    """Celery's eager apply() in place of the broker: each retry runs at once (the waits are checked apart)."""
    monkeypatch.setattr(tasks.deliver_webhook, "delay", lambda pk: tasks.deliver_webhook.apply(args=[pk]))


def hook_at(project, server, path="/hook") -> tuple[Webhook, str]:
    return webhooks.add_webhook(project, f"http://127.0.0.1:{server.server_port}{path}", user=None)


def end_a_job(people, capture, *, cancel=False):
    with capture(execute=True):
        job = start_job(kind="selfcheck", project=people.project, owner=people.lead)
    with capture(execute=True):
        if cancel:
            cancel_job(job)
        else:
            execute_job(job.pk)
    job.refresh_from_db()
    return job


def verified(secret: str, headers: dict, body: bytes) -> bool:
    """What a receiver does, from the page's and the docs' instructions alone."""
    signed = headers["X-Verdict-Timestamp"].encode() + b"." + body
    expected = "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers["X-Verdict-Signature"], expected) and abs(time.time() - int(headers["X-Verdict-Timestamp"])) < 300


@pytest.mark.usefixtures("outbound_loopback", "worker")
def test_a_job_s_end_is_posted_signed_and_retried_after_a_500(people, receiver, django_capture_on_commit_callbacks):
    hook, secret = hook_at(people.project, receiver, "/hook?team=search")
    assert secret not in hook.secret_sealed and hook.secret() == secret
    job = end_a_job(people, django_capture_on_commit_callbacks)
    assert len(Receiver.received) == 2 and Receiver.paths == ["/hook?team=search"] * 2  # a 500, then the retry
    (first, body), (second, again) = Receiver.received
    assert body == again and first["X-Verdict-Delivery"] == second["X-Verdict-Delivery"]
    assert all(verified(secret, headers, sent) for headers, sent in Receiver.received)
    assert not verified("another secret", first, body)
    assert first["X-Verdict-Event"] == "job.ended" and first["Content-Type"] == "application/json"
    event = json.loads(body)
    assert event["event"] == "job.ended" and event["project"] == people.project.slug
    assert event["job"]["uuid"] == str(job.uuid) and event["job"]["kind"] == "selfcheck" and event["job"]["state"] == "succeeded"
    delivery = WebhookDelivery.objects.get()
    assert (delivery.state, delivery.attempts, delivery.status_code, delivery.job) == ("delivered", 2, 200, job)


@pytest.mark.usefixtures("outbound_loopback", "worker")
def test_each_webhook_hears_a_failed_or_cancelled_job_too(people, receiver, django_capture_on_commit_callbacks):
    Receiver.answers = []
    hook_at(people.project, receiver, "/one")
    hook_at(people.project, receiver, "/two")
    end_a_job(people, django_capture_on_commit_callbacks, cancel=True)
    assert sorted(Receiver.paths) == ["/one", "/two"]
    assert {json.loads(body)["job"]["state"] for _, body in Receiver.received} == {"failed"}
    assert set(WebhookDelivery.objects.values_list("state", flat=True)) == {"delivered"}


@pytest.mark.usefixtures("outbound_loopback", "worker")
def test_tries_stop_at_the_bound_and_a_client_error_is_not_retried(people, receiver, settings, django_capture_on_commit_callbacks):
    settings.WEBHOOK_MAX_ATTEMPTS = 3
    Receiver.answers = [503] * 10
    hook_at(people.project, receiver)
    end_a_job(people, django_capture_on_commit_callbacks)
    assert len(Receiver.received) == 3
    assert WebhookDelivery.objects.values_list("state", "attempts", "status_code").get() == ("failed", 3, 503)
    WebhookDelivery.objects.all().delete()
    Receiver.answers, Receiver.received = [404], []
    end_a_job(people, django_capture_on_commit_callbacks)
    assert len(Receiver.received) == 1
    assert WebhookDelivery.objects.values_list("state", "attempts", "error").get() == ("failed", 1, "answered 404")


def test_the_waits_between_tries_grow_fourfold(settings):
    settings.WEBHOOK_RETRY_SECONDS = 10
    assert [webhooks.retry_wait(n) for n in range(4)] == [10, 40, 160, 640]


@pytest.mark.usefixtures("worker")
def test_a_loopback_receiver_is_refused_unless_the_operator_allows_it(people, receiver, django_capture_on_commit_callbacks):
    response = people.client("lead").post(reverse("judgments:webhooks", args=[people.project.slug]),
                                          {"url": f"http://127.0.0.1:{receiver.server_port}/"})
    assert "loopback" in str(response.context["form"].errors["url"]) and not Webhook.objects.exists()
    hook_at(people.project, receiver)  # saved while the operator allowed it, say
    end_a_job(people, django_capture_on_commit_callbacks)
    assert Receiver.received == []
    delivery = WebhookDelivery.objects.get()
    assert delivery.state == "failed" and delivery.attempts == 1 and "loopback" in delivery.error


@pytest.mark.usefixtures("outbound_loopback")
def test_a_silent_receiver_is_cut_off_by_the_deadline_and_tried_again_later(people, monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setattr(webhooks, "WEBHOOK_DEADLINE", 1)
    silent = socket.create_server(("127.0.0.1", 0))
    accepted = []
    threading.Thread(target=lambda: accepted.append(silent.accept()), daemon=True).start()
    queued = []
    monkeypatch.setattr(tasks.deliver_webhook, "delay", queued.append)
    webhooks.add_webhook(people.project, f"http://127.0.0.1:{silent.getsockname()[1]}/", user=None)
    end_a_job(people, django_capture_on_commit_callbacks)
    started = time.monotonic()
    assert webhooks.deliver(queued[0]) is True  # try again later
    assert time.monotonic() - started < 3
    delivery = WebhookDelivery.objects.get()
    assert delivery.state == "pending" and delivery.attempts == 1 and delivery.status_code is None and delivery.error
    silent.close()


@pytest.mark.usefixtures("outbound_loopback", "worker")
def test_the_page_adds_shows_and_removes_webhooks_for_leads(people, receiver, django_capture_on_commit_callbacks):
    Receiver.answers = []
    page = reverse("judgments:webhooks", args=[people.project.slug])
    lead = people.client("lead")
    made = lead.post(page, {"url": f"http://127.0.0.1:{receiver.server_port}/ci"})
    assert made.status_code == 201
    secret = made.context["secret"]
    assert secret in made.content.decode() and Webhook.objects.get().secret() == secret
    end_a_job(people, django_capture_on_commit_callbacks)
    shown = lead.get(page).content.decode()
    assert secret not in shown and "Delivered" in shown and "(200)" in shown and "selfcheck" in shown
    hook = Webhook.objects.get()
    lead.post(reverse("judgments:webhook-delete", args=[people.project.slug, hook.uuid]))
    assert not Webhook.objects.exists() and not WebhookDelivery.objects.exists()


@pytest.mark.parametrize("who, status", [("viewer", 403), ("rater", 403), ("outsider", 404)])
def test_only_leads_reach_the_webhooks_page(people, who, status):
    hook, _ = webhooks.add_webhook(people.project, "https://hooks.example.com/x", user=people.lead)
    client = people.client(who)
    assert client.get(reverse("judgments:webhooks", args=[people.project.slug])).status_code == status
    assert client.post(reverse("judgments:webhook-delete", args=[people.project.slug, hook.uuid])).status_code == status
    assert Webhook.objects.filter(pk=hook.pk).exists()


@pytest.mark.usefixtures("outbound_loopback")
def test_the_api_lists_adds_and_removes_webhooks(people, receiver, client):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token_for(people.lead, people.project)}"}
    base = f"/api/v1/projects/{people.project.slug}/webhooks"
    made = client.post(base, data=json.dumps({"url": f"http://127.0.0.1:{receiver.server_port}/"}), content_type="application/json", **headers)
    assert made.status_code == 201 and made.json()["secret"].startswith("whsec_") and made.json()["last_delivery"] is None
    assert Webhook.objects.get().secret() == made.json()["secret"]
    listed = client.get(base, **headers).json()["items"]
    assert [item["uuid"] for item in listed] == [made.json()["uuid"]] and "secret" not in listed[0]
    bad = client.post(base, data=json.dumps({"url": "ftp://example.com/"}), content_type="application/json", **headers)
    assert bad.status_code == 400 and bad.json()["detail"].startswith("url:")
    assert client.delete(f"{base}/{made.json()['uuid']}", **headers).status_code == 200
    assert client.delete(f"{base}/{made.json()['uuid']}", **headers).status_code == 404
    assert not Webhook.objects.exists()

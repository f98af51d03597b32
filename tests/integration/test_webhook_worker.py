"""A real worker sends a job's webhook event through the broker, retrying a 500 after its backoff (Celery's retry)."""

import json
import time

import pytest

from judgments.models import Job, WebhookDelivery
from judgments.ops.jobs import start_job
from judgments.ops.webhooks import add_webhook
from tests.factory import make_project, make_user
from tests.integration.test_worker import broker, start_worker, wait_for  # noqa: F401 (fixtures)
from tests.judgments.test_health import Receiver, receiver  # noqa: F401 (a fixture)
from tests.judgments.test_job_webhooks import verified

pytestmark = pytest.mark.worker


@pytest.fixture
def receiver_allowed(monkeypatch):
    """The worker's own settings (its environment, read before start_worker builds it) allow the loopback receiver."""
    monkeypatch.setenv("OUTBOUND_ALLOWED_NETWORKS", "127.0.0.0/8")
    monkeypatch.setenv("WEBHOOK_RETRY_SECONDS", "1")


def test_the_worker_posts_the_signed_event_and_retries_after_its_wait(receiver_allowed, start_worker, receiver):
    start_worker()
    Receiver.answers = [500]
    lead = make_user("lena")
    project = make_project(lead)
    _hook, secret = add_webhook(project, f"http://127.0.0.1:{receiver.server_port}/ci", user=lead)
    job = wait_for(start_job(kind="selfcheck", project=project, owner=lead), {Job.State.SUCCEEDED})
    deadline = time.monotonic() + 60
    while not WebhookDelivery.objects.filter(state=WebhookDelivery.State.DELIVERED).exists():
        assert time.monotonic() < deadline, list(WebhookDelivery.objects.values("state", "attempts", "status_code", "error"))
        time.sleep(0.2)
    assert WebhookDelivery.objects.values_list("attempts", "status_code").get() == (2, 200)
    (first, body), (second, _) = Receiver.received
    assert int(second["X-Verdict-Timestamp"]) - int(first["X-Verdict-Timestamp"]) >= 1  # the retry waited
    assert verified(secret, second, Receiver.received[1][1]) and json.loads(body)["job"]["uuid"] == str(job.uuid)

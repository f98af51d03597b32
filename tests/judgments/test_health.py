"""Health checks on real projects: each trigger measured from the database and stored files, the check
recorded, notifications once per firing (mail to leads, signed webhook with retries), snoozing, the command."""

import hashlib
import hmac
import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.core import mail
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from judgments import tasks
from judgments.lib.querylog import ColumnMapping
from judgments.lib.staleness import OK, STALE, UNMEASURED, WARN
from judgments.models import HealthCheck, Judgment, TriggerState
from judgments.ops import health, log_sampling
from judgments.ops.actions import save_guidelines
from judgments.ops.imports import import_run
from tests.evaluation.test_evaluations import DOCS, evaluated, setup  # noqa: F401 (a fixture)
from tests.factory import make_project, trec_run

pytestmark = pytest.mark.django_db

# Run C puts three documents nobody judged above two judged ones: 60% of its top 5 (and of its top 10) unjudged.
RUN_C = {q: [f"{q}-c{i}" for i in range(3)] + docs[:2] for q, docs in DOCS.items()}


class Worker:
    """Stands in for the Celery worker: what check_project queues waits in `queued` until `run()` sends it."""

    def __init__(self):
        self.queued: list[tuple] = []

    def run(self) -> None:
        while self.queued:
            tasks.notify_health(*self.queued.pop(0))


@pytest.fixture
def worker(monkeypatch) -> Worker:
    found = Worker()
    monkeypatch.setattr(tasks.notify_health, "delay_on_commit", lambda *args: found.queued.append(args))
    return found


@pytest.fixture
def mail_on(settings):
    settings.EMAIL_ENABLED = True
    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}


def states(check: HealthCheck) -> dict[str, str]:
    return {key: trigger["state"] for key, trigger in check.triggers.items()}


def import_log(project, tmp_path, name: str, counts: dict[str, int]):
    path = tmp_path / f"{name}.csv"
    path.write_text("query,count\n" + "".join(f"{q},{n}\n" for q, n in counts.items()))
    return log_sampling.import_query_log(project, path, path.name, name=name, mapping=ColumnMapping(query="query", count="count"))


def test_new_systems_fire_on_a_run_with_a_large_unjudged_share_and_list_runs_never_evaluated(people, setup):
    round, run_a, run_b, _ = setup
    evaluated(people, round, [run_a, run_b], measures=("nDCG@10", "nDCG@20"))
    trigger = health.measure_new_systems(people.project, health.health_settings(people.project).thresholds())
    assert trigger.state == OK and trigger.value == pytest.approx(1 / 6)  # B: one new document in its six
    run_c, _ = import_run(people.project, trec_run(RUN_C, "c"), "c.run", name="C", system="dense")
    trigger = health.measure_new_systems(people.project, health.health_settings(people.project).thresholds())
    assert trigger.details["unmeasured"] == ["C"] and "1 run not yet measured" in trigger.summary
    evaluated(people, round, [run_c], measures=("nDCG@10",))
    trigger = health.measure_new_systems(people.project, health.health_settings(people.project).thresholds())
    assert trigger.state == STALE and trigger.value == pytest.approx(0.6) and trigger.details["unmeasured"] == []
    assert {(row["run"], row["cutoff"]) for row in trigger.details["over"]} == {("C", 10), ("C", 20)}


def test_query_drift_measures_the_newest_log_against_the_query_sets_and_the_log_before(people, setup, tmp_path):
    import_log(people.project, tmp_path, "October", {"tent": 60, "boots": 30, "red tent": 10})
    october = health.measure_query_drift(people.project, health.health_settings(people.project).thresholds())
    assert october.state == OK and october.value == 1.0 and october.details["divergence"] is None
    import_log(people.project, tmp_path, "November", {"tent": 20, "camping chair": 50, "boots": 10, "headlamp": 20})
    november = health.measure_query_drift(people.project, health.health_settings(people.project).thresholds())
    assert november.state == STALE and november.value == pytest.approx(0.30)
    assert november.details["new_head"] == [("camping chair", 50), ("headlamp", 20)]
    assert 0 < november.details["divergence"] < 1 and november.details["log"] == "November"


def test_guidelines_age_and_agreement_fire_on_data_built_for_them(people, setup):
    round = setup[0]
    limits = health.health_settings(people.project).thresholds()
    assert health.measure_guidelines(people.project).state == OK
    save_guidelines(people.project, "# Rules, stricter", author=people.lead)
    changed = health.measure_guidelines(people.project)
    assert changed.state == WARN and changed.value == 20 and changed.details["rounds"][0]["round"] == "Round"
    now = timezone.now()
    assert health.measure_age(people.project, limits, now).state == OK
    old = list(Judgment.objects.filter(item__round=round).values_list("pk", flat=True)[:6])
    Judgment.objects.filter(pk__in=old).update(created_at=now - timedelta(days=181))
    aged = health.measure_age(people.project, limits, now)
    assert aged.state == WARN and aged.value == pytest.approx(6 / 20)
    assert health.measure_agreement(people.project).state == WARN  # grades and no agreement report


def test_a_check_is_recorded_and_mails_the_leads_once_per_firing(people, setup, mail_on, tmp_path, worker):
    people.lead.email = "lena@example.com"
    people.lead.save()
    import_log(people.project, tmp_path, "November", {"camping chair": 50, "tent": 10})
    first = health.check_project(people.project)
    assert mail.outbox == [] and len(worker.queued) == 1  # the worker sends it
    worker.run()
    assert first.firing and states(first)["query_drift"] == STALE and states(first)["new_systems"] == UNMEASURED
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["lena@example.com"]
    assert "Query drift" in mail.outbox[0].body and "camping chair" not in mail.outbox[0].subject
    fired_at = TriggerState.objects.get(project=people.project, trigger="query_drift").first_fired_at
    assert fired_at == first.at
    second = health.check_project(people.project, now=first.at + timedelta(days=31))
    worker.run()
    assert second.firing and len(mail.outbox) == 1  # still firing: no second mail
    assert TriggerState.objects.get(project=people.project, trigger="query_drift").first_fired_at == fired_at
    assert list(people.project.health_checks.values_list("pk", flat=True)) == [second.pk, first.pk]


def test_a_snoozed_trigger_is_recorded_but_not_announced(people, setup, mail_on, tmp_path, worker):
    people.lead.email = "lena@example.com"
    people.lead.save()
    health.snooze(people.project, "query_drift", days=30, reason="holiday traffic", user=people.lead)
    health.snooze(people.project, "agreement", days=30, reason="report next week", user=people.lead)
    import_log(people.project, tmp_path, "November", {"camping chair": 50, "tent": 10})
    check = health.check_project(people.project)
    worker.run()
    assert check.firing and mail.outbox == []
    state = TriggerState.objects.get(project=people.project, trigger="query_drift")
    assert state.is_snoozed() and state.snooze_reason == "holiday traffic" and state.snoozed_by == people.lead


class Receiver(BaseHTTPRequestHandler):
    answers: list[int] = []
    received: list[tuple[dict, bytes]] = []
    paths: list[str] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((dict(self.headers), body))
        type(self).paths.append(self.path)
        self.send_response(type(self).answers.pop(0) if type(self).answers else 200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    Receiver.answers, Receiver.received, Receiver.paths = [500], [], []
    server = HTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.usefixtures("outbound_loopback")
def test_the_webhook_is_signed_with_the_project_secret_and_retried_after_a_500(people, setup, receiver, tmp_path, monkeypatch,
                                                                               django_capture_on_commit_callbacks):
    monkeypatch.setattr(health, "WEBHOOK_BACKOFF", 0.01)
    queued = []
    monkeypatch.setattr(tasks.notify_health, "delay", lambda *args: queued.append(args))
    found = health.health_settings(people.project)
    found.webhook_url = f"http://127.0.0.1:{receiver.server_port}/hook?channel=search"
    found.set_webhook_secret("s3cret")
    found.save()
    assert "s3cret" not in found.webhook_secret_sealed
    import_log(people.project, tmp_path, "November", {"camping chair": 50, "tent": 10})
    with django_capture_on_commit_callbacks(execute=True):
        check = health.check_project(people.project)
    assert Receiver.received == [] and queued == [(check.pk, ["query_drift", "agreement"])]  # queued once committed
    tasks.notify_health(*queued[0])  # as the worker runs it
    assert len(Receiver.received) == 2  # a 500, then the retry
    assert Receiver.paths == ["/hook?channel=search"] * 2
    for headers, body in Receiver.received:
        expected = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers["X-Verdict-Signature"], expected)
    sent = json.loads(Receiver.received[-1][1])
    assert sent["project"] == people.project.slug and sent["check"] == str(check.uuid)
    assert "query_drift" in [row["trigger"] for row in sent["firing"]]
    with django_capture_on_commit_callbacks(execute=True):
        health.check_project(people.project)
    assert len(queued) == 1  # not again while it stays on


@pytest.mark.usefixtures("outbound_loopback")
def test_post_webhook_backs_off_and_gives_up_on_a_client_error(receiver):
    waits = []
    Receiver.answers = [500, 503, 200]
    assert health.post_webhook(f"http://127.0.0.1:{receiver.server_port}/", "k", {"a": 1}, sleep=waits.append, backoff=1) == 200
    assert waits == [1, 2]
    Receiver.answers = [404]
    assert health.post_webhook(f"http://127.0.0.1:{receiver.server_port}/", "k", {"a": 1}, sleep=waits.append) == 404


def test_the_command_exits_3_on_a_quiet_project_without_evidence_and_1_when_a_trigger_fires_with_json(people, setup, capsys):
    quiet = make_project(people.lead, name="Quiet")  # no run, no log, no label: nothing fires, nothing is known
    with pytest.raises(SystemExit) as exited:
        call_command("check_health", quiet.slug)
    assert exited.value.code == 3
    assert "quiet: nothing fires; 4 have not enough evidence: New systems, Query drift, Label age, Agreement" in capsys.readouterr().out
    call_command("check_health", quiet.slug, "--allow-insufficient")  # exits 0
    assert "quiet: nothing fires" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exited:
        call_command("check_health", people.project.slug, "--json", "--no-notify")
    assert exited.value.code == 1
    [printed] = json.loads(capsys.readouterr().out)
    assert printed["firing"] and printed["triggers"]["agreement"]["state"] == WARN
    assert HealthCheck.objects.filter(project=people.project).count() == 1


def test_due_checks_follow_each_project_schedule(people):
    now = timezone.now()
    assert health.is_due(people.project, now)
    health.check_project(people.project, now=now)
    assert not health.is_due(people.project, now + timedelta(days=29))
    assert health.is_due(people.project, now + timedelta(days=30))
    due = health.check_due(now + timedelta(days=30))
    assert people.project in [check.project for check in due]


# ------------------------------------------------------------------------------------------------ pages


def health_url(project, name="health", *args) -> str:
    return reverse(f"judgments:{name}", args=[project.slug, *args])


def test_raters_get_403_outsiders_404_and_viewers_read_without_lead_controls(people):
    for who, status in (("rater", 403), ("outsider", 404), ("viewer", 200), ("lead", 200)):
        assert people.client(who).get(health_url(people.project)).status_code == status, who
    for who, status in (("rater", 403), ("outsider", 404), ("viewer", 403)):
        assert people.client(who).post(health_url(people.project, "health-check")).status_code == status, who
        assert people.client(who).post(health_url(people.project, "health-snooze", "age"), {"days": 3, "reason": "x"}).status_code == status
    page = people.client("viewer").get(health_url(people.project)).content.decode()
    assert "Check now" not in page and 'id="settings"' not in page


def test_the_page_shows_each_trigger_its_trend_and_remedies_and_the_overview_sums_it_up(people, setup, tmp_path):
    round, run_a, run_b, _ = setup
    client = people.client("lead")
    import_log(people.project, tmp_path, "October", {"tent": 60, "boots": 30})
    assert client.post(health_url(people.project, "health-check")).status_code == 302
    import_log(people.project, tmp_path, "November", {"camping chair": 50, "tent": 10})
    run_c, _ = import_run(people.project, trec_run(RUN_C, "c"), "c.run", name="C", system="dense")
    client.post(health_url(people.project, "health-check"))
    page = client.get(health_url(people.project)).content.decode()
    drift = page[page.index('id="trigger-query_drift"'):page.index('id="trigger-guidelines"')]
    assert "stale" in drift and "camping chair" in drift and "Firing since" in drift
    assert "<svg" in drift and "The trend as text" in drift  # two checks: a trend
    log_uuid = people.project.query_logs.get(name="November").uuid
    assert reverse("judgments:query-log", args=[people.project.slug, log_uuid]) + "#sampling" in drift
    systems = page[page.index('id="trigger-new_systems"'):page.index('id="trigger-query_drift"')]
    assert health_url(people.project, "health-evaluate", run_c.uuid) in systems
    agreement = page[page.index('id="trigger-agreement"'):]
    assert reverse("judgments:round-agreement-compute", args=[people.project.slug, round.uuid]) in agreement
    response = client.post(health_url(people.project, "health-evaluate", run_c.uuid))
    assert response.status_code == 302 and "/evaluations/" in response["Location"]
    overview = client.get(reverse("judgments:project", args=[people.project.slug])).content.decode()
    summary = overview[overview.index('id="health-title"'):]
    assert "2 triggers fire: Query drift, Agreement" in summary


def test_a_lead_snoozes_a_trigger_with_a_reason_and_lifts_it(people, setup):
    client = people.client("lead")
    client.post(health_url(people.project, "health-check"))
    response = client.post(health_url(people.project, "health-snooze", "agreement"), {"days": "14", "reason": "report on Monday"})
    assert response.status_code == 302
    page = client.get(health_url(people.project)).content.decode()
    assert "report on Monday" in page and "Stop snoozing" in page
    client.post(health_url(people.project, "health-snooze", "agreement"), {"unsnooze": "1"})
    assert not TriggerState.objects.get(project=people.project, trigger="agreement").is_snoozed()
    assert client.post(health_url(people.project, "health-snooze", "agreement"), {"days": "14"}).status_code == 302
    assert not TriggerState.objects.get(project=people.project, trigger="agreement").is_snoozed()  # a reason is required


def test_the_settings_keep_the_webhook_secret_sealed_and_refuse_crossed_thresholds(people):
    client = people.client("lead")
    form = {"every_days": "7", "unjudged_warn": "0.1", "unjudged_stale": "0.2", "head_judged_share": "0.6",
            "new_head_queries": "10", "age_days": "90", "age_warn": "0.3", "age_stale": "0.5", "notify": "on",
            "webhook_url": "https://hooks.example.com/verdict", "webhook_secret": "topsecret", "cutoffs_text": "20, 5"}
    assert client.post(health_url(people.project, "health-settings"), form).status_code == 302
    found = health.health_settings(people.project)
    assert found.thresholds().cutoffs == (5, 20)
    assert found.every_days == 7 and found.webhook_secret() == "topsecret" and "topsecret" not in found.webhook_secret_sealed
    assert "topsecret" not in client.get(health_url(people.project)).content.decode()
    crossed = client.post(health_url(people.project, "health-settings"), form | {"unjudged_warn": "0.5"})
    assert crossed.status_code == 400 and "at least the warn threshold" in crossed.content.decode()
    assert client.post(health_url(people.project, "health-settings"), form | {"cutoffs_text": "10 ²"}).status_code == 400


def test_re_judging_the_overlap_is_a_refresh_round_of_the_newest_version_or_first_a_publish(people, setup):
    from judgments.models import Round
    from judgments.ops import versions

    round = setup[0]
    client = people.client("lead")
    client.post(health_url(people.project, "health-check"))
    page = client.get(health_url(people.project)).content.decode()
    agreement = page[page.index('id="trigger-agreement"'):]
    assert reverse("judgments:round-publish", args=[people.project.slug, round.uuid]) in agreement
    version = versions.publish(round, user=people.lead)
    page = client.get(health_url(people.project)).content.decode()
    agreement = page[page.index('id="trigger-agreement"'):]
    refresh_url = reverse("judgments:list-version-refresh", args=[people.project.slug, version.uuid])
    assert refresh_url in agreement and "15% sample of v1" in agreement
    remedy = next(r for r in health.remedies(people.project, "agreement", {"round_uuid": str(round.uuid)}) if r["url"] == refresh_url)
    response = client.post(refresh_url, remedy["fields"])
    refresh = Round.objects.get(refreshed_from=version)
    assert response.status_code == 302 and refresh.rejudge == Round.Rejudge.SAMPLE and refresh.rejudge_share == pytest.approx(0.15)

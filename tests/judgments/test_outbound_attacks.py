"""A project lead is not the server's administrator, attacked through the app: a server secret named as the LLM
key's variable, internal addresses as the base URL or the webhook, servers that drip or stay silent. Each attack
is tried where a lead can type it (the page, the API) and where it would take effect (the run, the worker)."""

import json
import time

import pytest
from django.urls import reverse

from api.models import ApiToken, Scope
from judgments import tasks
from judgments.models import HealthSettings, Job, LLMEndpoint
from judgments.ops import automatic, health, webhooks
from judgments.ops.actions import ActionRefused
from judgments.ops.automatic import PairChoice, add_judge, run_judge
from tests.config.test_settings import load_settings
from tests.drip import DripServer
from tests.factory import run_queued_jobs
from tests.judges.fake_llm import FakeLLM, Reply
from tests.judgments.test_automatic_judges import reference_round
from tests.judgments.test_outbound import INTERNAL

pytestmark = pytest.mark.django_db

SERVER_SECRETS = ["SECRET_KEY", "DATABASE_URL", "S3_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", "EMAIL_URL",
                  "CELERY_BROKER_URL", "HOME"]


def endpoint_page(people) -> str:
    return reverse("judgments:llm-endpoint", args=[people.project.slug])


def api_put(people, body: dict):
    _, secret = ApiToken.issue(user=people.lead, project=people.project, name="script", scope=Scope.WRITE)
    return people.client("lead").put(f"/api/v1/projects/{people.project.slug}/llm-endpoint", json.dumps(body),
                                     content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}")


def llm_round(people, base_url: str, *, api_key_env: str = "", **judge_settings):
    """A round with an LLM judge whose endpoint row is written as it is, past every form (as a stale row would be)."""
    round = reference_round(people)
    LLMEndpoint.objects.create(project=people.project, base_url=base_url, model="fake-model", api_key_env=api_key_env)
    judge = add_judge(round, name="gpt", kind="llm", settings={"backoff": 0.0, "max_retries": 0, **judge_settings})
    return round, judge


# ------------------------------------------------------------------------------------------ the key's variable


@pytest.mark.parametrize("name", SERVER_SECRETS)
def test_a_server_secret_named_as_the_key_variable_is_refused_by_the_page(people, name):
    page = people.client("lead").post(endpoint_page(people), {"base_url": "https://api.example.com/v1", "model": "m",
                                                              "api_key_env": name})
    text = page.content.decode()
    assert page.status_code == 200 and f"{name} is not a variable the operator allows" in text
    assert not LLMEndpoint.objects.exists()


@pytest.mark.parametrize("name", SERVER_SECRETS)
def test_a_server_secret_named_as_the_key_variable_is_refused_by_the_api(people, name):
    answer = api_put(people, {"base_url": "https://api.example.com/v1", "model": "m", "api_key_env": name})
    assert answer.status_code == 400 and answer.json()["detail"].startswith(f"api_key_env: {name} is not a variable")
    assert not LLMEndpoint.objects.exists()


@pytest.mark.usefixtures("outbound_loopback")
def test_a_server_secret_in_a_stored_row_is_refused_at_run_time_and_nothing_is_sent(people, settings):
    with FakeLLM() as server:
        round, judge = llm_round(people, server.base_url + "/v1", api_key_env="SECRET_KEY")
        with pytest.raises(ActionRefused, match="SECRET_KEY is not a variable the operator allows"):
            run_judge(judge)
        automatic.start_run(judge, PairChoice(), user=people.lead)
        [job] = run_queued_jobs()
        assert server.requests == []
    assert job.state == Job.State.FAILED and "SECRET_KEY is not a variable the operator allows" in job.error
    assert settings.SECRET_KEY not in job.error
    assert "API key: <strong>NOT USABLE" in people.client("lead").get(endpoint_page(people)).content.decode()


@pytest.mark.usefixtures("outbound_loopback")
def test_a_variable_the_operator_names_or_prefixes_is_used_and_listed(people, settings, monkeypatch):
    settings.ENDPOINT_KEY_VARIABLES = ["OPENAI_API_KEY"]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-named")
    monkeypatch.setenv("VERDICT_KEY_LOCAL_VLLM", "sk-prefixed")
    page = people.client("lead").get(endpoint_page(people)).content.decode()
    assert "<code>OPENAI_API_KEY</code>, <code>VERDICT_KEY_LOCAL_VLLM</code>" in page
    with FakeLLM() as server:
        round, judge = llm_round(people, server.base_url + "/v1")
        for name, key in (("OPENAI_API_KEY", "sk-named"), ("VERDICT_KEY_LOCAL_VLLM", "sk-prefixed")):
            answer = api_put(people, {"base_url": server.base_url + "/v1", "model": "fake-model", "api_key_env": name})
            assert answer.status_code == 200 and answer.json()["key_status"] == f"from the environment variable {name}"
            judge.grades.all().delete()
            server.requests.clear()
            run_judge(judge, PairChoice.parse("sample:1", seed=len(name)))
            assert server.requests[0].headers["authorization"] == f"Bearer {key}"


@pytest.mark.parametrize("listed", ["SECRET_KEY", "DATABASE_URL", "AWS_SECRET_ACCESS_KEY", "S3_SECRET_ACCESS_KEY", "NOT-A-NAME"])
def test_the_operator_cannot_list_a_setting_of_verdicts_own_as_a_key_variable(listed):
    result = load_settings(ENDPOINT_KEY_VARIABLES=f"OPENAI_API_KEY,{listed}")
    assert result.returncode != 0 and f"ENDPOINT_KEY_VARIABLES: {listed!r} cannot hold an endpoint's key" in result.stderr


def test_a_malformed_outbound_allowance_stops_start_up():
    result = load_settings(OUTBOUND_ALLOWED_NETWORKS="10.0.5.0/24,the-intranet")
    assert result.returncode != 0 and "'the-intranet' is not a network" in result.stderr


# ------------------------------------------------------------------------------------------ internal addresses


@pytest.mark.parametrize("url", INTERNAL + ["ftp://example.com/v1", "gopher://127.0.0.1:6379/_FLUSHALL"])
def test_an_internal_or_non_http_base_url_is_refused_by_the_page_and_the_api(people, url):
    page = people.client("lead").post(endpoint_page(people), {"base_url": url, "model": "m"})
    assert page.status_code == 200 and "errorlist" in page.content.decode()
    answer = api_put(people, {"base_url": url, "model": "m"})
    assert answer.status_code == 400 and answer.json()["detail"].startswith("base_url: ")
    assert not LLMEndpoint.objects.exists()


@pytest.mark.parametrize("url", INTERNAL + ["ftp://hooks.example.com/verdict"])
def test_an_internal_or_non_http_webhook_is_refused_by_the_health_settings(people, url):
    form = {"every_days": 30, "unjudged_warn": 0.1, "unjudged_stale": 0.3, "head_judged_share": 0.8, "new_head_queries": 5,
            "age_days": 365, "age_warn": 0.3, "age_stale": 0.5, "cutoffs_text": "10 20", "webhook_url": url}
    page = people.client("lead").post(reverse("judgments:health-settings", args=[people.project.slug]), form)
    assert page.status_code == 400 and "errorlist" in page.content.decode()
    assert not HealthSettings.objects.filter(project=people.project).exclude(webhook_url="").exists()


def test_the_operator_may_allow_an_internal_model_server(people, settings):
    from judgments.lib.outbound import Policy

    settings.OUTBOUND_POLICY = Policy.of(hosts=["localhost:11434"])
    assert api_put(people, {"base_url": "http://localhost:11434/v1", "model": "llama3"}).status_code == 200
    assert api_put(people, {"base_url": "http://localhost:6379/v1", "model": "llama3"}).status_code == 400


def test_a_loopback_endpoint_in_a_stored_row_is_refused_at_run_time_without_a_request(people):
    with FakeLLM() as server:
        round, judge = llm_round(people, server.base_url + "/v1")  # past the form, as a row from before this rule
        with pytest.raises(ActionRefused, match=r"127.0.0.1 is a loopback address"):
            run_judge(judge)
        assert server.requests == []


def test_a_loopback_webhook_in_a_stored_row_gets_nothing(people):
    with DripServer("silent") as server:
        found = health.health_settings(people.project)
        HealthSettings.objects.filter(pk=found.pk).update(webhook_url=server.url + "/hook")
        assert health.post_webhook(server.url + "/hook", "", {"a": 1}, sleep=lambda seconds: None) is None
        time.sleep(0.2)
        assert server.requests == []


@pytest.mark.usefixtures("outbound_loopback")
def test_a_job_error_names_the_status_and_the_endpoint_never_an_answer_that_is_not_the_apis(people):
    with FakeLLM() as server:
        server.answer = lambda request: Reply.status_code(404, body=b"<html>Page not found. URLconf: admin/ api/ ...</html>")
        round, judge = llm_round(people, server.base_url + "/v1")
        automatic.start_run(judge, PairChoice(), user=people.lead)
        [job] = run_queued_jobs()
    assert job.state == Job.State.FAILED
    assert f"{server.base_url}/v1/chat/completions refused the request with HTTP 404" in job.error
    assert "URLconf" not in job.error and "Page not found" not in job.error


# ------------------------------------------------------------------------------------------ slow servers


@pytest.mark.usefixtures("outbound_loopback")
@pytest.mark.parametrize("mode", ["drip", "silent"])
def test_a_judge_run_gives_up_on_a_dripping_or_silent_endpoint_at_its_deadline(people, mode):
    with DripServer(mode, interval=0.1) as server:
        round, judge = llm_round(people, server.url + "/v1", timeout=30, deadline=1, concurrency=4)
        started = time.monotonic()
        result = run_judge(judge, PairChoice.parse("sample:4"))
        took = time.monotonic() - started
    assert result["could_not_judge"] == {"endpoint_failed": 4} and took < 4
    assert {reason for reason in judge.grades.values_list("rationale", flat=True)} == {
        "The endpoint failed 1 try; the last: no complete answer within the deadline of 1 s."}


@pytest.mark.usefixtures("outbound_loopback")
@pytest.mark.parametrize("mode", ["drip", "silent"])
def test_a_webhook_gives_up_on_a_dripping_or_silent_receiver_at_its_deadline(mode, monkeypatch):
    monkeypatch.setattr(webhooks, "WEBHOOK_DEADLINE", 1.0)
    with DripServer(mode, interval=0.1) as server:
        started = time.monotonic()
        assert health.post_webhook(server.url + "/hook", "s", {"a": 1}, tries=2, sleep=lambda seconds: None) is None
        took = time.monotonic() - started
    assert len(server.requests) == 2 and 2 <= took < 3.5


@pytest.mark.usefixtures("outbound_loopback")
def test_check_now_answers_at_once_and_leaves_the_webhook_to_the_worker(people, monkeypatch, tmp_path):
    from tests.judgments.test_health import import_log

    queued = []
    monkeypatch.setattr(tasks.notify_health, "delay_on_commit", lambda *args: queued.append(args))
    with DripServer("silent") as server:
        HealthSettings.objects.update_or_create(project=people.project, defaults={"webhook_url": server.url + "/hook"})
        import_log(people.project, tmp_path, "November", {"camping chair": 50, "tent": 10})
        started = time.monotonic()
        answer = people.client("lead").post(reverse("judgments:health-check", args=[people.project.slug]))
        took = time.monotonic() - started
        time.sleep(0.3)
        assert answer.status_code == 302 and took < 5 and server.requests == []
    assert len(queued) == 1

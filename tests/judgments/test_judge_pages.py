"""The lead's pages for automatic judges: add one (a form from its settings), run it as a job, cancel the job,
see machine grades beside the raters' with a robot badge; the project's LLM endpoint with a key never shown
back. Raters get 403 on every judge page, outsiders 404, viewers read but change nothing."""

import pytest

from judgments import judges
from judgments.judges import Availability
from judgments.models import Job, LLMEndpoint, MachineGrade, RoundJudge
from judgments.ops import grading
from judgments.ops.grading import Verdict
from tests.factory import run_queued_jobs
from tests.judges.fake_llm import FakeLLM, Reply
from tests.judgments.test_automatic_judges import overlap_judge, reference_round

pytestmark = pytest.mark.django_db

KEY = "sk-live-do-not-show-4f9a1c"


@pytest.fixture
def round(people):
    return reference_round(people)


def judges_url(round):
    return f"/p/{round.project.slug}/rounds/{round.uuid}/judges/"


def test_the_judges_page_offers_every_kind_to_the_lead_and_only_reads_for_viewers(people, round):
    overlap_judge(round)
    page = people.client("lead").get(judges_url(round)).content.decode()
    assert 'class="robot-badge"' in page and "overlap" in page and "0 of 12" in page
    assert f"{judges_url(round)}new/token_overlap/" in page and "Set the project's" in page  # LLM: no endpoint yet
    viewer = people.client("viewer").get(judges_url(round))
    assert viewer.status_code == 200 and "new/token_overlap/" not in viewer.content.decode()
    assert people.client("rater").get(judges_url(round)).status_code == 403
    assert people.client("outsider").get(judges_url(round)).status_code == 404


def test_an_unavailable_kind_is_shown_with_its_install_command_and_cannot_be_added(people, round, monkeypatch):
    monkeypatch.setattr(judges.SemanticJudge, "availability",
                        classmethod(lambda cls: Availability(False, "the semantic judge needs onnx", "pip install -r requirements-judges.txt")))
    page = people.client("lead").get(judges_url(round)).content.decode()
    assert "Unavailable here" in page and "pip install -r requirements-judges.txt" in page
    assert "new/semantic/" not in page
    response = people.client("lead").post(f"{judges_url(round)}new/semantic/", {"name": "s", "min_kappa": 0.4, "min_tau": 0.9})
    assert response.status_code == 200 and "pip install -r requirements-judges.txt" in response.content.decode()
    assert not RoundJudge.objects.exists()


def test_the_lead_adds_a_judge_through_a_form_made_from_its_settings(people, round):
    url = f"{judges_url(round)}new/token_overlap/"
    form = people.client("lead").get(url).content.decode()
    for setting in ("setting_min_tokens", "setting_overlap_ratio", "setting_query_boost", "setting_stopwords", "setting_relevant_grade"):
        assert f'name="{setting}"' in form
    assert "Default: 15." in form
    response = people.client("lead").post(url, {"name": "strict", "setting_min_tokens": "3", "setting_query_boost": "false",
                                                "setting_stopwords": '["the", "a"]', "min_kappa": "0.5", "min_tau": "0.8"})
    judge = RoundJudge.objects.get()
    assert response.status_code == 302 and response["Location"] == judge.get_absolute_url()
    assert (judge.name, judge.kind, judge.min_kappa, judge.min_tau, judge.created_by) == ("strict", "token_overlap", 0.5, 0.8, people.lead)
    assert judge.settings == {"min_tokens": 3, "overlap_ratio": 0.6, "query_boost": False, "stopwords": ["the", "a"],
                              "relevant_grade": None}


def test_bad_settings_are_shown_on_their_field(people, round):
    url = f"{judges_url(round)}new/token_overlap/"
    page = people.client("lead").post(url, {"name": "x", "setting_overlap_ratio": "7", "min_kappa": "0.4", "min_tau": "0.9"})
    assert page.status_code == 200 and "overlap_ratio: must be" in page.content.decode()
    page = people.client("lead").post(url, {"name": "x", "setting_stopwords": "the, a", "min_kappa": "0.4", "min_tau": "0.9"})
    assert "Write a JSON list" in page.content.decode()
    assert not RoundJudge.objects.exists()
    assert people.client("lead").get(f"{judges_url(round)}new/oracle/").status_code == 404


def test_only_leads_add_or_run_judges(people, round):
    judge = overlap_judge(round)
    create = f"{judges_url(round)}new/token_overlap/"
    run = f"{judge.get_absolute_url()}run/"
    data = {"name": "x", "min_kappa": "0.4", "min_tau": "0.9", "pairs": "all"}
    for who, status in (("viewer", 403), ("rater", 403), ("outsider", 404)):
        assert people.client(who).post(create, data).status_code == status
        assert people.client(who).post(run, data).status_code == status
    assert people.client("lead").get(run).status_code == 405
    assert RoundJudge.objects.count() == 1 and not Job.objects.exists()


def test_running_a_judge_is_a_job_whose_grades_show_beside_the_raters_with_a_robot_badge(people, round):
    grading.record(round.items.get(document__doc_id="d11"), people.rater, Verdict(grade=2))
    judge = overlap_judge(round)
    response = people.client("lead").post(f"{judge.get_absolute_url()}run/", {"pairs": "all", "n": "", "seed": ""})
    job = Job.objects.get(kind="run_judge")
    assert response["Location"] == job.get_absolute_url() and job.params == {"judge": str(judge.uuid), "pairs": "all", "seed": 0}
    run_queued_jobs()
    assert MachineGrade.objects.filter(judge=judge).count() == 12

    page = people.client("lead").get(judge.get_absolute_url()).content.decode()
    assert "12 of 12 pairs judged" in page and 'class="robot-badge"' in page and "ravi: 2" in page and "texts are equal" in page
    query_page = people.client("lead").get(f"/p/{round.project.slug}/rounds/{round.uuid}/q/q1/").content.decode()
    assert "<strong>ravi</strong>" in query_page and 'class="robot-badge"' in query_page and "overlap: 3" in query_page
    assert people.client("viewer").get(judge.get_absolute_url()).status_code == 200
    assert people.client("rater").get(judge.get_absolute_url()).status_code == 403
    assert people.client("rater").get(f"/p/{round.project.slug}/rounds/{round.uuid}/q/q1/").status_code == 403
    assert people.client("outsider").get(judge.get_absolute_url()).status_code == 404


def test_a_sample_run_needs_its_size(people, round):
    judge = overlap_judge(round)
    people.client("lead").post(f"{judge.get_absolute_url()}run/", {"pairs": "sample", "n": "", "seed": "4"})
    assert not Job.objects.exists()
    people.client("lead").post(f"{judge.get_absolute_url()}run/", {"pairs": "sample", "n": "5", "seed": "4"})
    assert Job.objects.get().params == {"judge": str(judge.uuid), "pairs": "sample:5", "seed": 4}
    [job] = run_queued_jobs()
    assert job.result["judged"] == 5


def test_a_lead_cancels_a_run_from_its_job_page(people, round):
    judge = overlap_judge(round)
    people.client("lead").post(f"{judge.get_absolute_url()}run/", {"pairs": "all"})
    job = Job.objects.get()
    page = people.client("lead").get(job.get_absolute_url()).content.decode()
    assert f"/jobs/{job.uuid}/cancel/" in page
    assert f"/jobs/{job.uuid}/cancel/" not in people.client("viewer").get(job.get_absolute_url()).content.decode()
    assert people.client("viewer").post(f"/p/{round.project.slug}/jobs/{job.uuid}/cancel/").status_code == 403
    people.client("lead").post(f"/p/{round.project.slug}/jobs/{job.uuid}/cancel/")
    job.refresh_from_db()
    assert job.state == Job.State.FAILED and job.error == "Cancelled before it started."
    assert run_queued_jobs() == [] and not MachineGrade.objects.exists()


# ------------------------------------------------------------------------------------------ LLM endpoint


def endpoint_url(people):
    return f"/p/{people.project.slug}/llm-endpoint/"


def test_the_endpoint_key_is_stored_sealed_and_shown_only_as_set(people):
    url = endpoint_url(people)
    assert "not set" in people.client("lead").get(url).content.decode()
    people.client("lead").post(url, {"base_url": "https://api.example.com/v1", "model": "gpt-x", "api_key": KEY})
    endpoint = LLMEndpoint.objects.get()
    assert endpoint.api_key() == KEY and KEY not in endpoint.api_key_sealed
    page = people.client("lead").get(url).content.decode()
    assert "<strong>set</strong>" in page and KEY not in page and "gpt-x" in page

    people.client("lead").post(url, {"base_url": "https://api.example.com/v1", "model": "gpt-y", "api_key": ""})
    assert LLMEndpoint.objects.get().api_key() == KEY  # an empty box keeps the key
    people.client("lead").post(url, {"base_url": "https://api.example.com/v1", "model": "gpt-y", "clear_key": "on"})
    assert LLMEndpoint.objects.get().api_key() is None


def test_a_bad_endpoint_is_refused_and_only_leads_see_the_page(people):
    url = endpoint_url(people)
    page = people.client("lead").post(url, {"base_url": "ftp://x", "model": "m", "api_key": KEY})
    assert page.status_code == 200 and "http:// or https://" in page.content.decode() and KEY not in page.content.decode()
    assert not LLMEndpoint.objects.exists()
    for who, status in (("viewer", 403), ("rater", 403), ("outsider", 404)):
        assert people.client(who).get(url).status_code == status
        assert people.client(who).post(url, {"base_url": "https://a.example/v1", "model": "m"}).status_code == status
    assert not LLMEndpoint.objects.exists()


@pytest.mark.usefixtures("outbound_loopback")
def test_an_llm_judge_added_and_run_through_the_pages_never_shows_its_key(people, round):
    lead = people.client("lead")
    with FakeLLM() as server:
        server.answer = lambda request: Reply.text("Final grade: 3" if "Text of d12" in request.user else "Final grade: 0")
        lead.post(endpoint_url(people), {"base_url": server.base_url, "model": "fake-model", "api_key": KEY})
        lead.post(f"{judges_url(round)}new/llm/", {"name": "gpt", "setting_backoff": "0", "min_kappa": "0.4", "min_tau": "0.9"})
        judge = RoundJudge.objects.get()
        lead.post(f"{judge.get_absolute_url()}run/", {"pairs": "all"})
        [job] = run_queued_jobs()
    assert job.state == Job.State.SUCCEEDED and job.result["requests"] == 12
    assert {request.headers["authorization"] for request in server.requests} == {f"Bearer {KEY}"}
    assert judge.grades.get(item__document__doc_id="d12").grade == 3
    pages = [endpoint_url(people), judges_url(round), f"{judges_url(round)}new/llm/", judge.get_absolute_url(),
             job.get_absolute_url(), f"/p/{round.project.slug}/rounds/{round.uuid}/q/q1/", round.get_absolute_url(),
             f"/p/{round.project.slug}/jobs/", f"/p/{round.project.slug}/settings/"]
    for url in pages:
        response = lead.get(url)
        assert response.status_code == 200, url
        assert KEY not in response.content.decode() and KEY[3:15] not in response.content.decode(), url

"""Automatic judges in the app: references on queries, judges with automatic accounts, runs stored as machine
grades apart from the raters', the reply cache in the database, sealed API keys, the judge command, cancelling."""

import io
import json
import os

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from judgments.core.secrets import SecretUnreadable, seal, unseal
from judgments.models import DisplayField, Job, Judgment, LLMEndpoint, LLMReply, MachineGrade, Membership, RoundTotals
from judgments.ops import automatic, grading, jobs
from judgments.ops.actions import ActionRefused
from judgments.ops.automatic import PairChoice, add_judge, run_judge
from judgments.ops.grading import Verdict
from judgments.ops.imports import import_queries
from judgments.ops.log_sampling import query_set_csv
from tests.factory import PASSWORD, make_project, make_round, run_queued_jobs
from tests.judges.fake_llm import FakeLLM, Reply

pytestmark = pytest.mark.django_db


def reference_round(people, raters=None, **options):
    """A round whose queries' references repeat their first document's text: an overlap judge calls those
    relevant (grade 3 on the graded scale) and the others not (0)."""
    round = make_round(people.project, people.lead, raters or [people.rater], **options)
    for order, field in enumerate(("title", "body")):  # the text a judge reads, in this order on every database
        DisplayField.objects.get_or_create(project=people.project, field=field, defaults={"label": field, "order": order})
    for query in round.pool.query_set.queries.all():
        query.references = [f"Title of d{query.query_id[1:]}1 Text of d{query.query_id[1:]}1"]
        query.save()
    return round


def overlap_judge(round, name="overlap", **settings):
    return add_judge(round, name=name, kind="token_overlap", settings=settings)


# ------------------------------------------------------------------------------------------ references


def test_query_set_imports_read_references_from_repeated_columns_json_lists_and_jsonl(people):
    csv = ("query_id,query,references,references\n"
           "q1,cheap flights,Book early,Fly midweek\n"
           "q2,hotels,,\n")
    collection, _ = import_queries(people.project, csv.encode(), "refs.csv", name="repeated")
    assert dict(collection.queries.values_list("query_id", "references")) == {
        "q1": ["Book early", "Fly midweek"], "q2": []}

    listed = 'query_id,query,references\nq1,cheap flights,"[""Book early"", ""Fly midweek""]"\nq2,hotels,One answer\n'
    collection, _ = import_queries(people.project, listed.encode(), "list.csv", name="json list")
    assert dict(collection.queries.values_list("query_id", "references")) == {
        "q1": ["Book early", "Fly midweek"], "q2": ["One answer"]}

    jsonl = json.dumps({"query_id": "q1", "query": "x", "references": ["A", " ", "B"]}) + "\n"
    collection, _ = import_queries(people.project, jsonl.encode(), "refs.jsonl", name="jsonl")
    assert collection.queries.get().references == ["A", "B"]


def test_a_references_cell_that_is_not_a_list_of_texts_is_refused_with_its_line(people):
    from judgments.lib.fileformats import FileProblem

    with pytest.raises(FileProblem, match=r"bad.csv:3: references"):
        import_queries(people.project, b'query_id,query,references\nq1,a,x\nq2,b,"[1, [2]]"\n', "bad.csv", name="bad")
    with pytest.raises(FileProblem, match="repeated column names: 'query'"):
        import_queries(people.project, b"query_id,query,query\nq1,a,b\n", "twice.csv", name="twice")


def test_the_query_set_download_carries_references_and_imports_back(people):
    collection, _ = import_queries(people.project, b"query_id,query,references,references\nq1,a,=SUM(1),Two\n",
                                   "refs.csv", name="first")
    again, _ = import_queries(people.project, "".join(query_set_csv(collection)).encode(), "again.csv", name="again")
    assert again.queries.get().references == ["=SUM(1)", "Two"]


def test_the_query_editor_saves_references_separated_by_blank_lines(people):
    collection, _ = import_queries(people.project, b"query_id,query\nq1,flights\n", "q.csv", name="set")
    query = collection.queries.get()
    response = people.client("lead").post(
        f"/p/{people.project.slug}/queries/{collection.uuid}/q/q1/",
        {"query_id": "q1", "text": "flights", "references": "Book early.\r\nIt is cheaper.\r\n\r\n  \r\nFly midweek.",
         "version": query.version})
    assert response.status_code == 302
    query.refresh_from_db()
    assert query.references == ["Book early.\nIt is cheaper.", "Fly midweek."]
    page = people.client("lead").get(f"/p/{people.project.slug}/queries/{collection.uuid}/q/q1/")
    assert "Book early.\nIt is cheaper.\n\nFly midweek." in page.content.decode()


# ------------------------------------------------------------------------------------------ judges and runs


def test_a_judge_grades_through_an_automatic_account_that_cannot_log_in_or_grade(people, client):
    round = reference_round(people)
    judge = overlap_judge(round)
    account = judge.account
    assert not account.is_active and not account.has_usable_password()
    assert not Membership.objects.filter(user=account).exists()
    assert not round.raters.filter(pk=account.pk).exists()
    client.post("/accounts/login/", {"username": account.username, "password": PASSWORD})
    assert "_auth_user_id" not in client.session
    assert judge.settings == {"min_tokens": 15, "overlap_ratio": 0.6, "query_boost": True, "stopwords": None,
                              "relevant_grade": None}


def test_bad_settings_and_repeated_names_are_refused(people):
    round = reference_round(people)
    from judgments.judges import JudgeSettingsError

    with pytest.raises(JudgeSettingsError, match="min_tokens"):
        add_judge(round, name="x", kind="token_overlap", settings={"min_tokens": "many"})
    with pytest.raises(JudgeSettingsError, match="relevant_grade: 7 is not a grade"):
        add_judge(round, name="x", kind="token_overlap", settings={"relevant_grade": 7})
    overlap_judge(round)
    with pytest.raises(ActionRefused, match="already has a judge named 'overlap'"):
        overlap_judge(round)
    with pytest.raises(ActionRefused, match="LLM endpoint"):
        add_judge(round, name="gpt", kind="llm", settings={})
    assert get_user_model().objects.filter(is_active=False).count() == 1


def test_a_run_stores_machine_grades_with_provenance_and_leaves_the_raters_progress_alone(people):
    round = reference_round(people)
    before = RoundTotals.objects.filter(round=round).values().get()
    judge = overlap_judge(round)
    result = run_judge(judge)
    assert result == {
        "judge": "overlap", "pairs": "all", "chosen": 12, "skipped": 0, "judged": 12, "could_not_judge": {},
        "cancelled": 0, "requests": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0, "failures": {},
        "outcome": "succeeded"}
    grades = {(g.item.query.query_id, g.item.document.doc_id): g.grade for g in judge.grades.select_related("item__query", "item__document")}
    assert grades == {(f"q{q}", f"d{q}{d}"): 3 if d == 1 else 0 for q in range(1, 4) for d in range(1, 5)}
    stored = judge.grades.get(item__document__doc_id="d11")
    assert stored.outcome == "judged" and stored.score == 1.0 and "texts are equal" in stored.rationale
    assert stored.provenance == {"kind": "token_overlap", "version": 1, "settings": judge.settings, "model": None,
                                 "prompt_version": None}
    assert RoundTotals.objects.filter(round=round).values().get() == before
    assert not Judgment.objects.exists() and not round.items.filter(n_judged__gt=0).exists()
    assert grading.next_item(round, people.rater) is not None


def test_a_query_without_references_is_could_not_judge_never_a_grade(people):
    round = reference_round(people)
    round.pool.query_set.queries.filter(query_id="q2").update(references=[])
    result = run_judge(overlap_judge(round))
    assert result["judged"] == 8 and result["could_not_judge"] == {"no_references": 4}
    missing = MachineGrade.objects.filter(item__query__query_id="q2")
    assert [(g.outcome, g.grade, g.problem) for g in missing] == [("could_not_judge", None, "no_references")] * 4


def test_re_running_skips_pairs_graded_with_the_same_provenance_and_regrades_after_a_settings_change(people):
    round = reference_round(people)
    judge = overlap_judge(round)
    run_judge(judge)
    first = set(judge.grades.values_list("pk", flat=True))
    assert run_judge(judge)["skipped"] == 12
    assert set(judge.grades.values_list("pk", flat=True)) == first
    judge.settings = {**judge.settings, "min_tokens": 1}
    judge.save()
    again = run_judge(judge)
    assert again["skipped"] == 0 and again["judged"] == 12
    assert judge.grades.count() == 12 and not first & set(judge.grades.values_list("pk", flat=True))
    assert judge.grades.get(item__document__doc_id="d12").grade == 3  # shares "title" and "text" with q1's reference


def test_unjudged_pairs_and_a_seeded_sample(people):
    round = reference_round(people)
    for _ in range(5):
        grading.record(grading.next_item(round, people.rater), people.rater, Verdict(grade=1))
    judge = overlap_judge(round)
    assert run_judge(judge, PairChoice.parse("unjudged"))["chosen"] == 7
    graded_by_people = set(Judgment.objects.values_list("item_id", flat=True))
    assert not graded_by_people & set(judge.grades.values_list("item_id", flat=True))

    sample = PairChoice.parse("sample:4", seed=3)
    assert sample.items(round) == PairChoice.parse("sample:4", seed=3).items(round) != PairChoice.parse("sample:4", seed=4).items(round)
    assert len(sample.items(round)) == 4 and len(PairChoice.parse("sample:40").items(round)) == 12
    for bad in ("some", "sample:0", "sample:-1", "sample:x"):
        with pytest.raises(ValueError, match="all, unjudged, sample:N or calibrate:N"):
            PairChoice.parse(bad)


def test_a_cancelled_run_keeps_what_it_graded_and_the_next_run_finishes(people, monkeypatch):
    round = reference_round(people)
    judge = overlap_judge(round)
    monkeypatch.setattr(automatic, "CHUNK", 5)
    result = run_judge(judge, cancel=lambda: judge.grades.count() >= 5)  # cancelled once a chunk is stored
    assert result["judged"] == 5 and result["cancelled"] == 7 and judge.grades.count() == 5
    again = run_judge(judge)
    assert (again["skipped"], again["judged"]) == (5, 7)
    assert judge.grades.count() == 12


def test_cancel_job_fails_a_queued_run_and_asks_a_running_one_to_stop(people):
    round = reference_round(people)
    judge = overlap_judge(round)
    queued = automatic.start_run(judge, PairChoice(), user=people.lead)
    assert jobs.cancel_job(queued) == Job.State.FAILED and queued.error == "Cancelled before it started."
    assert run_queued_jobs() == [] and not judge.grades.exists()

    running = automatic.start_run(judge, PairChoice(), user=people.lead)
    Job.objects.filter(pk=running.pk).update(state=Job.State.RUNNING)
    assert not jobs.cancel_requested(running)
    assert jobs.cancel_job(running) == Job.State.RUNNING and jobs.cancel_requested(running)


def test_the_run_job_reports_its_counts(people):
    round = reference_round(people)
    judge = overlap_judge(round)
    automatic.start_run(judge, PairChoice.parse("sample:5", seed=1), user=people.lead)
    [job] = run_queued_jobs()
    assert job.state == Job.State.SUCCEEDED, job.error
    assert job.result["judged"] == 5 and job.result["pairs"] == "sample:5"
    assert job.result["link"] == judge.get_absolute_url()


def test_the_judge_command_runs_a_judge_and_says_what_it_did(people):
    round = reference_round(people)
    overlap_judge(round)
    out, err = io.StringIO(), io.StringIO()
    call_command("judge", str(round.uuid), "--judge", "overlap", "--pairs", "sample:3", "--seed", "2", stdout=out, stderr=err)
    assert "overlap: 3 pairs judged of 3 chosen (a sample of 3 pairs (seed 2)), 0 skipped" in out.getvalue()
    assert MachineGrade.objects.count() == 3
    with pytest.raises(CommandError, match="no judge named 'gpt' \\(its judges: overlap\\)"):
        call_command("judge", str(round.uuid), "--judge", "gpt")
    with pytest.raises(CommandError, match="sample:N"):
        call_command("judge", str(round.uuid), "--judge", "overlap", "--pairs", "half")


# ------------------------------------------------------------------------------------------ LLM judges


def llm_round(people, server, key="sk-secret-key-123"):
    round = reference_round(people)
    endpoint = LLMEndpoint(project=people.project, base_url=server.base_url, model="fake-model")
    endpoint.set_api_key(key)
    endpoint.save()
    judge = add_judge(round, name="gpt", kind="llm", settings={"backoff": 0.0, "max_retries": 1})
    return round, judge


@pytest.mark.usefixtures("outbound_loopback")
def test_an_llm_judge_asks_the_projects_endpoint_with_its_key_and_never_pays_twice(people):
    with FakeLLM() as server:
        server.answer = lambda request: Reply.text("Final grade: 3" if "Text of d12" in request.user else "Final grade: 1")
        round, judge = llm_round(people, server)
        assert "base_url" not in judge.settings and "model" not in judge.settings
        first = run_judge(judge)
        assert first["requests"] == 12 and first["cached"] == 0
        assert first["prompt_tokens"] == 1200 and first["completion_tokens"] == 60
        assert {r.headers["authorization"] for r in server.requests} == {"Bearer sk-secret-key-123"}
        assert LLMReply.objects.count() == 12
        grade = judge.grades.get(item__document__doc_id="d12")
        assert (grade.grade, grade.reply, grade.provenance["model"], grade.provenance["prompt_version"]) == (
            3, "Final grade: 3", "fake-model", "umbrela-graded-v1")
        assert grade.provenance["settings"]["base_url"] == server.base_url

        judge.grades.all().delete()  # the grades are gone, the replies are not: nothing is asked again
        again = run_judge(judge)
        assert again["requests"] == 0 and again["cached"] == 12 and again["prompt_tokens"] == 0
        assert len(server.requests) == 12 and judge.grades.filter(outcome="judged").count() == 12


def test_the_reply_cache_is_kept_per_project_and_goes_with_it(people):
    """A shared cache would tell a lead, through "from the cache", whether another project asked the same prompt."""
    from judgments import judges
    other = make_project(people.lead, name="Another shop")
    key = judges.CacheKey("fake-model", "umbrela-graded-v1", "a" * 64)
    automatic.DatabaseReplyCache(people.project).put(key, judges.CachedReply("Final grade: 3", 100, 5))
    assert automatic.DatabaseReplyCache(other).get_many([key]) == {}
    assert automatic.DatabaseReplyCache(people.project).get_many([key])[key].reply == "Final grade: 3"
    automatic.DatabaseReplyCache(other).put(key, judges.CachedReply("Final grade: 0", 100, 5))  # its own, not an overwrite
    assert automatic.DatabaseReplyCache(people.project).get_many([key])[key].reply == "Final grade: 3"
    people.project.delete()
    assert list(LLMReply.objects.values_list("reply", flat=True)) == ["Final grade: 0"]


@pytest.mark.usefixtures("outbound_loopback")
def test_unreadable_replies_and_failing_endpoints_are_kept_as_could_not_judge(people):
    with FakeLLM() as server:
        server.answer = lambda request: (Reply.text("I cannot say") if "Text of d12" in request.user
                                         else Reply.status_code(500) if "Text of d22" in request.user else Reply.text("Final grade: 2"))
        round, judge = llm_round(people, server)
        result = run_judge(judge)
    assert result["judged"] == 10
    assert result["could_not_judge"] == {"unparseable_reply": 1, "endpoint_failed": 1}
    unreadable = judge.grades.get(item__document__doc_id="d12")
    assert unreadable.grade is None and unreadable.reply == "I cannot say" and unreadable.problem == "unparseable_reply"


@pytest.mark.usefixtures("outbound_loopback")
def test_a_wrong_key_stops_the_run_with_the_endpoints_answer(people):
    with FakeLLM() as server:
        server.answer = lambda request: Reply.status_code(401, body=b'{"error": "bad key"}')
        round, judge = llm_round(people, server)
        with pytest.raises(ActionRefused, match="HTTP 401"):
            run_judge(judge)
        job = automatic.start_run(judge, PairChoice(), user=people.lead)
        [job] = run_queued_jobs()
    assert job.state == Job.State.FAILED and "HTTP 401" in job.error and "sk-secret" not in job.error


@pytest.mark.usefixtures("outbound_loopback")
def test_the_key_can_come_from_an_environment_variable(people, monkeypatch):
    with FakeLLM() as server:
        round, judge = llm_round(people, server, key="")
        endpoint = people.project.llm_endpoint
        endpoint.api_key_env = "VERDICT_KEY_TEST_LLM"
        endpoint.save()
        monkeypatch.setenv("VERDICT_KEY_TEST_LLM", "sk-from-env")
        run_judge(judge, PairChoice.parse("sample:1"))
        assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"
        assert endpoint.key_status == "from the environment variable VERDICT_KEY_TEST_LLM"


# ------------------------------------------------------------------------------------------ sealed keys


def test_a_sealed_key_opens_only_for_its_purpose_and_secret_key(settings):
    sealed = seal("sk-abc", purpose="llm-endpoint:1")
    assert "sk-abc" not in sealed and seal("sk-abc", purpose="llm-endpoint:1") != sealed
    assert unseal(sealed, purpose="llm-endpoint:1") == "sk-abc"
    with pytest.raises(SecretUnreadable):
        unseal(sealed, purpose="llm-endpoint:2")
    version, body = sealed.split(":")
    tampered = f"{version}:{body[:-2]}{'A' if body[-2] != 'A' else 'B'}{body[-1]}"
    with pytest.raises(SecretUnreadable):
        unseal(tampered, purpose="llm-endpoint:1")
    settings.SECRET_KEY = "another-secret-key-of-at-least-32-characters"
    with pytest.raises(SecretUnreadable, match="enter it again"):
        unseal(sealed, purpose="llm-endpoint:1")


def test_the_endpoint_keeps_its_key_sealed(people):
    endpoint = LLMEndpoint(project=people.project, base_url="https://api.example.com/v1", model="m")
    assert endpoint.key_status == "not set" and endpoint.api_key() is None
    endpoint.set_api_key("sk-stored-key")
    endpoint.save()
    row = LLMEndpoint.objects.values().get()
    assert "sk-stored-key" not in json.dumps(row, default=str)
    assert LLMEndpoint.objects.get().api_key() == "sk-stored-key" and endpoint.key_status == "set"


def test_a_semantic_judge_runs_in_the_app_with_the_packaged_model(people):
    from judgments.judges import availability

    found = availability("semantic")
    if not found.available:
        if os.environ.get("CI"):
            pytest.fail(f"{found.reason}: {found.install} (CI must run the semantic judge)")
        pytest.skip(f"{found.reason}: {found.install}")
    round = reference_round(people)
    judge = add_judge(round, name="minilm", kind="semantic", settings={"threshold": 0.95})
    result = run_judge(judge, PairChoice.parse("all"))
    assert result["judged"] == 12 and result["could_not_judge"] == {}
    grades = {g.item.document.doc_id: (g.grade, g.score) for g in judge.grades.select_related("item__document")}
    # Each query's first document repeats its reference word for word (cosine 1, relevant at 0.95); the others differ.
    for q in range(1, 4):
        assert grades[f"d{q}1"][0] == 3 and grades[f"d{q}1"][1] == pytest.approx(1.0, abs=1e-4)
        assert all(grades[f"d{q}{d}"][1] < grades[f"d{q}1"][1] for d in range(2, 5))
    assert judge.grades.first().provenance["kind"] == "semantic"

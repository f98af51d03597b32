"""The LLM judge against a fake OpenAI-compatible server on a loopback port (real HTTP)."""

import json
import threading
import time
from email.utils import formatdate

import pytest

from judgments.judges import (CANCELLED, ENDPOINT_FAILED, UNPARSEABLE_REPLY, EndpointError, JudgeSettingsError,
                              LLMJudge, MemoryCache, make_judge, usage)
from judgments.judges.llm import parse_retry_after
from judgments.lib.outbound import Policy
from judgments.lib.scales import make_scale, Grade

from .conftest import GRADED, context
from .fake_llm import FakeLLM, Reply

KEY = "sk-test-0123456789abcdef"
QUICK = {"backoff": 0.01, "max_wait": 2.0}
# The fake server listens on loopback, which the judge refuses unless the operator allows it.
LOOPBACK = Policy.of(networks=["127.0.0.0/8"])


@pytest.fixture
def server():
    with FakeLLM() as fake:
        yield fake


def judge_for(server, **settings):
    return LLMJudge({"base_url": server.base_url, "model": "fake-model", **QUICK, **settings}, api_key=KEY, policy=LOOPBACK)


def pairs(n, **kwargs):
    return [context(f"Document number {i} about retrieval.", "RAG is retrieval plus generation", **kwargs)
            for i in range(n)]


def test_a_well_formed_graded_reply_gives_the_grade_its_reason_and_the_tokens(server):
    server.script(Reply.text("It defines RAG exactly.\nFinal grade: 3", prompt_tokens=321, completion_tokens=9))
    verdict = judge_for(server).judge(context("RAG retrieves, then generates.", "RAG", scale=GRADED))

    assert (verdict.outcome, verdict.grade, verdict.score) == ("judged", 3, 3.0)
    assert verdict.rationale == "It defines RAG exactly."
    assert verdict.reply == "It defines RAG exactly.\nFinal grade: 3"
    assert (verdict.prompt_tokens, verdict.completion_tokens, verdict.cached) == (321, 9, False)


def test_the_request_is_a_chat_completion_at_temperature_zero_with_the_rounds_texts(server):
    guidelines = "Grade 3 only when the document defines the term."
    judge_for(server).judge(context("Some text", "an accepted answer", scale=GRADED, guidelines=guidelines,
                                    information_need="The user wants a definition"))
    request = server.requests[0]
    body = request.json

    assert request.path == "/v1/chat/completions"
    assert body["model"] == "fake-model" and body["temperature"] == 0 and body["stream"] is False
    prompt = request.user
    for text in (guidelines, "What is RAG?", "The user wants a definition", "an accepted answer", "Some text",
                 "3 = Perfect: This is exactly what I am looking for", "Final grade: N"):
        assert text in prompt


def test_the_binary_prompt_maps_yes_and_no_onto_the_scale(server):
    judge = judge_for(server, prompt="evret-binary-v1")
    server.script(Reply.text("YES"), Reply.text("no."), Reply.text("**Yes** - it answers the question"))
    verdicts = [judge.judge(context(f"doc {i}", "ref", scale=GRADED)) for i in range(3)]

    assert [(v.grade, v.score) for v in verdicts] == [(3, 1.0), (0, 0.0), (3, 1.0)]
    assert "YES or NO" in server.requests[0].user


@pytest.mark.parametrize("reply, why", [
    ("Maybe", "does not start with YES or NO"),
    ("Yes and no", "does not start with YES or NO"),
    ("", "empty"),
    (None, "empty"),
])
def test_an_unreadable_binary_reply_is_could_not_judge_with_the_reply_kept(server, reply, why):
    server.script(Reply.text(reply))
    verdict = judge_for(server, prompt="evret-binary-v1").judge(context("doc", "ref"))

    assert (verdict.outcome, verdict.grade, verdict.problem) == ("could_not_judge", None, UNPARSEABLE_REPLY)
    assert why in verdict.reason
    assert verdict.reply == (reply or "")


@pytest.mark.parametrize("reply, why", [
    ("Looks good to me.", "last line is not"),
    ("Final grade: 7", "not on the scale"),
    ("Final grade: two", "last line is not"),
    ("Final grade: 2\nThanks!", "last line is not"),
])
def test_an_unreadable_graded_reply_is_could_not_judge(server, reply, why):
    server.script(Reply.text(reply))
    verdict = judge_for(server).judge(context("doc", "ref", scale=GRADED))

    assert (verdict.problem, verdict.reply) == (UNPARSEABLE_REPLY, reply)
    assert why in verdict.reason


def test_a_thinking_block_and_markdown_around_the_final_grade_are_read(server):
    server.script(Reply.text("<think>The passage mentions it...</think>\nPartly answers.\n**Final grade: 1**"))
    verdict = judge_for(server).judge(context("doc", "ref", scale=GRADED))

    assert (verdict.grade, verdict.rationale) == (1, "Partly answers.")


def test_the_graded_prompt_uses_a_custom_scales_values_and_cues(server):
    scale = make_scale("custom", [Grade(1, "Off-topic", "nothing useful"), Grade(4, "Useful", "answers it"),
                                  Grade(7, "Vital", "the official answer")])
    server.script(Reply.text("It is the official page.\nFinal grade: 7"))
    verdict = judge_for(server).judge(context("doc", "ref", scale=scale))

    assert verdict.grade == 7
    assert "4 = Useful: answers it" in server.requests[0].user and "one of 1, 4, 7" in server.requests[0].user


def test_429_with_retry_after_in_seconds_is_waited_out_and_retried(server):
    server.script(Reply.status_code(429, retry_after="1"), Reply.text("Final grade: 2"))
    verdict = judge_for(server).judge(context("doc", "ref", scale=GRADED))

    assert verdict.grade == 2
    assert len(server.requests) == 2
    assert server.requests[1].started - server.requests[0].finished >= 0.95


def test_retry_after_as_an_http_date_is_honoured():
    now = time.time()
    assert parse_retry_after(formatdate(now + 30, usegmt=True), now=now) == pytest.approx(30, abs=1)
    assert parse_retry_after(formatdate(now - 30, usegmt=True), now=now) == 0
    assert parse_retry_after("2.5") == 2.5
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_a_500_is_retried_and_a_pair_that_keeps_failing_is_could_not_judge(server):
    server.script(Reply.status_code(500), Reply.text("Final grade: 1"))
    assert judge_for(server).judge(context("doc", "ref", scale=GRADED)).grade == 1

    server.answer = lambda request: Reply.status_code(503, body=b'{"error": "overloaded"}')
    verdict = judge_for(server, max_retries=2).judge(context("doc 2", "ref", scale=GRADED))
    assert (verdict.outcome, verdict.problem) == ("could_not_judge", ENDPOINT_FAILED)
    assert "failed 3 tries" in verdict.reason and "HTTP 503" in verdict.reason and "overloaded" in verdict.reason
    assert len(server.requests) == 2 + 3


def test_waits_between_tries_double_with_jitter(server):
    server.answer = lambda request: Reply.status_code(502)
    judge_for(server, max_retries=3, backoff=0.1).judge(context("doc", "ref"))
    starts = [request.started for request in server.requests]
    gaps = [b - a for a, b in zip(starts, starts[1:])]

    # 0.1 x 2^attempt x a random 50-100%
    for attempt, gap in enumerate(gaps):
        assert 0.05 * 2 ** attempt - 0.01 <= gap <= 0.1 * 2 ** attempt + 0.15


def test_a_malformed_body_is_retried_then_reported_without_its_text(server):
    server.script(Reply.malformed(), Reply.text("Final grade: 0"))
    assert judge_for(server).judge(context("doc", "ref", scale=GRADED)).grade == 0

    server.answer = lambda request: Reply.malformed(b"<html>intranet: payroll</html>")
    verdict = judge_for(server, max_retries=1).judge(context("doc 2", "ref", scale=GRADED))
    assert verdict.problem == ENDPOINT_FAILED and "the answer was not a chat completion" in verdict.reason
    assert "payroll" not in verdict.reason


def test_an_error_quotes_only_a_message_in_the_apis_error_shape(server):
    server.script(Reply.status_code(503, body=b"<h1>Internal wiki</h1> secret page"),
                  Reply.status_code(503, body=b'{"error": {"message": "model is loading", "type": "busy"}}'))
    verdict = judge_for(server, max_retries=0).judge(context("doc", "ref", scale=GRADED))
    assert verdict.reason.endswith("the last: HTTP 503.") and "wiki" not in verdict.reason
    verdict = judge_for(server, max_retries=0).judge(context("doc 2", "ref", scale=GRADED))
    assert verdict.reason.endswith("the last: HTTP 503: 'model is loading'.")

    server.answer = lambda request: Reply.status_code(404, body=b"<html>Django: Page not found. URLconf ...</html>")
    with pytest.raises(EndpointError) as raised:
        judge_for(server).judge(context("doc 3", "ref", scale=GRADED))
    assert str(raised.value) == f"{server.base_url}/chat/completions refused the request with HTTP 404"


def test_an_answer_slower_than_the_timeout_is_a_timeout_then_retried(server):
    server.script(Reply.slow(1.5), Reply.text("Final grade: 2"))
    verdict = judge_for(server, timeout=0.5).judge(context("doc", "ref", scale=GRADED))
    assert verdict.grade == 2

    server.answer = lambda request: Reply.slow(1.5)
    verdict = judge_for(server, timeout=0.3, max_retries=1).judge(context("doc 2", "ref", scale=GRADED))
    assert verdict.problem == ENDPOINT_FAILED and "no answer within 0.3 s" in verdict.reason


def test_a_pair_the_endpoint_refuses_is_could_not_judge_without_retrying(server):
    server.script(Reply.status_code(400, body=b'{"error": "maximum context length exceeded"}'))
    verdicts = judge_for(server).batch_judge(pairs(3, scale=GRADED))

    refused = [v for v in verdicts if v.problem == ENDPOINT_FAILED]  # whichever request came first
    assert len(refused) == 1 and "refused this pair: HTTP 400" in refused[0].reason
    assert "context length" in refused[0].reason
    assert sorted(v.grade for v in verdicts if v.judged) == [2, 2] and len(server.requests) == 3


def test_long_documents_are_cut_in_the_prompt_and_long_replies_are_cut_when_kept(server):
    server.script(Reply.text("x" * 50_000 + "\nFinal grade: 2"))
    verdict = judge_for(server, max_document_chars=1000).judge(context("word " * 1000, "ref", scale=GRADED))

    assert "cut at 1,000 characters" in server.requests[0].user and len(server.requests[0].user) < 3000
    assert verdict.problem == UNPARSEABLE_REPLY and len(verdict.reply) == 20_000


def test_an_answer_nested_too_deeply_is_not_a_chat_completion(server):
    server.script(Reply.malformed(b"[" * 100_000 + b"]" * 100_000), Reply.text("Final grade: 1"))
    assert judge_for(server).judge(context("doc", "ref", scale=GRADED)).grade == 1


def test_a_refused_request_stops_the_batch_with_a_clear_error_that_hides_the_key(server):
    server.answer = lambda request: Reply.status_code(
        401, body=json.dumps({"error": f"Incorrect API key provided: {KEY}"}).encode())

    with pytest.raises(EndpointError, match=r"HTTP 401") as raised:
        judge_for(server).batch_judge(pairs(5))
    assert KEY not in str(raised.value) and "[API key]" in str(raised.value)


def test_the_key_is_sent_as_a_bearer_header_and_appears_nowhere_else(server):
    judge = judge_for(server)
    verdict = judge.judge(context("doc", "ref", scale=GRADED))
    request = server.requests[0]

    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in request.raw.decode()
    assert all(KEY not in value for name, value in request.headers.items() if name != "authorization")
    for shown in (repr(judge), str(judge.describe()), json.dumps(judge.settings), str(verdict.to_json())):
        assert KEY not in shown
    assert judge.describe() == {"kind": "llm", "version": 1, "settings": judge.settings, "model": "fake-model",
                                "prompt_version": "umbrela-graded-v1"}


def test_without_a_key_no_authorization_header_is_sent(server):
    LLMJudge(base_url=server.base_url, model="llama3", policy=LOOPBACK).judge(context("doc", "ref"))
    assert "authorization" not in server.requests[0].headers


def test_no_more_requests_are_in_flight_than_the_concurrency_cap(server):
    server.latency = 0.05
    verdicts = judge_for(server, concurrency=3).batch_judge(pairs(30, scale=GRADED))

    assert all(v.grade == 2 for v in verdicts)
    assert server.max_in_flight == 3


def test_a_pair_is_never_paid_for_twice(server):
    cache = MemoryCache()
    judge = LLMJudge({"base_url": server.base_url, "model": "fake-model"}, api_key=KEY, cache=cache, policy=LOOPBACK)
    batch = pairs(10, scale=GRADED) + pairs(5, scale=GRADED)  # five pairs twice in one batch
    first = judge.batch_judge(batch)
    second = judge.batch_judge(batch)

    assert len(server.requests) == 10 and len(cache) == 10
    assert usage(first).requests == 10 and usage(first).cached == 5
    assert usage(first).prompt_tokens == 10 * 100 and usage(first).completion_tokens == 10 * 5
    assert usage(second).requests == 0 and usage(second).cached == 15 and usage(second).total_tokens == 0
    assert [v.grade for v in second] == [v.grade for v in first]


def test_the_cache_key_changes_with_the_model_the_prompt_and_the_texts(server):
    cache = MemoryCache()
    settings = {"base_url": server.base_url, "model": "a"}
    LLMJudge(settings, cache=cache, policy=LOOPBACK).judge(context("doc", "ref", scale=GRADED))
    LLMJudge(settings, cache=cache, policy=LOOPBACK).judge(context("doc", "ref", scale=GRADED))
    LLMJudge({**settings, "model": "b"}, cache=cache, policy=LOOPBACK).judge(context("doc", "ref", scale=GRADED))
    LLMJudge({**settings, "prompt": "evret-binary-v1"}, cache=cache, policy=LOOPBACK).judge(context("doc", "ref", scale=GRADED))
    LLMJudge(settings, cache=cache, policy=LOOPBACK).judge(context("doc", "ref", scale=GRADED, guidelines="new guidelines"))

    assert len(server.requests) == 4
    assert {key.model for key in cache.replies} == {"a", "b"}


def test_unparseable_replies_are_cached_too(server):
    server.script(Reply.text("I am not sure."))
    judge = judge_for(server)
    assert judge.judge(context("doc", "ref", scale=GRADED)).problem == UNPARSEABLE_REPLY
    again = judge.judge(context("doc", "ref", scale=GRADED))
    assert (again.problem, again.cached, len(server.requests)) == (UNPARSEABLE_REPLY, True, 1)


def test_progress_is_reported_from_the_calling_thread_and_cancel_stops_what_is_in_flight_and_not_sent(server):
    server.latency = 0.05
    seen, threads = [], set()

    def progress(done, total, message=""):
        seen.append((done, total))
        threads.add(threading.get_ident())

    verdicts = judge_for(server, concurrency=2).batch_judge(
        pairs(40, scale=GRADED), progress=progress, cancel=lambda: len(server.requests) >= 6)
    asked = len(server.requests)

    assert threads == {threading.get_ident()}
    assert seen[-1] == (40, 40) and all(total == 40 for _, total in seen)
    assert 6 <= asked <= 10
    judged = sum(v.judged for v in verdicts)
    assert judged <= asked and sum(v.problem == CANCELLED for v in verdicts) == 40 - judged
    assert all(v.outcome == "judged" for v in verdicts if v.problem != CANCELLED)


def test_an_exception_from_progress_stops_the_batch(server):
    server.latency = 0.05

    def progress(done, total, message=""):
        if done >= 4:
            raise KeyboardInterrupt("job taken away")

    with pytest.raises(KeyboardInterrupt):
        judge_for(server, concurrency=2).batch_judge(pairs(40), progress=progress)
    assert len(server.requests) < 12


def test_after_max_failures_in_a_row_the_rest_are_not_asked(server):
    server.answer = lambda request: Reply.status_code(500)
    verdicts = judge_for(server, concurrency=1, max_retries=0, max_failures=3).batch_judge(pairs(20))

    # The worker may have taken the next pair before the third failure came back: one more at most.
    assert 3 <= len(server.requests) <= 4
    assert all(v.problem == ENDPOINT_FAILED for v in verdicts)
    assert "failed 3 pairs in a row" in verdicts[-1].reason


def test_an_unreachable_endpoint_is_could_not_judge():
    judge = LLMJudge(base_url="http://127.0.0.1:9/v1", model="m", max_retries=1, backoff=0.01, policy=LOOPBACK)
    verdict = judge.judge(context("doc", "ref"))
    assert verdict.problem == ENDPOINT_FAILED and "ConnectionRefusedError" in verdict.reason


def test_settings_are_validated():
    for bad, message in [({"model": "m"}, "base_url: a value is required"),
                         ({"base_url": "ftp://x", "model": "m"}, "base_url: must be an http"),
                         ({"base_url": "https://u:p@x/v1", "model": "m"}, "no user or password"),
                         ({"base_url": "https://x/v1?key=1", "model": "m"}, "no query or fragment"),
                         ({"base_url": "https://x/v1", "model": " "}, "model: must not be empty"),
                         ({"base_url": "https://x/v1", "model": "m" * 201}, "model: must be at most 200"),
                         ({"base_url": "https://x:99999/v1", "model": "m"}, "base_url: must be a URL"),
                         ({"base_url": "https://x/" + "v" * 2000, "model": "m"}, "at most 2000 characters"),
                         ({"base_url": "https://x/v1", "model": "m", "prompt": "mine-v9"}, "prompt: must be one of"),
                         ({"base_url": "https://x/v1", "model": "m", "concurrency": 0}, "concurrency"),
                         ({"base_url": "https://x/v1", "model": "m", "timeout": 0}, "timeout"),
                         ({"base_url": "https://x/v1", "model": "m", "deadline": 0}, "deadline")]:
        with pytest.raises(JudgeSettingsError, match=message):
            make_judge("llm", bad)
    judge = make_judge("llm", {"base_url": "https://api.openai.com/v1", "model": "gpt-4o"}, api_key=KEY)
    assert judge.endpoint == "https://api.openai.com/v1/chat/completions"
    assert json.loads(json.dumps(judge.settings)) == judge.settings

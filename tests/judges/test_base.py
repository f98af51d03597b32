"""The judges' shared interface: contexts, verdicts, settings, provenance and the batch loop."""

import json
import threading

import pytest

from judgments.judges import (CANCELLED, JudgeContext, JudgeSettingsError, TokenOverlapJudge, Verdict,
                              availability, make_judge, settings_doc)

from .conftest import BINARY, GRADED, context


def test_a_context_takes_the_scales_json_and_checks_its_texts():
    pair = JudgeContext("q", "doc", GRADED.to_json(), references=["a", " ", "b"])
    assert pair.scale == GRADED and pair.references == ("a", " ", "b") and pair.usable_references == ("a", "b")
    with pytest.raises(TypeError, match="not one string"):
        JudgeContext("q", "doc", BINARY, references="an answer")
    with pytest.raises(TypeError, match="document must be a string"):
        JudgeContext("q", None, BINARY)


def test_a_verdict_round_trips_through_json():
    verdict = TokenOverlapJudge().judge(context("the answer is 42", "the answer is 42"))
    assert Verdict.from_json(json.loads(json.dumps(verdict.to_json()))) == verdict


def test_every_kind_is_made_from_stored_settings_and_describes_itself():
    stored = {"token_overlap": {"min_tokens": 4}, "semantic": {"mode": "graded"},
              "llm": {"base_url": "http://127.0.0.1:1/v1", "model": "m"}}
    for kind, settings in stored.items():
        judge = make_judge(kind, settings)
        described = judge.describe()
        assert described["kind"] == kind and described["settings"] == judge.settings
        assert json.loads(json.dumps(described)) == described
        assert {doc.name for doc in settings_doc(kind)} == set(judge.settings)
        assert make_judge(kind, judge.settings).settings == judge.settings  # stored settings come back the same
    assert availability("token_overlap").available and availability("llm").available
    with pytest.raises(JudgeSettingsError, match="unknown judge kind 'oracle'"):
        make_judge("oracle")
    with pytest.raises(JudgeSettingsError, match="settings must be a mapping"):
        make_judge("token_overlap", ["min_tokens", 3])


def test_integer_settings_accept_whole_floats_and_numbers_accept_ints():
    judge = TokenOverlapJudge({"min_tokens": 3.0, "overlap_ratio": 1})
    assert judge.settings["min_tokens"] == 3 and isinstance(judge.settings["min_tokens"], int)
    assert judge.settings["overlap_ratio"] == 1.0 and isinstance(judge.settings["overlap_ratio"], float)
    with pytest.raises(JudgeSettingsError, match="min_tokens: must be a whole number"):
        TokenOverlapJudge(min_tokens=2.5)


def test_the_batch_loop_reports_progress_and_stops_when_cancelled():
    judge = TokenOverlapJudge()
    judge.CHUNK = 10
    pairs = [context(f"doc {i}", "doc") for i in range(35)]
    seen = []
    verdicts = judge.batch_judge(pairs, progress=lambda done, total, message="": seen.append((done, total)))
    assert seen == [(10, 35), (20, 35), (30, 35), (35, 35)] and len(verdicts) == 35

    calls = iter(range(100))
    stopped = judge.batch_judge(pairs, cancel=lambda: next(calls) >= 2)
    assert [v.problem for v in stopped].count(CANCELLED) == 15
    assert all(v.outcome == "judged" for v in stopped[:20])

    event = threading.Event()
    event.set()
    assert all(v.problem == CANCELLED for v in judge.batch_judge(pairs, cancel=event))

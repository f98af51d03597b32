"""The one rule for every verdict: a proven failure fails, missing evidence is not a pass."""

import pytest

from judgments.lib import verdicts


def test_a_proven_failure_fails_even_when_evidence_is_missing():
    found = verdicts.decide(failures=["kappa 0.2 under 0.6"], missing=["tau over 3 runs: at least 4 needed"])
    assert found.failed and found.label == "fail"
    assert found.reasons == ("kappa 0.2 under 0.6", "tau over 3 runs: at least 4 needed")


def test_missing_evidence_is_never_a_pass():
    found = verdicts.decide(missing=["no pair graded by two raters yet"], grounds=["kappa 0.9"],
                            steps=["assign overlap"])
    assert found.insufficient and not found.passed
    assert found.label == "not enough evidence"
    assert found.reasons == ("no pair graded by two raters yet",) and found.steps == ("assign overlap",)


def test_a_pass_names_what_it_rests_on_and_round_trips_as_json():
    found = verdicts.decide(grounds=["kappa's lower bound 0.71 over 140 pairs"])
    assert found.passed and found.reasons == ("kappa's lower bound 0.71 over 140 pairs",)
    assert verdicts.Verdict.from_json(found.to_json()) == found
    assert found.to_json()["label"] == "pass"


def test_at_least_names_the_count_and_the_minimum():
    assert verdicts.at_least(4, 4, "runs") is None
    assert verdicts.at_least(3, 4, "tau over runs", "evaluate another run") == \
        "tau over runs: 3 of the 4 needed; evaluate another run"
    assert verdicts.at_least(1500, 2000, "pairs") == "pairs: 1,500 of the 2,000 needed"


def test_unknown_states_are_refused():
    with pytest.raises(ValueError):
        verdicts.Verdict("ok")

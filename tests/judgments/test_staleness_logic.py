"""The staleness triggers as pure computations: states at and around their thresholds, the drift figures."""

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import jensenshannon

from judgments.lib import staleness
from judgments.lib.staleness import OK, STALE, UNMEASURED, WARN, Thresholds
from judgments.lib.verdicts import INSUFFICIENT, Verdict, decide

LIMITS = Thresholds()


@pytest.mark.parametrize(("value", "state"), [(0.0, OK), (0.20, OK), (0.2001, WARN), (0.30, WARN), (0.3001, STALE),
                                              (None, UNMEASURED), (float("nan"), UNMEASURED)])
def test_a_level_is_ok_up_to_warn_and_stale_above_stale(value, state):
    assert staleness.level_above(value, 0.20, 0.30) == state


def test_new_systems_reports_the_largest_unjudged_share_and_the_runs_not_yet_measured():
    rows = [{"run": "bm25", "cutoff": 10, "share": 0.05}, {"run": "dense", "cutoff": 20, "share": 0.31}]
    trigger = staleness.new_systems(rows, ["hybrid"], LIMITS)
    assert trigger.state == STALE and trigger.value == 0.31 and trigger.firing
    assert "dense at @20" in trigger.summary and "1 run not yet measured" in trigger.summary
    assert [row["run"] for row in trigger.details["over"]] == ["dense"]
    assert staleness.new_systems(rows[:1], [], LIMITS).state == OK
    assert staleness.new_systems([{"run": "x", "cutoff": 10, "share": 0.25}], [], LIMITS).state == WARN
    nothing = staleness.new_systems([], ["hybrid"], LIMITS)
    assert nothing.state == UNMEASURED and not nothing.firing


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_jensen_shannon_divergence_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    old = pd.Series(rng.integers(0, 50, 30), index=[f"q{i}" for i in range(30)])
    new = pd.Series(rng.integers(0, 50, 25), index=[f"q{i}" for i in range(10, 35)])
    index = old.index.union(new.index)
    expected = jensenshannon(old.reindex(index, fill_value=0), new.reindex(index, fill_value=0), base=2) ** 2
    assert staleness.js_divergence(old, new) == pytest.approx(expected, abs=1e-12)


def test_jensen_shannon_divergence_is_zero_for_the_same_shape_and_one_for_disjoint_traffic():
    a = pd.Series([10, 30], index=["x", "y"])
    assert staleness.js_divergence(a, a * 3) == pytest.approx(0.0, abs=1e-12)
    assert staleness.js_divergence(a, pd.Series([5], index=["z"])) == pytest.approx(1.0)
    assert math.isnan(staleness.js_divergence(a, pd.Series([], dtype=float)))


def tiered() -> pd.DataFrame:
    return pd.DataFrame({"query": ["a", "b", "c", "d", "e", "f"], "traffic": [50, 30, 10, 5, 3, 2],
                         "tier": ["head", "head", "head", "torso", "torso", "tail"]})


def test_judged_traffic_share_per_tier_and_new_head_queries_busiest_first():
    shares = staleness.judged_traffic_share(tiered(), {"b", "d", "e"})
    assert shares == {"head": pytest.approx(30 / 90), "torso": pytest.approx(1.0), "tail": 0.0}
    assert staleness.new_head_queries(tiered(), {"b"}) == [("a", 50), ("c", 10)]
    assert staleness.judged_traffic_share(tiered().iloc[:0], set()) == {}


@pytest.mark.parametrize(("head", "n_new", "state"), [
    (0.50, 0, OK + "?"), (0.49, 0, STALE), (0.80, 19, WARN), (0.80, 20, STALE), (0.80, 9, OK), (0.80, 10, WARN),
    (0.74, 0, WARN), (0.75, 0, OK)])
def test_query_drift_fires_below_the_judged_share_or_at_the_new_head_count(head, n_new, state):
    new_head = [(f"n{i}", 100 - i) for i in range(n_new)]
    trigger = staleness.query_drift({"head": head}, new_head, 0.1, LIMITS, log="November")
    expected = WARN if state == OK + "?" else state  # 0.50 is not below 50%, but under 1.5 times it: warn
    assert trigger.state == expected
    assert "JS divergence 0.100" in trigger.summary
    assert staleness.query_drift({}, [], None, LIMITS).state == UNMEASURED


def test_guidelines_fire_when_labels_predate_the_current_version():
    assert staleness.guidelines([]).state == OK
    trigger = staleness.guidelines([{"round": "R1", "number": 1, "labels": 12}, {"round": "R2", "number": 2, "labels": 3}])
    assert trigger.state == WARN and trigger.value == 15 and "15 labels in 2 rounds" in trigger.summary


@pytest.mark.parametrize(("old", "state"), [(0, OK), (25, OK), (26, WARN), (50, WARN), (51, STALE)])
def test_age_is_the_share_of_labels_older_than_the_set_age(old, state):
    assert staleness.age(old, 100, LIMITS).state == state
    assert staleness.age(0, 0, LIMITS).state == UNMEASURED


def gate(state: str, value: float | None) -> dict:
    """A gate as `reports.Gate.to_json()` gives it."""
    verdict = {"pass": decide(grounds=["alpha 0.800 is at least 0.60"]), "fail": decide(failures=["alpha 0.400 is under 0.60"]),
               "insufficient": decide(missing=["no pair graded by two raters yet"], steps=["Keep grading."])}[state]
    return {"label": "alpha", "value": value, "threshold": 0.6, "state": state, "verdict": verdict.to_json()}


def test_agreement_fires_on_a_failing_gate_or_a_missing_report():
    passing, failing = gate("pass", 0.8), gate("fail", 0.4)
    assert staleness.agreement(passing, "R1", grades=80, newer_grades=False, limits=LIMITS).state == OK
    assert staleness.agreement(passing, "R1", grades=80, newer_grades=False, limits=LIMITS).verdict.passed
    assert staleness.agreement(passing, "R1", grades=80, newer_grades=True, limits=LIMITS).state == WARN
    assert staleness.agreement(failing, "R1", grades=80, newer_grades=False, limits=LIMITS).state == STALE
    assert staleness.agreement(failing, "R1", grades=80, newer_grades=False, limits=LIMITS).verdict.failed
    assert staleness.agreement(None, "R1", grades=80, newer_grades=False, limits=LIMITS).state == WARN
    assert staleness.agreement(None, "R1", grades=80, newer_grades=False, limits=LIMITS).verdict.insufficient
    nothing = staleness.agreement(None, "", grades=0, newer_grades=False, limits=LIMITS)
    assert nothing.state == UNMEASURED and nothing.verdict.insufficient and not nothing.firing


@pytest.mark.parametrize(("grades", "after", "state"), [(49, 50, UNMEASURED), (50, 50, WARN), (5000, None, UNMEASURED), (0, 0, WARN)])
def test_a_gate_without_enough_evidence_is_never_ok_and_fires_after_the_set_number_of_grades(grades, after, state):
    trigger = staleness.agreement(gate("insufficient", None), "R2", grades=grades, newer_grades=False,
                                  limits=Thresholds(agreement_fire_after=after))
    assert trigger.state == state and trigger.verdict.insufficient and trigger.value is None
    assert "R2: no pair graded by two raters yet" in trigger.verdict.reasons and trigger.verdict.steps == ("Keep grading.",)
    assert "gate passes" not in trigger.summary and trigger.summary.startswith("R2: no pair graded by two raters yet")


def test_each_trigger_has_a_verdict_and_one_stored_before_verdicts_gets_the_one_its_state_implies():
    rows = [{"run": "bm25", "cutoff": 10, "share": 0.05, "round": "R1"}]
    assert staleness.new_systems(rows, [], LIMITS).verdict.passed
    assert "last evaluated on R1" in staleness.new_systems(rows, [], LIMITS).summary
    unknown = staleness.new_systems(rows, ["dense"], LIMITS)  # measured runs are fine, a new one is unknown
    assert unknown.state == OK and unknown.verdict.insufficient and "dense" in unknown.verdict.reasons[0]
    assert staleness.new_systems([], [], LIMITS, runs=0).verdict.reasons == ("no run imported yet",)
    assert staleness.query_drift({}, [], None, LIMITS).verdict.insufficient
    assert staleness.age(0, 0, LIMITS).verdict.insufficient and staleness.age(60, 100, LIMITS).verdict.failed
    assert staleness.guidelines([]).verdict.passed
    old = {"key": "age", "state": "unmeasured", "value": None, "threshold": "t", "summary": "no labels yet", "details": {}}
    assert staleness.verdict_of(old) == Verdict(INSUFFICIENT, ("no labels yet",))
    assert staleness.Trigger.from_json(old | {"firing": False}).verdict.insufficient
    stored = staleness.age(60, 100, LIMITS).to_json()
    assert stored["verdict"]["state"] == "fail" and stored["firing"] and staleness.Trigger.from_json(stored).verdict.failed


def test_the_worst_state_wins():
    assert staleness.worst([OK, UNMEASURED, WARN]) == WARN
    assert staleness.worst([]) == UNMEASURED


def test_the_module_imports_nothing_from_django():
    code = ("import sys, judgments.lib.staleness; "
            "assert not [m for m in sys.modules if m.startswith('django')], 'django imported'")
    subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2], check=True)

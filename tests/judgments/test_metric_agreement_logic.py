"""The metric-agreement statistics against scipy.stats on copied samples, and the bootstrap's determinism."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from judgments.lib import metric_agreement as ma


def scipy_or_nan(function, x, y) -> float:
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(function(x, y).statistic)


def same(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or abs(a - b) < 1e-9


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.floats(0, 1, allow_nan=False), st.integers(0, 2), st.integers(0, 3)),
                min_size=1, max_size=25))
def test_weighted_tau_b_and_rho_equal_scipys_on_the_copied_sample(rows):
    grades = np.array([r[0] for r in rows], float)
    metric = np.array([round(r[1], 1) for r in rows])  # rounding makes ties
    copies = np.array([[r[3] for r in rows], [r[2] for r in rows]])
    taus, rhos = ma.weighted_tau_b(metric, grades, copies), ma.weighted_spearman(metric, grades, copies)
    for r, weights in enumerate(copies):
        x, y = np.repeat(metric, weights), np.repeat(grades, weights)
        assert same(taus[r], scipy_or_nan(lambda a, b: stats.kendalltau(a, b, variant="b"), x, y))
        assert same(rhos[r], scipy_or_nan(stats.spearmanr, x, y))
    swapped = ma.weighted_tau_b(grades, metric, copies)  # many distinct values on the side counted by level
    for r, weights in enumerate(copies):
        x, y = np.repeat(grades, weights), np.repeat(metric, weights)
        assert same(swapped[r], scipy_or_nan(lambda a, b: stats.kendalltau(a, b, variant="b"), x, y))


def answers(seed: int = 3, queries: int = 20, systems=("bm25-rag", "dense-rag", "hybrid-rag")) -> list[ma.Answer]:
    rng = np.random.default_rng(seed)
    found = []
    for q in range(queries):
        for k, system in enumerate(systems):
            grade = int(rng.integers(0, 3))
            found.append(ma.Answer(query=f"q{q}", system=system, grade=float(grade),
                                   metrics={"good": grade / 2 + rng.normal(0, 0.2) + 0.1 * k, "noise": float(rng.random()),
                                            "coarse": float(grade > 0)}))
    return found


def test_the_per_answer_figures_are_scipys_tau_b_and_rho_over_all_answers():
    data = ma.report(answers(), ["good", "noise", "coarse"], resamples=50)
    grades = [a.grade for a in answers()]
    for metric in ("good", "noise", "coarse"):
        values = [a.metrics[metric] for a in answers()]
        assert data["per_answer"][metric]["tau"]["value"] == pytest.approx(stats.kendalltau(values, grades).statistic)
        assert data["per_answer"][metric]["rho"]["value"] == pytest.approx(stats.spearmanr(values, grades).statistic)
    assert (data["n_answers"], data["n_queries"], data["n_systems"]) == (60, 20, 3)


def test_the_bootstrap_resamples_queries_and_its_seed_fixes_the_intervals():
    first = ma.report(answers(), ["good", "noise"], resamples=200, seed=5)
    again = ma.report(answers(), ["good", "noise"], resamples=200, seed=5)
    other = ma.report(answers(), ["good", "noise"], resamples=200, seed=6)
    assert first["per_answer"] == again["per_answer"] and first["system_level"] == again["system_level"]
    assert first["per_answer"]["good"]["tau"]["low"] != other["per_answer"]["good"]["tau"]["low"]
    draws = ma.query_draws(20, 200, 5)
    assert draws.shape == (200, 20) and (draws.sum(axis=1) == 20).all()
    tau = first["per_answer"]["good"]["tau"]
    assert tau["low"] <= tau["value"] <= tau["high"]


def test_the_interval_is_the_percentile_interval_of_tau_b_on_each_resample_of_whole_queries():
    found = answers(queries=8)
    data = ma.report(found, ["good"], resamples=100, seed=2)
    queries = sorted({a.query for a in found})
    draws = ma.query_draws(len(queries), 100, 2)
    taus = []
    for counts in draws:
        sample = [a for a in found for _ in range(int(counts[queries.index(a.query)]))]
        taus.append(scipy_or_nan(lambda a, b: stats.kendalltau(a, b), [a.metrics["good"] for a in sample], [a.grade for a in sample]))
    taus = np.array(taus)
    low, high = np.percentile(taus[np.isfinite(taus)], [2.5, 97.5])
    assert data["per_answer"]["good"]["tau"]["low"] == pytest.approx(low)
    assert data["per_answer"]["good"]["tau"]["high"] == pytest.approx(high)


def test_the_system_level_ranks_systems_by_their_means_over_common_queries():
    found = answers() + [ma.Answer(query="only-one", system="bm25-rag", grade=2.0, metrics={"good": 1.0, "noise": 0.0, "coarse": 1.0})]
    data = ma.report(found, ["good", "noise"], resamples=100)
    system = data["system_level"]
    assert system["n_queries"] == 20 and system["n_systems"] == 3 and system["enough_systems"]
    human = {row["system"]: row["human"] for row in system["systems"]}
    good = {row["system"]: row["metrics"]["good"] for row in system["systems"]}
    common = [a for a in found if a.query != "only-one"]
    for name in human:
        assert human[name] == pytest.approx(np.mean([a.grade for a in common if a.system == name]))
    names = sorted(human)
    expected = stats.kendalltau([good[n] for n in names], [human[n] for n in names]).statistic
    assert system["correlations"]["good"]["tau"]["value"] == pytest.approx(expected)
    expected_rho = stats.spearmanr([good[n] for n in names], [human[n] for n in names]).statistic
    assert system["correlations"]["good"]["rho"]["value"] == pytest.approx(expected_rho)


def test_two_systems_get_their_means_but_no_system_level_correlation():
    data = ma.report(answers(systems=("a", "b")), ["good"], resamples=20)
    assert not data["system_level"]["enough_systems"] and data["system_level"]["correlations"] == {}
    assert len(data["system_level"]["systems"]) == 2


def paired_leads(found: list[ma.Answer], best: str, other: str, resamples: int) -> tuple[float, float, float]:
    """The oracle for "is the best better than X": each resample's copied sample (the report's query draws),
    scipy's tau-b of both metrics on it, and the share and 95% percentile interval of their difference."""
    queries = sorted({a.query for a in found}, key=str)
    draws = ma.query_draws(len(queries), resamples, ma.SEED)
    differences = []
    for counts in draws:
        copied = [a for a in found for _ in range(int(counts[queries.index(a.query)]))]
        grades = [a.grade for a in copied]
        taus = [scipy_or_nan(lambda x, y: stats.kendalltau(x, y, variant="b"), [a.metrics[m] for a in copied], grades)
                for m in (best, other)]
        if not np.isnan(taus).any():
            differences.append(taus[0] - taus[1])
    low, high = np.percentile(differences, [2.5, 97.5])
    return float(np.mean(np.array(differences) > 0)), float(low), float(high)


def test_the_best_leads_another_metric_when_the_paired_difference_of_their_taus_is_above_0():
    found = answers()
    data = ma.report(found, ["good", "noise", "coarse"], resamples=200, min_answers=30)
    verdict = data["verdict"]
    taus = {m: data["per_answer"][m]["tau"]["value"] for m in ("good", "noise", "coarse")}
    assert verdict["best"] == max(taus, key=taus.get)
    for metric in {"good", "noise", "coarse"} - {verdict["best"]}:
        wins, low, high = paired_leads(found, verdict["best"], metric, 200)
        assert verdict["wins"][metric] == pytest.approx(wins)
        assert (verdict["leads"][metric]["low"], verdict["leads"][metric]["high"]) == (pytest.approx(low), pytest.approx(high))
        assert (metric in verdict["unproven"]) == (not low > 0)
    assert verdict["decision"]["state"] == ("pass" if not verdict["unproven"] else "insufficient")


def test_a_lead_the_resamples_prove_passes_though_the_two_intervals_overlap():
    """Two metrics that order the answers almost alike have overlapping intervals, yet one is higher in every
    resample: the paired difference decides, and the verdict says so rather than "uncertain"."""
    rng = np.random.default_rng(0)
    found = []
    for q in range(40):
        for system in ("a", "b", "c"):
            grade = float(rng.integers(0, 3))
            base = grade + rng.normal(0, 0.8)
            found.append(ma.Answer(query=f"q{q}", system=system, grade=grade, metrics={"sharp": base, "blurred": base + rng.normal(0, 0.5)}))
    data = ma.report(found, ["sharp", "blurred"], resamples=300, min_answers=30)
    sharp, blurred = data["per_answer"]["sharp"]["tau"], data["per_answer"]["blurred"]["tau"]
    assert data["verdict"]["best"] == "sharp" and blurred["high"] >= sharp["low"]  # the intervals overlap
    wins, low, _high = paired_leads(found, "sharp", "blurred", 300)
    assert low > 0 and data["verdict"]["wins"]["blurred"] == pytest.approx(wins)
    assert data["verdict"]["decision"]["state"] == "pass" and data["verdict"]["unproven"] == []


def test_too_few_answers_name_no_metric_whatever_the_resamples_say():
    found = answers(queries=5)  # 15 answers
    data = ma.report(found, ["good", "noise"], resamples=100)
    decision = data["verdict"]["decision"]
    assert decision["state"] == "insufficient" and decision["label"] == "not enough evidence"
    assert decision["reasons"][0].startswith("graded answers with reference answers: 15 of the 30 needed")
    assert ma.report(found, ["good", "noise"], resamples=100, min_answers=10)["verdict"]["decision"]["reasons"][0] != decision["reasons"][0]


def test_a_best_metric_whose_tau_is_proven_below_0_fails():
    found = [ma.Answer(query=f"q{q}", system=s, grade=float(g), metrics={"backwards": -float(g) + 0.01 * q})
             for q in range(15) for s, g in (("a", 0), ("b", 1), ("c", 2))]
    decision = ma.report(found, ["backwards"], resamples=100)["verdict"]["decision"]
    assert decision["state"] == "fail" and decision["reasons"][0].startswith("no metric agrees with the raters")


def test_constant_grades_leave_every_correlation_undefined_and_no_best_metric():
    flat = [ma.Answer(query=f"q{i}", system="a", grade=1.0, metrics={"m": float(i)}) for i in range(5)]
    data = ma.report(flat, ["m"], resamples=20)
    assert data["per_answer"]["m"]["tau"]["value"] is None and data["per_answer"]["m"]["rho"]["value"] is None
    assert data["per_answer"]["m"]["tau"]["undefined_resamples"] == 20
    assert data["verdict"]["best"] is None


def test_no_answers_make_an_empty_report():
    data = ma.report([], ["m"], resamples=10)
    assert data["n_answers"] == 0 and data["per_answer"] == {} and data["verdict"]["best"] is None


def test_importing_the_statistics_loads_no_django():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = ("import sys, judgments.lib.metric_agreement\n"
            "assert not [n for n in sys.modules if n == 'django' or n.startswith('django.')], 'django imported'\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                            env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr

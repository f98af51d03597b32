"""Prediction-powered estimates (evaluation/engine/ppi.py), checked against ppi-python 0.2.3 (the oracle of
point estimates, intervals and p-values), statsmodels' Holm, and cases worked by hand. No database."""

import json
import math

import numpy as np
import ppi_py
import pytest
from scipy.stats import norm
from statsmodels.stats.multitest import multipletests

from evaluation.engine import EngineInputError
from evaluation.engine.ppi import (
    MIN_LABELLED,
    Estimate,
    calibration_variances,
    classical_mean,
    effective_labelled,
    estimate,
    plan_sample_size,
    ppi_mean,
    stratified,
)

Z95 = norm.ppf(0.975)


def _scores(rng, size, judge_noise):
    """Per-query values shaped like IR measures: in [0, 1], with ties at 0 and 1, and a judge whose values
    follow the humans' with noise (judge_noise 0: equal; large: unrelated)."""
    human = np.clip(rng.beta(0.8, 1.2, size) + rng.choice([0.0, -1.0, 1.0], size, p=[0.8, 0.1, 0.1]), 0, 1)
    judge = np.clip(human + judge_noise * rng.normal(size=size), 0, 1)
    return human, judge


def _oracle(y, yhat, yhat_u, *, w=None, w_u=None, lam=None, alpha=0.05):
    point = ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u, lam=lam, w=w, w_unlabeled=w_u)
    low, high = ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=alpha, lam=lam, w=w, w_unlabeled=w_u)
    return float(np.ravel(point)[0]), float(np.ravel(low)[0]), float(np.ravel(high)[0])


def _random_case(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 501))
    big_n = int(rng.integers(1, 1001))
    noise = float(rng.choice([0.0, 0.05, 0.2, 0.5, 2.0]))
    y, yhat = _scores(rng, n, noise)
    _, yhat_u = _scores(rng, big_n, noise)
    weighted = seed % 3 == 0
    w = rng.uniform(0.1, 5.0, n) if weighted else None
    w_u = rng.uniform(0.1, 5.0, big_n) if weighted else None
    lam = [None, None, 0.0, 0.3, 1.0][seed % 5]
    alpha = [0.05, 0.1, 0.01][seed % 3]
    return y, yhat, yhat_u, w, w_u, lam, alpha


@pytest.mark.parametrize("seed", range(120))
def test_it_equals_ppi_python_on_random_arrays(seed):
    y, yhat, yhat_u, w, w_u, lam, alpha = _random_case(seed)
    found = ppi_mean(y, yhat, yhat_u, weights=w, weights_unlabelled=w_u, alpha=alpha, lam=lam)
    point, low, high = _oracle(y, yhat, yhat_u, w=w, w_u=w_u, lam=lam, alpha=alpha)
    assert found.mean == pytest.approx(point, abs=1e-12, rel=0)
    assert found.low == pytest.approx(low, abs=1e-12, rel=0)
    assert found.high == pytest.approx(high, abs=1e-12, rel=0)
    assert (found.n_labelled, found.n_unlabelled) == (y.size, yhat_u.size)
    if lam is not None:
        assert found.lam == lam


def test_tuned_lam_is_in_zero_one_and_a_fixed_one_is_kept():
    rng = np.random.default_rng(7)
    y, yhat = _scores(rng, 80, 0.1)
    _, yhat_u = _scores(rng, 800, 0.1)
    assert 0.0 <= ppi_mean(y, yhat, yhat_u).lam <= 1.0
    assert ppi_mean(y, yhat, yhat_u, lam=0.25).lam == 0.25


def test_a_labelled_set_of_one_gives_the_human_value_without_an_interval():
    # ppi-python gives a zero-width interval here (std of one value is 0); one value says nothing of the spread,
    # so the standard error is NaN, the interval unknown, and JSON shows None.
    found = ppi_mean([0.7], [0.4], [0.2, 0.5, 0.9])
    assert found.mean == pytest.approx(0.7)
    assert found.lam == 0.0  # no covariance can be seen in one query
    assert math.isnan(found.se) and math.isnan(found.low) and math.isnan(found.high)
    assert found.as_dict()["low"] is None and found.as_dict()["se"] is None
    human = classical_mean([0.7])
    assert math.isnan(human.se)
    assert math.isnan(effective_labelled(found, human))


def test_estimate_with_one_labelled_query_shows_numbers_but_no_verdict():
    judge = {"a": {"AP": {"q1": 0.5, "q2": 0.1, "q3": 0.3}}, "b": {"AP": {"q1": 0.2, "q2": 0.0, "q3": 0.4}}}
    human = {"a": {"AP": {"q1": 0.6}}, "b": {"AP": {"q1": 0.1}}}
    result = estimate(human, judge, labelled=["q1"])
    (comparison,) = result.comparisons["AP"]
    assert comparison.state == "insufficient"
    assert comparison.queries_needed is None
    assert comparison.evidence().state == "insufficient"
    assert result.runs["a"]["AP"].ppi.mean == pytest.approx(0.6)
    json.dumps(result.to_json(), allow_nan=False)


def test_a_judge_equal_to_the_humans_with_lam_one_is_the_judges_own_interval():
    rng = np.random.default_rng(3)
    y, _ = _scores(rng, 30, 0.0)
    _, yhat_u = _scores(rng, 300, 0.0)
    found = ppi_mean(y, y, yhat_u, lam=1.0)
    judge_alone = classical_mean(yhat_u)  # the judge's mean and interval over the queries it alone labelled
    assert found.mean == pytest.approx(judge_alone.mean, abs=1e-15)
    assert found.se == pytest.approx(judge_alone.se, abs=1e-15)
    assert (found.low, found.high) == pytest.approx((judge_alone.low, judge_alone.high), abs=1e-15)


@pytest.mark.parametrize("k", [1, 10, 100, 10_000])
def test_a_judge_equal_to_the_humans_gets_lam_towards_one(k):
    # Labelled [0, 1], unlabelled k zeros and k ones, judge = humans: g = g_hat, so
    # lam = var0(labelled) / ((1 + n/N) var1(all)) = 0.25 / ((1 + 1/k) * 0.25 (2k + 2) / (2k + 1))
    #     = k (2k + 1) / (2 (k + 1)^2): 3/8 at k = 1, 0.9852 at k = 100, -> 1.
    unlabelled = np.array([0.0, 1.0] * k)
    found = ppi_mean([0.0, 1.0], [0.0, 1.0], unlabelled)
    lam = k * (2 * k + 1) / (2 * (k + 1) ** 2)
    assert found.lam == pytest.approx(lam, rel=1e-12)
    assert found.mean == pytest.approx(0.5, abs=1e-12)
    assert found.se == pytest.approx(math.sqrt(lam ** 2 * 0.25 / (2 * k) + (1 - lam) ** 2 * 0.25 / 2), rel=1e-12)


def test_a_constant_judge_gets_lam_zero_and_the_human_only_estimate():
    # ppi-python divides 0 by 0 here (the judge has no spread) and returns NaN.
    rng = np.random.default_rng(11)
    y, _ = _scores(rng, 40, 0.0)
    found = ppi_mean(y, np.full(40, 0.3), np.full(200, 0.3))
    human = classical_mean(y)
    assert found.lam == 0.0
    assert (found.mean, found.se, found.low, found.high) == pytest.approx(
        (human.mean, human.se, human.low, human.high), abs=1e-15)


def test_lam_zero_is_the_human_only_estimate_with_weights():
    rng = np.random.default_rng(5)
    y, yhat = _scores(rng, 25, 0.3)
    w = rng.uniform(0.5, 3.0, 25)
    found = ppi_mean(y, yhat, rng.uniform(size=90), weights=w, lam=0.0)
    human = classical_mean(y, weights=w)
    assert (found.mean, found.low, found.high) == pytest.approx((human.mean, human.low, human.high), abs=1e-15)


def test_weighted_human_only_estimate_worked_by_hand():
    # Weights 2, 1, 1 scaled to mean 1: 1.5, 0.75, 0.75; w * y = 1.5, 0, 0: mean 0.5 (= 2 / 4, the weighted
    # mean), std (ddof 0) sqrt(0.75 - 0.25) = sqrt(0.5), se sqrt(0.5) / sqrt(3).
    found = classical_mean([1.0, 0.0, 0.0], weights=[2.0, 1.0, 1.0])
    assert found.mean == pytest.approx(0.5)
    assert found.se == pytest.approx(math.sqrt(0.5 / 3))
    assert found.low == pytest.approx(0.5 - Z95 * math.sqrt(0.5 / 3))
    assert found.lam is None


def test_weights_that_are_not_usable_are_refused():
    with pytest.raises(ValueError, match="non-negative"):
        classical_mean([1.0, 0.0], weights=[1.0, -1.0])
    with pytest.raises(ValueError, match="2 values for 3"):
        ppi_mean([1.0, 0.0, 1.0], [1.0, 0.0, 1.0], [0.5], weights=[1.0, 1.0])


def test_with_every_query_labelled_the_estimate_is_the_human_one():
    found = ppi_mean([0.2, 0.4, 0.9], [0.1, 0.5, 0.8], [])
    human = classical_mean([0.2, 0.4, 0.9])
    assert found.lam == 0.0 and found.n_unlabelled == 0
    assert (found.mean, found.se) == pytest.approx((human.mean, human.se))


def test_no_labelled_query_is_an_error():
    with pytest.raises(ValueError, match="no labelled query"):
        ppi_mean([], [], [0.5])


def test_stratified_worked_by_hand():
    # shares 0.25 / 0.75: mean 0.25 * 0.5 + 0.75 * 0.8 = 0.725; se^2 = 0.0625 * 0.01 + 0.5625 * 0.04 = 0.023125
    parts = {"head": Estimate(0.5, 0.3, 0.7, 0.1, 10, 90, 0.4), "tail": Estimate(0.8, 0.4, 1.2, 0.2, 30, 270, 0.8)}
    found = stratified(parts, {"head": 0.25, "tail": 0.75})
    assert found.mean == pytest.approx(0.725)
    assert found.se == pytest.approx(math.sqrt(0.023125))
    assert (found.low, found.high) == pytest.approx((0.725 - Z95 * math.sqrt(0.023125), 0.725 + Z95 * math.sqrt(0.023125)))
    assert (found.n_labelled, found.n_unlabelled) == (40, 360)
    assert found.lam == pytest.approx(0.25 * 0.4 + 0.75 * 0.8)
    with pytest.raises(ValueError, match="sum to 1"):
        stratified(parts, {"head": 0.5, "tail": 0.6})
    with pytest.raises(ValueError, match="differ"):
        stratified(parts, {"head": 1.0})


def test_effective_labelled_worked_by_hand():
    ppi = Estimate(0.5, 0.4, 0.6, 0.05, 20, 180, 0.7)
    human = Estimate(0.5, 0.3, 0.7, 0.1, 20, 0, None)
    assert effective_labelled(ppi, human) == pytest.approx(80.0)  # 20 * (0.1 / 0.05)^2


def test_plan_sample_size_worked_by_hand():
    # 1,000 queries, var_residual 0.04, var_judge 0.09, half-width 0.05 at 95%: need
    # 0.04 / n + 0.09 / (1000 - n) <= (0.05 / 1.959964)^2 = 0.00065077.
    # n = 72: 0.00055556 + 0.00009698 = 0.00065253 (too wide); n = 73: 0.00054795 + 0.00009709 = 0.00064504.
    assert plan_sample_size(n_queries=1000, half_width=0.05, var_residual=0.04, var_judge=0.09) == 73
    # A loose target is met by the fewest queries a verdict needs.
    assert plan_sample_size(n_queries=1000, half_width=0.5, var_residual=0.04, var_judge=0.09) == MIN_LABELLED
    # 100 queries: the residual term alone needs n >= 62, where the judge's term 0.09 / 38 is already too big.
    assert plan_sample_size(n_queries=100, half_width=0.05, var_residual=0.04, var_judge=0.09) is None
    # A judge without variance: labelling every query is allowed and reaches it.
    assert plan_sample_size(n_queries=50, half_width=0.05, var_residual=0.04, var_judge=0.0) is None
    assert plan_sample_size(n_queries=70, half_width=0.05, var_residual=0.04, var_judge=0.0) == 62
    assert plan_sample_size(n_queries=5, half_width=1.0, var_residual=0.04, var_judge=0.09) is None


def test_calibration_variances_worked_by_hand():
    # Queries both labelled: a, b, c. human - judge = 0, -1, 1: var (ddof 1) 1; judge 1, 1, 0: var 1/3.
    found = calibration_variances({"a": 1.0, "b": 0.0, "c": 1.0, "x": 1.0}, {"a": 1.0, "b": 1.0, "c": 0.0, "d": 1.0})
    assert found == {"var_residual": pytest.approx(1.0), "var_judge": pytest.approx(1 / 3), "queries": 3}
    assert calibration_variances({"a": 1.0}, {"a": 0.0})["queries"] == 1


# ------------------------------------------------------------------------------------------- estimate


def _runs(seed, n_queries=60, n_runs=3, measures=("AP", "nDCG@10"), noise=0.15, shift=0.08):
    """Judge values on every query and human values, per run and measure; run i is better by i * shift."""
    rng = np.random.default_rng(seed)
    queries = [f"q{i:03d}" for i in range(n_queries)]
    base = {m: rng.uniform(size=n_queries) for m in measures}
    human, judge = {}, {}
    for r in range(n_runs):
        name = f"run{r}"
        human[name], judge[name] = {}, {}
        for m in measures:
            h = np.clip(base[m] + r * shift + 0.1 * rng.normal(size=n_queries), 0, 1)
            j = np.clip(h + noise * rng.normal(size=n_queries), 0, 1)
            human[name][m] = dict(zip(queries, h.tolist()))
            judge[name][m] = dict(zip(queries, j.tolist()))
    return queries, human, judge


def _labelled_only(human, labelled):
    return {run: {m: {q: v[q] for q in labelled} for m, v in ms.items()} for run, ms in human.items()}


def test_estimate_on_two_runs_matches_ppi_python_per_run_and_on_the_difference():
    queries, human, judge = _runs(1, n_runs=2)
    labelled = queries[::3]
    rest = [q for q in queries if q not in labelled]
    result = estimate(_labelled_only(human, labelled), judge, labelled=labelled)
    assert result.labelled == sorted(labelled) and result.unlabelled == rest

    def arrays(run, m):
        return (np.array([human[run][m][q] for q in labelled]), np.array([judge[run][m][q] for q in labelled]),
                np.array([judge[run][m][q] for q in rest]))

    for run in ("run0", "run1"):
        for m in ("AP", "nDCG@10"):
            y, yhat, yhat_u = arrays(run, m)
            found = result.runs[run][m]
            assert (found.ppi.mean, found.ppi.low, found.ppi.high) == pytest.approx(_oracle(y, yhat, yhat_u), abs=1e-12)
            assert found.human.mean == pytest.approx(y.mean())
            assert found.judge_mean == pytest.approx(np.mean([judge[run][m][q] for q in queries]))
            assert found.effective_labelled == pytest.approx(len(labelled) * (found.human.se / found.ppi.se) ** 2)
            assert found.weighted is None and found.weighted_reason == "no traffic weights were given"
    for m in ("AP", "nDCG@10"):
        (c,) = result.comparisons[m]
        (y0, j0, u0), (y1, j1, u1) = arrays("run0", m), arrays("run1", m)
        assert (c.a, c.b) == ("run0", "run1")
        assert (c.ppi.mean, c.ppi.low, c.ppi.high) == pytest.approx(_oracle(y0 - y1, j0 - j1, u0 - u1), abs=1e-12)
        assert c.p == pytest.approx(float(np.ravel(ppi_py.ppi_mean_pval(y0 - y1, j0 - j1, u0 - u1))[0]), abs=1e-12)
        assert c.p_adjusted == c.p  # one comparison per measure
        assert c.human.mean == pytest.approx((y0 - y1).mean())


def test_comparisons_of_a_measure_are_corrected_together_with_holm():
    queries, human, judge = _runs(2, n_queries=200, n_runs=4, shift=0.03)
    labelled = queries[::4]
    result = estimate(_labelled_only(human, labelled), judge, labelled=labelled)
    for m, comparisons in result.comparisons.items():
        assert [(c.a, c.b) for c in comparisons] == [("run0", "run1"), ("run0", "run2"), ("run0", "run3"),
                                                     ("run1", "run2"), ("run1", "run3"), ("run2", "run3")]
        p = [c.p for c in comparisons]
        expected = multipletests(p, method="holm")[1]
        assert [c.p_adjusted for c in comparisons] == pytest.approx(expected, abs=1e-15)
        for c in comparisons:
            assert c.state == ("significant" if c.p_adjusted < 0.05 else "not significant")
            assert c.evidence().state == ("pass" if c.state == "significant" else "fail")
    states = {c.state for cs in result.comparisons.values() for c in cs}
    assert states == {"significant", "not significant"}


def _formula_p_adjusted(comparison, human, judge, labelled, rest, measure, n, multiplier, n_queries):
    """The p-value times its Holm multiplier with n labelled queries, lam and the per-query variances held."""
    def diff(part, side):
        return np.array([side[comparison.a][measure][q] - side[comparison.b][measure][q] for q in part])

    lam = comparison.ppi.lam
    var_labelled = np.var(diff(labelled, human) - lam * diff(labelled, judge))
    var_unlabelled = np.var(lam * diff(rest, judge))
    se = math.sqrt(var_labelled / n + var_unlabelled / (n_queries - n))
    return min(1.0, multiplier * 2 * norm.sf(abs(comparison.ppi.mean) / se))


def test_queries_needed_is_the_fewest_that_would_make_the_comparison_significant():
    queries, human, judge = _runs(4, n_queries=400, n_runs=3, shift=0.02, noise=0.1)
    labelled = queries[:30]
    rest = queries[30:]
    result = estimate(_labelled_only(human, labelled), judge, labelled=labelled)
    comparisons = result.comparisons["AP"]
    p = np.array([c.p for c in comparisons])
    multiplier = {int(i): len(p) - rank for rank, i in enumerate(np.argsort(p, kind="stable"))}
    checked = 0
    for index, c in enumerate(comparisons):
        if c.queries_needed is None or c.queries_needed <= MIN_LABELLED:
            continue
        at = _formula_p_adjusted(c, human, judge, labelled, rest, "AP", c.queries_needed, multiplier[index], 400)
        before = _formula_p_adjusted(c, human, judge, labelled, rest, "AP", c.queries_needed - 1, multiplier[index], 400)
        assert at < 0.05 <= before
        assert f"about {c.queries_needed:,} labelled queries in all" in c.queries_needed_reason
        checked += 1
    assert checked >= 2
    assert any(c.state == "not significant" and (c.queries_needed or 0) > 30 for c in comparisons)


def test_queries_needed_is_none_for_identical_runs():
    queries, human, judge = _runs(5, n_runs=1)
    human["copy"], judge["copy"] = human["run0"], judge["run0"]
    result = estimate(_labelled_only(human, queries[:20]), judge, labelled=queries[:20])
    (c,) = result.comparisons["AP"]
    assert c.ppi.mean == 0.0 and c.p == 1.0 and c.state == "not significant"
    assert c.queries_needed is None and "difference is 0" in c.queries_needed_reason


def test_fewer_than_min_labelled_queries_are_insufficient_whatever_the_p_value():
    queries, human, judge = _runs(6, n_runs=2, shift=0.5)
    labelled = queries[:MIN_LABELLED - 1]
    (c,) = estimate(_labelled_only(human, labelled), judge, labelled=labelled).comparisons["AP"]
    assert c.p < 0.05 and c.state == "insufficient"
    assert f"at least {MIN_LABELLED}" in c.reason
    assert c.evidence().missing and c.evidence().steps


def test_traffic_weights_give_a_weighted_estimate_beside_the_headline_one():
    queries, human, judge = _runs(7, n_runs=2)
    labelled = queries[::2]
    rest = queries[1::2]
    weights = {q: 1.0 + i % 5 for i, q in enumerate(queries)}
    result = estimate(_labelled_only(human, labelled), judge, labelled=labelled, weights=weights)
    found = result.runs["run0"]["AP"]
    y = np.array([human["run0"]["AP"][q] for q in labelled])
    yhat = np.array([judge["run0"]["AP"][q] for q in labelled])
    yhat_u = np.array([judge["run0"]["AP"][q] for q in rest])
    w, w_u = np.array([weights[q] for q in labelled]), np.array([weights[q] for q in rest])
    assert (found.weighted["ppi"].mean, found.weighted["ppi"].low) == pytest.approx(
        _oracle(y, yhat, yhat_u, w=w, w_u=w_u)[:2], abs=1e-12)
    assert found.weighted["human"].mean == pytest.approx(np.average(y, weights=w))
    del weights[rest[0]]
    lacking = estimate(_labelled_only(human, labelled), judge, labelled=labelled, weights=weights)
    assert lacking.runs["run0"]["AP"].weighted is None
    assert "no traffic weight for 1 of the set's 60 queries" in lacking.runs["run0"]["AP"].weighted_reason


def test_tiers_give_estimates_per_tier_and_tier_shares_a_stratified_headline():
    queries, human, judge = _runs(8, n_runs=2)
    tiers = {q: "head" if i < 20 else "tail" for i, q in enumerate(queries)}
    labelled = queries[:20:2] + queries[20::4]
    result = estimate(_labelled_only(human, labelled), judge, labelled=labelled, tiers=tiers,
                      tier_shares={"head": 1 / 3, "tail": 2 / 3})
    found = result.runs["run1"]["nDCG@10"]
    assert set(found.by_tier) == {"head", "tail"}
    for tier in ("head", "tail"):
        inside = [q for q in labelled if tiers[q] == tier]
        outside = [q for q in queries if tiers[q] == tier and q not in labelled]
        y = np.array([human["run1"]["nDCG@10"][q] for q in inside])
        yhat = np.array([judge["run1"]["nDCG@10"][q] for q in inside])
        yhat_u = np.array([judge["run1"]["nDCG@10"][q] for q in outside])
        assert found.by_tier[tier]["ppi"].mean == pytest.approx(_oracle(y, yhat, yhat_u)[0], abs=1e-12)
    expected = stratified({t: found.by_tier[t]["ppi"] for t in ("head", "tail")}, {"head": 1 / 3, "tail": 2 / 3})
    assert found.ppi == expected
    (c,) = result.comparisons["nDCG@10"]
    assert c.queries_needed is None or c.queries_needed >= MIN_LABELLED


def test_a_tier_without_labelled_queries_cannot_be_stratified():
    queries, human, judge = _runs(9, n_runs=1)
    tiers = {q: "head" if i < 20 else "tail" for i, q in enumerate(queries)}
    labelled = queries[20:40]
    with pytest.raises(EngineInputError, match="tier 'head' has no labelled query"):
        estimate(_labelled_only(human, labelled), judge, labelled=labelled, tiers=tiers,
                 tier_shares={"head": 1 / 3, "tail": 2 / 3})


def test_bad_input_names_the_query_or_run():
    queries, human, judge = _runs(10, n_runs=2)
    labelled = queries[:15]
    partial = _labelled_only(human, labelled)
    del partial["run1"]["AP"]["q003"]
    with pytest.raises(EngineInputError, match=r"run 'run1', AP: no human value for labelled query 'q003'"):
        estimate(partial, judge, labelled=labelled)
    with pytest.raises(EngineInputError, match="labelled query 'nope' has no judge value"):
        estimate(_labelled_only(human, labelled), judge, labelled=labelled + ["nope"])
    with pytest.raises(EngineInputError, match="listed twice"):
        estimate(_labelled_only(human, labelled), judge, labelled=labelled + labelled[:1])
    with pytest.raises(EngineInputError, match="runs"):
        estimate({"run0": _labelled_only(human, labelled)["run0"]}, judge, labelled=labelled)
    del judge["run1"]["AP"]["q050"]
    with pytest.raises(EngineInputError, match=r"run 'run1', AP: no judge value for query 'q050'"):
        estimate(_labelled_only(human, labelled), judge, labelled=labelled)


def test_to_json_has_the_contracts_fields_and_is_strict_json():
    queries, human, judge = _runs(12, n_runs=2)
    labelled = queries[:25]
    document = estimate(_labelled_only(human, labelled), judge, labelled=labelled).to_json()
    json.dumps(document, allow_nan=False)
    assert {k: document[k] for k in ("alpha", "labelled", "unlabelled", "min_labelled")} == {
        "alpha": 0.05, "labelled": 25, "unlabelled": 35, "min_labelled": MIN_LABELLED}
    run = document["runs"][0]
    assert run["run"] == "run0"
    assert set(run["measures"]["AP"]) == {"ppi", "human", "judge_mean", "effective_labelled", "weighted",
                                          "weighted_reason", "by_tier"}
    assert set(run["measures"]["AP"]["ppi"]) == {"mean", "low", "high", "se", "n_labelled", "n_unlabelled", "lam"}
    assert run["measures"]["AP"]["human"]["lam"] is None
    (c,) = document["comparisons"]["AP"]
    assert set(c) == {"a", "b", "ppi", "human", "p", "p_adjusted", "state", "reason", "queries_needed",
                      "queries_needed_reason"}

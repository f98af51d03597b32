"""Significance tests for run comparisons, checked against scipy, exact enumeration and
published worked examples."""

import itertools
import json
import math

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.engine import significance
from evaluation.engine.significance import (
    Comparison,
    bonferroni,
    bootstrap_ci,
    compare,
    compare_many,
    holm,
    paired_t_test,
    permutation_test,
)

COMPARISON_KEYS = {
    "measure", "A_mean", "B_mean", "diff", "p_value", "t_p_value", "ci_low", "ci_high",
    "p_corrected", "significant", "significant_corrected", "wins", "ties", "losses",
    "n_queries", "missing_a", "missing_b",
}


def exact_sign_flip_p(d):
    """Fraction of all 2^n sign vectors whose |sum| reaches the observed |sum|."""
    d = np.asarray(d, dtype=float)
    signs = np.array(list(itertools.product([1.0, -1.0], repeat=d.size)))
    sums = signs @ d
    observed = abs(d.sum())
    return np.mean(np.abs(sums) >= observed - 1e-9)


def monte_carlo_tolerance(p, resamples):
    return 3 * math.sqrt(p * (1 - p) / resamples) + 1 / resamples


def per_query(scores):
    return {f"q{i}": float(s) for i, s in enumerate(scores)}


# Paired t-test


@pytest.mark.parametrize("n", [2, 5, 30, 700])
def test_the_t_test_matches_scipy_ttest_rel(n):
    rng = np.random.default_rng(n)
    a = rng.random(n)
    b = np.clip(a + rng.normal(0.05, 0.2, n), 0, 1)
    assert paired_t_test(a, b) == pytest.approx(scipy.stats.ttest_rel(a, b).pvalue, rel=1e-9)


def test_the_t_test_gives_one_for_identical_inputs_where_scipy_gives_nan():
    a = [0.1, 0.5, 0.9]
    assert paired_t_test(a, a) == 1.0
    assert paired_t_test([0.3], [0.1]) == 1.0


@pytest.mark.filterwarnings("ignore:Precision loss occurred:RuntimeWarning")
def test_the_t_test_gives_zero_for_a_constant_nonzero_difference_like_scipy():
    assert paired_t_test([1, 2, 3], [0, 1, 2]) == scipy.stats.ttest_rel([1, 2, 3], [0, 1, 2]).pvalue


# Permutation test


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_permutation_p_value_is_close_to_exact_enumeration(seed):
    rng = np.random.default_rng(seed)
    d = rng.normal(0.15, 0.5, 11)
    exact = exact_sign_flip_p(d)
    p = permutation_test(d, resamples=20_000, seed=seed)
    assert abs(p - exact) <= monte_carlo_tolerance(exact, 20_000)


def test_the_permutation_p_value_is_close_to_scipy_permutation_test():
    rng = np.random.default_rng(7)
    a = rng.random(13)
    b = np.clip(a - rng.normal(0.1, 0.25, 13), 0, 1)
    oracle = scipy.stats.permutation_test(
        (a, b), lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples", n_resamples=np.inf,
    ).pvalue
    p = permutation_test(a - b, resamples=20_000)
    assert abs(p - oracle) <= monte_carlo_tolerance(oracle, 20_000)


def test_the_permutation_p_value_matches_the_normal_limit_for_many_queries():
    # With n large, sum(s_i d_i) under random signs is close to N(0, sum d_i^2).
    rng = np.random.default_rng(3)
    d = rng.normal(0.02, 0.3, 1003) * (rng.random(1003) < 0.6)
    z = abs(d.sum()) / math.sqrt((d**2).sum())
    normal = 2 * scipy.stats.norm.sf(z)
    p = permutation_test(d, resamples=10_000)
    assert abs(p - normal) <= monte_carlo_tolerance(normal, 10_000) + 0.01


def test_the_permutation_test_counts_floating_point_ties_as_extreme():
    # Only the all-plus and all-minus signs reach |0.1 + 0.2 + 0.3|: exactly 2/8.
    p = permutation_test([0.1, 0.2, 0.3], resamples=20_000)
    assert abs(p - 0.25) <= monte_carlo_tolerance(0.25, 20_000)


def test_the_permutation_test_counts_ties_that_rounding_would_split():
    # Nine differences of +-0.1: every sign vector has |sum| >= 0.1, so the exact p is 1, but
    # sums such as 0.1*3 - 0.1*2 round below 0.1 in floating point.
    d = [0.1] * 5 + [-0.1] * 4
    assert exact_sign_flip_p(d) == 1.0
    assert permutation_test(d, resamples=2_000) == 1.0
    assert permutation_test(np.append(np.tile([0.1, -0.1], 4500), 0.1), resamples=500) == 1.0


def test_the_permutation_test_gives_one_for_zero_differences():
    assert permutation_test(np.zeros(50)) == 1.0
    assert permutation_test([]) == 1.0
    assert permutation_test([0.5, -0.5, 0.25, -0.25]) == 1.0


def test_the_permutation_p_value_is_never_zero():
    p = permutation_test(np.full(200, 0.3), resamples=1_000)
    assert p == 1 / 1_001


def test_the_permutation_test_is_reproducible_with_a_seed():
    d = np.random.default_rng(5).normal(0.01, 0.3, 500)
    assert permutation_test(d, seed=9) == permutation_test(d, seed=9)
    assert permutation_test(d, seed=9) != permutation_test(d, seed=10)


@pytest.mark.parametrize("threads", [1, 3])
def test_the_resampling_results_do_not_depend_on_the_number_of_threads(monkeypatch, threads):
    d = np.random.default_rng(6).normal(0.01, 0.3, 3000)
    expected = (permutation_test(d), bootstrap_ci(d))
    monkeypatch.setattr(significance, "_workers", lambda: threads)
    assert (permutation_test(d), bootstrap_ci(d)) == expected


def test_the_permutation_test_rejects_non_finite_differences():
    with pytest.raises(ValueError):
        permutation_test([0.1, float("nan")])


# Bootstrap


def test_the_bootstrap_interval_contains_the_mean_and_matches_normal_theory():
    d = np.random.default_rng(11).normal(0.03, 0.25, 4000)
    low, high = bootstrap_ci(d)
    assert low < d.mean() < high
    half_width = 1.959964 * d.std(ddof=1) / math.sqrt(d.size)
    assert low == pytest.approx(d.mean() - half_width, abs=0.1 * half_width)
    assert high == pytest.approx(d.mean() + half_width, abs=0.1 * half_width)


def test_the_bootstrap_interval_of_few_distinct_differences_matches_normal_theory():
    # P@10-like differences take a handful of values; resampling then draws value counts.
    d = np.random.default_rng(15).choice([-0.2, -0.1, 0.0, 0.1, 0.3], size=5000)
    low, high = bootstrap_ci(d)
    half_width = 1.959964 * d.std(ddof=1) / math.sqrt(d.size)
    assert low == pytest.approx(d.mean() - half_width, abs=0.1 * half_width)
    assert high == pytest.approx(d.mean() + half_width, abs=0.1 * half_width)


def test_the_bootstrap_interval_is_close_to_scipy_percentile_bootstrap():
    d = np.random.default_rng(12).exponential(0.2, 60) - 0.15
    oracle = scipy.stats.bootstrap(
        (d,), np.mean, n_resamples=20_000, method="percentile", rng=np.random.default_rng(0),
    ).confidence_interval
    low, high = bootstrap_ci(d, resamples=20_000)
    width = oracle.high - oracle.low
    assert low == pytest.approx(oracle.low, abs=0.05 * width)
    assert high == pytest.approx(oracle.high, abs=0.05 * width)


def test_the_bootstrap_interval_narrows_as_queries_grow():
    rng = np.random.default_rng(13)
    small = bootstrap_ci(rng.normal(0, 0.3, 50))
    large = bootstrap_ci(rng.normal(0, 0.3, 5000))
    assert (large[1] - large[0]) < (small[1] - small[0]) / 5


def test_the_bootstrap_interval_is_reproducible_and_honours_the_confidence():
    d = np.random.default_rng(14).normal(0.05, 0.3, 300)
    assert bootstrap_ci(d, seed=1) == bootstrap_ci(d, seed=1)
    wide = bootstrap_ci(d, confidence=0.99)
    narrow = bootstrap_ci(d, confidence=0.9)
    assert wide[0] < narrow[0] < narrow[1] < wide[1]


def test_the_bootstrap_interval_of_a_constant_difference_is_that_constant():
    assert bootstrap_ci(np.zeros(10)) == (0.0, 0.0)
    assert bootstrap_ci([0.25] * 7) == (0.25, 0.25)


# Multiple-comparison corrections


def test_holm_matches_the_published_worked_example():
    # Wikipedia, "Holm-Bonferroni method", example: p = 0.01, 0.04, 0.03, 0.005 at alpha 0.05.
    # Sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> running max 0.06.
    # H1 and H4 are rejected, H2 and H3 are not.
    adjusted = holm([0.01, 0.04, 0.03, 0.005])
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02])
    assert list(adjusted < 0.05) == [True, False, False, True]


def test_bonferroni_matches_the_worked_example_and_caps_at_one():
    np.testing.assert_allclose(bonferroni([0.01, 0.04, 0.03, 0.005]), [0.04, 0.16, 0.12, 0.02])
    np.testing.assert_allclose(bonferroni([0.3, 0.6]), [0.6, 1.0])


def test_holm_caps_at_one_and_keeps_ties_and_order():
    np.testing.assert_allclose(holm([0.5, 0.6]), [1.0, 1.0])
    np.testing.assert_allclose(holm([0.02, 0.02, 0.9]), [0.06, 0.06, 0.9])
    assert holm([]).size == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=12), st.sampled_from([0.01, 0.05, 0.1]))
def test_holm_rejects_exactly_what_the_step_down_procedure_rejects(pvalues, alpha):
    # Holm 1979: walk the sorted p-values, reject while p_(k) <= alpha / (m - k + 1), then stop.
    m = len(pvalues)
    rejected = set()
    for k, i in enumerate(sorted(range(m), key=lambda i: pvalues[i])):
        if pvalues[i] > alpha / (m - k):
            break
        rejected.add(i)
    adjusted = holm(pvalues)
    assert {i for i in range(m) if adjusted[i] <= alpha} == rejected
    assert np.all(np.asarray(pvalues) <= adjusted + 1e-15)
    assert np.all(adjusted <= bonferroni(pvalues) + 1e-15)
    assert np.all(adjusted <= 1.0)
    in_order = adjusted[np.argsort(pvalues, kind="stable")]
    assert np.all(np.diff(in_order) >= 0)


# compare()


def test_compare_scores_missing_queries_as_zero_and_counts_them():
    a = {"AP": {"q1": 0.5, "q2": 0.25, "q3": 1.0}}
    b = {"AP": {"q2": 0.25, "q3": 0.5, "q4": 0.75, "q5": 0.1}}
    (result,) = compare(a, b, resamples=200)
    assert result.n_queries == 5
    assert result.missing_a == 2
    assert result.missing_b == 1
    assert result.A_mean == pytest.approx((0.5 + 0.25 + 1.0) / 5)
    assert result.B_mean == pytest.approx((0.25 + 0.5 + 0.75 + 0.1) / 5)
    assert result.diff == pytest.approx(result.A_mean - result.B_mean)
    assert (result.wins, result.ties, result.losses) == (2, 1, 2)


def test_compare_counts_wins_ties_and_losses_per_query():
    a = {"nDCG@10": per_query([0.9, 0.5, 0.5, 0.2, 0.0, 1.0])}
    b = {"nDCG@10": per_query([0.1, 0.5, 0.7, 0.2, 0.3, 0.0])}
    (result,) = compare(a, b, resamples=200)
    assert (result.wins, result.ties, result.losses) == (2, 2, 2)


def test_compare_uses_the_building_blocks_on_the_paired_scores():
    rng = np.random.default_rng(21)
    a_scores = rng.random(40)
    b_scores = np.clip(a_scores - rng.normal(0.08, 0.2, 40), 0, 1)
    (result,) = compare({"AP": per_query(a_scores)}, {"AP": per_query(b_scores)})
    assert result.t_p_value == pytest.approx(scipy.stats.ttest_rel(a_scores, b_scores).pvalue)
    assert result.ci_low < result.diff < result.ci_high
    assert result.significant == (result.p_value < 0.05)


def test_compare_gives_p_one_for_identical_runs():
    run = {"AP": per_query([0.1, 0.4, 0.8]), "P@10": per_query([0.2, 0.0, 0.5])}
    for result in compare(run, run):
        assert result.p_value == 1.0
        assert result.t_p_value == 1.0
        assert result.p_corrected == 1.0
        assert (result.ci_low, result.ci_high) == (0.0, 0.0)
        assert result.diff == 0.0
        assert not result.significant and not result.significant_corrected
        assert result.ties == 3


def test_compare_follows_the_measure_order_of_a_and_skips_unshared_measures():
    a = {"P@10": {"q1": 1.0}, "AP": {"q1": 1.0}, "RR": {"q1": 1.0}}
    b = {"AP": {"q1": 0.0}, "P@10": {"q1": 0.0}, "nDCG@10": {"q1": 0.0}}
    assert [c.measure for c in compare(a, b, resamples=100)] == ["P@10", "AP"]


def test_compare_is_reproducible_with_the_same_seed_whatever_the_query_order():
    rng = np.random.default_rng(22)
    a = per_query(rng.random(300))
    b = per_query(rng.random(300))
    reversed_a = dict(reversed(list(a.items())))
    first = compare({"AP": a}, {"AP": b}, seed=3)
    assert first == compare({"AP": reversed_a}, {"AP": b}, seed=3)


def test_compare_corrects_across_its_measures():
    rng = np.random.default_rng(23)
    base = rng.random(30)
    a = {m: per_query(base + shift) for m, shift in [("AP", 0.2), ("RR", 0.05), ("P@5", 0.0)]}
    b = {m: per_query(base + rng.normal(0, 0.1, 30)) for m in a}
    raw = [c.p_value for c in compare(a, b, correction="none")]
    for method, oracle in [("holm", holm(raw)), ("bonferroni", bonferroni(raw))]:
        results = compare(a, b, correction=method)
        assert [c.p_value for c in results] == raw
        np.testing.assert_allclose([c.p_corrected for c in results], oracle)
        assert [c.significant_corrected for c in results] == list(oracle < 0.05)
    assert [c.p_corrected for c in compare(a, b, correction="none")] == raw


def test_compare_rejects_an_unknown_correction():
    with pytest.raises(ValueError, match="correction"):
        compare({"AP": {"q1": 1.0}}, {"AP": {"q1": 0.0}}, correction="fdr")


def test_a_comparison_is_frozen_and_serialises_to_plain_json():
    (result,) = compare({"AP": per_query([0.3, 0.6])}, {"AP": per_query([0.1, 0.2])},
                        resamples=100)
    assert isinstance(result, Comparison)
    with pytest.raises(AttributeError):
        result.p_value = 0.0
    data = result.as_dict()
    assert set(data) == COMPARISON_KEYS
    assert json.loads(json.dumps(data)) == data
    assert type(data["significant"]) is bool and type(data["wins"]) is int


# compare_many()


def test_compare_many_corrects_across_every_run_and_measure():
    rng = np.random.default_rng(24)
    base = rng.random(25)
    baseline = {"AP": per_query(base), "RR": per_query(base)}
    others = {
        "bm25+rerank": {"AP": per_query(base + 0.15), "RR": per_query(base + 0.02)},
        "dense": {"AP": per_query(base - 0.05), "RR": per_query(base + rng.normal(0, .1, 25))},
    }
    results = compare_many(baseline, others, correction="bonferroni")
    assert list(results) == ["bm25+rerank", "dense"]
    flat = [c for run in results.values() for c in run]
    assert [c.measure for c in flat] == ["AP", "RR", "AP", "RR"]
    np.testing.assert_allclose([c.p_corrected for c in flat],
                               np.minimum(1, 4 * np.array([c.p_value for c in flat])))
    single = compare(others["dense"], baseline, correction="none")
    assert [c.p_value for c in results["dense"]] == [c.p_value for c in single]
    assert results["bm25+rerank"][0].diff == pytest.approx(0.15)

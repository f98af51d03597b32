"""Calibration statistics against independent oracles (scikit-learn, krippendorff, scipy) and worked examples."""

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from evaluation.engine import significance
from judgments import agreement
from judgments.judges.calibration import GateThresholds, gate, leaderboard_agreement, pair_agreement

GRADES = [0, 1, 2, 3]


def panel(n=200, seed=0, judge_noise=(-1, 0, 0, 1)):
    """Two raters on every pair, a third on every fourth, and a judge: all near a latent grade."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 4, n)
    rows = []
    for item in range(n):
        for rater in ("ann", "bob", "cyd"):
            if rater == "cyd" and item % 4:
                continue
            rows.append((f"p{item}", rater, int(np.clip(truth[item] + rng.choice([-1, 0, 0, 0, 0, 1]), 0, 3))))
    human = pd.DataFrame(rows, columns=["item", "rater", "grade"])
    machine = {f"p{i}": int(np.clip(truth[i] + rng.choice(judge_noise), 0, 3)) for i in range(n)}
    return human, machine


def consensus_of(human, rule="majority"):
    frame = agreement.consensus(human, GRADES, rule)
    return dict(zip(frame["item"], frame["label"]))


def test_kappa_and_alpha_against_the_consensus_equal_sklearn_krippendorff_and_the_agreement_module():
    human, machine = panel()
    result = pair_agreement(human, machine, GRADES, scale_kind="graded", resamples=200)
    truth = consensus_of(human)
    items = sorted(truth)
    judge = [machine[i] for i in items]
    consensus = [truth[i] for i in items]

    assert result["n_items"] == 200 and result["weights"] == "quadratic" and result["alpha_level"] == "ordinal"
    assert result["kappa"]["value"] == pytest.approx(cohen_kappa_score(consensus, judge, labels=GRADES,
                                                                       weights="quadratic"), abs=1e-12)
    assert result["kappa"]["value"] == pytest.approx(agreement.cohen_kappa(judge, consensus, GRADES, "quadratic"))
    assert result["alpha"]["value"] == pytest.approx(krippendorff.alpha(
        reliability_data=np.array([judge, consensus], dtype=float), value_domain=GRADES,
        level_of_measurement="ordinal"), abs=1e-12)
    assert result["kappa"]["low"] < result["kappa"]["value"] < result["kappa"]["high"]
    assert result["alpha"]["low"] < result["alpha"]["value"] < result["alpha"]["high"]


def test_a_binary_scale_takes_unweighted_kappa_and_nominal_alpha():
    human, machine = panel()
    human["grade"] = (human["grade"] >= 2).astype(int)
    machine = {item: int(grade >= 2) for item, grade in machine.items()}
    result = pair_agreement(human, machine, [0, 1], scale_kind="binary", resamples=100)
    truth = dict(zip(*(agreement.consensus(human, [0, 1], "majority")[c] for c in ("item", "label"))))
    items = sorted(truth)

    assert result["weights"] is None and result["alpha_level"] == "nominal"
    assert result["kappa"]["value"] == pytest.approx(
        cohen_kappa_score([truth[i] for i in items], [machine[i] for i in items]), abs=1e-12)


def test_the_confusion_matrix_precision_recall_and_bias_worked_by_hand():
    human = pd.DataFrame({"item": ["a", "a", "b", "c", "d", "d"], "rater": ["r1", "r2", "r1", "r1", "r1", "r2"],
                          "grade": [1, 1, 0, 1, 0, 1]})
    # consensus by majority (ties to the lower grade): a 1, b 0, c 1, d 0; mean human grades 1, 0, 1, 0.5
    machine = {"a": 1, "b": 1, "c": 0, "d": 0, "e": 1}
    result = pair_agreement(human, machine, [0, 1], scale_kind="binary", resamples=10)

    assert result["confusion"] == [[1, 1], [1, 1]]  # rows consensus 0, 1; columns judge 0, 1
    assert result["per_grade"] == [
        {"label": 0, "human": 2, "judge": 2, "both": 1, "precision": 0.5, "recall": 0.5},
        {"label": 1, "human": 2, "judge": 2, "both": 1, "precision": 0.5, "recall": 0.5}]
    assert result["bias"] == pytest.approx(((1 - 1) + (1 - 0) + (0 - 1) + (0 - 0.5)) / 4)
    assert result["exact_agreement"] == 0.5
    assert result["n_items"] == 4  # "e" has no human grade


def test_adjudicated_labels_override_the_rule_and_could_not_judge_is_counted_apart():
    human = pd.DataFrame({"item": ["a", "a", "b"], "rater": ["r1", "r2", "r1"], "grade": [0, 1, 1]})
    result = pair_agreement(human, {"a": 1, "b": None}, [0, 1], scale_kind="binary", resamples=10,
                            adjudicated={"a": 1})
    assert result["confusion"] == [[0, 0], [0, 1]]
    assert (result["n_items"], result["n_could_not_judge"], result["n_not_judged"]) == (1, 1, 0)


def test_the_judge_is_compared_with_each_rater_beside_the_raters_with_each_other():
    human, machine = panel(seed=1)
    result = pair_agreement(human, machine, GRADES, scale_kind="graded", resamples=10)
    by_rater = {row["rater"]: row for row in result["raters"]}

    for rater in ("ann", "bob", "cyd"):
        theirs = human[human["rater"] == rater]
        expected = cohen_kappa_score(theirs["grade"], [machine[i] for i in theirs["item"]], labels=GRADES,
                                     weights="quadratic")
        assert by_rater[rater]["kappa"] == pytest.approx(expected, abs=1e-12)
        assert by_rater[rater]["n_items"] == len(theirs)
    pairs = {(p["rater_a"], p["rater_b"]): p["kappa"] for p in result["rater_pairs"]}
    assert set(pairs) == {("ann", "bob"), ("ann", "cyd"), ("bob", "cyd")}
    shared = [p["n_items"] for p in result["rater_pairs"]]
    assert result["raters_mean_kappa"] == pytest.approx(np.average(list(pairs.values()), weights=shared))
    assert result["as_good_as_a_rater"] == (result["judge_mean_kappa"] >= result["raters_mean_kappa"])
    assert {row["rater"] for row in result["against_others"]} == {"ann", "bob", "cyd", "judge"}


def test_a_noisy_judge_is_not_as_good_as_a_rater_and_a_careful_one_is():
    human, careful = panel(seed=2, judge_noise=(0,))
    _, noisy = panel(seed=2, judge_noise=(-2, -1, 1, 2))
    assert pair_agreement(human, careful, GRADES, scale_kind="graded", resamples=10)["as_good_as_a_rater"] is True
    assert pair_agreement(human, noisy, GRADES, scale_kind="graded", resamples=10)["as_good_as_a_rater"] is False


def test_the_worst_disagreements_come_first_with_every_grade():
    human = pd.DataFrame({"item": ["a", "a", "b", "c"], "rater": ["r1", "r2", "r1", "r1"], "grade": [3, 2, 0, 1]})
    result = pair_agreement(human, {"a": 0, "b": 0, "c": 2}, GRADES, scale_kind="graded", resamples=10)

    assert result["disagreements"] == [
        {"item": "a", "judge": 0, "consensus": 2, "grades": [2, 3], "difference": -2.5},
        {"item": "c", "judge": 2, "consensus": 1, "grades": [1], "difference": 1.0}]


def test_undefined_statistics_say_why_in_the_judges_terms():
    nothing = pair_agreement(pd.DataFrame({"item": [], "rater": [], "grade": []}), {}, [0, 1], scale_kind="binary")
    same = pair_agreement(pd.DataFrame({"item": ["a", "b"], "rater": ["r", "r"], "grade": [1, 1]}),
                          {"a": 1, "b": 1}, [0, 1], scale_kind="binary", resamples=10)

    assert nothing["kappa"]["value"] is None and "no pair has both" in nothing["kappa"]["reason"]
    assert same["kappa"]["reason"] == same["alpha"]["reason"] == \
        "the judge and the consensus gave every pair one and the same grade"
    assert "Cohen's kappa is undefined (no pair has both" in gate(nothing, None)["reasons"][0]


def test_bad_input_is_refused():
    human = pd.DataFrame({"item": ["a"], "rater": ["judge"], "grade": [1]})
    with pytest.raises(ValueError, match="named 'judge'"):
        pair_agreement(human, {"a": 1}, [0, 1], scale_kind="binary")
    with pytest.raises(ValueError, match="not on the scale"):
        pair_agreement(human.assign(rater="r"), {"a": 5}, [0, 1], scale_kind="binary")
    with pytest.raises(ValueError, match="binary scale has two labels"):
        pair_agreement(human.assign(rater="r"), {"a": 1}, GRADES, scale_kind="binary")


# --------------------------------------------------------------------------------------------- systems


def runs(means, queries=20, seed=0, noise=0.0):
    rng = np.random.default_rng(seed)
    return {run: {f"q{q}": float(mean + rng.normal(0, 0.05) + rng.normal(0, noise)) for q in range(queries)}
            for run, mean in means.items()}


def test_kendall_and_spearman_equal_scipys_on_the_run_means():
    human = runs({"a": 0.5, "b": 0.4, "c": 0.3, "d": 0.35, "e": 0.2})
    machine = runs({"a": 0.45, "b": 0.5, "c": 0.25, "d": 0.3, "e": 0.1}, seed=1)
    result = leaderboard_agreement(human, machine, resamples=500)
    h = [np.mean(list(human[r].values())) for r in sorted(human)]
    m = [np.mean([machine[r][q] for q in human[r]]) for r in sorted(human)]

    assert result["kendall_tau"]["value"] == pytest.approx(stats.kendalltau(h, m).statistic)
    assert result["spearman_rho"]["value"] == pytest.approx(stats.spearmanr(h, m).statistic)


def test_kendalls_tau_on_a_worked_example():
    # Human order a > b > c > d; judge order a > c > b > d: one discordant pair of six, tau = (5 - 1) / 6.
    human = {run: {"q": value} for run, value in zip("abcd", (0.9, 0.7, 0.5, 0.1))}
    machine = {run: {"q": value} for run, value in zip("abcd", (0.8, 0.4, 0.6, 0.2))}
    result = leaderboard_agreement(human, machine, resamples=100)

    assert result["kendall_tau"]["value"] == pytest.approx(4 / 6)
    assert result["spearman_rho"]["value"] == pytest.approx(1 - 6 * 2 / (4 * 15))
    assert [(r["run"], r["human_rank"], r["judge_rank"]) for r in result["runs"]] == [
        ("a", 1, 1), ("b", 2, 3), ("c", 3, 2), ("d", 4, 4)]


def test_significance_flips_are_found_with_the_engines_tests():
    # b beats a clearly with human labels; with judge labels they are level.
    human = runs({"a": 0.3, "b": 0.6, "c": 0.31}, queries=30)
    machine = {"a": human["a"], "b": {q: v - 0.3 for q, v in human["b"].items()}, "c": human["c"]}
    result = leaderboard_agreement(human, machine, resamples=2000, seed=7)
    by_pair = {(c["run_a"], c["run_b"]): c for c in result["comparisons"]}

    assert by_pair[("a", "b")]["flip"] == "lost significance"
    assert by_pair[("a", "c")]["flip"] is None
    # p-values are the engine's permutation test, Holm-corrected across the three pairs of runs
    raw = [significance.permutation_test([human[a][q] - human[b][q] for q in sorted(human[a])], resamples=2000,
                                         seed=7) for a, b in by_pair]
    assert [c["human_p"] for c in by_pair.values()] == pytest.approx(list(significance.holm(raw)))
    assert result["n_flips"] == sum(1 for c in result["comparisons"] if c["flip"])


def test_a_reversed_significant_comparison_is_a_flip():
    human = runs({"a": 0.3, "b": 0.6}, queries=30)
    machine = {"a": human["b"], "b": human["a"]}
    result = leaderboard_agreement(human, machine, resamples=2000)
    assert result["comparisons"][0]["flip"] == "reversed"
    assert result["kendall_tau"]["value"] == pytest.approx(-1.0)


def test_too_few_runs_or_mismatched_runs():
    one = leaderboard_agreement({"a": {"q": 1.0}}, {"a": {"q": 0.5}}, resamples=10)
    assert one["kendall_tau"] == {"value": None, "reason": "fewer than two runs"}
    with pytest.raises(ValueError, match="runs differ"):
        leaderboard_agreement({"a": {"q": 1.0}}, {"b": {"q": 1.0}})
    with pytest.raises(ValueError, match="no value with judge labels"):
        leaderboard_agreement({"a": {"q": 1.0, "r": 0.0}}, {"a": {"q": 1.0}})


# --------------------------------------------------------------------------------------------- gate


def test_the_gate_refuses_a_failing_judge_with_its_reasons_and_passes_a_good_one():
    human, careful = panel(seed=3, judge_noise=(0,))
    _, noisy = panel(seed=3, judge_noise=(-3, -2, 2, 3))
    same = runs({"a": 0.5, "b": 0.4, "c": 0.3})
    shuffled = runs({"a": 0.3, "b": 0.5, "c": 0.4})

    good = gate(pair_agreement(human, careful, GRADES, scale_kind="graded", resamples=10),
                leaderboard_agreement(same, same, resamples=100))
    bad = gate(pair_agreement(human, noisy, GRADES, scale_kind="graded", resamples=10),
               leaderboard_agreement(same, shuffled, resamples=100))
    no_runs = gate(pair_agreement(human, careful, GRADES, scale_kind="graded", resamples=10), None)

    assert good["passed"] is True and good["reasons"] == []
    assert bad["passed"] is False and len(bad["reasons"]) == 2
    assert "below 0.40" in bad["reasons"][0] and "Kendall's tau" in bad["reasons"][1]
    assert no_runs["passed"] is False and "at least two" in no_runs["reasons"][0]


def test_gate_thresholds_are_settable_and_checked():
    human, careful = panel(seed=3, judge_noise=(0,))
    pairs = pair_agreement(human, careful, GRADES, scale_kind="graded", resamples=10)
    same = leaderboard_agreement(runs({"a": 0.5, "b": 0.4}), runs({"a": 0.5, "b": 0.4}), resamples=10)
    assert gate(pairs, same, GateThresholds(min_kappa=0.99))["passed"] is False
    with pytest.raises(ValueError, match="min_tau"):
        GateThresholds(min_tau=2)

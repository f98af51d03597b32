"""Calibration statistics against independent oracles (scikit-learn, krippendorff, scipy) and worked examples."""

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from evaluation.engine import significance
from judgments.judges.calibration import (GateThresholds, calibration_sample, gate, gate_summary, leaderboard_agreement,
                                          pair_agreement)
from judgments.lib import agreement
from judgments.lib import verdicts

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
    empty = gate(nothing, None)
    assert empty.insufficient and empty.reasons[0] == "pairs with a human grade and a judge grade: 0 of the 100 needed"


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


def test_the_kappa_interval_is_the_percentile_of_scikit_learns_kappa_on_the_same_seeded_resamples():
    # An independent computation: the same resamples of pairs (numpy's default_rng(seed), one (resamples, n) draw
    # of pair positions in item order, as agreement.bootstrap_values draws them), each scored by scikit-learn.
    human, machine = panel(n=150, seed=5)
    result = pair_agreement(human, machine, GRADES, scale_kind="graded", resamples=400, seed=11)
    truth = consensus_of(human)
    items = sorted(truth)
    judge = np.array([machine[i] for i in items])
    consensus = np.array([truth[i] for i in items])
    draws = np.random.default_rng(11).integers(0, len(items), size=(400, len(items)))
    values = []
    for draw in draws:
        if len(set(judge[draw]) | set(consensus[draw])) > 1:
            values.append(cohen_kappa_score(consensus[draw], judge[draw], labels=GRADES, weights="quadratic"))
    low, high = np.quantile(values, [0.025, 0.975])
    assert result["kappa"]["low"] == pytest.approx(low, abs=1e-9)
    assert result["kappa"]["high"] == pytest.approx(high, abs=1e-9)
    assert result["kappa"]["low"] < result["kappa"]["value"] < result["kappa"]["high"]


def pairs_result(n, *, value=0.8, low=0.7, high=0.9, judge_grades=GRADES, human_grades=GRADES):
    """A pair_agreement result as the gate reads it: n shared pairs, kappa with its interval, per-grade counts."""
    return {"n_items": n, "kappa": {"value": value, "low": low, "high": high, "reason": None},
            "per_grade": [{"label": g, "human": 10 if g in human_grades else 0, "judge": 10 if g in judge_grades else 0}
                          for g in GRADES]}


def systems_result(runs, tau=1.0):
    return {"n_runs": runs, "kendall_tau": {"value": tau, "reason": None}}


def test_the_gate_passes_only_on_enough_pairs_and_runs_with_the_lower_end_of_kappa_over_its_threshold():
    verdict = gate(pairs_result(120), systems_result(5, tau=0.95))
    assert verdict.state == verdicts.PASS
    assert "its lower end 0.700 is at least 0.40" in verdict.reasons[0] and "over 120 pairs" in verdict.reasons[0]
    assert any("0.950, at least 0.90 over 5 runs" in reason for reason in verdict.reasons)


def test_too_few_pairs_or_runs_is_not_enough_evidence_naming_the_counts_and_the_step():
    few_pairs = gate(pairs_result(30), systems_result(5))
    assert few_pairs.state == verdicts.INSUFFICIENT and few_pairs.label == "not enough evidence"
    assert few_pairs.reasons == ("pairs with a human grade and a judge grade: 30 of the 100 needed",)
    assert few_pairs.steps[0].startswith("Run the judge in calibrate mode on 70 more pairs")

    three_runs = gate(pairs_result(300), systems_result(3))  # the demo's tau 1.000 over three runs
    assert three_runs.state == verdicts.INSUFFICIENT
    assert three_runs.reasons == ("tau over 3 runs: at least 4 needed.",)
    assert three_runs.steps[0].startswith("Evaluate another run: add 1 more run to the round's pool")

    no_runs = gate(pairs_result(300), None)
    assert no_runs.insufficient and "needs at least 4 runs" in no_runs.reasons[0]
    settable = gate(pairs_result(30), systems_result(3), GateThresholds(min_pairs=30, min_runs=3))
    assert settable.passed


def test_the_gate_reads_the_lower_end_of_kappas_interval_not_its_point_estimate():
    straddling = pairs_result(500, value=0.45, low=0.38, high=0.52)  # the point estimate clears 0.40, the interval does not
    verdict = gate(straddling, systems_result(4))
    assert verdict.failed and "its lower end 0.380 is below 0.40" in verdict.reasons[0]
    # on too few pairs the same shortfall is not proven: not enough evidence, listing it
    early = gate({**straddling, "n_items": 40}, systems_result(4))
    assert early.insufficient and any("not proven on so few pairs" in reason for reason in early.reasons)
    # a whole interval under the threshold is proven even on few pairs: a fail, with what else is missing
    hopeless = gate(pairs_result(40, value=0.1, low=0.0, high=0.2), systems_result(2))
    assert hopeless.failed and "even its upper end is below 0.40" in hopeless.reasons[0]
    assert "tau over 2 runs: at least 4 needed." in hopeless.reasons


def test_a_judge_that_never_gives_a_grade_the_raters_give_fails_it_cannot_reproduce_the_scale():
    binary_on_graded = pairs_result(675, value=0.601, low=0.556, high=0.643, judge_grades=(0, 3))  # the demo's overlap judge
    verdict = gate(binary_on_graded, systems_result(3))
    assert verdict.failed
    assert verdict.reasons[0] == ("The judge never gave grades 1, 2, which the raters' consensus gives: it cannot "
                                  "reproduce the scale.")
    assert "tau over 3 runs: at least 4 needed." in verdict.reasons
    # a grade the raters never give either is no failure
    assert gate(pairs_result(675, judge_grades=(0, 3), human_grades=(0, 3)), systems_result(4)).passed


def test_a_report_stored_before_the_gate_asked_for_evidence_is_decided_from_its_numbers():
    old = {"n_items": 675, "kappa": {"value": 0.6, "low": 0.55, "high": 0.64, "band": "moderate", "reason": None},
           "per_grade": [{"label": 0, "human": 5, "judge": 9, "both": 5, "precision": 0.5, "recall": 1.0},
                         {"label": 1, "human": 4, "judge": 0, "both": 0, "precision": None, "recall": 0.0}]}
    summary = gate_summary(old, {"n_runs": 3, "kendall_tau": {"value": 1.0, "reason": None}})
    assert summary["state"] == "fail" and summary["passed"] is False and summary["unused_grades"] == [1]
    assert (summary["kappa"], summary["kappa_low"], summary["n_pairs"], summary["n_runs"]) == (0.6, 0.55, 675, 3)
    assert summary["verdict"] == verdicts.Verdict.from_json(summary["verdict"]).to_json()
    assert gate({"kappa": {"value": None}}, None).insufficient  # older still: no counts at all


def test_real_statistics_through_the_gate_a_careful_judge_passes_and_a_noisy_one_fails():
    human, careful = panel(seed=3, judge_noise=(0,))
    _, noisy = panel(seed=3, judge_noise=(-3, -2, 2, 3))
    same = runs({"a": 0.5, "b": 0.4, "c": 0.3, "d": 0.2})
    shuffled = runs({"a": 0.3, "b": 0.5, "c": 0.4, "d": 0.2})

    good = gate(pair_agreement(human, careful, GRADES, scale_kind="graded", resamples=100),
                leaderboard_agreement(same, same, resamples=100))
    bad = gate(pair_agreement(human, noisy, GRADES, scale_kind="graded", resamples=100),
               leaderboard_agreement(same, shuffled, resamples=100))
    assert good.passed, good
    assert bad.failed and "below 0.40" in bad.reasons[0] and any("Kendall's tau" in r for r in bad.reasons)


def test_gate_thresholds_are_settable_and_checked():
    human, careful = panel(seed=3, judge_noise=(0,))
    pairs = pair_agreement(human, careful, GRADES, scale_kind="graded", resamples=10)
    same = leaderboard_agreement(runs({"a": 0.5, "b": 0.4}), runs({"a": 0.5, "b": 0.4}), resamples=10)
    assert gate(pairs, same, GateThresholds(min_kappa=0.99, min_runs=2)).failed
    with pytest.raises(ValueError, match="min_tau"):
        GateThresholds(min_tau=2)
    with pytest.raises(ValueError, match="min_runs"):
        GateThresholds(min_runs=1)
    with pytest.raises(ValueError, match="min_pairs"):
        GateThresholds(min_pairs=0)


# --------------------------------------------------------------------------------------------- sampling and spread


def test_the_calibration_sample_is_seeded_and_stratified_by_the_consensus_grade():
    truth = {f"p{i:04}": 0 if i < 500 else 1 if i < 800 else 2 if i < 990 else 3 for i in range(1000)}
    sample = calibration_sample(truth, 100, seed=4)
    counts = {g: sum(truth[item] == g for item in sample) for g in GRADES}
    assert len(sample) == len(set(sample)) == 100 and sample == sorted(sample)
    assert counts == {0: 50, 1: 30, 2: 19, 3: 1}  # 50, 30, 19 and the 1.0 a share of 10 pairs in 1,000 gives
    assert calibration_sample(truth, 100, seed=4) == sample and calibration_sample(truth, 100, seed=5) != sample
    assert {truth[i] for i in calibration_sample(truth, 4, seed=0)} == {0, 1, 2, 3}  # every grade while n allows
    assert calibration_sample({"a": 1, "b": 0}, 100) == ["a", "b"]  # fewer pairs than asked: all of them


def test_the_disagreements_are_spread_over_queries_worst_first():
    # q1's four pairs disagree by 3, q2's and q3's by less: without groups q1 fills the list.
    human = pd.DataFrame({"item": [f"{q}-{d}" for q in ("q1", "q2", "q3") for d in range(4)], "rater": "r",
                          "grade": [3] * 4 + [2] * 4 + [1] * 4})
    machine = {item: 0 for item in human["item"]}
    groups = {item: item.split("-")[0] for item in machine}
    plain = pair_agreement(human, machine, GRADES, scale_kind="graded", resamples=10, worst=4)
    spread = pair_agreement(human, machine, GRADES, scale_kind="graded", resamples=10, worst=6, groups=groups)
    assert [d["item"] for d in plain["disagreements"]] == ["q1-0", "q1-1", "q1-2", "q1-3"]
    assert [d["item"] for d in spread["disagreements"]] == ["q1-0", "q2-0", "q3-0", "q1-1", "q2-1", "q3-1"]

"""Calibration: may a judge stand in for the raters? Its grades against theirs, pair by pair and system by system.

Pair level (``pair_agreement``), over the pairs that have a human grade and a judge grade:

- the human consensus of each pair: the round's rule over its raters' grades (``agreement.consensus``), or
  the lead's adjudicated label where there is one;
- Cohen's kappa of the judge against that consensus, with the agreement report's weights (unweighted on a
  binary scale, quadratic on a graded one), and Krippendorff's alpha (nominal on binary, ordinal on graded,
  as the report's gate), each with a 95% percentile bootstrap interval over pairs. Both are
  ``judgments.lib.agreement``'s own statistics, computed on a two-"rater" table (judge, consensus);
- the confusion matrix (rows the consensus, columns the judge), per-grade precision and recall (the
  consensus as truth), and the bias: the mean of the judge's grade minus the mean human grade of the pair
  (> 0: the judge grades higher);
- the judge as one more rater: its kappa with each rater on their shared pairs, beside each pair of raters'
  kappa (``agreement.pairwise``), and each rater and the judge against the others (``rater_vs_consensus``).
  The judge is "as good as a rater" when its mean kappa with the raters (weighted by shared pairs) is at
  least the raters' mean pairwise kappa with each other;
- the pairs where the judge and the raters disagree most (largest |judge - mean human grade|).

System level (``leaderboard_agreement``): the same runs scored per query with human labels and with judge
labels (the app evaluates them with the engine on the same pairs). Kendall's tau-b and Spearman's rho between
the two lists of mean scores (scipy), and for every pair of runs the paired permutation test under each
labelling (``evaluation.engine.significance``, Holm-corrected across the pairs): a comparison "flips" when it
is significant under one labelling and not the other, or significant under both in opposite directions.

``gate`` is the judge's verdict (`judgments.lib.verdicts`): pass only on enough evidence (at least 100 shared pairs
and 4 runs by default), with the lower end of kappa's interval at least 0.40, tau at least 0.90 and every grade
the consensus gives given by the judge; fail on a proven shortfall; otherwise not enough evidence, naming what is
missing and the step that supplies it. Nothing here imports Django; every result is plain JSON values.
"""

from __future__ import annotations

import random

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations, zip_longest
from typing import Any

import numpy as np
import pandas as pd

from evaluation.engine import significance
from judgments.lib import agreement, verdicts

JUDGE = "judge"
CONSENSUS = "consensus"
DEFAULT_MIN_KAPPA = 0.40
DEFAULT_MIN_TAU = 0.90
DEFAULT_MIN_PAIRS = 100  # pairs with a human grade and a judge grade before the gate may pass
DEFAULT_MIN_RUNS = 4  # runs before Kendall's tau between two leaderboards says anything (3 runs: 4 values)


def _weights(scale_kind: str) -> str | None:
    return None if scale_kind == "binary" else "quadratic"


def _level(scale_kind: str) -> str:
    return "nominal" if scale_kind == "binary" else "ordinal"


def _check_kind(scale_kind: str, labels: Sequence[int]) -> None:
    if scale_kind not in agreement.SCALE_KINDS:
        raise ValueError(f"unknown scale kind {scale_kind!r}; use one of {agreement.SCALE_KINDS}")
    if scale_kind == "binary" and len(labels) != 2:
        raise ValueError(f"a binary scale has two labels, got {tuple(labels)}")


def _none(value: float) -> float | None:
    return None if value is None or np.isnan(value) else float(value)


def _python(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


# The agreement module speaks of raters; here the two "raters" are the judge and the consensus.
_REASONS = {agreement.NO_ITEMS: "no pair has both a human grade and a judge grade",
            agreement.ONE_LABEL_PAIRS: "the judge and the consensus gave every pair one and the same grade",
            agreement.ONE_LABEL: "the judge and the consensus gave every pair one and the same grade"}


def _with_interval(table: pd.DataFrame, statistic: agreement.Statistic, *, resamples: int, seed: int,
                   level: float) -> dict[str, Any]:
    value, reason = statistic.evaluate(table)
    reason = _REASONS.get(reason, reason)
    interval = agreement.bootstrap_ci(table, statistic, resamples=resamples, seed=seed, level=level) \
        if value is not None else None
    return {"value": value, "low": interval[0] if interval else None, "high": interval[1] if interval else None,
            "band": agreement.band(value), "reason": reason}


def pair_agreement(human: Any, machine: Mapping[Hashable, int | None], labels: Sequence[int], *, scale_kind: str,
                   rule: str = "majority", adjudicated: Mapping[Hashable, int] | None = None,
                   resamples: int = 1000, seed: int = 0, level: float = 0.95, worst: int = 20,
                   groups: Mapping[Hashable, Hashable] | None = None) -> dict[str, Any]:
    """The judge's grades against the raters' (see the module docstring).

    `human` is the raters' grades as ``agreement`` takes them (columns item, rater, grade); `machine` maps a
    pair (item) to the judge's grade, or None where it could not judge. `adjudicated` maps items to a lead's
    final label, which overrides `rule`. Keys: ``n_items`` (pairs with both), ``n_could_not_judge`` and
    ``n_not_judged`` (human-graded pairs the judge could not judge or has no verdict for), ``kappa`` and
    ``alpha`` (value, low, high, band, reason), ``weights``, ``alpha_level``, ``confusion`` (rows consensus,
    columns judge), ``labels``, ``bias``, ``exact_agreement``, ``per_grade`` (label, human, judge, both,
    precision, recall), ``raters`` (the judge against each rater: rater, n_items, kappa, agreement),
    ``rater_pairs`` (rater against rater), ``judge_mean_kappa``, ``raters_mean_kappa``, ``as_good_as_a_rater``,
    ``against_others`` (``agreement.rater_vs_consensus`` with the judge as a rater) and ``disagreements``
    (item, judge, consensus, grades, difference; worst first, at most `worst`; ``disagreements_by_query`` says
    whether they were spread over `groups`). With `groups` (item -> its
    query), the disagreements are spread over the groups: each query's worst pair, worst query first, then each
    query's second worst, and so on, so that one query's run of pairs does not fill the list.
    """
    _check_kind(scale_kind, labels)
    frame = human if isinstance(human, pd.DataFrame) else pd.DataFrame(human)
    if not {"item", "rater", "grade"} <= set(frame.columns):
        raise ValueError("the human grades need the columns item, rater and grade")
    frame = frame[["item", "rater", "grade"]]
    if (frame["rater"] == JUDGE).any():
        raise ValueError(f"a rater is named {JUDGE!r}, the name the judge takes in the tables")
    scale = sorted(int(label) for label in labels)
    truth = consensus_labels(frame, scale, rule, adjudicated)
    missing = [grade for grade in machine.values() if grade is not None and grade not in scale]
    if missing:
        raise ValueError(f"judge grade(s) {sorted(set(missing))} are not on the scale {tuple(scale)}")
    items = [item for item in truth if machine.get(item) is not None]
    n_could_not = sum(1 for item in truth if item in machine and machine[item] is None)
    judge_grades = np.array([machine[item] for item in items], dtype=np.int64)
    human_grades = np.array([truth[item] for item in items], dtype=np.int64)
    weights, alpha_level = _weights(scale_kind), _level(scale_kind)
    versus = pd.DataFrame({"item": items * 2, "rater": [JUDGE] * len(items) + [CONSENSUS] * len(items),
                           "grade": np.concatenate([judge_grades, human_grades])})
    kappa = _with_interval(versus, agreement.Statistic("mean_pairwise_kappa", tuple(scale), weights=weights),
                           resamples=resamples, seed=seed, level=level)
    alpha = _with_interval(versus, agreement.Statistic("krippendorff_alpha", tuple(scale), level=alpha_level),
                           resamples=resamples, seed=seed, level=level)
    matrix = agreement.confusion(human_grades, judge_grades, scale)
    mean_human = frame.groupby("item")["grade"].mean()
    difference = judge_grades - mean_human.reindex(items).to_numpy() if items else np.zeros(0)
    with_judge = pd.concat([frame, pd.DataFrame({"item": items, "rater": JUDGE, "grade": judge_grades})],
                           ignore_index=True)
    raters, rater_pairs = _judge_among_raters(with_judge, scale, weights)
    judge_mean = _weighted_mean([(r["kappa"], r["n_items"]) for r in raters])
    raters_mean = _weighted_mean([(p["kappa"], p["n_items"]) for p in rater_pairs])
    against = agreement.rater_vs_consensus(with_judge, scale, rule=rule, weights=weights) if items else pd.DataFrame()
    return {
        "scale_kind": scale_kind, "labels": scale, "rule": rule, "weights": weights, "alpha_level": alpha_level,
        "n_items": len(items), "n_could_not_judge": n_could_not,
        "n_not_judged": sum(1 for item in truth if item not in machine),
        "resamples": resamples, "seed": seed, "level": level,
        "kappa": kappa, "alpha": alpha,
        "confusion": matrix.tolist(),
        "bias": float(difference.mean()) if len(items) else None,
        "exact_agreement": float((judge_grades == human_grades).mean()) if len(items) else None,
        "per_grade": _per_grade(matrix, scale),
        "raters": raters, "rater_pairs": rater_pairs,
        "judge_mean_kappa": judge_mean, "raters_mean_kappa": raters_mean,
        "as_good_as_a_rater": None if judge_mean is None or raters_mean is None else judge_mean >= raters_mean,
        "against_others": [{key: _python(value) for key, value in row.items()} for row in against.to_dict("records")],
        "disagreements": _disagreements(frame, items, judge_grades, human_grades, difference, worst, groups),
        "disagreements_by_query": groups is not None,
    }


def consensus_labels(human: pd.DataFrame, labels: Sequence[int], rule: str = "majority",
                     adjudicated: Mapping[Hashable, int] | None = None) -> dict[Hashable, int]:
    """Each human-graded pair's label: `rule` over its raters' grades, or the lead's adjudication where there is one."""
    consensus = agreement.consensus(human[["item", "rater", "grade"]], sorted(labels), rule) if len(human) \
        else pd.DataFrame(columns=["item", "label"])
    truth = dict(zip(consensus["item"], consensus["label"].astype(int).tolist()))
    truth.update({item: int(label) for item, label in (adjudicated or {}).items() if item in truth})
    return truth


def _per_grade(matrix: np.ndarray, scale: list[int]) -> list[dict[str, Any]]:
    human, judge, both = matrix.sum(axis=1), matrix.sum(axis=0), np.diag(matrix)
    return [{"label": label, "human": int(human[k]), "judge": int(judge[k]), "both": int(both[k]),
             "precision": float(both[k] / judge[k]) if judge[k] else None,
             "recall": float(both[k] / human[k]) if human[k] else None}
            for k, label in enumerate(scale)]


def _judge_among_raters(with_judge: pd.DataFrame, scale: list[int], weights: str | None) -> tuple[list, list]:
    kappa = {None: "kappa", "quadratic": "kappa_quadratic"}[weights]
    raters, pairs = [], []
    for result in agreement.pairwise(with_judge, scale):
        row = {"n_items": result.n_items, "kappa": getattr(result, kappa), "agreement": result.percent_agreement}
        if JUDGE in (result.rater_a, result.rater_b):
            other = result.rater_b if result.rater_a == JUDGE else result.rater_a
            raters.append({"rater": other, **row})
        else:
            pairs.append({"rater_a": result.rater_a, "rater_b": result.rater_b, **row})
    return raters, pairs


def _weighted_mean(values: list[tuple[float | None, int]]) -> float | None:
    defined = [(value, n) for value, n in values if value is not None and n > 0]
    if not defined:
        return None
    return float(sum(value * n for value, n in defined) / sum(n for _, n in defined))


def _disagreements(frame: pd.DataFrame, items: list, judge: np.ndarray, human: np.ndarray,
                   difference: np.ndarray, worst: int, groups: Mapping[Hashable, Hashable] | None) -> list[dict[str, Any]]:
    if not items or worst <= 0:
        return []
    grades = frame.groupby("item")["grade"].apply(lambda column: sorted(int(g) for g in column))
    order = [i for i in np.lexsort((np.arange(len(items)), -np.abs(difference)))
             if not (difference[i] == 0 and judge[i] == human[i])]
    if groups is not None:
        by_group: dict[Hashable, list[int]] = {}
        for i in order:  # worst first, so the groups come in the order of their worst pair
            by_group.setdefault(groups.get(items[i]), []).append(i)
        order = [i for layer in zip_longest(*by_group.values()) for i in layer if i is not None]
    return [{"item": _python(items[i]), "judge": int(judge[i]), "consensus": int(human[i]),
             "grades": grades[items[i]], "difference": float(difference[i])} for i in order[:worst]]


def calibration_sample(truth: Mapping[Hashable, int], n: int, seed: int = 0) -> list:
    """A seeded sample of `n` of the pairs that have a human label (`truth`: pair -> consensus grade), stratified
    by that grade: each grade gets its share of `n` (largest remainders), at least one pair while `n` allows, so
    the judge is tried on every grade the raters gave. All of them when there are no more than `n`. Sorted."""
    if n <= 0:
        raise ValueError(f"the sample size must be at least 1, got {n!r}")
    strata: dict[int, list] = {}
    for item in sorted(truth, key=lambda item: (str(type(item)), item)):
        strata.setdefault(int(truth[item]), []).append(item)
    total = sum(len(members) for members in strata.values())
    if total <= n:
        return sorted(item for members in strata.values() for item in members)
    grades = sorted(strata)
    quota = {g: n * len(strata[g]) / total for g in grades}
    taken = {g: max(min(len(strata[g]), int(quota[g])), 1 if n >= len(grades) else 0) for g in grades}
    by_remainder = sorted(grades, key=lambda g: (-(quota[g] - int(quota[g])), g))
    while sum(taken.values()) < n:  # largest remainders first, round again while pairs are left
        for grade in by_remainder:
            if sum(taken.values()) < n and taken[grade] < len(strata[grade]):
                taken[grade] += 1
    while sum(taken.values()) > n:  # the floors of one pair overshot: take back where most above its share
        grade = max((g for g in grades if taken[g] > 1), key=lambda g: (taken[g] - quota[g], g))
        taken[grade] -= 1
    rng = random.Random(seed)
    return sorted(item for g in grades for item in rng.sample(strata[g], taken[g]))


# --------------------------------------------------------------------------------------------- systems

PerQuery = Mapping[str, Mapping[str, float]]


def leaderboard_agreement(human: PerQuery, machine: PerQuery, *, resamples: int = 10_000, seed: int = 42,
                          alpha: float = 0.05, correction: str = "holm") -> dict[str, Any]:
    """How far judge labels change the leaderboard of runs, for one measure.

    `human` and `machine` map run -> query -> the measure's value, computed with human labels and with judge
    labels over the same pairs; both must name the same runs. A run's score is its mean over the queries of
    its `human` values (a query missing from the judge's values counts as missing: an error). Keys: ``runs``
    (run, human, judge, human_rank, judge_rank; best first by human score), ``n_runs``, ``kendall_tau`` and
    ``spearman_rho`` (value and reason; None with fewer than two runs or constant scores), ``comparisons``
    (every pair of runs: diffs, p-values, significance under each labelling and ``flip``: None,
    "became significant", "lost significance" or "reversed") and ``n_flips``.
    """
    if set(human) != set(machine):
        raise ValueError(f"the runs differ: only with human labels {sorted(set(human) - set(machine))}, "
                         f"only with judge labels {sorted(set(machine) - set(human))}")
    for run, values in human.items():
        lacking = set(values) - set(machine[run])
        if lacking:
            raise ValueError(f"run {run!r}: {len(lacking)} queries have no value with judge labels, "
                             f"e.g. {sorted(lacking)[0]!r}")
    runs = sorted(human)
    human_means = np.array([np.mean(list(human[run].values())) if human[run] else 0.0 for run in runs])
    judge_means = np.array([np.mean([machine[run][q] for q in human[run]]) if human[run] else 0.0 for run in runs])
    from scipy import stats  # here, not at the top: scipy.stats costs every web process 50 MB it rarely needs

    correlations = {}
    for name, function in (("kendall_tau", stats.kendalltau), ("spearman_rho", stats.spearmanr)):
        if len(runs) < 2:
            correlations[name] = {"value": None, "reason": "fewer than two runs"}
        elif np.all(human_means == human_means[0]) or np.all(judge_means == judge_means[0]):
            correlations[name] = {"value": None, "reason": "every run has the same score under one labelling"}
        else:
            correlations[name] = {"value": float(function(human_means, judge_means)[0]), "reason": None}
    comparisons = _flips(runs, human, machine, resamples=resamples, seed=seed, alpha=alpha, correction=correction)
    order = np.lexsort((np.arange(len(runs)), -human_means))
    human_rank = _ranks(human_means)
    judge_rank = _ranks(judge_means)
    return {
        "n_runs": len(runs),
        "runs": [{"run": runs[i], "human": float(human_means[i]), "judge": float(judge_means[i]),
                  "human_rank": int(human_rank[i]), "judge_rank": int(judge_rank[i])} for i in order],
        **correlations,
        "alpha": alpha, "correction": correction, "resamples": resamples, "seed": seed,
        "comparisons": comparisons,
        "n_flips": sum(1 for c in comparisons if c["flip"]),
    }


def _ranks(means: np.ndarray) -> np.ndarray:
    """1 for the best; ties share the best rank among them (competition ranking)."""
    return np.array([1 + int(np.sum(means > value)) for value in means])


def _flips(runs: list[str], human: PerQuery, machine: PerQuery, **options: Any) -> list[dict[str, Any]]:
    pairs = list(combinations(runs, 2))
    results = {}
    for source, values in (("human", human), ("judge", machine)):
        tests = [significance.compare({"m": {q: values[a][q] for q in human[a]}},
                                      {"m": {q: values[b][q] for q in human[b]}},
                                      resamples=options["resamples"], seed=options["seed"], alpha=options["alpha"],
                                      correction="none")[0] for a, b in pairs]
        corrected = significance.correct([t.p_value for t in tests], options["correction"]) if tests else []
        results[source] = [(t, float(p), bool(p < options["alpha"])) for t, p in zip(tests, corrected)]
    out = []
    for (a, b), (h, hp, hs), (j, jp, js) in zip(pairs, results["human"], results["judge"]):
        if hs and js and np.sign(h.diff) != np.sign(j.diff):
            flip = "reversed"
        elif js and not hs:
            flip = "became significant"
        elif hs and not js:
            flip = "lost significance"
        else:
            flip = None
        out.append({"run_a": a, "run_b": b, "human_diff": h.diff, "human_p": hp, "human_significant": hs,
                    "judge_diff": j.diff, "judge_p": jp, "judge_significant": js, "flip": flip})
    return out


# --------------------------------------------------------------------------------------------- gate


@dataclass(frozen=True)
class GateThresholds:
    """What a judge must reach and on how much evidence: kappa's lower 95% bound against the consensus at least
    `min_kappa`, Kendall's tau between the leaderboards at least `min_tau`, over at least `min_pairs` pairs with
    both grades and `min_runs` runs."""

    min_kappa: float = DEFAULT_MIN_KAPPA
    min_tau: float = DEFAULT_MIN_TAU
    min_pairs: int = DEFAULT_MIN_PAIRS
    min_runs: int = DEFAULT_MIN_RUNS

    def __post_init__(self) -> None:
        for name in ("min_kappa", "min_tau"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1 <= value <= 1:
                raise ValueError(f"{name} must be a number from -1 to 1, got {value!r}")
        for name, lowest in (("min_pairs", 1), ("min_runs", 2)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
                raise ValueError(f"{name} must be a whole number of at least {lowest}, got {value!r}")


def unused_grades(pairs: Mapping[str, Any]) -> list[int]:
    """The grades of the consensus on the shared pairs that the judge never gave: it cannot reproduce the scale."""
    return [row["label"] for row in pairs.get("per_grade") or () if row["human"] > 0 and row["judge"] == 0]


def gate(pairs: Mapping[str, Any], systems: Mapping[str, Any] | None,
         thresholds: GateThresholds = GateThresholds()) -> verdicts.Verdict:
    """Pass, fail or not enough evidence (`judgments.lib.verdicts`), with every reason: `pairs` is ``pair_agreement``'s
    result, `systems` ``leaderboard_agreement``'s (None when no runs were evaluated). Stored reports of any age
    are read (only ``n_items``, ``kappa``, ``per_grade`` and ``n_runs``, ``kendall_tau``).

    Kappa is read at the lower end of its bootstrap interval. A shortfall is a proven failure only on enough
    evidence (the whole interval under `min_kappa`; or `min_pairs` pairs; tau and unused grades likewise on
    `min_runs` runs and `min_pairs` pairs); before that it is listed with what is missing.
    """
    failures, missing, grounds, steps = _gate_findings(pairs, systems, thresholds)
    return verdicts.decide(failures=failures, missing=missing, grounds=grounds, steps=steps)


def _gate_findings(pairs: Mapping[str, Any], systems: Mapping[str, Any] | None,
                   thresholds: GateThresholds) -> tuple[list[str], list[str], list[str], list[str]]:
    """What the data prove fails, what is missing, what a pass rests on, and the next steps."""
    t = thresholds
    failures: list[str] = []
    missing: list[str] = []
    grounds: list[str] = []
    steps: list[str] = []
    n = int(pairs.get("n_items") or 0)
    enough_pairs = n >= t.min_pairs
    kappa = pairs.get("kappa") or {}
    value, low, high = kappa.get("value"), kappa.get("low"), kappa.get("high")
    short = verdicts.at_least(n, t.min_pairs, "pairs with a human grade and a judge grade")
    if short:
        missing.append(short)
        steps.append(f"Run the judge in calibrate mode on {t.min_pairs - n:,} more pairs that the raters graded, "
                     "then compute the report again.")
    if value is None:
        if n:
            missing.append(f"Cohen's kappa is undefined ({kappa.get('reason') or 'no pairs with both grades'}).")
    else:
        bound = low if low is not None else value
        interval = f" (95% interval {low:.3f} to {high:.3f})" if low is not None and high is not None else ""
        said = f"Cohen's kappa against the raters' consensus is {value:.3f}{interval} over {n:,} pairs"
        if high is not None and high < t.min_kappa:
            failures.append(f"{said}: even its upper end is below {t.min_kappa:.2f}.")
        elif bound < t.min_kappa:
            (failures if enough_pairs else missing).append(
                f"{said}: its lower end {bound:.3f} is below {t.min_kappa:.2f}"
                + ("." if enough_pairs else " (not proven on so few pairs)."))
            if enough_pairs:
                steps.append("Change the judge's settings (prompt, model, thresholds) and calibrate again, or grade more "
                             "pairs to narrow the interval.")
        else:
            grounds.append(f"{said}: its lower end {bound:.3f} is at least {t.min_kappa:.2f}.")
    unused = unused_grades(pairs)
    if unused:
        said = (f"The judge never gave grade{'s' if len(unused) > 1 else ''} {', '.join(map(str, unused))}, which the "
                f"raters' consensus gives: it cannot reproduce the scale")
        (failures if enough_pairs else missing).append(said + ("." if enough_pairs else " (not proven on so few pairs)."))
        if enough_pairs:
            steps.append("Use a judge that grades on the whole scale (a graded prompt, graded bands), or a binary scale.")
    elif n:
        grounds.append("The judge gives every grade the raters' consensus gives.")
    if systems is None:
        missing.append(f"No runs were evaluated with both labellings: Kendall's tau needs at least {t.min_runs} runs.")
        steps.append(f"Evaluate at least {t.min_runs} runs: add runs to the round's pool, then compute the report again.")
    else:
        runs = int(systems.get("n_runs") or 0)
        tau = (systems.get("kendall_tau") or {}).get("value")
        enough_runs = runs >= t.min_runs
        short = verdicts.at_least(runs, t.min_runs, "runs for Kendall's tau")
        if short:
            missing.append(f"tau over {runs} run{'s' if runs != 1 else ''}: at least {t.min_runs} needed.")
            steps.append(f"Evaluate another run: add {t.min_runs - runs} more run{'s' if t.min_runs - runs > 1 else ''} "
                         "to the round's pool, then compute the report again.")
        if tau is None:
            missing.append(f"Kendall's tau is undefined ({(systems.get('kendall_tau') or {}).get('reason')}).")
        elif tau < t.min_tau:
            said = f"Kendall's tau between the leaderboards is {tau:.3f}, below {t.min_tau:.2f} (over {runs} runs)"
            (failures if enough_runs else missing).append(said + ("." if enough_runs else ", not proven on so few runs."))
        elif enough_runs:
            grounds.append(f"Kendall's tau between the leaderboards is {tau:.3f}, at least {t.min_tau:.2f} over {runs} runs.")
    return failures, missing, grounds, steps


def gate_line(summary: Mapping[str, Any]) -> str:
    """One line for a command's output from ``gate_summary``'s JSON (or an older stored gate, which lacks the
    interval and the counts): the verdict and the numbers it rests on."""
    def number(value: Any) -> str:
        return "undefined" if value is None else f"{value:.3f}"

    kappa = f"kappa {number(summary.get('kappa'))}"
    if summary.get("kappa_low") is not None:
        kappa += f" (95% interval from {number(summary['kappa_low'])})"
    if summary.get("n_pairs") is not None:
        kappa += f" over {summary['n_pairs']:,} pairs"
    tau = f"tau {number(summary.get('tau'))}" + (f" over {summary['n_runs']} runs" if summary.get("n_runs") is not None else "")
    state = summary.get("label") or ("pass" if summary.get("passed") else "fail")
    return f"gate {state}: {kappa}, {tau}"


def gate_summary(pairs: Mapping[str, Any], systems: Mapping[str, Any] | None,
                 thresholds: GateThresholds = GateThresholds()) -> dict[str, Any]:
    """The gate's verdict with the numbers it read and the thresholds, as JSON (stored with an evaluation that a
    judge filled, shown by the pages, printed by the commands). ``passed`` is the verdict's, for older readers;
    ``failures`` and ``missing`` split its reasons into what the data prove fails and what is not known yet."""
    verdict = gate(pairs, systems, thresholds)
    failures, missing, _grounds, _steps = _gate_findings(pairs, systems, thresholds)
    kappa = pairs.get("kappa") or {}
    return {"verdict": verdict.to_json(), "passed": verdict.passed, "state": verdict.state, "label": verdict.label,
            "reasons": list(verdict.reasons), "steps": list(verdict.steps), "failures": failures, "missing": missing,
            "kappa": kappa.get("value"), "kappa_low": kappa.get("low"), "kappa_high": kappa.get("high"),
            "n_pairs": int(pairs.get("n_items") or 0), "unused_grades": unused_grades(pairs),
            "tau": None if systems is None else (systems.get("kendall_tau") or {}).get("value"),
            "n_runs": 0 if systems is None else int(systems.get("n_runs") or 0),
            "min_kappa": thresholds.min_kappa, "min_tau": thresholds.min_tau,
            "min_pairs": thresholds.min_pairs, "min_runs": thresholds.min_runs}

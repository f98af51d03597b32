"""Which automatic answer metric agrees with the raters: rank correlations with query-bootstrap intervals.

Pure statistics (numpy and scipy, no Django); `judgments.ops.answer_metrics` gathers a round's grades and
metric values and calls `report`.

Per answer: Kendall's tau-b and Spearman's rho between a metric's values and the human grades over the
answers. System level: the answer runs ranked by their mean human grade against the ranking by a metric's
mean, over the queries every run answered, tau-b and rho again. Intervals are percentile bootstrap
intervals that resample queries (every answer of a drawn query comes along), since answers to one query
are not independent. A resample is represented by per-query counts instead of copied rows: tau-b and rho
of the copied sample come out of weighted pair counts and weighted ranks, equal to scipy's on the copied
sample (the tests check), for every resample at once.
"""

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .verdicts import at_least, decide

RESAMPLES = 1000
SEED = 0
LEVEL = 0.95
MIN_SYSTEMS = 3  # a ranking of two systems has one pair: tau is +1 or -1, no information about agreement
MIN_ANSWERS = 30  # below this many graded answers no metric is named (settings.ANSWER_METRICS_MIN_ANSWERS)


@dataclass(frozen=True)
class Correlation:
    """A correlation, its bootstrap interval (None when no resample gives a defined value), and how many
    resamples left it undefined (a constant side)."""

    value: float | None
    low: float | None
    high: float | None
    undefined_resamples: int

    def to_json(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "undefined_resamples": self.undefined_resamples}


def _number(value: float) -> float | None:
    return None if not np.isfinite(value) else float(value)


def _interval(values: np.ndarray, level: float) -> tuple[float | None, float | None]:
    finite = values[np.isfinite(values)]
    if len(finite) == 0:
        return None, None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def _correlation(point: float, resampled: np.ndarray, level: float) -> Correlation:
    low, high = _interval(resampled, level)
    return Correlation(_number(point), low, high, int(np.count_nonzero(~np.isfinite(resampled))))


# ----------------------------------------------------------------------------------- weighted statistics


def _value_weights(values: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values, and the weight of each in each sample: (resamples, distinct) sums of `w`."""
    order = np.argsort(values, kind="stable")
    unique, starts, code = np.unique(values[order], return_index=True, return_inverse=True)
    counts = np.add.reduceat(w[:, order], starts, axis=1)
    return unique, counts


def _tied_pairs(values: np.ndarray, w: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Pairs of positions tied on `values` in each copied sample: each value's count choose 2, summed."""
    _, counts = _value_weights(values, w)
    return ((counts * counts).sum(axis=1) - total) / 2


def weighted_tau_b(x: np.ndarray, y: np.ndarray, weights: np.ndarray, *, tied_y: np.ndarray | None = None) -> np.ndarray:
    """Kendall's tau-b of the sample holding item i `weights[r, i]` times, for each row r of `weights`
    (NaN where a side is constant); copies of one item are a pair tied on both sides, as in the copied
    sample. `y` has few distinct values (grades): the cost is resamples x items x distinct values of y.
    `tied_y`: `_tied_pairs(y, weights, ...)` when already known (the same grades against every metric)."""
    x, y, w = np.asarray(x, float), np.asarray(y, float), np.atleast_2d(np.asarray(weights, float))
    total = w.sum(axis=1)
    pairs = total * (total - 1) / 2
    levels = [np.flatnonzero(y == level) for level in np.unique(y)]
    # Concordant minus discordant pairs: over each pair of grade levels high > low, the weight of the low
    # level's items below each high item on x, less the weight above it.
    score = np.zeros(len(w))
    for k, low in enumerate(levels):
        order = low[np.argsort(x[low], kind="stable")]
        sorted_x = x[order]
        cumulative = np.concatenate([np.zeros((len(w), 1)), np.cumsum(w[:, order], axis=1)], axis=1)
        for high in levels[k + 1:]:
            below = cumulative[:, np.searchsorted(sorted_x, x[high], side="left")]
            above = cumulative[:, -1:] - cumulative[:, np.searchsorted(sorted_x, x[high], side="right")]
            score += (w[:, high] * (below - above)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        tied_y = _tied_pairs(y, w, total) if tied_y is None else tied_y
        return score / np.sqrt((pairs - _tied_pairs(x, w, total)) * (pairs - tied_y))


def _weighted_ranks(values: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties sharing their mean rank) of each item in each weighted sample."""
    unique, counts = _value_weights(values, w)
    below = np.cumsum(counts, axis=1) - counts
    return (below + (counts + 1) / 2)[:, np.searchsorted(unique, values)]


def weighted_spearman(x: np.ndarray, y: np.ndarray, weights: np.ndarray, *, ranks_y: np.ndarray | None = None) -> np.ndarray:
    """Spearman's rho (Pearson's r of average ranks) of the sample holding item i `weights[r, i]` times,
    for each row r (NaN where a side is constant)."""
    x, y, w = np.asarray(x, float), np.asarray(y, float), np.atleast_2d(np.asarray(weights, float))
    rx, ry = _weighted_ranks(x, w), (_weighted_ranks(y, w) if ranks_y is None else ranks_y)
    total = w.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        dx = rx - (w * rx).sum(axis=1, keepdims=True) / total
        dy = ry - (w * ry).sum(axis=1, keepdims=True) / total
        cov = (w * dx * dy).sum(axis=1)
        spread = np.sqrt((w * dx * dx).sum(axis=1) * (w * dy * dy).sum(axis=1))
        # Ranks of a constant side are all equal: zero, whatever rounding leaves.
        constant = (np.abs(dx) < 1e-9).all(axis=1) | (np.abs(dy) < 1e-9).all(axis=1)
        return np.where(constant, np.nan, np.clip(cov / spread, -1.0, 1.0))


def _tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    if len(x) < 2:
        return float("nan")
    from scipy import stats  # here, not at the top: scipy.stats costs every web process 50 MB it rarely needs

    return float(stats.kendalltau(x, y, variant="b").statistic)


def _rho(x: Sequence[float], y: Sequence[float]) -> float:
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    from scipy import stats

    return float(stats.spearmanr(x, y).statistic)


def query_draws(n_queries: int, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """How many times each query is drawn, per resample: (resamples, n_queries) counts, seeded."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, n_queries, size=(resamples, n_queries))
    flat = (drawn + n_queries * np.arange(resamples)[:, None]).ravel()
    return np.bincount(flat, minlength=resamples * n_queries).reshape(resamples, n_queries).astype(float)


# ------------------------------------------------------------------------------------------ the report


@dataclass(frozen=True)
class Answer:
    """One graded answer: its query, the system (answer run) that gave it, the human label, and the value
    of each metric."""

    query: Hashable
    system: str
    grade: float
    metrics: Mapping[str, float]


def per_answer(answers: Sequence[Answer], metrics: Sequence[str], draws: np.ndarray, queries: list, level: float = LEVEL) -> dict:
    """Tau-b and rho between each metric and the human grade over the answers, intervals over `draws`
    (per-query counts in the order of `queries`)."""
    position = {query: i for i, query in enumerate(queries)}
    grades = np.array([a.grade for a in answers], float)
    of_query = np.array([position[a.query] for a in answers], int)
    weights = draws[:, of_query]
    tied_y, ranks_y = _tied_pairs(grades, weights, weights.sum(axis=1)), _weighted_ranks(grades, weights)
    found = {}
    for metric in metrics:
        values = np.array([a.metrics[metric] for a in answers], float)
        taus = weighted_tau_b(values, grades, weights, tied_y=tied_y)
        found[metric] = {
            "undefined_because": _undefined_because(values, grades),
            "tau": _correlation(_tau_b(values, grades), taus, level),
            "rho": _correlation(_rho(values, grades), weighted_spearman(values, grades, weights, ranks_y=ranks_y), level),
            "taus": taus,
        }
    return found


def _undefined_because(values: np.ndarray, grades: np.ndarray) -> str:
    """Why a correlation over all the answers is undefined, or "" when it is defined."""
    if len(values) < 2:
        return "fewer than 2 answers"
    if np.ptp(grades) == 0:
        return "every answer has the same human label"
    if np.ptp(values) == 0:
        return "the metric gives every answer the same value"
    return ""


def _row_tau_b(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Tau-b between the columns of each row of a and b (systems are columns), NaN where a row is constant."""
    i, j = np.triu_indices(a.shape[1], k=1)
    sa, sb = np.sign(a[:, i] - a[:, j]), np.sign(b[:, i] - b[:, j])
    with np.errstate(invalid="ignore", divide="ignore"):
        return (sa * sb).sum(axis=1) / np.sqrt(np.count_nonzero(sa, axis=1) * np.count_nonzero(sb, axis=1))


def _row_rho(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    from scipy import stats

    ra, rb = stats.rankdata(a, axis=1), stats.rankdata(b, axis=1)
    da, db = ra - ra.mean(axis=1, keepdims=True), rb - rb.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = (da * db).sum(axis=1) / np.sqrt((da * da).sum(axis=1) * (db * db).sum(axis=1))
    constant = (np.ptp(a, axis=1) == 0) | (np.ptp(b, axis=1) == 0)
    return np.where(constant, np.nan, value)


def system_level(answers: Sequence[Answer], metrics: Sequence[str], *, resamples: int, seed: int, level: float = LEVEL) -> dict:
    """Each system's mean human grade and mean metric values over the queries every system answered, and
    (with at least MIN_SYSTEMS systems) tau-b and rho between the human ranking and each metric's, with
    intervals resampling those queries."""
    systems = sorted({a.system for a in answers})
    by_system: dict[str, dict] = {s: {} for s in systems}
    for a in answers:
        by_system[a.system][a.query] = a
    common = sorted(set.intersection(*(set(q) for q in by_system.values())), key=str) if systems else []
    result = {"systems": [], "n_queries": len(common), "n_systems": len(systems), "correlations": {},
              "enough_systems": len(systems) >= MIN_SYSTEMS and len(common) > 0}
    if not common:
        result["systems"] = [{"system": s, "human": None, "metrics": {m: None for m in metrics}} for s in systems]
        return result
    human = np.array([[by_system[s][q].grade for q in common] for s in systems])  # systems x queries
    values = {m: np.array([[by_system[s][q].metrics[m] for q in common] for s in systems]) for m in metrics}
    result["systems"] = [{"system": s, "human": float(human[k].mean()), "metrics": {m: float(values[m][k].mean()) for m in metrics}}
                         for k, s in enumerate(systems)]
    if not result["enough_systems"]:
        return result
    draws = query_draws(len(common), resamples, seed)
    total = draws.sum(axis=1, keepdims=True)
    human_means = draws @ human.T / total  # resamples x systems
    human_point = human.mean(axis=1)[None, :]
    for m in metrics:
        means = draws @ values[m].T / total
        point = values[m].mean(axis=1)[None, :]
        result["correlations"][m] = {
            "tau": _correlation(_row_tau_b(point, human_point)[0], _row_tau_b(means, human_means), level),
            "rho": _correlation(_row_rho(point, human_point)[0], _row_rho(means, human_means), level),
        }
    return result


def verdict(per_answer_results: Mapping[str, dict], *, n_answers: int = 0, n_queries: int = 0,
            min_answers: int = MIN_ANSWERS, level: float = LEVEL) -> dict:
    """The metric with the highest per-answer tau-b (the first in the metrics' order on a tie; `tied` names
    the others), how far it leads each other metric, and `decision`: whether the report may name it (a
    `verdicts.Verdict` as JSON).

    "Is the best better than X" is a paired question: both taus come from the same resampled answers, so
    the answer is the interval of the difference tau_best - tau_X over the resamples (`leads`: its
    percentile interval, and `wins`, the share of resamples in which the best is strictly higher), not
    whether the two separate intervals overlap (they can overlap while the best is higher in every
    resample). The lead is proven when that interval lies above 0.

    Pass: at least `min_answers` graded answers, the best's tau-b proven above 0 (its interval's low end),
    and its lead over every other defined metric proven (`unproven` lists the others; tied metrics give
    the same ordering, so no lead over them is asked for). Fail: its tau-b interval lies at or below 0 (no
    metric agrees with the raters). Anything else: not enough evidence, with what is missing.
    """
    defined = [(m, r) for m, r in per_answer_results.items() if r["tau"].value is not None]
    step = "grade (or adjudicate) more answers of the round, then open this report again"
    enough = at_least(n_answers, min_answers, "graded answers with reference answers")
    if not defined:
        missing = [m for m in (enough, "no metric's tau-b is defined (too few answers, or every answer has the same "
                                       "human grade)") if m]
        return {"best": None, "tied": [], "unproven": [], "wins": {}, "leads": {}, "min_answers": min_answers,
                "decision": decide(missing=missing, steps=[step]).to_json()}
    order = sorted(defined, key=lambda item: -item[1]["tau"].value)
    best, best_result = order[0]
    tied = [m for m, r in order[1:] if abs(r["tau"].value - best_result["tau"].value) < 1e-12]
    tail = (1 - level) / 2 * 100
    wins, leads, unproven = {}, {}, []
    for m, r in order[1:]:
        both = np.isfinite(best_result["taus"]) & np.isfinite(r["taus"])
        if not both.any():
            wins[m], leads[m] = None, {"low": None, "high": None}
        else:
            difference = best_result["taus"][both] - r["taus"][both]
            low, high = np.percentile(difference, [tail, 100 - tail])
            wins[m], leads[m] = float(np.mean(difference > 0)), {"low": float(low), "high": float(high)}
        if m not in tied and not (leads[m]["low"] is not None and leads[m]["low"] > 0):
            unproven.append(m)
    tau = best_result["tau"]
    failures, missing = [], [m for m in (enough,) if m]
    interval = f"{tau.low:.3f} to {tau.high:.3f}" if tau.low is not None else "no interval"
    if tau.high is not None and tau.high <= 0:
        failures.append(f"no metric agrees with the raters: even {best}'s tau-b interval ({interval}) is not above 0")
    elif tau.low is None or tau.low <= 0:
        missing.append(f"{best}'s tau-b is not proven above 0 ({round(level * 100)}% interval {interval})")
    alike: dict[tuple, list[str]] = {}  # metrics that order the answers alike have the same figures: one line
    for m in unproven:
        alike.setdefault((wins[m], leads[m]["low"], leads[m]["high"]), []).append(m)
    for (share, low, high), names in alike.items():
        share = "no resample defines both" if share is None else f"higher in {share:.0%} of the resamples"
        around = f", its lead {low:+.3f} to {high:+.3f} includes 0" if low is not None else ""
        missing.append(f"{best}'s lead over {', '.join(names)} is not proven: {share}{around}")
    others = len(order) - 1 - len(tied)
    grounds = [f"{best} has per-answer tau-b {tau.value:.3f} ({interval}) over {n_answers:,} answers to {n_queries:,} queries"
               + (f", and leads each of the {others} other metrics: the {round(level * 100)}% interval of each paired "
                  "difference lies above 0" if others else "")]
    decision = decide(failures=failures, missing=missing, grounds=grounds, steps=[step] if missing else [])
    return {"best": best, "tied": tied, "unproven": unproven, "wins": wins, "leads": leads, "min_answers": min_answers,
            "decision": decision.to_json()}


def report(answers: Sequence[Answer], metrics: Sequence[str], *, resamples: int = RESAMPLES, seed: int = SEED,
           level: float = LEVEL, min_answers: int = MIN_ANSWERS) -> dict:
    """The whole report as plain JSON values: per-answer and system-level correlations with intervals, the
    per-system means, the verdict, and what the figures cover."""
    queries = sorted({a.query for a in answers}, key=str)
    draws = query_draws(max(1, len(queries)), resamples, seed)
    found = per_answer(answers, metrics, draws, queries, level) if answers else {}
    decided = verdict(found, n_answers=len(answers), n_queries=len(queries), min_answers=min_answers, level=level)
    return {
        "metrics": list(metrics),
        "resamples": resamples, "seed": seed, "level": level,
        "n_answers": len(answers), "n_queries": len(queries), "n_systems": len({a.system for a in answers}),
        "per_answer": {m: {"tau": r["tau"].to_json(), "rho": r["rho"].to_json(), "undefined_because": r["undefined_because"]}
                       for m, r in found.items()},
        "system_level": _system_json(system_level(answers, metrics, resamples=resamples, seed=seed, level=level)),
        "verdict": decided,
    }


def _system_json(result: dict) -> dict:
    return {**result, "correlations": {m: {k: c.to_json() for k, c in r.items()} for m, r in result["correlations"].items()}}

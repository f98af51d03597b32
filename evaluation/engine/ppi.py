"""Prediction-powered inference (PPI++) for a run's mean score: raters label a random sample of queries, an
automatic judge labels them all, and the estimate is the judge's mean corrected by the human-minus-judge
difference on the sample. Its interval is valid whatever the judge's errors are; the better the judge, the
narrower it is. Pure numpy + scipy, no Django.

Words: "labelled" queries are the random sample raters labelled; "unlabelled" ones are the set's other
queries, which only the judge labelled. For human labels Y and judge labels Yhat on the n labelled queries,
judge labels Yhat_u on the N unlabelled ones, normalised weights w (mean 1 within each part) and a factor lam,

    theta = mean(w_u * lam * Yhat_u) + mean(w * (Y - lam * Yhat))
    se^2  = std(w_u * lam * Yhat_u)^2 / N + std(w * (Y - lam * Yhat))^2 / n

lam = 1 is plain PPI, lam = 0 the human-only estimate; by default lam is tuned (PPI++) to the
variance-minimising value clipped to [0, 1]:

    lam = cov(g, g_hat) / ((1 + n/N) * var([g_hat, g_hat_u])),  g = w (Y - theta_1), g_hat = w (Yhat - theta_1)

with theta_1 the lam = 1 estimate, cov over the labelled queries (ddof 0) and var over all (ddof 1). The point
estimate and lam are ``ppi_py.ppi_mean_pointestimate`` of ppi-python 0.2.3 (``lhat=None``), which the tests
match to 1e-12.

Two intervals (``interval=``). ``"normal"`` is ppi-python's ``ppi_mean_ci`` (to 1e-12): std with ddof 0 and
theta -/+ z_(1 - alpha/2) * se. ``"t"``, the default, is the same estimate with the unbiased spreads (ddof 1)
and Student's t quantile with n - 1 degrees of freedom, n the labelled queries (for a stratified estimate,
Welch-Satterthwaite's degrees of freedom over the tiers). Why: the normal interval is a large-sample one, and
raters label few queries. On `benchmarks/fewer_judgments.py` (400 DBpedia-Entity queries, a judge at kappa
0.2-0.8) ppi-python's normal interval covers 93.1-93.4% instead of 95% for nDCG@10 and AP at 25 labelled
queries, as the normal human-only interval does; the t interval covers at least 94.7%. Comparisons test with
the same distribution, and ``plan_sample_size`` and ``queries_needed`` use its quantile at each n. Where ppi-python has no answer this module says what it does instead: a judge without spread
(var = 0, so lam = 0/0) gets lam = 0, the human-only estimate; with one labelled query the residual's spread
cannot be estimated, so the standard error and interval are NaN (shown as "none", and no verdict rests on
fewer than MIN_LABELLED queries); with no unlabelled query the estimate is the human-only one (lam = 0).

Paired comparisons of two runs apply the same estimator to per-query differences a - b, with a two-sided
test of the estimate (t or normal, as the interval) and Holm's correction over the comparisons of one measure
(``significance.holm``). No verdict rests on fewer than MIN_LABELLED labelled queries.

References
----------
- A. N. Angelopoulos, S. Bates, C. Fannjiang, M. I. Jordan, T. Zrnic. "Prediction-powered inference".
  Science 382(6671), 2023.
- A. N. Angelopoulos, J. C. Duchi, T. Zrnic. "PPI++: Efficient Prediction-Powered Inference". arXiv
  2311.01453, 2023. (Power tuning: the factor lam.)
- H. Oosterhuis, R. Jagerman, Z. Qin, X. Wang, M. Bendersky. "Reliable Confidence Intervals for Information
  Retrieval Evaluation Using Generative A.I.". KDD 2024. (PPI for IR metrics per query.)
- B. L. Welch. "The generalization of 'Student's' problem when several different population variances are
  involved". Biometrika 34(1/2), 1947. (Degrees of freedom of a stratified estimate.)
- S. Holm. "A Simple Sequentially Rejective Multiple Test Procedure". Scand. J. Statistics 6(2), 1979.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from scipy.special import ndtr, ndtri, stdtr, stdtrit

from .errors import EngineInputError, show
from .significance import Evidence, holm

__all__ = [
    "INTERVALS",
    "MIN_LABELLED",
    "Estimate",
    "MeasureEstimate",
    "PPIResult",
    "PairComparison",
    "calibration_variances",
    "classical_mean",
    "effective_labelled",
    "estimate",
    "plan_sample_size",
    "ppi_mean",
    "stratified",
]

# Fewer labelled queries than this: the numbers are shown, but no verdict ("not enough evidence"). 25 is the
# smallest sample at which benchmarks/fewer_judgments.py shows the t intervals holding their level (at least
# 94% for a nominal 95%); at 10 they cover 91-93%, the normal ones 86-87%.
MIN_LABELLED = 25
INTERVALS = ("t", "normal")

PerRun = Mapping[str, Mapping[str, Mapping[str, float]]]  # run -> measure -> query id -> value


def _finite_or_none(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _z(alpha: float) -> float:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1, not {alpha!r}")
    return float(ndtri(1.0 - alpha / 2.0))  # scipy.stats.norm.ppf without its 50 us of argument checks


def _quantile(alpha: float, df: float | np.ndarray | None) -> float | np.ndarray:
    """The two-sided 1 - alpha quantile: Student's t with ``df`` degrees of freedom, the normal one for None."""
    if df is None:
        return _z(alpha)
    _z(alpha)  # checks alpha
    return stdtrit(df, 1.0 - alpha / 2.0)  # scipy.stats.t.ppf without its argument checks


def _two_sided_p(statistic: float | np.ndarray, df: float | np.ndarray | None) -> float | np.ndarray:
    if df is None:
        return 2.0 * ndtr(-np.abs(statistic))  # norm.sf(x) is ndtr(-x)
    return 2.0 * stdtr(df, -np.abs(statistic))


def _check_interval(interval: str) -> None:
    if interval not in INTERVALS:
        raise ValueError(f"unknown interval {interval!r}; choose one of {', '.join(INTERVALS)}")


def _ddof(interval: str) -> int:
    return 1 if interval == "t" else 0


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A mean with its interval [low, high] at level 1 - alpha and standard error.

    ``lam`` is the PPI++ factor the estimate used (0: the judge was given no weight; 1: plain PPI), None for
    a human-only (classical) estimate. ``df`` is the t interval's degrees of freedom, None for the normal
    interval. NaN fields (no spread could be estimated) are None in ``as_dict``."""

    mean: float
    low: float
    high: float
    se: float
    n_labelled: int
    n_unlabelled: int
    lam: float | None
    df: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {"mean": _finite_or_none(self.mean), "low": _finite_or_none(self.low),
                "high": _finite_or_none(self.high), "se": _finite_or_none(self.se),
                "n_labelled": self.n_labelled, "n_unlabelled": self.n_unlabelled,
                "lam": _finite_or_none(self.lam), "df": _finite_or_none(self.df)}


def _interval(mean: float, se: float, alpha: float, n_labelled: int, n_unlabelled: int,
              lam: float | None, df: float | None) -> Estimate:
    q = float(_quantile(alpha, df)) if df is None or df > 0 else math.nan
    return Estimate(mean=float(mean), low=float(mean - q * se), high=float(mean + q * se), se=float(se),
                    n_labelled=n_labelled, n_unlabelled=n_unlabelled, lam=lam, df=df)


def _labelled_df(n: int, interval: str) -> float | None:
    return float(n - 1) if interval == "t" else None


def _values(values: Sequence[float] | np.ndarray, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64).ravel()
    if not np.isfinite(array).all():
        raise ValueError(f"{what} must be finite numbers")
    return array


def _weights(weights: Sequence[float] | np.ndarray | None, size: int, what: str) -> np.ndarray:
    """Weights scaled to mean 1 within their part, as ppi-python's construct_weight_vector."""
    if weights is None:
        return np.ones(size)
    w = _values(weights, what)
    if w.size != size:
        raise ValueError(f"{what} has {w.size} values for {size} queries")
    if (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"{what} must be non-negative with a positive sum")
    return w / w.sum() * size


def _std(values: np.ndarray, ddof: int = 0) -> float:
    """The spread (ddof 0 as ppi-python's, or 1), NaN for a single value: one query says nothing of it."""
    return float(values.std(ddof=ddof)) if values.size > 1 else math.nan


def _tuned_lam(y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray, w: np.ndarray, w_u: np.ndarray) -> float:
    n, big_n = y.size, yhat_u.size
    theta_1 = (w_u * yhat_u).mean() + (w * (y - yhat)).mean()
    grads = w * (y - theta_1)
    grads_hat = w * (yhat - theta_1)
    covariance = 2.0 / n * float((grads - grads.mean()) @ (grads_hat - grads_hat.mean()))
    spread = float(np.var(np.concatenate([grads_hat, w_u * (yhat_u - theta_1)]), ddof=1))
    if not spread > 0.0:
        return 0.0  # a judge without spread carries no information (ppi-python: 0/0)
    return float(np.clip(covariance / (2.0 * (1.0 + n / big_n) * spread), 0.0, 1.0))


def ppi_mean(human: Sequence[float] | np.ndarray, judge_labelled: Sequence[float] | np.ndarray,
             judge_unlabelled: Sequence[float] | np.ndarray, *, weights: Sequence[float] | None = None,
             weights_unlabelled: Sequence[float] | None = None, alpha: float = 0.05,
             lam: float | None = None, interval: str = "t") -> Estimate:
    """The PPI++ estimate of the mean over labelled and unlabelled queries (module docstring): ``human`` and
    ``judge_labelled`` are the raters' and the judge's values on the labelled queries, in the same order;
    ``lam=None`` tunes the factor as ppi-python does, a number fixes it. ``interval="normal"`` gives
    ppi-python's interval, ``"t"`` (the default) the small-sample one."""
    _check_interval(interval)
    y = _values(human, "human values")
    yhat = _values(judge_labelled, "judge values on the labelled queries")
    yhat_u = _values(judge_unlabelled, "judge values on the unlabelled queries")
    n, big_n = y.size, yhat_u.size
    if yhat.size != n:
        raise ValueError(f"{n} human values but {yhat.size} judge values on the labelled queries")
    if n == 0:
        raise ValueError("no labelled query: a prediction-powered estimate needs human labels")
    w = _weights(weights, n, "weights")
    w_u = _weights(weights_unlabelled, big_n, "weights_unlabelled")
    if big_n == 0:
        lam = 0.0  # every query is labelled: the judge has nothing to add
    elif lam is None:
        lam = _tuned_lam(y, yhat, yhat_u, w, w_u)
    lam = float(lam)
    imputed = w_u * (lam * yhat_u)
    rectifier = w * (y - lam * yhat)
    mean = (imputed.mean() if big_n else 0.0) + rectifier.mean()
    ddof = _ddof(interval)
    imputed_var = (_std(imputed, ddof) if big_n > 1 else 0.0) ** 2 / big_n if big_n else 0.0
    se = math.sqrt(imputed_var + _std(rectifier, ddof) ** 2 / n)
    return _interval(mean, se, alpha, n, big_n, lam, _labelled_df(n, interval))


def classical_mean(human: Sequence[float] | np.ndarray, *, weights: Sequence[float] | None = None,
                   alpha: float = 0.05, interval: str = "t") -> Estimate:
    """The raters' labels alone: mean(w * Y) with se = std(w * Y) / sqrt(n) (normalised weights; ddof and
    quantile as ``interval``), which is what ``ppi_mean`` gives with lam = 0, so the two are compared on the
    same footing."""
    _check_interval(interval)
    y = _values(human, "human values")
    if y.size == 0:
        raise ValueError("no labelled query: a human-only estimate needs human labels")
    weighted = _weights(weights, y.size, "weights") * y
    return _interval(weighted.mean(), _std(weighted, _ddof(interval)) / math.sqrt(y.size), alpha, y.size, 0, None,
                     _labelled_df(y.size, interval))


def stratified(parts: Mapping[str, Estimate], shares: Mapping[str, float], *, alpha: float = 0.05) -> Estimate:
    """Per-tier estimates combined with the tiers' shares of the set (summing to 1), for a sample drawn
    within tiers: mean = sum_t s_t m_t, se^2 = sum_t s_t^2 se_t^2. ``lam`` is the share-weighted mean of the
    tiers' factors (None when the parts are human-only); each tier's own stays in its part. With t parts the
    degrees of freedom are Welch-Satterthwaite's: (sum_t v_t)^2 / sum_t v_t^2 / df_t, v_t = s_t^2 se_t^2."""
    if set(parts) != set(shares):
        raise ValueError(f"tiers with estimates {sorted(parts)} differ from tiers with shares {sorted(shares)}")
    if not parts:
        raise ValueError("no tier to combine")
    total = math.fsum(shares.values())
    if any(s < 0 for s in shares.values()) or abs(total - 1.0) > 1e-9:
        raise ValueError(f"tier shares must be non-negative and sum to 1, not {total!r}")
    tiers = sorted(parts)
    mean = math.fsum(shares[t] * parts[t].mean for t in tiers)
    se = math.sqrt(math.fsum((shares[t] * parts[t].se) ** 2 for t in tiers))
    lams = [parts[t].lam for t in tiers]
    lam = None if any(v is None for v in lams) else math.fsum(shares[t] * parts[t].lam for t in tiers)
    return _interval(mean, se, alpha, sum(parts[t].n_labelled for t in tiers),
                     sum(parts[t].n_unlabelled for t in tiers), lam, _welch_df(parts, shares))


def _welch_df(parts: Mapping[str, Estimate], shares: Mapping[str, float]) -> float | None:
    if any(part.df is None for part in parts.values()):
        return None
    variances = {t: (shares[t] * parts[t].se) ** 2 for t in parts}
    terms = [variances[t] ** 2 / parts[t].df for t in parts if variances[t] > 0]
    if any(not math.isfinite(v) for v in variances.values()) or any(parts[t].df <= 0 for t in parts if variances[t] > 0):
        return math.nan
    if not terms:
        return float(min(part.df for part in parts.values()))
    return math.fsum(variances.values()) ** 2 / math.fsum(terms)


def effective_labelled(ppi: Estimate, human: Estimate) -> float:
    """How many human-labelled queries the PPI estimate is worth: the n a human-only estimate would need for
    the PPI standard error, n * (human.se / ppi.se)^2. NaN when either spread is unknown or both are 0."""
    if not (math.isfinite(ppi.se) and math.isfinite(human.se)):
        return math.nan
    if ppi.se == 0.0:
        return math.nan if human.se == 0.0 else math.inf
    return ppi.n_labelled * (human.se / ppi.se) ** 2


def _labelled_counts(n_queries: int) -> np.ndarray:
    return np.arange(MIN_LABELLED, n_queries + 1, dtype=np.float64)


def _ses(n: np.ndarray, n_queries: int, var_labelled: float, var_unlabelled: float) -> np.ndarray:
    """sqrt(var_labelled / n + var_unlabelled / (n_queries - n)) for each candidate n; labelling every
    query leaves the judge's term infinite unless its variance is 0."""
    rest = n_queries - n
    with np.errstate(divide="ignore", invalid="ignore"):
        judge_term = np.where(rest > 0, var_unlabelled / rest, 0.0 if var_unlabelled == 0 else math.inf)
    return np.sqrt(var_labelled / n + judge_term)


def plan_sample_size(*, n_queries: int, half_width: float, var_residual: float, var_judge: float,
                     alpha: float = 0.05, interval: str = "t") -> int | None:
    """The fewest labelled queries n in [MIN_LABELLED, n_queries] whose PPI interval half-width
    q_n * sqrt(var_residual / n + var_judge / (n_queries - n)) is at most ``half_width``, with lam = 1 (the
    conservative choice: tuning can only narrow it) and q_n the quantile of ``interval`` at n (t: n - 1
    degrees of freedom). None when no such n exists."""
    _check_interval(interval)
    if half_width <= 0:
        raise ValueError(f"half_width must be positive, not {half_width!r}")
    if var_residual < 0 or var_judge < 0:
        raise ValueError("variances must be non-negative")
    n = _labelled_counts(n_queries)
    quantile = _quantile(alpha, n - 1 if interval == "t" else None)
    reached = np.flatnonzero(quantile * _ses(n, n_queries, var_residual, var_judge) <= half_width)
    return int(n[reached[0]]) if reached.size else None


def calibration_variances(human: Mapping[str, float], judge: Mapping[str, float]) -> dict[str, float | int]:
    """The judge's calibration for ``plan_sample_size``, from per-query values of one run and measure on the
    queries both labelled: var(human - judge) and var(judge) (ddof 1; NaN below two queries)."""
    queries = sorted(set(human) & set(judge))
    h = np.array([human[q] for q in queries], dtype=np.float64)
    j = np.array([judge[q] for q in queries], dtype=np.float64)
    if len(queries) < 2:
        return {"var_residual": math.nan, "var_judge": math.nan, "queries": len(queries)}
    return {"var_residual": float(np.var(h - j, ddof=1)), "var_judge": float(np.var(j, ddof=1)),
            "queries": len(queries)}


# ------------------------------------------------------------------------------- runs, measures, pairs


@dataclasses.dataclass(frozen=True)
class MeasureEstimate:
    """One run and measure: the PPI estimate beside the human-only one over the same labelled queries, the
    judge's plain mean over every query (a judge's number: mark it so wherever shown), and what the judge
    was worth in labelled queries. ``weighted`` is None when no traffic weights apply (``weighted_reason``
    says why); ``by_tier`` maps each tier to its own {"ppi", "human"}."""

    ppi: Estimate
    human: Estimate
    judge_mean: float
    effective_labelled: float
    weighted: Mapping[str, Estimate] | None
    weighted_reason: str
    by_tier: Mapping[str, Mapping[str, Estimate]]

    def to_json(self) -> dict[str, object]:
        def pair(estimates: Mapping[str, Estimate]) -> dict[str, object]:
            return {"ppi": estimates["ppi"].as_dict(), "human": estimates["human"].as_dict()}

        return {"ppi": self.ppi.as_dict(), "human": self.human.as_dict(),
                "judge_mean": _finite_or_none(self.judge_mean),
                "effective_labelled": _finite_or_none(self.effective_labelled),
                "weighted": pair(self.weighted) if self.weighted is not None else None,
                "weighted_reason": self.weighted_reason,
                "by_tier": {tier: pair(both) for tier, both in self.by_tier.items()}}


@dataclasses.dataclass(frozen=True)
class PairComparison:
    """Run a against run b on one measure, on per-query differences a - b. ``state`` is "significant",
    "not significant" or "insufficient" (fewer than MIN_LABELLED labelled queries); ``queries_needed`` is
    the number of labelled queries in all that would bring ``p_adjusted`` below alpha, or None
    (``queries_needed_reason`` says why)."""

    measure: str
    a: str
    b: str
    ppi: Estimate
    human: Estimate
    p: float
    p_adjusted: float
    state: str
    reason: str
    queries_needed: int | None
    queries_needed_reason: str

    def evidence(self) -> Evidence:
        """The verdict's fields for ``judgments.lib.verdicts.decide``: significant is a pass, not significant a
        fail, too few labelled queries not enough evidence."""
        if self.state == "significant":
            return Evidence(grounds=(self.reason,))
        if self.state == "not significant":
            return Evidence(failures=(self.reason,))
        step = (f"Label about {self.queries_needed:,} queries in all, drawn at random"
                if self.queries_needed is not None else "Label more queries, drawn at random")
        return Evidence(missing=(self.reason,), steps=(step,))

    def to_json(self) -> dict[str, object]:
        return {"a": self.a, "b": self.b, "ppi": self.ppi.as_dict(), "human": self.human.as_dict(),
                "p": _finite_or_none(self.p), "p_adjusted": _finite_or_none(self.p_adjusted),
                "state": self.state, "reason": self.reason, "queries_needed": self.queries_needed,
                "queries_needed_reason": self.queries_needed_reason}


@dataclasses.dataclass(frozen=True)
class PPIResult:
    """What ``estimate`` found: ``runs`` maps run -> measure -> MeasureEstimate (runs in the order given),
    ``comparisons`` maps measure -> its PairComparisons (every pair, a before b in the run order)."""

    alpha: float
    labelled: list[str]
    unlabelled: list[str]
    runs: Mapping[str, Mapping[str, MeasureEstimate]]
    comparisons: Mapping[str, list[PairComparison]]
    interval: str = "t"

    def to_json(self) -> dict[str, object]:
        return {"alpha": self.alpha, "interval": self.interval, "labelled": len(self.labelled),
                "unlabelled": len(self.unlabelled), "min_labelled": MIN_LABELLED,
                "runs": [{"run": run, "measures": {m: e.to_json() for m, e in measures.items()}}
                         for run, measures in self.runs.items()],
                "comparisons": {m: [c.to_json() for c in found] for m, found in self.comparisons.items()}}


@dataclasses.dataclass(frozen=True)
class _Design:
    """Which queries are labelled, and how they split into tiers; every array below is in this order."""

    labelled: list[str]
    unlabelled: list[str]
    tier_of_labelled: np.ndarray | None
    tier_of_unlabelled: np.ndarray | None
    tier_shares: Mapping[str, float] | None
    alpha: float
    interval: str = "t"

    def tiers(self) -> list[str]:
        if self.tier_of_labelled is None:
            return []
        return sorted(set(self.tier_of_labelled.tolist()) | set(self.tier_of_unlabelled.tolist()))


def _queries_of(judge: PerRun) -> list[str]:
    return sorted({q for measures in judge.values() for values in measures.values() for q in values})


def _check_shapes(human: PerRun, judge: PerRun) -> list[str]:
    """The measures, after checking both sides hold the same runs and measures."""
    if not judge:
        raise EngineInputError("no run to estimate: the judge's values name no run")
    if set(human) != set(judge):
        raise EngineInputError(f"the human values' runs {show(sorted(human))} differ from the judge's "
                               f"{show(sorted(judge))}")
    measures = list(next(iter(judge.values())))
    for run in judge:
        for side, values in (("judge", judge[run]), ("human", human[run])):
            if set(values) != set(measures):
                raise EngineInputError(f"run {show(run)} has {side} values for measures {show(sorted(values))}, "
                                       f"not {show(sorted(measures))}")
    return measures


def _check_labelled(labelled: Iterable[str], queries: list[str]) -> list[str]:
    chosen = list(labelled)
    known = set(queries)
    seen: set[str] = set()
    for query in chosen:
        if query in seen:
            raise EngineInputError(f"labelled query {show(query)} is listed twice")
        if query not in known:
            raise EngineInputError(f"labelled query {show(query)} has no judge value: the labelled queries must be "
                                   "part of the set the judge labelled")
        seen.add(query)
    if not chosen:
        raise EngineInputError("no labelled query: raters must label a random sample of the queries")
    return sorted(chosen)


def _array(values: Mapping[str, float], queries: list[str], run: str, measure: str, side: str) -> np.ndarray:
    try:
        array = np.array([values[q] for q in queries], dtype=np.float64)
    except KeyError as missing:
        what = "labelled query" if side == "human" else "query"
        raise EngineInputError(f"run {show(run)}, {measure}: no {side} value for {what} {show(missing.args[0])}") \
            from None
    if not np.isfinite(array).all():
        raise EngineInputError(f"run {show(run)}, {measure}: {side} values must be finite numbers")
    return array


def _design(labelled: list[str], queries: list[str], tiers: Mapping[str, str] | None,
            tier_shares: Mapping[str, float] | None, alpha: float, interval: str) -> _Design:
    chosen = set(labelled)
    unlabelled = [q for q in queries if q not in chosen]
    if tiers is None:
        if tier_shares is not None:
            raise EngineInputError("tier shares were given without the queries' tiers")
        return _Design(labelled, unlabelled, None, None, None, alpha, interval)
    untiered = [q for q in queries if q not in tiers]
    if untiered:
        raise EngineInputError(f"no tier for {len(untiered)} of the set's queries, e.g. {show(untiered[:3])}")
    design = _Design(labelled, unlabelled, np.array([str(tiers[q]) for q in labelled], dtype=object),
                     np.array([str(tiers[q]) for q in unlabelled], dtype=object), tier_shares, alpha, interval)
    present = design.tiers()
    empty = [t for t in present if t not in set(design.tier_of_labelled.tolist())]
    if tier_shares is not None:
        if set(tier_shares) != set(present):
            raise EngineInputError(f"tier shares name tiers {show(sorted(tier_shares))}, the queries' tiers are "
                                   f"{show(present)}")
        if empty:
            raise EngineInputError(f"tier {show(empty[0])} has no labelled query: a sample drawn within tiers "
                                   "labels some in each")
    return design


def _estimates(y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray, design: _Design) -> dict[str, Estimate]:
    """{"ppi", "human"} for one run and measure (or one difference): stratified when the sample was drawn
    within tiers."""
    if design.tier_shares is None:
        return {"ppi": ppi_mean(y, yhat, yhat_u, alpha=design.alpha, interval=design.interval),
                "human": classical_mean(y, alpha=design.alpha, interval=design.interval)}
    parts = _by_tier(y, yhat, yhat_u, design)
    return {kind: stratified({t: both[kind] for t, both in parts.items()}, design.tier_shares, alpha=design.alpha)
            for kind in ("ppi", "human")}


def _by_tier(y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray, design: _Design) -> dict[str, dict[str, Estimate]]:
    found = {}
    for tier in design.tiers():
        inside, inside_u = design.tier_of_labelled == tier, design.tier_of_unlabelled == tier
        if not inside.any():
            continue  # no labelled query in this tier (only possible without tier shares): nothing to estimate
        found[tier] = {"ppi": ppi_mean(y[inside], yhat[inside], yhat_u[inside_u], alpha=design.alpha,
                                       interval=design.interval),
                       "human": classical_mean(y[inside], alpha=design.alpha, interval=design.interval)}
    return found


def _traffic(weights: Mapping[str, float] | None, design: _Design) -> tuple[np.ndarray | None, np.ndarray | None, str]:
    if weights is None:
        return None, None, "no traffic weights were given"
    queries = design.labelled + design.unlabelled
    lacking = [q for q in queries if q not in weights]
    if lacking:
        return None, None, (f"no traffic weight for {len(lacking)} of the set's {len(queries)} queries, "
                            f"e.g. {show(lacking[:3])}")
    w = np.array([weights[q] for q in queries], dtype=np.float64)
    if not np.isfinite(w).all() or (w < 0).any():
        raise EngineInputError("traffic weights must be non-negative finite numbers")
    n = len(design.labelled)
    if w[:n].sum() <= 0 or (len(w) > n and w[n:].sum() <= 0):
        return None, None, "the traffic weights of the labelled (or of the unlabelled) queries are all 0"
    return w[:n], w[n:], ""


def _measure_estimate(y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray, design: _Design,
                      traffic: tuple[np.ndarray | None, np.ndarray | None, str]) -> MeasureEstimate:
    both = _estimates(y, yhat, yhat_u, design)
    w, w_u, reason = traffic
    weighted = None
    if w is not None:
        weighted = {"ppi": ppi_mean(y, yhat, yhat_u, weights=w, weights_unlabelled=w_u if yhat_u.size else None,
                                    alpha=design.alpha, interval=design.interval),
                    "human": classical_mean(y, weights=w, alpha=design.alpha, interval=design.interval)}
    judge_all = np.concatenate([yhat, yhat_u])
    return MeasureEstimate(ppi=both["ppi"], human=both["human"], judge_mean=float(judge_all.mean()),
                           effective_labelled=effective_labelled(both["ppi"], both["human"]), weighted=weighted,
                           weighted_reason=reason,
                           by_tier=_by_tier(y, yhat, yhat_u, design) if design.tier_of_labelled is not None else {})


def _p_value(found: Estimate) -> float:
    """Two-sided test of mean = 0 (se floored at 1e-16): normal, as ppi-python's rectified_p_value, or t with
    the estimate's degrees of freedom."""
    if not math.isfinite(found.se) or (found.df is not None and not found.df > 0):
        return math.nan
    return float(_two_sided_p(found.mean / max(found.se, 1e-16), found.df))


def _spreads(y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray, lam: float, ddof: int,
             inside: np.ndarray | None = None, inside_u: np.ndarray | None = None) -> tuple[float, float]:
    """The per-query variances behind the PPI standard error at a given lam: labelled, unlabelled."""
    if inside is not None:
        y, yhat, yhat_u = y[inside], yhat[inside], yhat_u[inside_u]
    return _std(y - lam * yhat, ddof) ** 2, _std(lam * yhat_u, ddof) ** 2 if yhat_u.size > 1 else 0.0


def _se_curve(y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray, found: Estimate, design: _Design,
              n: np.ndarray) -> np.ndarray:
    """The PPI standard error with n labelled queries in all, drawn at random (within tiers, in proportion to
    their shares, when the sample was), holding lam and the per-query variances at their estimates."""
    n_queries = y.size + yhat_u.size
    ddof = _ddof(design.interval)
    if design.tier_shares is None:
        return _ses(n, n_queries, *_spreads(y, yhat, yhat_u, found.lam, ddof))
    variance = np.zeros_like(n)
    for tier, share in design.tier_shares.items():
        inside, inside_u = design.tier_of_labelled == tier, design.tier_of_unlabelled == tier
        size = int(inside.sum() + inside_u.sum())
        lam = ppi_mean(y[inside], yhat[inside], yhat_u[inside_u], alpha=design.alpha, interval=design.interval).lam
        var_l, var_u = _spreads(y, yhat, yhat_u, lam, ddof, inside, inside_u)
        tier_n = np.maximum(n * size / n_queries, 1.0)
        variance += share ** 2 * _ses(tier_n, size, var_l, var_u) ** 2
    return np.sqrt(variance)


def _queries_needed(y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray, found: Estimate, design: _Design,
                    multiplier: int) -> tuple[int | None, str]:
    n_queries = y.size + yhat_u.size
    if y.size < 2:
        return None, "one labelled query says nothing of the spread of the differences"
    if found.mean == 0.0:
        return None, "the estimated difference is 0: no number of labelled queries would make it significant"
    n = _labelled_counts(n_queries)
    se = _se_curve(y, yhat, yhat_u, found, design, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = _two_sided_p(found.mean / np.maximum(se, 1e-16), n - 1 if design.interval == "t" else None)
    reached = np.flatnonzero(np.minimum(1.0, multiplier * p) < design.alpha)
    step = f"the p-value times {multiplier} (its Holm step)" if multiplier > 1 else "the p-value"
    if not reached.size:
        return None, (f"even {n_queries:,} labelled queries (the whole set) would not bring {step} below alpha "
                      f"{design.alpha} if the difference and spreads stay as estimated")
    needed = int(n[reached[0]])
    return needed, (f"about {needed:,} labelled queries in all, drawn at random, would bring {step} below alpha "
                    f"{design.alpha} if the difference and spreads stay as estimated ({y.size:,} labelled now)")


def _compare_measure(measure: str, runs: list[str], arrays: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
                     design: _Design) -> list[PairComparison]:
    pairs = [(a, b) for i, a in enumerate(runs) for b in runs[i + 1:]]
    diffs = {pair: tuple(arrays[pair[0]][k] - arrays[pair[1]][k] for k in range(3)) for pair in pairs}
    found = {pair: _estimates(*diffs[pair], design) for pair in pairs}
    p = np.array([_p_value(found[pair]["ppi"]) for pair in pairs])
    adjusted = holm(np.where(np.isnan(p), 1.0, p))
    adjusted[np.isnan(p)] = np.nan
    order = np.argsort(np.where(np.isnan(p), 1.0, p), kind="stable")
    multiplier = np.empty(len(pairs), dtype=int)
    multiplier[order] = len(pairs) - np.arange(len(pairs))
    n, big_n = len(design.labelled), len(design.unlabelled)
    family = f" after Holm's correction across {len(pairs)} comparisons" if len(pairs) > 1 else ""
    where = f"PPI over {n:,} labelled and {big_n:,} judge-only queries"
    comparisons = []
    for index, pair in enumerate(pairs):
        ppi = found[pair]["ppi"]
        if n < MIN_LABELLED or not math.isfinite(adjusted[index]):
            state, reason = "insufficient", (f"only {n:,} labelled queries: at least {MIN_LABELLED} are needed "
                                             "for a verdict")
        elif adjusted[index] < design.alpha:
            state, reason = "significant", (f"p {_p_text(adjusted[index])}{family} is below alpha {design.alpha} "
                                            f"({where})")
        else:
            state, reason = "not significant", (f"p {_p_text(adjusted[index])}{family} is not below alpha "
                                                f"{design.alpha} ({where})")
        needed, needed_reason = _queries_needed(*diffs[pair], ppi, design, int(multiplier[index]))
        comparisons.append(PairComparison(measure=measure, a=pair[0], b=pair[1], ppi=ppi, human=found[pair]["human"],
                                          p=float(p[index]), p_adjusted=float(adjusted[index]), state=state,
                                          reason=reason, queries_needed=needed, queries_needed_reason=needed_reason))
    return comparisons


def _p_text(p: float) -> str:
    return "< 0.0001" if p < 0.0001 else f"{p:.4f}"


def estimate(human: PerRun, judge: PerRun, *, labelled: Iterable[str], weights: Mapping[str, float] | None = None,
             tiers: Mapping[str, str] | None = None, tier_shares: Mapping[str, float] | None = None,
             alpha: float = 0.05, correction: str = "holm", interval: str = "t") -> PPIResult:
    """Prediction-powered estimates of every run and measure, and paired comparisons of every two runs.

    ``human`` maps run -> measure -> query id -> value over the labelled queries (raters' labels);
    ``judge`` the same over every query of the set (the judge's labels). ``labelled`` are the queries raters
    labelled: a random sample of the set, which the caller vouches for. ``weights`` are traffic weights per
    query (a weighted estimate beside the headline one, over all queries, not stratified); ``tiers`` a tier per
    query (estimates per tier); ``tier_shares`` each tier's share of the set, when the sample was drawn within
    tiers: the headline estimates are then ``stratified``. Comparisons of a measure are corrected together
    (Holm). ``interval`` is "t" (small-sample, the default) or "normal" (ppi-python's); see the module docstring."""
    _check_interval(interval)
    if correction != "holm":
        raise ValueError(f"unknown correction {correction!r}; prediction-powered comparisons use holm")
    _z(alpha)
    measures = _check_shapes(human, judge)
    queries = _queries_of(judge)
    design = _design(_check_labelled(labelled, queries), queries, tiers, tier_shares, alpha, interval)
    traffic = _traffic(weights, design)
    runs = list(judge)
    arrays = {run: {m: (_array(human[run][m], design.labelled, run, m, "human"),
                        _array(judge[run][m], design.labelled, run, m, "judge"),
                        _array(judge[run][m], design.unlabelled, run, m, "judge"))
                    for m in measures} for run in runs}
    estimates = {run: {m: _measure_estimate(*arrays[run][m], design, traffic) for m in measures} for run in runs}
    comparisons = {m: _compare_measure(m, runs, {run: arrays[run][m] for run in runs}, design) for m in measures}
    return PPIResult(alpha=alpha, labelled=design.labelled, unlabelled=design.unlabelled, runs=estimates,
                     comparisons=comparisons, interval=interval)

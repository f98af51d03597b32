"""Paired significance tests for comparing two runs query by query.

Everything here works on per-query scores and imports nothing from Django. ``compare`` is what the
engine's ``compare`` command and the web app call; the building blocks (``permutation_test``,
``paired_t_test``, ``bootstrap_ci``, ``holm``, ``bonferroni``) are plain functions on numpy arrays.

References
----------
- M. D. Smucker, J. Allan, B. Carterette. "A Comparison of Statistical Significance Tests for
  Information Retrieval Evaluation". CIKM 2007. (Randomization/permutation test as the default
  test for IR; the paired t-test agrees with it closely; bootstrap close too.)
- S. Holm. "A Simple Sequentially Rejective Multiple Test Procedure". Scandinavian Journal of
  Statistics 6(2), 1979.
- B. Phipson, G. K. Smyth. "Permutation P-values Should Never Be Zero". Statistical Applications
  in Genetics and Molecular Biology 9(1), 2010. (Why p = (c + 1) / (R + 1).)
- B. Efron, R. Tibshirani. "An Introduction to the Bootstrap". Chapman & Hall, 1993, ch. 13
  (percentile interval).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = [
    "Comparison",
    "Evidence",
    "bonferroni",
    "bootstrap_ci",
    "compare",
    "compare_many",
    "correct",
    "evidence",
    "holm",
    "paired_t_test",
    "permutation_test",
    "smallest_p",
]

PerQuery = Mapping[str, Mapping[str, float]]

# A resample counts as "at least as extreme" when |S| >= |observed| - TIE_TOLERANCE * sum(|d|).
# Sums of the same numbers taken in another order differ by up to about (n/8) ulps of sum(|d|),
# so exact ties (symmetric or repeated differences) would otherwise be lost at random. 1e-10
# covers that bound up to millions of queries and is far below the spread of the null
# distribution (its standard deviation is at least sum(|d|) / sqrt(n)).
TIE_TOLERANCE = 1e-10

# Resamples are drawn in chunks, each from its own child of SeedSequence(seed), so the result
# depends only on the seed, the resample count and the number of queries, never on the number of
# threads. Chunks are sized to keep their working arrays in the CPU cache (a few MB): at 6,980
# queries that is 2-3 times faster than chunks of 1,000 resamples.
_PERMUTATION_CELLS = 1 << 17
_BOOTSTRAP_CELLS = 1 << 18


def _chunk_rows(width: int, cells: int, most: int) -> int:
    return max(8, min(most, cells // max(width, 1)))


# 256 x 8 matrix: row b holds the bits of byte b, least significant first.
_BYTE_BITS = np.unpackbits(
    np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little"
).astype(np.float64)


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One measure, run A against run B, over the union of their queries.

    ``diff`` is ``A_mean - B_mean``. A query present in one run only scores 0 in the other, and
    ``missing_a`` / ``missing_b`` count such queries (missing from A / missing from B).
    ``significant`` compares the uncorrected permutation ``p_value`` with alpha (the UltraRAG
    convention); ``significant_corrected`` uses ``p_corrected``.
    """

    measure: str
    A_mean: float
    B_mean: float
    diff: float
    p_value: float
    t_p_value: float
    ci_low: float
    ci_high: float
    p_corrected: float
    significant: bool
    significant_corrected: bool
    wins: int
    ties: int
    losses: int
    n_queries: int
    missing_a: int
    missing_b: int

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def _as_diffs(diffs: Sequence[float] | np.ndarray) -> np.ndarray:
    d = np.ascontiguousarray(diffs, dtype=np.float64).ravel()
    if not np.isfinite(d).all():
        raise ValueError("per-query differences must be finite")
    return d


def _workers() -> int:
    return max(1, min(os.cpu_count() or 1, 4))


Chunk = Callable[[np.random.SeedSequence, int], np.ndarray]


def _run_chunks(make_worker: Callable[[int], Chunk], seed: int, resamples: int,
                rows: int) -> np.ndarray:
    """Concatenate worker(seed_i, size_i) over the chunks of `resamples`, in chunk order.

    Each thread gets its own worker from make_worker(rows), which allocates its buffers once:
    allocating fresh multi-MB arrays per chunk costs more in page faults than the arithmetic.
    """
    sizes = [min(rows, resamples - start) for start in range(0, resamples, rows)]
    jobs = list(zip(np.random.SeedSequence(seed).spawn(len(sizes)), sizes))
    threads = min(_workers(), len(jobs))

    def run(part: list[tuple[np.random.SeedSequence, int]]) -> list[np.ndarray]:
        work = make_worker(rows)
        return [work(seq, size) for seq, size in part]

    if threads == 1:
        return np.concatenate(run(jobs))
    bounds = np.linspace(0, len(jobs), threads + 1).astype(int)
    # numpy releases the GIL in the random draws, take() and the reductions the workers use.
    with ThreadPoolExecutor(threads) as pool:
        parts = pool.map(run, [jobs[lo:hi] for lo, hi in zip(bounds, bounds[1:])])
        return np.concatenate([chunk for part in parts for chunk in part])


def permutation_test(diffs: Sequence[float] | np.ndarray, *, resamples: int = 10_000,
                     seed: int = 42) -> float:
    """Two-sided paired randomization (sign-flip) test of mean(d) = 0.

    Under the null hypothesis the labels A and B are exchangeable within each query, so every
    per-query difference d_i keeps or flips its sign with probability 1/2. With R random sign
    vectors s (drawn from ``seed``), the Monte Carlo p-value is

        p = (c + 1) / (R + 1),   c = #{ r : |sum_i s_ri d_i| >= |sum_i d_i| - tol },

    where tol = 1e-10 * sum_i |d_i| absorbs floating-point rounding so that exact ties count
    (``TIE_TOLERANCE``). The +1 counts the observed labelling itself, so p is never 0 (Phipson &
    Smyth 2010). All-zero differences, including an empty input, give p = 1. This is the test
    recommended for IR by Smucker, Allan & Carterette (CIKM 2007).

    Speed: sum_i s_i d_i = sum(d) - 2 * sum_{i flipped} d_i. The flips are random bytes; for
    each block of 8 queries a 256-entry table holds the sum of the flipped d_i for every byte
    value, so one resample costs n/8 table look-ups instead of n multiplications.
    """
    d = _as_diffs(diffs)
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    scale = float(np.abs(d).sum())
    if scale == 0.0:
        return 1.0
    blocks = -(-d.size // 8)
    padded = np.zeros(blocks * 8)
    padded[: d.size] = d
    table = (padded.reshape(blocks, 8) @ _BYTE_BITS.T).ravel()  # table[j*256 + b]
    offsets = (np.arange(blocks, dtype=np.int32) * 256)[:, None]
    total = float(d.sum())
    threshold = abs(total) - TIE_TOLERANCE * scale

    def make_worker(rows: int) -> Chunk:
        picks = np.empty((blocks, rows), dtype=np.int32)
        flipped = np.empty((blocks, rows))

        def count(seq: np.random.SeedSequence, size: int) -> np.ndarray:
            words = -(-size // 8)
            raw = np.random.PCG64(seq).random_raw(blocks * words)
            flips = raw.view(np.uint8).reshape(blocks, words * 8)[:, :size]
            np.add(flips, offsets, out=picks[:, :size])
            table.take(picks[:, :size], out=flipped[:, :size], mode="clip")
            sums = total - 2.0 * flipped[:, :size].sum(axis=0)
            return np.array([np.count_nonzero(np.abs(sums) >= threshold)])

        return count

    rows = _chunk_rows(blocks, _PERMUTATION_CELLS, 512)
    c = int(_run_chunks(make_worker, seed, resamples, rows).sum())
    return (c + 1) / (resamples + 1)


def paired_t_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided paired t-test p-value, as ``scipy.stats.ttest_rel(a, b).pvalue``.

    With d = a - b, t = mean(d) / (sd(d) / sqrt(n)), sd with n - 1 degrees of freedom, and
    p = 2 * F_{n-1}(-|t|) (Student's t CDF). Where scipy would return nan (identical inputs, or
    fewer than two queries) this returns 1.0: no evidence of a difference. Constant non-zero
    differences give p = 0.0, as in scipy.
    """
    from scipy.special import stdtr

    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError("a and b must have the same length")
    d = _as_diffs(a - b)
    n = d.size
    if n < 2:
        return 1.0
    mean = d.mean()
    sd = d.std(ddof=1)
    if sd == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    t = mean / (sd / math.sqrt(n))
    p = float(2.0 * stdtr(n - 1, -abs(t)))
    return 1.0 if math.isnan(p) else min(p, 1.0)


def bootstrap_ci(diffs: Sequence[float] | np.ndarray, *, resamples: int = 10_000, seed: int = 42,
                 confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean per-query difference.

    Each of R resamples draws n queries with replacement (from ``seed``) and takes the mean of
    their differences; the interval runs from the (1 - confidence)/2 to the (1 + confidence)/2
    quantile of those R means (linear interpolation, numpy's default). Efron & Tibshirani 1993,
    ch. 13. An empty input gives (0.0, 0.0).

    Speed: when the differences take few distinct values (P@k, recall with one relevant
    document) a resample is one multinomial draw of how often each value is picked. Otherwise
    the picked query is floor(u * n) for a uniform double u, which has 53 random bits: each
    query's probability is 1/n within a relative n / 2^53, far below any Monte Carlo error.
    """
    d = _as_diffs(diffs)
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be between 0 and 1")
    n = d.size
    if n == 0:
        return (0.0, 0.0)
    if np.all(d == d[0]):
        return (float(d[0]), float(d[0]))
    values, counts = np.unique(d, return_counts=True)

    def by_value(rows: int) -> Chunk:
        def means(seq: np.random.SeedSequence, size: int) -> np.ndarray:
            picked = np.random.default_rng(seq).multinomial(n, counts / n, size=size)
            return picked @ values / n

        return means

    def by_index(rows: int) -> Chunk:
        uniform = np.empty((rows, n))
        picks = np.empty((rows, n), dtype=np.intp)
        picked = np.empty((rows, n))

        def means(seq: np.random.SeedSequence, size: int) -> np.ndarray:
            u, i, x = uniform[:size], picks[:size], picked[:size]
            np.random.default_rng(seq).random(out=u)
            u *= n
            np.copyto(i, u, casting="unsafe")  # truncation = floor for u >= 0
            d.take(i, out=x, mode="clip")  # clip: u * n may round up to n
            return x.sum(axis=1) / n

        return means

    # Measured: a multinomial draw over K values costs about as much as 16 K index draws.
    if values.size * 16 <= n:
        sample = _run_chunks(by_value, seed, resamples, 250)
    else:
        sample = _run_chunks(by_index, seed, resamples, _chunk_rows(n, _BOOTSTRAP_CELLS, 250))
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(sample, [tail, 100.0 - tail])
    return (float(low), float(high))


def holm(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (Holm 1979), in the input order.

    With p_(1) <= ... <= p_(m) sorted, the adjusted value of the i-th smallest is
    max_{j <= i} min(1, (m - j + 1) * p_(j)): rejecting where it is below alpha is Holm's
    step-down procedure, and the adjusted values never decrease along the sorted order.
    """
    p = np.asarray(pvalues, dtype=np.float64).ravel()
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


def bonferroni(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Bonferroni adjusted p-values: min(1, m * p_i) for m tests."""
    p = np.asarray(pvalues, dtype=np.float64).ravel()
    return np.minimum(1.0, p * p.size)


_CORRECTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "holm": holm,
    "bonferroni": bonferroni,
    "none": lambda p: np.asarray(p, dtype=np.float64).ravel().copy(),
}


def correct(pvalues: Sequence[float] | np.ndarray, method: str = "holm") -> np.ndarray:
    """Adjust p-values for multiple comparisons: "holm", "bonferroni" or "none"."""
    try:
        return _CORRECTIONS[method](pvalues)
    except KeyError:
        raise ValueError(
            f"unknown correction {method!r}; choose one of {', '.join(_CORRECTIONS)}"
        ) from None


def _compare_one(measure: str, scores_a: Mapping[str, float], scores_b: Mapping[str, float], *,
                 resamples: int, seed: int, alpha: float) -> Comparison:
    # Sorted ids make the sign flips (and so the p-value) independent of dict order.
    queries = sorted(set(scores_a) | set(scores_b))
    a = np.array([scores_a.get(q, 0.0) for q in queries], dtype=np.float64)
    b = np.array([scores_b.get(q, 0.0) for q in queries], dtype=np.float64)
    d = _as_diffs(a - b)
    n = len(queries)
    a_mean = float(a.mean()) if n else 0.0
    b_mean = float(b.mean()) if n else 0.0
    p = permutation_test(d, resamples=resamples, seed=seed)
    low, high = bootstrap_ci(d, resamples=resamples, seed=seed)
    return Comparison(
        measure=measure,
        A_mean=a_mean,
        B_mean=b_mean,
        diff=a_mean - b_mean,
        p_value=p,
        t_p_value=paired_t_test(a, b),
        ci_low=low,
        ci_high=high,
        p_corrected=p,
        significant=p < alpha,
        significant_corrected=p < alpha,
        wins=int(np.count_nonzero(a > b)),
        ties=int(np.count_nonzero(a == b)),
        losses=int(np.count_nonzero(a < b)),
        n_queries=n,
        missing_a=sum(1 for q in scores_b if q not in scores_a),
        missing_b=sum(1 for q in scores_a if q not in scores_b),
    )


def _with_correction(comparisons: list[Comparison], correction: str,
                     alpha: float) -> list[Comparison]:
    adjusted = correct([c.p_value for c in comparisons], correction)
    return [
        dataclasses.replace(c, p_corrected=float(p), significant_corrected=bool(p < alpha))
        for c, p in zip(comparisons, adjusted)
    ]


def compare(per_query_a: PerQuery, per_query_b: PerQuery, *, resamples: int = 10_000,
            seed: int = 42, alpha: float = 0.05, correction: str = "holm") -> list[Comparison]:
    """Compare run A with run B on every measure present in both, in the order of A.

    Each mapping goes measure -> query id -> score. For each measure: means, the paired
    permutation test (``permutation_test``), the paired t-test (``paired_t_test``), the bootstrap
    95% CI of the mean difference (``bootstrap_ci``), per-query wins/ties/losses (exact equality
    is a tie), and the p-value corrected across the measures of this call (``correct``).
    """
    correct([], correction)  # fail fast on an unknown method
    comparisons = [
        _compare_one(measure, scores, per_query_b[measure], resamples=resamples, seed=seed,
                     alpha=alpha)
        for measure, scores in per_query_a.items()
        if measure in per_query_b
    ]
    return _with_correction(comparisons, correction, alpha)


def compare_many(baseline: PerQuery, others: Mapping[str, PerQuery], *, resamples: int = 10_000,
                 seed: int = 42, alpha: float = 0.05,
                 correction: str = "holm") -> dict[str, list[Comparison]]:
    """Compare several runs with one baseline, correcting across all measures x runs.

    Returns run name -> comparisons, in the order of ``others``. In each comparison A is the
    run and B the baseline, so a positive ``diff`` means the run beats the baseline.
    ``p_corrected`` adjusts for every (run, measure) test of the call together.
    """
    correct([], correction)
    results = {
        name: compare(run, baseline, resamples=resamples, seed=seed, alpha=alpha,
                      correction="none")
        for name, run in others.items()
    }
    flat = [c for comparisons in results.values() for c in comparisons]
    corrected = iter(_with_correction(flat, correction, alpha))
    return {name: [next(corrected) for _ in comparisons] for name, comparisons in results.items()}


# ------------------------------------------------------------------------------- enough evidence?


def smallest_p(differing: int, resamples: int) -> float:
    """The smallest p-value ``permutation_test`` can give over ``differing`` queries whose difference is not 0.

    A query whose difference is 0 changes nothing when its sign flips, so only the k differing queries count.
    The exact two-sided sign-flip p is the share of the 2^k sign vectors at least as extreme as the observed
    one; that one and its mirror image always are, so p >= 2 / 2^k (4 queries: 0.125; 0.0625 needs 5). The
    Monte Carlo estimate (c + 1) / (R + 1) of ``permutation_test`` cannot go below 1 / (R + 1) either. With
    no differing query p is 1.

    The other two statistics have no such floor, which is why a verdict never rests on them: the paired
    t-test gives p = 0 for two queries with equal non-zero differences, and the bootstrap interval leaves 0
    out whenever every difference has the same sign (two queries are enough). They are shown beside the
    permutation test, which decides.
    """
    if differing <= 0:
        return 1.0
    return max(1.0 / (resamples + 1), 2.0 ** (1 - differing))


def _queries_needed(tests: int, alpha: float) -> int:
    """The fewest differing queries with m * 2 / 2^k < alpha: the permutation floor, times the most a
    correction across m tests multiplies by, below alpha."""
    k = 1
    while tests * 2.0 ** (1 - k) >= alpha:
        k += 1
    return k


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What "significant" rests on for one comparison, in the fields of the app's three-state verdict
    (``judgments.lib.verdicts.decide(failures=, missing=, grounds=, steps=)`` takes them as they are): a proven
    difference is a pass, a test that could have reached alpha and did not is a fail, and a test that could
    not have (too few differing queries, or resamples, for the correction) is not enough evidence."""

    failures: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    grounds: tuple[str, ...] = ()
    steps: tuple[str, ...] = ()

    @property
    def state(self) -> str:
        """"pass", "fail" or "insufficient", by decide's rule (the engine imports nothing from the app)."""
        return "fail" if self.failures else "insufficient" if self.missing else "pass"

    def as_dict(self) -> dict[str, object]:
        return {"failures": list(self.failures), "missing": list(self.missing), "grounds": list(self.grounds),
                "steps": list(self.steps)}


def _p_text(p: float) -> str:
    return "< 0.0001" if p < 0.0001 else f"{p:.4f}"


def evidence(comparisons: Sequence[Comparison | Mapping[str, object]], *, resamples: int, alpha: float = 0.05,
             correction: str = "holm") -> list[Evidence]:
    """The evidence of each comparison of one family, the tests ``correct`` adjusted together (one
    ``compare`` or ``compare_many`` call), in their order.

    The verdict reads the corrected permutation p (``p_corrected``). Its floor for a test over k differing
    queries is ``smallest_p(k, R)`` = f; a correction across m tests can only raise it: to at least m * f
    (Bonferroni), at least max(f, m * f_min) under Holm (the smallest p of the family is multiplied by m, and
    no adjusted p is below that one), f without correction. When that floor is not below alpha the test
    could not have found a difference whatever the runs did: not enough evidence, naming the differing
    queries (or resamples) needed.
    """
    rows = [c.as_dict() if isinstance(c, Comparison) else dict(c) for c in comparisons]
    m = len(rows) if correction != "none" else 1
    floors = [smallest_p(int(r["wins"]) + int(r["losses"]), resamples) for r in rows]
    least = min(floors, default=1.0)
    family = f" after {correction.capitalize()}'s correction across {m} tests" if m > 1 else ""
    found = []
    for r, floor in zip(rows, floors):
        differing, p, corrected = int(r["wins"]) + int(r["losses"]), float(r["p_value"]), float(r["p_corrected"])
        reachable = min(1.0, m * floor) if correction == "bonferroni" else max(floor, min(1.0, m * least))
        what = f"over {int(r['n_queries']):,} queries, {differing:,} of which differ"
        if corrected < alpha:
            found.append(Evidence(grounds=(f"p {_p_text(corrected)}{family} is below alpha {alpha} ({what})",)))
            continue
        if reachable < alpha:
            note = f"; the uncorrected p {_p_text(p)} is" if p < alpha and family else ""
            found.append(Evidence(failures=(f"p {_p_text(corrected)}{family} is not below alpha {alpha}{note} ({what}), "
                                            "and the test could have gone below it",)))
            continue
        missing, steps = [], []
        if m * 2.0 ** (1 - differing) >= alpha:
            missing.append(f"{what}: the smallest p this test can give is {_p_text(max(floor, 2.0 ** (1 - differing)))}"
                           + (f" ({_p_text(reachable)}{family})" if family else "")
                           + f", not below alpha {alpha}: at least {_queries_needed(m, alpha):,} differing queries needed")
            steps.append("Compare over more queries: label more of the query set, or add queries both runs answer")
        if m / (resamples + 1) >= alpha:
            fewest = math.floor(m / alpha)
            missing.append(f"{resamples:,} resamples: no p can go below {_p_text(1.0 / (resamples + 1))}"
                           + (f" ({_p_text(min(1.0, m / (resamples + 1)))}{family})" if family else "")
                           + f": at least {fewest:,} resamples needed")
            steps.append(f"Evaluate again with {max(fewest, 10_000):,} resamples")
        found.append(Evidence(missing=tuple(missing), steps=tuple(steps)))
    return found

"""Inter-rater agreement: how far raters agree, where they disagree, and one label per item.

The judgment-list method (step 5) has raters grade an overlap set and checks that the scale is applied
consistently before the grades become ground truth. This module computes the statistics for that check on a
long table of judgments, one row per (item, rater): columns ``item`` (a query/document pair), ``rater`` and
``grade`` (an int from the scale), as a pandas DataFrame or a mapping of parallel arrays. ``labels`` is the
full scale (``(0, 1)``, ``(0, 1, 2, 3)``): statistics always run over every label of the scale, also those no
rater used. Unrateable and "later" are not grades and never reach this module. A rater grades an item at
most once.

Only items graded by at least two raters count for agreement: an item with one grade says nothing about
agreement and is left out of every statistic (it still gets a consensus label). Below, for such an item i,
n_ik is the number of its grades equal to label k, m_i = sum_k n_ik, and N is the number of such items.

- Percent agreement: each item's share of agreeing rater pairs, averaged over items with equal weight,
  ``P_o = (1/N) sum_i sum_k n_ik (n_ik - 1) / (m_i (m_i - 1))`` (Fleiss's P-bar, Gwet's p_a). With two
  raters, the share of items they graded alike.
- Cohen's kappa (Cohen 1960, *Educ. Psychol. Meas.* 20; weighted: Cohen 1968, *Psychol. Bull.* 70) for two
  raters' q x q confusion matrix O over their shared items, E = outer(row sums, column sums) / n:
  ``kappa = 1 - sum(w O) / sum(w E)`` with disagreement weights ``w_jk`` = 1 if j != k (unweighted),
  ``|j - k|`` (linear) or ``(j - k)^2`` (quadratic) on the labels' positions in the scale. Equal to
  ``sklearn.metrics.cohen_kappa_score(a, b, labels=labels, weights=weights)``.
- Specific agreement per label (Fleiss 1975, *Biometrics* 31; Cicchetti & Feinstein 1990, *J. Clin.
  Epidemiol.* 43): ``2 O_kk / (row_k + col_k)``, the chance that one rater gives k given that the other
  did; for binary scales, positive and negative agreement.
- Mean pairwise kappa: Cohen's kappa of every pair of raters that share items, averaged with the number of
  shared items as weights over the pairs where it is defined. With every pair on the same items (a fully
  crossed design) it is Light's kappa (Light 1971, *Psychol. Bull.* 76).
- Fleiss' kappa (Fleiss 1971, *Psychol. Bull.* 76) when every counted item has the same number m of grades:
  ``p_k = sum_i n_ik / (N m)``, ``P_e = sum_k p_k^2``, ``kappa = (P_o - P_e) / (1 - P_e)``. Equal to
  ``statsmodels.stats.inter_rater.fleiss_kappa``. Undefined (None) when the numbers of grades differ.
- Krippendorff's alpha (Krippendorff, "Computing Krippendorff's Alpha-Reliability", 2011; *Content
  Analysis*, 4th ed. 2019), any number of raters, missing grades allowed. Coincidences
  ``o_ck = sum_i (n_ic n_ik - [c = k] n_ic) / (m_i - 1)``, ``n_c = sum_k o_ck``, ``n = sum_c n_c``, and
  ``alpha = 1 - (n - 1) sum_ck o_ck d_ck / sum_ck n_c n_k d_ck`` with ``d_ck`` = 1 if c != k (nominal),
  ``(sum_{g=c..k} n_g - (n_c + n_k) / 2)^2`` (ordinal), ``(v_c - v_k)^2`` on the grade values
  (interval) or ``((v_c - v_k) / (v_c + v_k))^2`` (ratio: grade values counted from an absolute zero,
  none negative: 0 against 1 is as far apart as 0 against 3, and 2 against 3 counts less than 1 against
  2). Equal to ``krippendorff.alpha(value_domain=labels, level_of_measurement=level)``.
  Krippendorff asks for alpha >= 0.800, and >= 0.667 for tentative conclusions.
- Gwet's AC1 (Gwet 2008, *Br. J. Math. Stat. Psychol.* 61; *Handbook of Inter-Rater Reliability*, 4th ed.
  2014), any number of raters, missing grades allowed: ``pi_k = (1/N) sum_i n_ik / m_i``,
  ``P_e = sum_k pi_k (1 - pi_k) / (q - 1)`` over the q labels of the scale, ``AC1 = (P_o - P_e) / (1 - P_e)``.
  Gwet's own pi_k also averages over items with a single grade; here those items do not count, as
  everywhere in this module (on Gwet's 12-unit example, 0.7752 instead of 0.7754).

A chance-corrected statistic is undefined when its expected disagreement is zero: every counted grade is
the same label (kappa, Fleiss, alpha), or no item has two grades. The functions then return None, never
NaN; ``strict=True`` raises ``UndefinedStatistic`` with the reason instead, and ``summary`` reports it.
``band`` names a value on the Landis & Koch (1977, *Biometrics* 33) scale; each band holds its upper bound.
Labels are used in ascending order whatever order they come in: ordinal statistics and the rules below
read the scale from low to high.

Confidence intervals (``bootstrap_ci``) resample the counted items with replacement, all grades of an item
together (a cluster bootstrap; Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993), and take the
percentile interval of the resampled values (numpy's default linear interpolation) over the resamples where
the statistic is defined. Draws come from ``numpy.random.default_rng(seed)``, so a seed repeats an interval,
and every statistic of one ``summary`` sees the same resamples. A ``Statistic`` is computed for a block of
resamples at once, as item-count weights times per-item contributions; any other callable is called once
per resample on the resampled judgments (item ids replaced by the draw's position). Items graded alike by
the same raters contribute alike, so every sum over items (a resample's, a query's, a week's, a rater's) is
taken per class of such items, counted: two raters on a 0-3 scale make at most 16 classes, whatever the
number of items. With two grades an item every term is a whole number or a half and these sums are exact;
with more, they can differ from item-by-item sums in the last bits.

Consensus rules (``consensus``) turn an item's grades into one label:

- ``mean``: the arithmetic mean of the grades, to the nearest scale value; exactly half way between two
  values goes up (computed in integers, so 1.5 between 1 and 2 is 2).
- ``median``: the median (with an even number of grades, the mean of the two middle ones), rounded down to
  the nearest scale value when it falls between two: (1, 2) gives 1, (0, 3) gives 1.
- ``majority``: the most frequent grade; a tie goes to the lower grade.
- ``min_top3``: "the lowest of the top three when they disagree": the lowest of the three highest grades
  (of all of them, when fewer than three); when those agree, that value. (3, 3, 2, 0) gives 2.

``prepare`` codes the judgments once for several of these functions (a report calls five).

No Django here: ``judgments`` reads the grades from the database and renders what this returns.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from scipy import sparse

from .verdicts import Verdict, decide

LEVELS = ("nominal", "ordinal", "interval", "ratio")
WEIGHTS = (None, "linear", "quadratic")
RULES = ("mean", "median", "majority", "min_top3")
SCALE_KINDS = ("binary", "graded")
STATISTICS = ("percent_agreement", "fleiss_kappa", "krippendorff_alpha", "gwet_ac1", "mean_pairwise_kappa")
# Landis & Koch (1977): (name, lower bound exclusive, upper bound inclusive); 0 itself is "slight".
BANDS = (
    ("poor", float("-inf"), 0.0),
    ("slight", 0.0, 0.20),
    ("fair", 0.20, 0.40),
    ("moderate", 0.40, 0.60),
    ("substantial", 0.60, 0.80),
    ("almost perfect", 0.80, 1.00),
)
UNDEFINED_BAND = "undefined"
CONSENSUS_COLUMNS = ("item", "label", "n_grades", "spread", "grades")
DISAGREEMENT_COLUMNS = ("item", "n_grades", "spread", "low", "high", "grades", "raters")
GROUP_COLUMNS = ("group", "n_items", "n_judgments", "alpha")
RATER_COLUMNS = ("rater", "n_items", "bias", "agreement", "kappa", "out_of_line")
DRIFT_COLUMNS = ("start", "end", "n_items", "n_judgments", "percent_agreement", "alpha")

NO_ITEMS = "no item has grades from two raters"
NO_SHARED_ITEMS = "the two raters share no item"
ONE_LABEL = "every grade is the same label, so agreement by chance is certain"
ONE_LABEL_PAIRS = "every pair of raters gave all their shared items one and the same label"
UNEQUAL_RATERS = "Fleiss' kappa needs the same number of grades on every item"

_BLOCK = 1 << 22  # bootstrap weights (resamples x items) computed at once


class UndefinedStatistic(ArithmeticError):
    """A statistic has no value on these judgments; the message says why."""


# --------------------------------------------------------------------------------------------- input


def _scale(labels: Sequence[int]) -> np.ndarray:
    values = np.asarray(labels)
    if values.ndim != 1 or len(values) < 2:
        raise ValueError(f"a scale needs at least two labels, got {labels!r}")
    whole = _whole_numbers(values, "labels")
    if len(np.unique(whole)) != len(whole):
        raise ValueError(f"the scale's labels must be distinct, got {labels!r}")
    return np.sort(whole)


def _whole_numbers(values: np.ndarray, what: str) -> np.ndarray:
    if values.dtype.kind in "iub":
        return values.astype(np.int64)
    try:
        floats = values.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be whole numbers") from None
    if not np.all(np.isfinite(floats)) or np.any(floats != np.round(floats)):
        raise ValueError(f"{what} must be whole numbers")
    return floats.astype(np.int64)


def _frame(judgments: Any) -> pd.DataFrame:
    frame = judgments if isinstance(judgments, pd.DataFrame) else pd.DataFrame(judgments)
    missing = [column for column in ("item", "rater", "grade") if column not in frame.columns]
    if missing:
        raise ValueError(f"the judgments lack the column(s) {', '.join(missing)}")
    return frame


def _codes(column: pd.Series, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes and the distinct ids, sorted when the ids can be sorted (else in order of appearance)."""
    if column.dtype.kind in "iub":
        values = column.to_numpy()
    elif isinstance(column.dtype, pd.StringDtype):
        values = column  # pandas factorizes its strings without making a Python object a row
    else:
        values = column.to_numpy(dtype=object)
    try:
        codes, uniques = pd.factorize(values, sort=True)
    except TypeError:
        codes, uniques = pd.factorize(values, sort=False)
    if len(codes) and codes.min() < 0:
        raise ValueError(f"{what} ids cannot be missing")
    # Numbers stay a numpy array (half a million Python ints would take 34 MB); `_python` converts each one read.
    return codes.astype(np.int64), np.asarray(uniques) if column.dtype.kind in "iub" else np.asarray(uniques, dtype=object)


def _python(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


@dataclass(frozen=True, eq=False)
class CodedJudgments:
    """The judgments coded as integers (items and raters in sorted id order, grades as label positions), as
    ``prepare`` returns them: every function here takes them in place of the judgments."""

    labels: np.ndarray
    frame: pd.DataFrame
    item_ids: np.ndarray
    rater_ids: np.ndarray
    item: np.ndarray
    rater: np.ndarray
    grade: np.ndarray
    counts: np.ndarray  # (items, labels): how many grades of each label an item got

    @property
    def q(self) -> int:
        return len(self.labels)

    @cached_property
    def m(self) -> np.ndarray:
        return self.counts.sum(axis=1)

    @cached_property
    def units(self) -> _Units:
        return _Units(self)


def prepare(judgments: Any, labels: Sequence[int]) -> CodedJudgments:
    """The judgments coded once for several of the functions here, on the scale `labels`: each takes the
    result in place of the judgments, and what they share (the items graded twice, grouped) is worked out
    once. A report that calls five of them on a million judgments saves seconds."""
    return _prepare(judgments, labels)


def _prepare(judgments: Any, labels: Sequence[int] | None) -> CodedJudgments:
    if isinstance(judgments, CodedJudgments):
        if labels is not None and not np.array_equal(_scale(labels), judgments.labels):
            raise ValueError(f"the judgments were prepared on the scale {tuple(judgments.labels.tolist())}, "
                             f"not {tuple(labels)!r}")
        return judgments
    frame = _frame(judgments)
    grades = _whole_numbers(frame["grade"].to_numpy(), "grades")
    scale = _scale(labels) if labels is not None else np.unique(grades)
    position = np.searchsorted(scale, grades)
    off_scale = (position >= len(scale)) | (scale[np.minimum(position, len(scale) - 1)] != grades)
    if off_scale.any():
        raise ValueError(f"grade(s) {sorted(set(grades[off_scale].tolist()))} are not on the scale "
                         f"{tuple(scale.tolist())}")
    item, item_ids = _codes(frame["item"], "item")
    rater, rater_ids = _codes(frame["rater"], "rater")
    pair = item * len(rater_ids) + rater
    if _has_duplicates(pair, len(item_ids) * len(rater_ids)):
        first = np.flatnonzero(pd.Series(pair).duplicated().to_numpy())[0]
        raise ValueError(f"rater {_python(rater_ids[rater[first]])!r} graded item {_python(item_ids[item[first]])!r} more than once")
    counts = np.bincount(item * len(scale) + position, minlength=len(item_ids) * len(scale))
    return CodedJudgments(scale, frame, item_ids, rater_ids, item, rater, position.astype(np.int64),
                      counts.reshape(len(item_ids), len(scale)))


def _has_duplicates(codes: np.ndarray, space: int) -> bool:
    if space <= max(1 << 20, 8 * len(codes)):
        return len(codes) > 0 and bool(np.bincount(codes, minlength=space).max() > 1)
    return len(np.unique(codes)) != len(codes)


@dataclass(frozen=True, eq=False)
class _Units:
    """The items graded at least twice (the units of agreement), as per-item terms the statistics sum."""

    data: CodedJudgments
    chosen: np.ndarray | None = None  # item codes of some of them (one per class, see `classes`); None: all

    @cached_property
    def index(self) -> np.ndarray:
        """Item codes of the counted items."""
        return np.flatnonzero(self.data.m >= 2) if self.chosen is None else self.chosen

    @cached_property
    def counts(self) -> np.ndarray:
        return self.data.counts[self.index].astype(np.float64)

    @cached_property
    def m(self) -> np.ndarray:
        return self.counts.sum(axis=1)

    @cached_property
    def agree(self) -> np.ndarray:
        """Each item's share of agreeing rater pairs."""
        return (self.counts * (self.counts - 1)).sum(axis=1) / (self.m * (self.m - 1))

    @cached_property
    def shares(self) -> np.ndarray:
        """n_ik / m_i."""
        return self.counts / self.m[:, None]

    @cached_property
    def coincidences(self) -> np.ndarray:
        """(n_ik n_il - [k = l] n_ik) / (m_i - 1), flattened to (items, q * q)."""
        q = self.data.q
        products = self.counts[:, :, None] * self.counts[:, None, :]
        products[:, np.arange(q), np.arange(q)] -= self.counts
        return (products / (self.m - 1)[:, None, None]).reshape(len(self.index), q * q)

    @property
    def n(self) -> int:
        return len(self.index)

    @cached_property
    def rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The judgment rows of the counted items, grouped by unit: (rows, unit of each row, first row per unit)."""
        unit_of_item = np.full(len(self.data.item_ids), -1)
        unit_of_item[self.index] = np.arange(self.n)
        unit = unit_of_item[self.data.item]
        rows = np.flatnonzero(unit >= 0)
        rows = rows[np.argsort(unit[rows], kind="stable")]
        starts = np.concatenate(([0], np.cumsum(self.m.astype(np.int64))[:-1]))
        return rows, unit[rows], starts

    @cached_property
    def pairs(self) -> _Pairs:
        return _Pairs(self)

    @cached_property
    def classes(self) -> _Classes:
        """Units graded alike by the same raters add the same terms to every statistic, so sums over units
        (a resample's, a query's, all of them) are taken per class of such units. Two raters on a
        four-label scale make at most 16 classes however many items they share."""
        rows, unit, starts = self.rows
        data = self.data
        code = data.rater[rows] * data.q + data.grade[rows]
        code = code[np.lexsort((code, unit))]  # each unit's (rater, grade) codes ascending
        m = self.m.astype(np.int64)
        klass, chosen = np.empty(self.n, np.int64), []
        for size in np.unique(m).tolist():
            members = np.flatnonzero(m == size)
            first, inverse = _distinct_rows(code[starts[members][:, None] + np.arange(size)], len(data.rater_ids) * data.q)
            klass[members] = sum(map(len, chosen)) + inverse
            chosen.append(members[first])
        chosen = np.concatenate(chosen) if chosen else np.empty(0, np.int64)
        order = np.argsort(chosen)
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        klass = rank[klass]
        return _Classes(klass, np.bincount(klass, minlength=len(order)), _Units(data, self.index[chosen[order]]))


class _Classes(NamedTuple):
    of_unit: np.ndarray  # each unit's class
    sizes: np.ndarray  # units per class
    units: _Units  # one unit standing for each class, in item order


def _distinct_rows(grid: np.ndarray, base: int) -> tuple[np.ndarray, np.ndarray]:
    """The first row of each distinct row of `grid` (values in 0..base-1), and each row's distinct row."""
    if base ** grid.shape[1] < 1 << 62:  # rows packed into one integer each sort much faster
        grid = grid @ base ** np.arange(grid.shape[1], dtype=np.int64)
        _, first, inverse = np.unique(grid, return_index=True, return_inverse=True)
    else:
        _, first, inverse = np.unique(grid, axis=0, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


@dataclass(frozen=True, eq=False)
class _Pairs:
    """Every pair of raters on every counted item: (unit, pair, grade of the first rater, of the second)."""

    units: _Units
    unit: np.ndarray = field(init=False)
    pair: np.ndarray = field(init=False)
    first: np.ndarray = field(init=False)
    second: np.ndarray = field(init=False)
    raters: np.ndarray = field(init=False)  # (pairs, 2) rater codes, first < second

    def __post_init__(self) -> None:
        data = self.units.data
        rows, unit, _ = self.units.rows
        long = pd.DataFrame({"unit": unit, "rater": data.rater[rows], "grade": data.grade[rows]})
        joined = long.merge(long, on="unit", suffixes=("_a", "_b"))
        joined = joined[joined["rater_a"].to_numpy() < joined["rater_b"].to_numpy()]
        a, b = joined["rater_a"].to_numpy(), joined["rater_b"].to_numpy()
        pair, keys = pd.factorize(a * len(data.rater_ids) + b, sort=True)
        set_ = object.__setattr__
        set_(self, "unit", joined["unit"].to_numpy())
        set_(self, "pair", pair.astype(np.int64))
        set_(self, "first", joined["grade_a"].to_numpy())
        set_(self, "second", joined["grade_b"].to_numpy())
        set_(self, "raters", np.column_stack((keys // len(data.rater_ids), keys % len(data.rater_ids))))

    @property
    def n(self) -> int:
        return len(self.raters)

    @cached_property
    def cells(self) -> sparse.csr_matrix:
        """(units, pairs * q * q): which confusion cell of which pair each unit adds one to."""
        q = self.units.data.q
        cell = (self.pair * q + self.first) * q + self.second
        ones = np.ones(len(cell))
        return sparse.csr_matrix((ones, (self.unit, cell)), shape=(self.units.n, self.n * q * q))

    def confusions(self, weights: np.ndarray) -> np.ndarray:
        """(resamples, pairs, q, q) confusion matrices under item weights (resamples, units)."""
        q = self.units.data.q
        out = np.asarray(self.cells.T @ weights.T).T
        return out.reshape(len(weights), self.n, q, q)


# --------------------------------------------------------------------------------------------- statistics


def band(value: float | None) -> str:
    """The Landis & Koch (1977) name of a kappa-like value: poor (< 0), slight (0-0.20), fair (0.21-0.40),
    moderate (0.41-0.60), substantial (0.61-0.80) or almost perfect (0.81-1.00); each band holds its upper
    bound. None is "undefined"."""
    if value is None or np.isnan(value):
        return UNDEFINED_BAND
    if value < 0:
        return BANDS[0][0]
    for name, _, upper in BANDS[1:]:
        if value <= upper:
            return name
    return BANDS[-1][0]


def _disagreement_weights(q: int, weights: str | None) -> np.ndarray:
    if weights not in WEIGHTS:
        raise ValueError(f"unknown kappa weights {weights!r}; use one of {WEIGHTS}")
    positions = np.arange(q)
    distance = np.abs(positions[:, None] - positions[None, :]).astype(np.float64)
    if weights is None:
        return (distance > 0).astype(np.float64)
    return distance if weights == "linear" else distance**2


def _kappa_from_confusion(confusion: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Cohen's kappa of each (..., q, q) confusion matrix, NaN where undefined; sklearn's arithmetic."""
    confusion = np.asarray(confusion, dtype=np.float64)
    n = confusion.sum(axis=(-2, -1))
    rows, columns = confusion.sum(axis=-1), confusion.sum(axis=-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = rows[..., :, None] * columns[..., None, :] / n[..., None, None]
        observed_disagreement = (weights * confusion).sum(axis=(-2, -1))
        expected_disagreement = (weights * expected).sum(axis=(-2, -1))
        kappa = 1 - observed_disagreement / expected_disagreement
    return np.where((n > 0) & (expected_disagreement > 0), kappa, np.nan)


def _alpha_from_coincidences(coincidences: np.ndarray, labels: np.ndarray, level: str) -> np.ndarray:
    """Krippendorff's alpha of each (..., q, q) coincidence matrix, NaN where undefined."""
    q = len(labels)
    n_c = coincidences.sum(axis=-1)
    n = n_c.sum(axis=-1)
    if level == "nominal":
        delta = 1.0 - np.eye(q)
    elif level == "interval":
        delta = ((labels[:, None] - labels[None, :]) ** 2).astype(np.float64)
    elif level == "ratio":
        difference = (labels[:, None] - labels[None, :]).astype(np.float64)
        total = (labels[:, None] + labels[None, :]).astype(np.float64)
        delta = np.divide(difference, total, out=np.zeros_like(difference), where=total != 0) ** 2
    else:
        positions = np.arange(q)
        low, high = np.minimum.outer(positions, positions), np.maximum.outer(positions, positions)
        cumulative = np.cumsum(n_c, axis=-1)
        between = cumulative[..., high] - cumulative[..., low] + n_c[..., low]
        delta = (between - (n_c[..., :, None] + n_c[..., None, :]) / 2) ** 2
    observed = (coincidences * delta).sum(axis=(-2, -1))
    expected = (n_c[..., :, None] * n_c[..., None, :] * delta).sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = 1 - (n - 1) * observed / expected
    return np.where(expected > 0, alpha, np.nan)


def _check_level(level: str, labels: Sequence[int]) -> None:
    if level not in LEVELS:
        raise ValueError(f"unknown level of measurement {level!r}; use one of {LEVELS}")
    if level == "ratio" and min(labels) < 0:
        raise ValueError(f"the ratio level needs grades counted from an absolute zero, none negative, got {tuple(labels)!r}")


@dataclass(frozen=True)
class Statistic:
    """An agreement statistic over items graded at least twice, by name: callable on judgments, and computed
    for a whole block of bootstrap resamples at once by ``bootstrap_ci`` and ``summary``.

    ``name`` is one of ``STATISTICS``; ``level`` applies to ``krippendorff_alpha``, ``weights`` to
    ``mean_pairwise_kappa``.
    """

    name: str
    labels: tuple[int, ...]
    level: str = "nominal"
    weights: str | None = None

    def __post_init__(self) -> None:
        if self.name not in STATISTICS:
            raise ValueError(f"unknown statistic {self.name!r}; use one of {STATISTICS}")
        _check_level(self.level, self.labels)
        _disagreement_weights(2, self.weights)
        object.__setattr__(self, "labels", tuple(_scale(self.labels).tolist()))

    def __call__(self, judgments: Any) -> float | None:
        return self.evaluate(judgments)[0]

    def evaluate(self, judgments: Any) -> tuple[float | None, str | None]:
        """(value, None), or (None, the reason it is undefined)."""
        data = _prepare(judgments, self.labels)
        units = data.units
        if units.n == 0:
            return None, NO_ITEMS
        if self.name == "fleiss_kappa" and not _same_number_of_grades(units):
            return None, UNEQUAL_RATERS
        classes = units.classes
        value = float(self._on_units(classes.units, classes.sizes[None, :].astype(np.float64))[0])
        if np.isnan(value):
            return None, ONE_LABEL_PAIRS if self.name == "mean_pairwise_kappa" else ONE_LABEL
        return value, None

    def on_weights(self, data: CodedJudgments, weights: np.ndarray) -> np.ndarray:
        """The statistic with each counted item counted `weights[r, i]` times, for each row r; NaN where
        undefined."""
        return self._on_units(data.units, weights)

    def _on_units(self, units: _Units, weights: np.ndarray) -> np.ndarray:
        """As ``on_weights``, with `weights` over `units` (all counted items, or the classes standing for them)."""
        data = units.data
        total = weights.sum(axis=1)
        if self.name == "krippendorff_alpha":
            coincidences = (weights @ units.coincidences).reshape(len(weights), data.q, data.q)
            return _alpha_from_coincidences(coincidences, data.labels, self.level)
        if self.name == "mean_pairwise_kappa":
            return _mean_pairwise_kappa(units.pairs, weights, self.weights)
        observed = (weights @ units.agree) / total
        if self.name == "percent_agreement":
            return observed
        if self.name == "gwet_ac1":
            pi = (weights @ units.shares) / total[:, None]
            expected = (pi * (1 - pi)).sum(axis=1) / (data.q - 1)
            return (observed - expected) / (1 - expected)
        if not _same_number_of_grades(units):
            return np.full(len(weights), np.nan)
        per_label = weights @ units.counts
        p = per_label / per_label.sum(axis=1, keepdims=True)
        expected = (p**2).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            kappa = (observed - expected) / (1 - expected)
        return np.where((per_label > 0).sum(axis=1) >= 2, kappa, np.nan)


def _same_number_of_grades(units: _Units) -> bool:
    return units.n > 0 and bool(np.all(units.m == units.m[0]))


def _mean_pairwise_kappa(pairs: _Pairs, weights: np.ndarray, kappa_weights: str | None) -> np.ndarray:
    if pairs.n == 0:
        return np.full(len(weights), np.nan)
    q = pairs.units.data.q
    disagreement = _disagreement_weights(q, kappa_weights)
    out = np.empty(len(weights))
    step = max(1, _BLOCK // (pairs.n * q * q))
    for start in range(0, len(weights), step):
        confusions = pairs.confusions(weights[start:start + step])
        kappa = _kappa_from_confusion(confusions, disagreement)
        shared = confusions.sum(axis=(-2, -1))
        shared = np.where(np.isnan(kappa), 0.0, shared)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start:start + step] = np.nansum(kappa * shared, axis=1) / shared.sum(axis=1)
    return out


def _value(statistic: Statistic, judgments: Any, strict: bool) -> float | None:
    value, reason = statistic.evaluate(judgments)
    if value is None and strict:
        raise UndefinedStatistic(reason)
    return value


def percent_agreement(judgments: Any, *, strict: bool = False) -> float | None:
    """The share of agreeing rater pairs within each item graded at least twice, averaged over those items
    (each item weighs the same whatever its number of raters); with two raters, the share of items graded
    alike. None without such items."""
    data = _prepare(judgments, None)
    if data.units.n == 0:
        if strict:
            raise UndefinedStatistic(NO_ITEMS)
        return None
    return float(data.units.agree.mean())


def fleiss_kappa(judgments: Any, labels: Sequence[int], *, strict: bool = False) -> float | None:
    """Fleiss' kappa over the items graded at least twice; None unless they all have the same number of
    grades, or when every grade is the same label."""
    return _value(Statistic("fleiss_kappa", labels), judgments, strict)


def fleiss_kappa_table(table: Any, *, strict: bool = False) -> float | None:
    """Fleiss' kappa of an (items x labels) table of counts, as statsmodels takes it; every row must have
    the same sum m >= 2."""
    counts = np.asarray(table)
    if counts.ndim != 2 or counts.shape[1] < 2:
        raise ValueError("the table must have one row per item and a column per label (at least two)")
    counts = _whole_numbers(counts, "counts")
    item, position = np.nonzero(counts)
    repeats = counts[item, position]
    judgments = {"item": np.repeat(item, repeats), "grade": np.repeat(position, repeats)}
    judgments["rater"] = np.arange(len(judgments["item"]))  # raters are anonymous in a table
    return fleiss_kappa(judgments, list(range(counts.shape[1])), strict=strict)


def krippendorff_alpha(judgments: Any, labels: Sequence[int], level: str = "nominal", *,
                       strict: bool = False) -> float | None:
    """Krippendorff's alpha at the `level` of measurement ("nominal", "ordinal", "interval" or "ratio") over the
    items graded at least twice, any raters missing; None when all those grades are one label."""
    return _value(Statistic("krippendorff_alpha", labels, level=level), judgments, strict)


def gwet_ac1(judgments: Any, labels: Sequence[int], *, strict: bool = False) -> float | None:
    """Gwet's AC1 over the items graded at least twice, any raters missing, chance agreement over the full
    scale's q labels; None only without such items."""
    return _value(Statistic("gwet_ac1", labels), judgments, strict)


def mean_pairwise_kappa(judgments: Any, labels: Sequence[int], weights: str | None = None, *,
                        strict: bool = False) -> float | None:
    """Cohen's kappa of every pair of raters sharing items, averaged weighted by shared items over the
    pairs where it is defined (Light's kappa when all pairs share the same items)."""
    return _value(Statistic("mean_pairwise_kappa", labels, weights=weights), judgments, strict)


def confusion(a: Sequence[int], b: Sequence[int], labels: Sequence[int]) -> np.ndarray:
    """The (q x q) counts of two raters' grades on the same items, in scale order: rows rater `a`."""
    scale = _scale(labels)
    first, second = (_positions(np.asarray(grades), scale) for grades in (a, b))
    if len(first) != len(second):
        raise ValueError(f"the two raters' grades differ in length ({len(first)} and {len(second)})")
    q = len(scale)
    return np.bincount(first * q + second, minlength=q * q).reshape(q, q)


def _positions(grades: np.ndarray, scale: np.ndarray) -> np.ndarray:
    if grades.size == 0:
        return np.zeros(0, dtype=np.int64)
    whole = _whole_numbers(grades.ravel(), "grades")
    position = np.searchsorted(scale, whole)
    off_scale = (position >= len(scale)) | (scale[np.minimum(position, len(scale) - 1)] != whole)
    if off_scale.any():
        raise ValueError(f"grade(s) {sorted(set(whole[off_scale].tolist()))} are not on the scale "
                         f"{tuple(scale.tolist())}")
    return position.astype(np.int64)


def cohen_kappa(a: Sequence[int], b: Sequence[int], labels: Sequence[int], weights: str | None = None, *,
                strict: bool = False) -> float | None:
    """Cohen's kappa of two raters' grades on the same items (``a[i]`` and ``b[i]`` grade item i), over the
    full scale; `weights` None, "linear" or "quadratic". None when they share no item or both gave every
    item one and the same label."""
    matrix = confusion(a, b, labels)
    kappa = _kappa_from_confusion(matrix, _disagreement_weights(len(matrix), weights))
    if np.isnan(kappa):
        if strict:
            raise UndefinedStatistic(NO_SHARED_ITEMS if matrix.sum() == 0 else ONE_LABEL)
        return None
    return float(kappa)


def _per_grade(matrix: np.ndarray, scale: np.ndarray) -> list[dict]:
    rows, columns, both = matrix.sum(axis=1), matrix.sum(axis=0), np.diag(matrix)
    return [
        {
            "label": int(label),
            "a": int(rows[k]),
            "b": int(columns[k]),
            "both": int(both[k]),
            "one": int(rows[k] + columns[k] - 2 * both[k]),
            "specific_agreement": float(2 * both[k] / (rows[k] + columns[k])) if rows[k] + columns[k] else None,
        }
        for k, label in enumerate(scale)
    ]


def per_grade_agreement(a: Sequence[int], b: Sequence[int], labels: Sequence[int]) -> list[dict]:
    """Per label of the scale: how many items rater `a` and rater `b` gave it, ``both`` gave it, exactly
    ``one`` of them did, and the specific agreement ``2 both / (a + b)`` (None when neither used it)."""
    return _per_grade(confusion(a, b, labels), _scale(labels))


# --------------------------------------------------------------------------------------------- bootstrap


def _draws(n: int, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Blocks of resamples, each a (block, n) array of drawn unit positions; the blocks depend on n only."""
    rng = np.random.default_rng(seed)
    step = max(1, _BLOCK // n)
    for start in range(0, resamples, step):
        yield rng.integers(0, n, size=(min(step, resamples - start), n))


def _class_draws(units: _Units, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Blocks of resamples, each a (block, classes) array: how many times the resample draws a unit of
    each of `units.classes`. The draws are ``_draws``'s (each unit drawn by its position); a statistic
    summed over the classes with these weights is the one summed over the drawn units."""
    n_classes = units.classes.units.n
    # A class code per unit in the smallest integer type: the lookups of a draw stay in the cache.
    klass = units.classes.of_unit.astype(np.min_scalar_type(max(n_classes - 1, 0)))
    for draws in _draws(units.n, resamples, seed):
        weights = np.array([np.bincount(klass[row], minlength=n_classes) for row in draws], dtype=np.float64)
        del draws  # before the next block is drawn: one block of draws in memory, not two
        yield weights


def _check_resamples(resamples: int) -> None:
    if isinstance(resamples, bool) or int(resamples) != resamples or resamples < 1:
        raise ValueError(f"the number of resamples must be a whole number >= 1, got {resamples!r}")


def _check_bootstrap(resamples: int, level: float) -> None:
    _check_resamples(resamples)
    if not 0 < level < 1:
        raise ValueError(f"the confidence level must be between 0 and 1, got {level!r}")


def _interval(values: np.ndarray, level: float) -> tuple[float, float] | None:
    defined = values[~np.isnan(values)]
    if len(defined) == 0:
        return None
    low, high = np.quantile(defined, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def _resampled_frame(data: CodedJudgments, draw: np.ndarray) -> pd.DataFrame:
    rows, _, starts = data.units.rows
    lengths = data.units.m.astype(np.int64)[draw]
    first = np.repeat(starts[draw] - np.cumsum(lengths) + lengths, lengths)
    taken = rows[first + np.arange(lengths.sum())]
    frame = data.frame.iloc[taken].reset_index(drop=True)
    frame["item"] = np.repeat(np.arange(len(draw)), lengths)
    return frame


def bootstrap_values(judgments: Any, statistic: Callable[[Any], float | None], *, resamples: int = 1000,
                     seed: int = 0) -> np.ndarray:
    """The statistic on each of `resamples` item resamples (NaN where undefined); see ``bootstrap_ci``."""
    _check_resamples(resamples)
    labels = statistic.labels if isinstance(statistic, Statistic) else None
    data = _prepare(judgments, labels)
    n = data.units.n
    if n == 0:
        return np.full(resamples, np.nan)
    if isinstance(statistic, Statistic):
        classes = data.units.classes.units
        return np.concatenate([statistic._on_units(classes, weights) for weights in _class_draws(data.units, resamples, seed)])
    values = []
    for draws in _draws(n, resamples, seed):
        block = [statistic(_resampled_frame(data, draw)) for draw in draws]
        values.append(np.array([np.nan if value is None else value for value in block], dtype=np.float64))
    return np.concatenate(values)


def bootstrap_ci(judgments: Any, statistic: Callable[[Any], float | None], *, resamples: int = 1000,
                 seed: int = 0, level: float = 0.95) -> tuple[float, float] | None:
    """The percentile bootstrap interval (low, high) of `statistic` at confidence `level`, resampling the
    items graded at least twice with replacement (all grades of an item together), seeded.

    `statistic` is a ``Statistic`` (fast: all resamples of a block at once) or any callable taking the
    judgments and returning a float or None. Resamples where it is undefined are left out; None when it is
    undefined on all of them.
    """
    _check_bootstrap(resamples, level)
    return _interval(bootstrap_values(judgments, statistic, resamples=resamples, seed=seed), level)


# --------------------------------------------------------------------------------------------- reports


@dataclass(frozen=True, eq=False)
class PairResult:
    """Two raters on the items they both graded: kappas (unweighted, linear, quadratic; on a binary scale
    all three are equal), the share graded alike, the confusion matrix (rows `rater_a`) and per-grade
    agreement as ``per_grade_agreement`` gives it. `reason` says why the kappas are None."""

    rater_a: Hashable
    rater_b: Hashable
    n_items: int
    percent_agreement: float
    kappa: float | None
    kappa_linear: float | None
    kappa_quadratic: float | None
    reason: str | None
    confusion: np.ndarray
    per_grade: list[dict]


def _none_if_nan(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def _optional(values: np.ndarray) -> pd.Series:
    """A column of floats with None, not NaN, where undefined."""
    return pd.Series([_none_if_nan(value) for value in values], dtype=object)


def pairwise(judgments: Any, labels: Sequence[int]) -> list[PairResult]:
    """Every pair of raters that share at least one item, in rater order; pairs with nothing in common are
    left out."""
    data = _prepare(judgments, labels)
    _, sizes, classes = data.units.classes
    pairs = classes.pairs
    if pairs.n == 0:
        return []
    q = data.q
    matrices = pairs.confusions(sizes[None, :].astype(np.float64))[0].round().astype(np.int64)
    kappas = {weights: _kappa_from_confusion(matrices, _disagreement_weights(q, weights)) for weights in WEIGHTS}
    results = []
    for p, (a, b) in enumerate(pairs.raters):
        matrix = matrices[p]
        kappa = _none_if_nan(kappas[None][p])
        results.append(PairResult(
            rater_a=_python(data.rater_ids[a]),
            rater_b=_python(data.rater_ids[b]),
            n_items=int(matrix.sum()),
            percent_agreement=float(np.trace(matrix) / matrix.sum()),
            kappa=kappa,
            kappa_linear=_none_if_nan(kappas["linear"][p]),
            kappa_quadratic=_none_if_nan(kappas["quadratic"][p]),
            reason=ONE_LABEL if kappa is None else None,
            confusion=matrix,
            per_grade=_per_grade(matrix, data.labels),
        ))
    return results


def _report_statistics(scale_kind: str, labels: tuple[int, ...]) -> dict[str, Statistic]:
    statistics = {
        "percent_agreement": Statistic("percent_agreement", labels),
        "fleiss_kappa": Statistic("fleiss_kappa", labels),
    }
    if scale_kind == "binary":
        statistics["alpha_nominal"] = Statistic("krippendorff_alpha", labels, level="nominal")
    else:
        statistics["alpha_ordinal"] = Statistic("krippendorff_alpha", labels, level="ordinal")
        statistics["alpha_interval"] = Statistic("krippendorff_alpha", labels, level="interval")
        if min(labels) >= 0:  # a ratio needs grades counted from zero
            statistics["alpha_ratio"] = Statistic("krippendorff_alpha", labels, level="ratio")
    statistics["gwet_ac1"] = Statistic("gwet_ac1", labels)
    statistics["mean_pairwise_kappa"] = Statistic(
        "mean_pairwise_kappa", labels, weights=None if scale_kind == "binary" else "quadratic")
    return statistics


def summary(judgments: Any, labels: Sequence[int], *, scale_kind: str, resamples: int = 1000, seed: int = 0,
            level: float = 0.95) -> dict:
    """Everything an agreement report needs, as plain Python values.

    Keys: ``scale_kind``, ``labels``, ``n_items`` (items graded at least twice), ``n_judgments`` (their
    grades), ``n_items_single`` (items with one grade, left out), ``raters`` (who graded a counted item),
    ``n_pairs`` (rater pairs sharing items), ``resamples``, ``seed``, ``level``, and ``statistics``: for
    percent_agreement, fleiss_kappa, alpha_nominal (binary) or alpha_ordinal, alpha_interval and alpha_ratio
    (graded; ratio only when no grade is negative),
    gwet_ac1 and mean_pairwise_kappa (unweighted for binary, quadratic for graded), a dict with ``value``,
    ``low`` and ``high`` (bootstrap percentile interval), ``band`` (Landis & Koch; None for percent
    agreement), ``reason`` (why value is None) and ``undefined_resamples``. Every statistic sees the same
    resamples.
    """
    if scale_kind not in SCALE_KINDS:
        raise ValueError(f"unknown scale kind {scale_kind!r}; use one of {SCALE_KINDS}")
    _check_bootstrap(resamples, level)
    data = _prepare(judgments, labels)
    if scale_kind == "binary" and data.q != 2:
        raise ValueError(f"a binary scale has two labels, got {tuple(data.labels.tolist())}")
    units = data.units
    statistics = _report_statistics(scale_kind, tuple(data.labels.tolist()))
    values = {name: [] for name in statistics}
    if units.n:
        classes = units.classes.units
        for weights in _class_draws(units, resamples, seed):
            for name, statistic in statistics.items():
                values[name].append(statistic._on_units(classes, weights))
    report = {}
    for name, statistic in statistics.items():
        value, reason = statistic.evaluate(data)
        resampled = np.concatenate(values[name]) if values[name] else np.full(resamples, np.nan)
        interval = _interval(resampled, level) if value is not None else None
        report[name] = {
            "value": value,
            "low": interval[0] if interval else None,
            "high": interval[1] if interval else None,
            "band": None if name == "percent_agreement" else band(value),
            "reason": reason,
            "undefined_resamples": int(np.isnan(resampled).sum()),
        }
    counted_rows = units.rows[0]
    return {
        "scale_kind": scale_kind,
        "labels": data.labels.tolist(),
        "n_items": units.n,
        "n_judgments": len(counted_rows),
        "n_items_single": int((data.m == 1).sum()),
        "raters": [_python(data.rater_ids[r]) for r in np.unique(data.rater[counted_rows])],
        "n_pairs": units.classes.units.pairs.n if units.n else 0,
        "resamples": int(resamples),
        "seed": seed,
        "level": level,
        "statistics": report,
    }


def _group_alpha(data: CodedJudgments, group: np.ndarray, n_groups: int, level: str) -> tuple[np.ndarray, ...]:
    """Per group of counted units (`group[u]` in 0..n_groups-1): units, grades, summed agreement and alpha."""
    units = data.units
    klass, _, classes = units.classes
    per_class = sparse.csr_matrix((np.ones(units.n), (group, klass)), shape=(n_groups, classes.n))  # units, summed
    coincidences = np.asarray(per_class @ classes.coincidences).reshape(n_groups, data.q, data.q)
    alpha = _alpha_from_coincidences(coincidences, data.labels, level)
    return (np.bincount(group, minlength=n_groups), np.bincount(group, units.m, minlength=n_groups).astype(np.int64),
            np.bincount(group, units.agree, minlength=n_groups), alpha)


def per_item_group_alpha(judgments: Any, groups: Mapping[Hashable, Hashable] | pd.Series, labels: Sequence[int],
                         level: str = "nominal") -> pd.DataFrame:
    """Krippendorff's alpha within each group of items (the query a query/document pair belongs to), over
    the group's items graded at least twice: columns ``GROUP_COLUMNS``, worst alpha first, undefined (None:
    no such items, or all their grades one label) last. Every group of a judged item has a row.

    Each group's alpha uses the group's own grades for its expected disagreement, so a small group is noisy.
    """
    _check_level(level, labels)
    data = _prepare(judgments, labels)
    mapping = groups if isinstance(groups, pd.Series) else pd.Series(dict(groups), dtype=object)
    item_group = mapping.reindex(data.item_ids).reset_index(drop=True)
    if item_group.isna().any():
        missing = data.item_ids[item_group.isna().to_numpy()]
        raise ValueError(f"{len(missing)} judged item(s) have no group, e.g. {_python(missing[0])!r}")
    code, group_ids = _codes(item_group, "group")
    units = data.units
    n_items, n_judgments, _, alpha = _group_alpha(data, code[units.index], len(group_ids), level)
    frame = pd.DataFrame({
        "group": [_python(g) for g in group_ids],
        "n_items": n_items,
        "n_judgments": n_judgments,
        "alpha": _optional(alpha),
    })
    order = np.lexsort((np.arange(len(frame)), np.nan_to_num(alpha, nan=np.inf), np.isnan(alpha)))
    return frame.iloc[order].reset_index(drop=True)


def _order_statistic(counts: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """The label position of each row's `rank`-th smallest grade (0-based)."""
    return (np.cumsum(counts, axis=1) > rank[:, None]).argmax(axis=1)


def _consensus_positions(counts: np.ndarray, labels: np.ndarray, rule: str) -> np.ndarray:
    """One label position per row of grade counts (every row has at least one grade)."""
    m = counts.sum(axis=1)
    if rule == "majority":
        return counts.argmax(axis=1)
    if rule == "mean":
        # |mean - label| scaled by m, in integers, so a mean exactly half way is a tie; ties go up.
        distance = np.abs((counts @ labels)[:, None] - m[:, None] * labels[None, :])
        return len(labels) - 1 - distance[:, ::-1].argmin(axis=1)
    if rule == "median":
        twice = labels[_order_statistic(counts, (m - 1) // 2)] + labels[_order_statistic(counts, m // 2)]
        return np.searchsorted(2 * labels, twice, side="right") - 1
    if rule == "min_top3":
        return _order_statistic(counts, m - np.minimum(m, 3))
    raise ValueError(f"unknown consensus rule {rule!r}; use one of {RULES}")


def _grade_tuples(data: CodedJudgments, rows: np.ndarray, item: np.ndarray) -> tuple[list, list]:
    """Per item in code order among `item` (sorted codes of the items wanted): grades ascending, and the
    raters in the same order."""
    if len(item) == 0:
        return [], []
    order = np.lexsort((data.rater[rows], data.grade[rows], data.item[rows]))
    rows = rows[order]
    bounds = np.searchsorted(data.item[rows], item, side="right")[:-1]
    grades = np.split(data.labels[data.grade[rows]], bounds)
    raters = np.split(data.rater_ids[data.rater[rows]], bounds)
    return ([tuple(g.tolist()) for g in grades], [tuple(_python(r) for r in group) for group in raters])


def consensus(judgments: Any, labels: Sequence[int], rule: str) -> pd.DataFrame:
    """One label per judged item by `rule` (``RULES``; see the module docstring), items with a single grade
    included: columns ``CONSENSUS_COLUMNS`` (``spread`` = highest - lowest grade, ``grades`` ascending)."""
    if rule not in RULES:
        raise ValueError(f"unknown consensus rule {rule!r}; use one of {RULES}")
    data = _prepare(judgments, labels)
    items = np.arange(len(data.item_ids))
    grades, _ = _grade_tuples(data, np.arange(len(data.item)), items)
    label = data.labels[_consensus_positions(data.counts, data.labels, rule)]
    present = data.counts > 0
    spread = data.labels[data.q - 1 - present[:, ::-1].argmax(axis=1)] - data.labels[present.argmax(axis=1)]
    return pd.DataFrame({
        "item": [_python(i) for i in data.item_ids],
        "label": label,
        "n_grades": data.m,
        "spread": spread,
        "grades": grades,
    }, columns=list(CONSENSUS_COLUMNS))


def disagreements(judgments: Any, margin: int) -> pd.DataFrame:
    """Items whose highest and lowest grade differ by at least `margin` (>= 1), for an adjudication queue:
    columns ``DISAGREEMENT_COLUMNS`` (``grades`` ascending, ``raters`` in the same order), widest spread
    first, then item order."""
    if isinstance(margin, bool) or int(margin) != margin or margin < 1:
        raise ValueError(f"the margin must be a whole number >= 1, got {margin!r}")
    data = _prepare(judgments, None)
    if len(data.item) == 0:
        return pd.DataFrame(columns=list(DISAGREEMENT_COLUMNS))
    present = data.counts > 0
    low = data.labels[present.argmax(axis=1)]
    high = data.labels[data.q - 1 - present[:, ::-1].argmax(axis=1)]
    wanted = np.flatnonzero(high - low >= margin)
    wanted = wanted[np.argsort(-(high - low)[wanted], kind="stable")]
    rows = np.flatnonzero(np.isin(data.item, wanted))
    grades, raters = _grade_tuples(data, rows, np.sort(wanted))
    position = np.searchsorted(np.sort(wanted), wanted)
    return pd.DataFrame({
        "item": [_python(data.item_ids[i]) for i in wanted],
        "n_grades": data.m[wanted],
        "spread": (high - low)[wanted],
        "low": low[wanted],
        "high": high[wanted],
        "grades": [grades[p] for p in position],
        "raters": [raters[p] for p in position],
    }, columns=list(DISAGREEMENT_COLUMNS))


def rater_vs_consensus(judgments: Any, labels: Sequence[int], *, rule: str = "majority",
                       weights: str | None = None) -> pd.DataFrame:
    """Each rater against the other raters of the same items (items graded at least twice).

    Columns ``RATER_COLUMNS``: ``n_items`` the rater graded with someone else; ``bias`` the mean of (the
    rater's grade - the mean grade of the other raters of the item), > 0 when the rater grades higher;
    ``agreement`` the share of items where the rater's grade equals the others' consensus by `rule`;
    ``kappa`` Cohen's kappa (`weights`) of the rater's grades against that consensus, None when undefined.
    ``out_of_line`` marks the one rater with the lowest kappa (ties: lower agreement, then larger |bias|),
    and only when at least three raters have rows: with two, each is the other's consensus and neither can
    be singled out. Rows come most out of line first.
    """
    if rule not in RULES:
        raise ValueError(f"unknown consensus rule {rule!r}; use one of {RULES}")
    data = _prepare(judgments, labels)
    # A rater's row on a unit is the same on every unit of its class: each class's rows, counted its size.
    _, sizes, classes = data.units.classes
    rows, unit, _ = classes.rows
    times = sizes[unit]
    q = data.q
    grade = data.grade[rows]
    others = data.counts[classes.index[unit]]
    others[np.arange(len(rows)), grade] -= 1
    m_others = others.sum(axis=1)
    bias = data.labels[grade] - (others @ data.labels) / m_others
    agreed = _consensus_positions(others, data.labels, rule)
    rater = data.rater[rows]
    n_raters = len(data.rater_ids)
    n = np.bincount(rater, times, minlength=n_raters).astype(np.int64)
    cells = np.bincount((rater * q + grade) * q + agreed, times, minlength=n_raters * q * q)
    kappa = _kappa_from_confusion(cells.reshape(n_raters, q, q), _disagreement_weights(q, weights))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_bias = np.bincount(rater, bias * times, minlength=n_raters) / n
        agreement = np.bincount(rater, (grade == agreed) * times, minlength=n_raters) / n
    present = np.flatnonzero(n > 0)
    order = present[np.lexsort((present, -np.abs(mean_bias[present]), agreement[present],
                                np.nan_to_num(kappa[present], nan=np.inf), np.isnan(kappa[present])))]
    frame = pd.DataFrame({
        "rater": [_python(data.rater_ids[r]) for r in order],
        "n_items": n[order],
        "bias": mean_bias[order],
        "agreement": agreement[order],
        "kappa": _optional(kappa[order]),
        "out_of_line": (np.arange(len(order)) == 0) & (len(order) >= 3),
    }, columns=list(RATER_COLUMNS))
    return frame


def drift(judgments: Any, labels: Sequence[int], *, level: str = "nominal", freq: str = "W") -> pd.DataFrame:
    """Agreement per period (pandas `freq`; "W" = weeks Monday to Sunday): each item graded at least twice
    falls in the period of its latest grade (when its agreement became known), times read from the ``time``
    column in UTC. Columns ``DRIFT_COLUMNS``: first and last day of the period, its items and their grades,
    percent agreement and Krippendorff's alpha at `level` (None when undefined). Every period from the
    first to the last has a row."""
    _check_level(level, labels)
    data = _prepare(judgments, labels)
    if "time" not in data.frame.columns:
        raise ValueError("drift needs a time column")
    times = pd.to_datetime(data.frame["time"], utc=True)
    if times.isna().any():
        raise ValueError("every judgment needs a time")
    units = data.units
    columns = list(DRIFT_COLUMNS)
    if units.n == 0:
        return pd.DataFrame(columns=columns)
    nanos = times.dt.tz_convert(None).to_numpy().astype("datetime64[ns]").astype(np.int64)
    latest = np.full(len(data.item_ids), np.iinfo(np.int64).min)
    np.maximum.at(latest, data.item, nanos)
    periods = pd.DatetimeIndex(latest[units.index].astype("datetime64[ns]")).to_period(freq)
    every = pd.period_range(periods.min(), periods.max(), freq=freq)
    group = every.get_indexer(periods)
    n_items, n_judgments, agree, alpha = _group_alpha(data, group, len(every), level)
    with np.errstate(invalid="ignore", divide="ignore"):
        percent = agree / n_items
    return pd.DataFrame({
        "start": [p.start_time.date() for p in every],
        "end": [p.end_time.date() for p in every],
        "n_items": n_items,
        "n_judgments": n_judgments,
        "percent_agreement": _optional(percent),
        "alpha": _optional(alpha),
    }, columns=columns)


# ------------------------------------------------------------------------------------------ the gate

GATE_ADVICE = (
    "Rewrite the guidelines' edge cases where raters split (the worst queries below show where).",
    "Calibrate: grade a handful of pairs together, discuss each disagreement, and add them as examples.",
    "Re-judge the overlap pairs under the revised guidelines (a new round) and compute the report again.",
)
NO_OVERLAP = "no pair graded by two raters yet"


def gate_verdict(statistic: str, value: float | None, threshold: float, *, n_items: int, n_items_single: int = 0,
                 reason: str | None = None, overlap: str = "") -> Verdict:
    """A round's agreement gate: pass when `statistic` (its name, for the reasons) is defined and at least
    `threshold`, fail when it is defined and under it, not enough evidence when it is undefined.

    `n_items`: pairs graded by two raters or more (what the statistic is computed over); `n_items_single`: pairs
    with one grade; `reason`: why the value is undefined; `overlap`: the round's plan for pairs graded twice in
    words ("15% of its pairs get a second rater"), "" when it plans none. A fail's steps are the advice on
    disagreeing raters; not enough evidence names what is missing and how to get it."""
    over = f"over {n_items:,} pair{'s' * (n_items != 1)} graded by two raters or more"
    if value is not None:
        if value >= threshold:
            return decide(grounds=[f"{statistic} {value:.3f} is at least {threshold:.2f} {over}"])
        return decide(failures=[f"{statistic} {value:.3f} is under the gate of {threshold:.2f} {over}"], steps=GATE_ADVICE)
    if n_items == 0:
        single = f" ({n_items_single:,} pair{'s' * (n_items_single != 1)} graded once)" if n_items_single else ""
        if overlap:
            steps = [f"Keep grading: {overlap}; once a second rater has graded some of them, compute the report again."]
        else:
            steps = ["This round grades each pair once: re-judge a sample of its pairs in a refresh round, or give the "
                     "next round an overlap (10-20% of pairs graded twice) or two raters per pair."]
        return decide(missing=[NO_OVERLAP + single], steps=steps)
    return decide(missing=[f"{statistic} is undefined {over}" + (f": {reason}" if reason else "")],
                  steps=["Grade more pairs by two raters (pairs with different grades), then compute the report again."])

"""Vectorised measure computations over every query at once.

All queries' rankings are concatenated into flat arrays (query index ``seg``, 0-based rank ``pos``,
relevance code ``rel``) with per-query ``starts``/``lengths``. A relevance code is the qrels grade
(>= 0), ``NONPOOL`` (-1, not in the qrels) or ``UNJUDGED`` (-2, in the qrels with a negative grade),
exactly as trec_eval's ``form_res_rels.c`` builds its ``results_rel_list``.

Sums are taken with ``np.bincount(seg, weights=...)``, which adds in array order, so every per-query
value is the same floating-point sum trec_eval's loop computes; logarithms for discounts come from
the C library (``math.log2``), as in trec_eval. Functions that reproduce a trec_eval measure say so.
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from .measures import Measure

NONPOOL = -1
UNJUDGED = -2
C_NAN = -np.nan  # the NaN that C's 0.0 / 0.0 gives on x86 and ARM (sign bit set), printed "-nan"
MIN_GEO_MEAN = 0.00001  # trec_eval's floor for gm_map / gm_bpref
INFAP_EPSILON = 0.00001  # trec_eval's smoothing constant in infAP


class Context:
    """Flat arrays for one (qrels, run) evaluation, with per-relevance-level caches.

    ``seg`` is sorted (queries in order), so each query's rows are one slice. Most rows of a deep run
    are neither relevant nor judged: counts over the few rows that are come from binary searches in
    their row numbers, not from passes over every row.
    """

    def __init__(self, seg: np.ndarray, rel: np.ndarray, n_queries: int, qrels_seg: np.ndarray,
                 qrels_grade: np.ndarray, *, relevance_level: int, iprec_version: int = 10,
                 max_grade: int = 0, num_docs_in_coll: int = 0, placeholder: np.ndarray | None = None):
        self.E = n_queries
        self.seg = seg
        self.rel = rel
        bounds = np.searchsorted(seg, np.arange(n_queries + 1, dtype=seg.dtype)).astype(np.int64)
        self.starts = bounds[:-1]
        self.lengths = np.diff(bounds)
        self.qrels_seg = qrels_seg
        self.qrels_grade = qrels_grade
        self.level = relevance_level
        self.iprec_version = iprec_version
        self.max_grade = max_grade
        self.num_docs_in_coll = num_docs_in_coll
        # Queries of -c the run lacks, which trec_eval scores on a one-document placeholder ranking (a document
        # in no qrels, cut by -J and -M 0); the engine ranks nothing for them.
        self.placeholder = np.zeros(n_queries, dtype=bool) if placeholder is None else placeholder
        self._levels: dict[int, _Level] = {}

    def drop_levels(self) -> None:
        """Forget the per-level caches. Each points back at this context; without this the cycle keeps every
        flat array alive until Python's next garbage collection (evaluating a run in parts, one per part)."""
        self._levels.clear()

    def at(self, level: int | None) -> _Level:
        level = self.level if level is None else level
        if level not in self._levels:
            self._levels[level] = _Level(self, level)
        return self._levels[level]

    # --- helpers
    @cached_property
    def pos(self) -> np.ndarray:
        """Every row's 0-based rank in its query."""
        return np.arange(len(self.seg), dtype=np.int64) - np.repeat(self.starts, self.lengths)

    def pos_of(self, rows: np.ndarray) -> np.ndarray:
        return rows - self.starts[self.seg[rows]]

    def count(self, mask: np.ndarray) -> np.ndarray:
        return np.bincount(self.seg[mask], minlength=self.E).astype(np.int64)

    def count_rows(self, marked: np.ndarray) -> np.ndarray:
        """Per query: how many of the rows ``marked`` (sorted row numbers) it has."""
        return np.bincount(self.seg[marked], minlength=self.E).astype(np.int64)

    def count_through(self, marked: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Per row of ``rows``: how many ``marked`` rows (sorted row numbers) of its query come up to
        and including it."""
        return np.searchsorted(marked, rows, side="right") - np.searchsorted(marked, self.starts[self.seg[rows]])

    def count_in_top(self, marked: np.ndarray, k: int | np.ndarray) -> np.ndarray:
        """Per query: how many ``marked`` rows lie in its top k ranks (all of them if fewer were retrieved)."""
        depth = np.minimum(self.lengths, k)
        return np.searchsorted(marked, self.starts + depth) - np.searchsorted(marked, self.starts)

    @cached_property
    def discounts(self) -> np.ndarray:
        """log2(rank + 1) for 0-based positions, from the C library like trec_eval."""
        longest = int(max(self.lengths.max(initial=0), np.bincount(self.qrels_seg, minlength=1).max(initial=0))) + 2
        return np.array([math.log2(i + 2) for i in range(longest)])

    @cached_property
    def qrels_counts(self) -> np.ndarray:
        return np.bincount(self.qrels_seg, minlength=self.E)


class _Level:
    """Everything that depends on the relevance level. ``*_rows`` are sorted row numbers."""

    def __init__(self, ctx: Context, level: int):
        self.ctx = ctx
        self.level = level
        self.rel_rows = np.flatnonzero(ctx.rel >= level)
        self.rel_seg = ctx.seg[self.rel_rows]
        self.rel_pos = self.rel_rows - ctx.starts[self.rel_seg]
        # How many relevant rows of its query each relevant row is, counting from 1.
        self.rel_running = np.arange(1, len(self.rel_rows) + 1) - np.searchsorted(self.rel_seg, self.rel_seg)
        self.num_rel_ret = np.bincount(self.rel_seg, minlength=ctx.E).astype(np.int64)
        grade = ctx.qrels_grade
        self.num_rel = np.bincount(ctx.qrels_seg[(grade >= 0) & (grade >= level)], minlength=ctx.E).astype(np.int64)
        self.num_nonrel = np.bincount(ctx.qrels_seg[(grade >= 0) & (grade < level)], minlength=ctx.E).astype(np.int64)

    def in_top(self, k: int | np.ndarray) -> np.ndarray:
        """Per query: relevant rows in the top k."""
        return self.ctx.count_in_top(self.rel_rows, k)

    @cached_property
    def judged_rel(self) -> np.ndarray:
        rel = self.ctx.rel
        return np.flatnonzero((rel >= 0) & (rel >= self.level))

    @cached_property
    def judged_nonrel(self) -> np.ndarray:
        rel = self.ctx.rel
        return np.flatnonzero((rel >= 0) & (rel < self.level))

    @cached_property
    def ap_terms(self) -> np.ndarray:
        return self.rel_running / (self.rel_pos + 1.0)

    @cached_property
    def interpolated(self) -> tuple[np.ndarray, np.ndarray]:
        """Interpolated precision at the r-th relevant doc: max precision at any rank at or below it.

        Returns the values for every relevant retrieved row (grouped by query, in rank order) and the
        index of each query's first such row.
        """
        ctx = self.ctx
        return (_segmented_suffix_max(self.ap_terms, self.rel_seg, ctx.E),
                np.searchsorted(self.rel_seg, np.arange(ctx.E)))


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.zeros(np.broadcast(num, den).shape)
    np.divide(num, den, out=out, where=den != 0)
    return out


def _segmented_suffix_max(values: np.ndarray, seg: np.ndarray, n_segments: int) -> np.ndarray:
    """For each element, the max over the rest of its segment (itself included); exact."""
    if values.size == 0:
        return values.copy()
    distinct, rank = np.unique(values, return_inverse=True)
    keys = (n_segments - 1 - seg.astype(np.int64)) * (len(distinct) + 1) + rank
    best = np.maximum.accumulate(keys[::-1])[::-1]
    return distinct[best % (len(distinct) + 1)]


# ------------------------------------------------------------------------------------------ measures


def compute(ctx: Context, m: Measure) -> np.ndarray:
    """Per-query values of one measure, as float64 (counts too)."""
    return _COMPUTE[m.name](ctx, m)


def _num_q(ctx, m):
    return np.ones(ctx.E)


def _num_ret(ctx, m):
    return ctx.lengths.astype(np.float64)


def _num_rel(ctx, m):
    return ctx.at(m.rel).num_rel.astype(np.float64)


def _num_rel_ret(ctx, m):
    return ctx.at(m.rel).num_rel_ret.astype(np.float64)


def _ap(ctx, m):
    """trec_eval m_map.c / m_map_cut.c: sum of P@rank at each relevant doc (ranks <= k), over R."""
    lv = ctx.at(m.rel)
    terms, seg = lv.ap_terms, lv.rel_seg
    if m.cutoff is not None:
        inside = lv.rel_pos < m.cutoff
        terms, seg = terms[inside], seg[inside]
    return _safe_div(np.bincount(seg, weights=terms, minlength=ctx.E), lv.num_rel)


def _rprec(ctx, m):
    """trec_eval m_Rprec.c (and Rprec_mult: precision at rank round(mult * R))."""
    lv = ctx.at(m.rel)
    if m.param is None:
        return _safe_div(lv.in_top(lv.num_rel), lv.num_rel)
    cut = (m.param * lv.num_rel + 0.9).astype(np.int64)
    return _safe_div(lv.in_top(cut), cut)


def _bpref(ctx, m):
    """trec_eval m_bpref.c: (1/R) sum over judged relevant of 1 - min(n, R) / min(N, R)."""
    lv = ctx.at(m.rel)
    nonrel_above = ctx.count_through(lv.judged_nonrel, lv.judged_rel)
    seg = ctx.seg[lv.judged_rel]
    R = lv.num_rel[seg]
    N = lv.num_nonrel[seg]
    terms = np.where(nonrel_above > 0,
                     1.0 - _safe_div(np.minimum(nonrel_above, R), np.minimum(N, R)), 1.0)
    return _safe_div(np.bincount(seg, weights=terms, minlength=ctx.E), lv.num_rel)


def _rr(ctx, m):
    """trec_eval m_recip_rank.c: 1 / rank of the first relevant document (within the cutoff)."""
    lv = ctx.at(m.rel)
    first = lv.rel_running == 1
    if m.cutoff is not None:
        first &= lv.rel_pos < m.cutoff
    out = np.zeros(ctx.E)
    out[lv.rel_seg[first]] = 1.0 / (lv.rel_pos[first] + 1.0)
    return out


def _p(ctx, m):
    """trec_eval m_P.c: relevant in the top k divided by k."""
    lv = ctx.at(m.rel)
    return lv.in_top(m.cutoff) / float(m.cutoff)


def _r(ctx, m):
    """trec_eval m_recall.c: relevant in the top k divided by R."""
    lv = ctx.at(m.rel)
    return _safe_div(lv.in_top(m.cutoff), lv.num_rel)


def _rel_p(ctx, m):
    """trec_eval m_rel_P.c: relevant in the top k divided by min(k, R)."""
    lv = ctx.at(m.rel)
    return _safe_div(lv.in_top(m.cutoff), np.minimum(lv.num_rel, m.cutoff))


def _success(ctx, m):
    """trec_eval m_success.c: 1 if a relevant document is in the top k."""
    lv = ctx.at(m.rel)
    return (lv.in_top(m.cutoff) > 0).astype(np.float64)


def _set_p(ctx, m):
    lv = ctx.at(m.rel)
    return _safe_div(lv.num_rel_ret, ctx.lengths)


def _set_r(ctx, m):
    lv = ctx.at(m.rel)
    return _safe_div(lv.num_rel_ret, lv.num_rel)


def _set_rel_p(ctx, m):
    lv = ctx.at(m.rel)
    return _safe_div(lv.num_rel_ret, np.minimum(ctx.lengths, lv.num_rel))


def _set_ap(ctx, m):
    return _set_p(ctx, m) * _set_r(ctx, m)


def _set_f(ctx, m):
    """trec_eval m_set_F.c: (1 + b^2) P R / (b^2 P + R), 0 when nothing relevant is retrieved."""
    beta = 1.0 if m.param is None else m.param
    p, r = _set_p(ctx, m), _set_r(ctx, m)
    return _safe_div((beta * beta + 1.0) * p * r, beta * beta * p + r)


def _num_nonrel_judged_ret(ctx, m):
    return ctx.count_rows(ctx.at(m.rel).judged_nonrel).astype(np.float64)


def _infap(ctx, m):
    """trec_eval m_infap.c, term for term (Yilmaz & Aslam's inferred AP)."""
    lv = ctx.at(m.rel)
    rel_rows = lv.judged_rel
    rel_so_far = ctx.count_through(rel_rows, rel_rows) - 1
    nonrel = ctx.count_through(lv.judged_nonrel, rel_rows)
    unjudged = ctx.count_through(np.flatnonzero(ctx.rel == UNJUDGED), rel_rows)
    j = ctx.pos_of(rel_rows).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = (1.0 / (j + 1.0)
                 + (j / (j + 1.0)) * ((rel_so_far + nonrel + unjudged) / j)
                 * ((rel_so_far + INFAP_EPSILON) / (rel_so_far + nonrel + 2 * INFAP_EPSILON)))
    terms = np.where(j == 0, 1.0, terms)
    sums = np.bincount(ctx.seg[rel_rows], weights=terms, minlength=ctx.E)
    return _safe_div(sums, lv.num_rel)


def _iprec_cutoffs(ctx, lv, level: float) -> np.ndarray:
    if ctx.iprec_version == 9:
        return (level * lv.num_rel + 0.9).astype(np.int64)
    # C lround: halves away from zero.
    return np.floor(level * lv.num_rel + 0.5).astype(np.int64)


def _iprec_values(ctx, lv, level: float) -> np.ndarray:
    """trec_eval m_iprec_at_recall.c for one recall level."""
    values, first = lv.interpolated
    cut = _iprec_cutoffs(ctx, lv, level)
    out = np.zeros(ctx.E)
    has = (cut <= lv.num_rel_ret) & (lv.num_rel_ret > 0)
    index = first[has] + np.maximum(cut[has], 1) - 1
    out[has] = values[index]
    # With nothing ranked (-J, -M 0) trec_eval starts from precision 0/0 and gives it to the levels it reaches.
    out[(ctx.lengths == 0) & ~ctx.placeholder & (cut <= 0)] = C_NAN
    return out


def _iprec(ctx, m):
    return _iprec_values(ctx, ctx.at(m.rel), m.param)


def _11pt(ctx, m):
    """trec_eval m_11pt_avg.c: the mean of interpolated precision at the recall levels."""
    lv = ctx.at(m.rel)
    levels = m.params or (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    total = np.zeros(ctx.E)
    # trec_eval adds from the highest recall level down.
    for level in sorted(levels, reverse=True):
        total = total + _iprec_values(ctx, lv, level)
    return total / len(levels)


def _gain_table(ctx, m) -> tuple[np.ndarray, int]:
    """Gains indexed by code + 2 (codes -2, -1, 0.. max grade): raw grades unless overridden."""
    top = max(ctx.max_grade, max((lvl for lvl, _ in m.gains or ()), default=0))
    table = np.zeros(top + 3)
    table[2:] = np.arange(top + 1)
    for level, gain in m.gains or ():
        if level >= -2:
            table[level + 2] = gain
    return table, top


def _ndcg(ctx, m):
    """trec_eval m_ndcg.c (no cutoff, optional custom gains) and m_ndcg_cut.c (cutoff, raw grades)."""
    if m.cutoff is not None or m.gains is None:
        gains_of = np.arange(ctx.max_grade + 3, dtype=np.float64) - 2
        gains_of[:2] = 0.0
    else:
        gains_of, _ = _gain_table(ctx, m)
    rel = ctx.rel
    if gains_of[:3].any():  # a custom gain for unjudged, missing or grade-0 documents
        rows = np.flatnonzero(gains_of[np.minimum(rel, len(gains_of) - 3) + 2])
    else:
        rows = np.flatnonzero(rel > 0)
    gain = gains_of[np.minimum(rel[rows], len(gains_of) - 3) + 2]
    pos = ctx.pos_of(rows)
    inside = gain != 0
    if m.cutoff is not None:
        inside &= pos < m.cutoff
    rows, gain, pos = rows[inside], gain[inside], pos[inside]
    dcg = np.bincount(ctx.seg[rows], weights=gain / ctx.discounts[pos], minlength=ctx.E)
    ideal_gain, seg = _ideal_gains(ctx, gains_of, None if m.cutoff is not None else m)
    start = np.searchsorted(seg, np.arange(ctx.E))
    rank = np.arange(len(seg)) - start[seg]
    inside = np.ones(len(seg), dtype=bool) if m.cutoff is None else rank < m.cutoff
    idcg = np.bincount(seg[inside], weights=ideal_gain[inside] / ctx.discounts[rank[inside]], minlength=ctx.E)
    return _safe_div(dcg, idcg)


def _ideal_gains(ctx, gains_of: np.ndarray, m: Measure | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ideal ordering: every judged document with a positive gain, best first, and its query. With custom
    gains (``m.gains``), in trec_eval's own order of gain levels (see :func:`_trec_ideal`)."""
    if m is not None and m.gains is not None:
        return _custom_ideal_gains(ctx, m)
    grade = ctx.qrels_grade
    judged = grade >= 0
    ideal_gain = gains_of[np.minimum(grade[judged], len(gains_of) - 3) + 2]
    seg = ctx.qrels_seg[judged]
    keep = ideal_gain > 0
    ideal_gain, seg = ideal_gain[keep], seg[keep]
    order = np.lexsort((-ideal_gain, seg))
    return ideal_gain[order], seg[order]


def _custom_ideal_gains(ctx, m: Measure) -> tuple[np.ndarray, np.ndarray]:
    judged = ctx.qrels_grade >= 0
    order = np.argsort(ctx.qrels_seg[judged], kind="stable")
    grade, seg = ctx.qrels_grade[judged][order], ctx.qrels_seg[judged][order]
    bounds = np.searchsorted(seg, np.arange(ctx.E + 1))
    pairs = _gain_pairs(m)
    parts = [_trec_ideal(pairs, np.bincount(grade[bounds[q]:bounds[q + 1]])) for q in range(ctx.E)]
    ideal = np.concatenate(parts) if parts else np.zeros(0)
    return ideal, np.repeat(np.arange(ctx.E), [len(p) for p in parts])


def _gain_pairs(m: Measure) -> list[tuple[int, float]]:
    """(level, gain) pairs in the order given on trec_eval's command line (``ndcg.2=3,1=0.5``)."""
    if m.trec_printable:
        return [(int(level), float(gain)) for level, _, gain in
                (pair.partition("=") for pair in m.trec_printable.split(","))]
    return list(m.gains)


def _trec_ideal(pairs: list[tuple[int, float]], counts: np.ndarray) -> np.ndarray:
    """One query's ideal gains as trec_eval's gain_init.c and its loops make them: the given levels, then the
    judged levels 0..max not given (gain = level), sorted by glibc's qsort (a stable merge sort) with trec_eval's
    comparator, which truncates the difference of two gains to an int (so 0.5 and 0 compare equal); then walked
    from the top level down, each level with documents repeated as often, stopping at the first gain <= 0."""
    levels = len(np.flatnonzero(counts)) and int(np.flatnonzero(counts)[-1]) + 1
    table = [[level, gain, 0] for level, gain in pairs]
    for level in range(levels):
        given = next((entry for entry in table if entry[0] == level), None)
        if given is not None:
            given[2] = int(counts[level])
        else:
            table.append([level, float(level), int(counts[level])])
    table = c_qsort(table, lambda a, b: int(a[1] - b[1]))
    if not table or table[-1][1] <= 0.0:
        return np.zeros(0)
    out = []
    for _, gain, count in reversed(table):
        if count:
            if gain <= 0.0:
                break
            out += [gain] * count
    return np.array(out)


def c_qsort(items: list, compare) -> list:
    """The order glibc's qsort (2.36: msort, a top-down merge sort, left half n // 2, ties to the left) gives
    with a C comparator, consistent or not (trec_eval's gain comparator truncates, its score one meets NaN)."""
    if len(items) <= 1:
        return list(items)
    left, right = c_qsort(items[:len(items) // 2], compare), c_qsort(items[len(items) // 2:], compare)
    out, i, j = [], 0, 0
    while i < len(left) and j < len(right):
        if compare(left[i], right[j]) <= 0:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    return out + left[i:] + right[j:]


def _rbp(ctx, m):
    """trec_eval m_rbp.c: (1-p) sum gain_i p^i, gains scaled to [0,1] when a grade exceeds 1."""
    p = 0.9 if m.param is None else m.param
    rel = ctx.rel
    longest = int(ctx.lengths.max(initial=0))
    powers = np.concatenate([[1.0], np.cumprod(np.full(max(longest - 1, 0), p))])
    top = np.zeros(ctx.E)
    judged = ctx.qrels_grade >= 0
    np.maximum.at(top, ctx.qrels_seg[judged], ctx.qrels_grade[judged].astype(np.float64))
    gain = np.where(rel > 0, rel, 0).astype(np.float64)
    scale = top[ctx.seg]
    gain = np.where(scale > 1, gain / np.where(scale > 1, scale, 1.0), gain)
    mask = gain != 0
    sums = np.bincount(ctx.seg[mask], weights=gain[mask] * powers[ctx.pos[mask]], minlength=ctx.E)
    return (1.0 - p) * sums


def _unjudged(ctx, m):
    """trec_eval m_unjudged.c: docs in the top k missing from the qrels or unjudged, over k."""
    mask = (ctx.rel < 0) & (ctx.pos < m.cutoff)
    return ctx.count(mask) / float(m.cutoff)


def _share_of_ranked(ctx, m, mask: np.ndarray) -> np.ndarray:
    """The share of the top min(k, retrieved) rows (every retrieved row without a cutoff) in ``mask``."""
    if m.cutoff is None:
        return _safe_div(ctx.count(mask), ctx.lengths)
    return _safe_div(ctx.count(mask & (ctx.pos < m.cutoff)), np.minimum(ctx.lengths, m.cutoff))


def _unjudged_share(ctx, m):
    """Docs missing from the qrels or unjudged, over the documents ranked (not over k, as unj does)."""
    return _share_of_ranked(ctx, m, ctx.rel < 0)


def _judged(ctx, m):
    """ir_measures Judged@k (its judged provider, since PR #48): docs in the qrels over min(k, retrieved)."""
    return _share_of_ranked(ctx, m, ctx.rel != NONPOOL)


def _err(ctx, m):
    """Expected reciprocal rank at k (Chapelle et al. 2009): gdeval's loop with 2^max for its 2^4. The chance of
    reaching each rank is a product within its own query (a segmented scan), so no digit is lost to the queries
    before it, however long the run."""
    top = ctx.max_grade if m.param is None else int(m.param)
    if top <= 0:
        return np.zeros(ctx.E)
    inside = np.flatnonzero(ctx.pos < m.cutoff)
    grade = np.where(ctx.rel > 0, ctx.rel, 0)[inside].astype(np.float64)
    stop = (np.exp2(grade) - 1.0) / np.exp2(top)
    pos = ctx.pos[inside]
    reach = np.ones(len(inside))
    reach[1:] = 1.0 - stop[:-1]  # the chance of going on from the rank before...
    reach[pos == 0] = 1.0  # ...except at the top of a query
    step = 1
    while step <= pos.max(initial=0):  # ...then products over 2, 4, 8... ranks (Hillis-Steele), within each query
        later = np.flatnonzero(pos >= step)
        reach[later] = reach[later] * reach[later - step]
        step *= 2
    return np.bincount(ctx.seg[inside], weights=stop * reach / (pos + 1.0), minlength=ctx.E)


def _hit_rate(ctx, m):
    return _success(ctx, m)


# ------------------------------------------------------------------ trec_eval's experimental measures


def _placeholder_rows(ctx) -> np.ndarray:
    """Per query, the documents trec_eval ranks: the engine's, plus its placeholder (one, in no qrels)."""
    return ctx.lengths + ctx.placeholder


def _relstring(ctx, m):
    """trec_eval m_relstring.c: the first len codes as characters (per query only; an object array of text)."""
    length = max(10 if m.params is None else int(m.params[0]), 0)
    chars = np.array(list("<.-0123456789>"))
    shown = np.flatnonzero(ctx.pos < length)
    code = chars[np.clip(ctx.rel[shown], -3, 10) + 3]
    bounds = np.searchsorted(ctx.seg[shown], np.arange(ctx.E + 1))
    out = np.array(["".join(code[bounds[q]:bounds[q + 1]]) for q in range(ctx.E)], dtype=object)
    # trec_eval clears the default relstring of a placeholder query, and prints the placeholder's '-' otherwise.
    if m.params is not None and length > 0:
        out[ctx.placeholder] = "-"
    return out


def _utility(ctx, m):
    """trec_eval m_utility.c: p1*a + p2*b + p3*c + p4*(N + a - retrieved - R), in its order of operations."""
    p1, p2, p3, p4 = m.params or (1.0, -1.0, 0.0, 0.0)
    lv = ctx.at(m.rel)
    ret = ctx.lengths + (ctx.placeholder if m.params is not None else 0)  # the default is zeroed for placeholders
    a, R = lv.num_rel_ret.astype(np.float64), lv.num_rel
    return (p1 * a + p2 * (ret - lv.num_rel_ret) + p3 * (R - lv.num_rel_ret)
            + p4 * (ctx.num_docs_in_coll + lv.num_rel_ret - ret - R))


def _bin_g(ctx, m):
    """trec_eval m_binG.c: (1/R) sum over relevant retrieved of 1/log2(3 + rank0 - relevant so far)."""
    lv = ctx.at(m.rel)
    terms = 1.0 / ctx.discounts[lv.rel_pos - lv.rel_running + 1]
    return _safe_div(np.bincount(lv.rel_seg, weights=terms, minlength=ctx.E), lv.num_rel)


def _rbp_resid(ctx, m):
    """trec_eval m_rbp_resid.c: p^n + (1-p) sum over unjudged retrieved of p^rank0, 0 without unjudged."""
    p = 0.9 if m.param is None else m.param
    out = np.zeros(ctx.E)
    for q in range(ctx.E):
        rel = ctx.rel[ctx.starts[q]:ctx.starts[q] + ctx.lengths[q]]
        unjudged = np.flatnonzero(rel < 0)
        if m.param is not None and ctx.placeholder[q]:  # the placeholder is unjudged
            unjudged, n = np.zeros(1, np.int64), 1
        else:
            n = len(rel)
        if len(unjudged):
            powers = _powers(p, n + 1)
            out[q] = powers[n] + (1 - p) * np.cumsum(powers[unjudged])[-1]
    return out


def _powers(p: float, n: int) -> np.ndarray:
    """1, p, p*p, ... (n values), each the product of the one before and p, as trec_eval's loops."""
    return np.concatenate([[1.0], np.cumprod(np.full(max(n - 1, 0), p))])


def _query_gains(ctx, m):
    """For trec_eval's G, Rndcg and ndcg_rel (gain_init.c): per query, the retrieved docs' gains in rank order
    and its ideal gains (positive ones, best first)."""
    table, top = _gain_table(ctx, m)
    gain = table[np.minimum(ctx.rel, top) + 2]
    ideal, seg = _ideal_gains(ctx, table, m)
    bounds = np.searchsorted(seg, np.arange(ctx.E + 1))
    for q in range(ctx.E):
        start = ctx.starts[q]
        yield q, gain[start:start + ctx.lengths[q]], ideal[bounds[q]:bounds[q + 1]]


def _g(ctx, m):
    """trec_eval m_G.c: sum gain_i / log2(2 + C_i - S_i) over the ideal total, where S_i is the gain retrieved
    through rank i and C_i the sum of max(ideal gain_j, 1) for j <= i."""
    out = np.zeros(ctx.E)
    for q, gain, ideal in _query_gains(ctx, m):
        if not len(ideal):
            continue
        n = len(gain)
        cost = np.ones(n)
        cost[:min(n, len(ideal))] = np.maximum(ideal[:n], 1.0)
        spent = (2 + np.cumsum(cost)) - np.cumsum(gain)
        nonzero = np.flatnonzero(gain)
        terms = [gain[i] / math.log2(spent[i]) for i in nonzero]
        out[q] = (np.cumsum(terms)[-1] if terms else 0.0) / np.cumsum(ideal)[-1]
    return out


def _ndcg_rel(ctx, m):
    """trec_eval m_ndcg_rel.c: nDCG at each retrieved doc with a positive gain (the ideal DCG stops growing with
    the ideal ranking), plus DCG at the end over the ideal DCG for each positive-gain doc not retrieved, over
    the number of positive-gain docs; 0 unless that sum is positive."""
    out = np.zeros(ctx.E)
    for q, gain, ideal in _query_gains(ctx, m):
        n, size = len(gain), len(ideal)
        dcg = np.cumsum(gain / ctx.discounts[:n]) if n else np.zeros(1)
        idcg = np.cumsum(ideal / ctx.discounts[:size]) if size else np.zeros(1)
        found = np.flatnonzero(gain > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = list(dcg[found] / idcg[np.minimum(found, max(size - 1, 0))])
            terms.append(float(size - len(found)) * (dcg[-1] if n else 0.0) / idcg[-1])
        total = np.cumsum([0.0] + terms)[-1]
        if total > 0.0:
            out[q] = total / size
    return out


def _rndcg(ctx, m):
    """trec_eval m_Rndcg.c: nDCG at each rank where the ideal gain changes (DCG of the ranks above over the ideal
    DCG above), and at the end of the ranking when it is more than one longer than the ideal one; averaged.
    0 when nothing is relevant; NaN (as trec_eval's 0/0) when no ideal gain is positive."""
    num_rel = ctx.at(m.rel).num_rel
    out = np.zeros(ctx.E)
    for q, gain, ideal in _query_gains(ctx, m):
        if not num_rel[q]:
            continue
        n, size = len(gain), len(ideal)
        dcg = np.concatenate([[0.0], np.cumsum(gain / ctx.discounts[:n])])
        idcg = np.concatenate([[0.0], np.cumsum(ideal / ctx.discounts[:size])])
        changes = [c for c in range(1, size) if ideal[c] != ideal[c - 1]] + ([size] if size else [])
        terms = [dcg[min(c, n)] / idcg[c] for c in changes]
        if n > size + 1 and size:
            terms.append(dcg[n] / idcg[size])
        out[q] = np.cumsum(terms)[-1] / len(terms) if terms else C_NAN
    return out


# --- ranx's F1 and DCG family (ranx 0.3.21 metrics/f1.py, ndcg.py): grades below the relevance level gain 0.

MAX_EXPONENTIAL_GRADE = 1023  # 2^1024 overflows a float64


def _f1(ctx, m):
    """ranx f1: 2 P R / (P + R) with P = hits@k / k and R = hits@k / R; k is the number retrieved without a cutoff."""
    lv = ctx.at(m.rel)
    k = ctx.lengths if m.cutoff is None else m.cutoff
    hits = lv.in_top(k)
    precision, recall = _safe_div(hits, k), _safe_div(hits, lv.num_rel)
    return _safe_div(2.0 * precision * recall, precision + recall)


def _gain(grades: np.ndarray, exponential: bool) -> np.ndarray:
    grades = grades.astype(np.float64)
    return np.exp2(grades) - 1.0 if exponential else grades


def _discounted_gain(ctx, m, exponential: bool) -> np.ndarray:
    """Per query: the DCG of the ranking's relevant documents in the top k (all without a cutoff)."""
    lv = ctx.at(m.rel)
    grades = ctx.rel[lv.rel_rows]
    keep = grades > 0
    if m.cutoff is not None:
        keep &= lv.rel_pos < m.cutoff
    pos = lv.rel_pos[keep]
    return np.bincount(lv.rel_seg[keep], weights=_gain(grades[keep], exponential) / ctx.discounts[pos],
                       minlength=ctx.E)


def _ideal_discounted_gain(ctx, m, exponential: bool) -> np.ndarray:
    """Per query: the DCG of its relevant qrels documents ranked best first (ranx's idcg)."""
    grades = ctx.qrels_grade
    keep = (grades > 0) & (grades >= ctx.at(m.rel).level)
    seg, gain = ctx.qrels_seg[keep], _gain(grades[keep], exponential)
    order = np.lexsort((-gain, seg))
    seg, gain = seg[order], gain[order]
    rank = np.arange(len(seg)) - np.searchsorted(seg, seg)
    inside = slice(None) if m.cutoff is None else rank < m.cutoff
    return np.bincount(seg[inside], weights=gain[inside] / ctx.discounts[rank[inside]], minlength=ctx.E)


def _dcg(ctx, m):
    return _discounted_gain(ctx, m, exponential=False)


def _dcg_burges(ctx, m):
    return _discounted_gain(ctx, m, exponential=True)


def _ndcg_burges(ctx, m):
    return _safe_div(_discounted_gain(ctx, m, True), _ideal_discounted_gain(ctx, m, True))


_COMPUTE = {
    "NumQ": _num_q, "NumRet": _num_ret, "NumRel": _num_rel, "NumRelRet": _num_rel_ret, "AP": _ap,
    "GMAP": _ap, "Rprec": _rprec, "Bpref": _bpref, "GMBpref": _bpref, "RR": _rr, "P": _p, "R": _r,
    "infAP": _infap, "11pt_avg": _11pt, "nDCG": _ndcg, "RelP": _rel_p, "Success": _success, "SetP": _set_p,
    "SetRelP": _set_rel_p, "SetR": _set_r, "SetAP": _set_ap, "SetF": _set_f,
    "NumNonrelJudgedRet": _num_nonrel_judged_ret, "IPrec": _iprec, "RBP": _rbp, "Unjudged": _unjudged,
    "UnjudgedShare": _unjudged_share, "Judged": _judged, "ERR": _err, "HitRate": _hit_rate,
    "RelString": _relstring, "Utility": _utility, "BinG": _bin_g, "G": _g, "nDCGRel": _ndcg_rel, "RnDCG": _rndcg,
    "RBPResid": _rbp_resid, "F1": _f1, "DCG": _dcg, "DCG_burges": _dcg_burges, "nDCG_burges": _ndcg_burges,
}

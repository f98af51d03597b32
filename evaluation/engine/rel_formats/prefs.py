"""Preference judgments (trec_eval's ``-R prefs`` and ``-R qrels_prefs``) and the ``all_prefs`` measures.

A prefs file holds lines ``qid jg jsg docno rel_level``: within one judgment subgroup (jsg) a document with a
higher level is preferred to every document with a lower one; the subgroups of one judgment group (jg) are one
person's partial order, closed under transitivity and required to be consistent; different groups may disagree.
A ``qrels_prefs`` file is a qrels file read the same way (``qid jg docno rel``, one subgroup per group).

Each measure follows trec_eval 10.0 (``form_prefs_counts.c``, ``m_prefs_*.c``) exactly, its quirks included;
``rel_level`` 0.0 means non-relevant. Documents are placed by the run's ranking (score descending, ties by doc
id ascending, as trec_eval does for preferences) and a preference A > B is *fulfilled* when A ranks above B or
only A is retrieved; ``_ret`` measures count only pairs with both retrieved, ``_imp`` ones pairs with at least
one retrieved, the others every pair (an unretrieved pair counts as a failure).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import EngineInputError
from . import PREFS_MEASURES
from .lines import TextLine, read_fields

COUNT_MEASURES = frozenset(PREFS_MEASURES[:3])  # summed over queries, not averaged
# One query's preference pairs held at once (16 bytes each, and again while they are counted): trec_eval holds
# a num_judged x num_judged counts matrix per query and a bytes matrix per judgment group, so it grows as fast.
MAX_QUERY_PAIRS = 25_000_000


@dataclass(frozen=True)
class Preference:
    """One line of a prefs file: ``docno`` has ``level`` in subgroup ``jsg`` of judgment group ``jg``."""

    jg: str
    jsg: str
    docno: str
    level: float


def read_prefs(path: str) -> dict[str, list[Preference]]:
    """Read a ``qid jg jsg docno rel_level`` file into each query's preferences.

    Lines starting with ``#`` are comments. A line with another number of fields, or a level that is not a
    finite non-negative number, stops the reading with ``path:line``.
    """
    return _group(_preference(line, jsg=None) for line in read_fields(path, 5))


def read_qrels_prefs(path: str) -> dict[str, list[Preference]]:
    """Read a qrels file (``qid jg docno rel``) as preferences: one subgroup per judgment group."""
    return _group(_preference(line, jsg="0") for line in read_fields(path, 4))


def _preference(line: TextLine, jsg: str | None) -> tuple[str, Preference]:
    fields = line.fields
    level = line.number(fields[-1], "relevance level")
    if not math.isfinite(level) or level < 0:
        raise line.error(f"relevance level must be a finite number >= 0, found {fields[-1]!r}")
    if jsg is None:
        return fields[0], Preference(fields[1], fields[2], fields[3], level)
    return fields[0], Preference(fields[1], jsg, fields[2], level)


def _group(rows: Iterable[tuple[str, Preference]]) -> dict[str, list[Preference]]:
    queries: dict[str, list[Preference]] = {}
    for qid, preference in rows:
        queries.setdefault(qid, []).append(preference)
    return dict(sorted(queries.items(), key=lambda item: item[0].encode()))


@dataclass
class JudgmentGroup:
    """One judgment group's preferences over documents named by their place (``docid rank``).

    A place below ``num_judged_ret`` is a retrieved document's rank among the retrieved judged ones; the
    unretrieved judged documents follow in doc id order. ``better[k]`` is preferred to ``worse[k]``.
    ``classes`` holds each level's places (highest level first) when the group has one subgroup, as trec_eval
    keeps it; with several subgroups it is None and ``levels`` maps a place to its level.
    """

    better: np.ndarray
    worse: np.ndarray
    classes: list[np.ndarray] | None
    levels: dict[int, float] = field(default_factory=dict)
    num_rel: int = 0
    num_rel_ret: int = 0
    num_nonrel: int = 0
    num_nonrel_ret: int = 0


@dataclass
class Counts:
    """Preferences of a group by outcome; ``possible_*`` include the fulfilled ones."""

    fulfilled_ret: int
    possible_ret: int
    fulfilled_imp: int
    possible_imp: int
    possible_notoccur: int

    @classmethod
    def of(cls, better: np.ndarray, worse: np.ndarray, num_judged_ret: int) -> Counts:
        ranked_first = better < worse
        both_ret = np.maximum(better, worse) < num_judged_ret
        one_ret = ~both_ret & (np.minimum(better, worse) < num_judged_ret)
        fulfilled_ret = int(np.count_nonzero(ranked_first & both_ret))
        fulfilled_imp = int(np.count_nonzero(ranked_first & one_ret))
        return cls(fulfilled_ret, int(np.count_nonzero(both_ret)), fulfilled_imp, int(np.count_nonzero(one_ret)),
                   len(better) - int(np.count_nonzero(both_ret | one_ret)))

    @property
    def fulfilled(self) -> int:
        return self.fulfilled_ret + self.fulfilled_imp

    @property
    def possible(self) -> int:
        return self.possible_ret + self.possible_imp + self.possible_notoccur


@dataclass
class QueryPrefs:
    """A query's judgment groups placed against one ranking, and their counts."""

    num_judged: int
    num_judged_ret: int
    groups: list[JudgmentGroup]
    counts: list[Counts]


def place_preferences(qid: str, preferences: Sequence[Preference], ranking: Sequence[str], *,
                      source: str | None = None) -> QueryPrefs:
    """Place a query's preferences against ``ranking`` (doc ids best first, already cut at ``-M``).

    A judgment group that contradicts itself, or a query with more than MAX_QUERY_PAIRS preference pairs, is an
    EngineInputError naming ``source`` (the file), the query, the group and the documents.
    """
    judged = {p.docno for p in preferences}
    retrieved = [doc for doc in ranking if doc in judged]
    place = {doc: i for i, doc in enumerate(retrieved)}
    for doc in sorted(judged - place.keys(), key=str.encode):
        place[doc] = len(place)
    by_group: dict[str, list[Preference]] = {}
    for p in preferences:
        by_group.setdefault(p.jg, []).append(p)
    names = sorted(place, key=place.__getitem__)
    groups = []
    held = 0
    for jg in sorted(by_group, key=str.encode):
        held += _pairs_bound(by_group[jg])
        if held > MAX_QUERY_PAIRS:
            raise EngineInputError(f"query {qid!r}: more than {MAX_QUERY_PAIRS:,} preference pairs (judgment groups "
                                   f"up to {jg!r}); split the query's judgments", path=source)
        try:
            groups.append(_judgment_group(by_group[jg], place, len(retrieved)))
        except _Contradiction as contradiction:
            raise EngineInputError(f"query {qid!r}, judgment group {jg!r}: {contradiction.describe(names)}",
                                   path=source) from None
    counts = [Counts.of(g.better, g.worse, len(retrieved)) for g in groups]
    return QueryPrefs(len(place), len(retrieved), groups, counts)


def _pairs_bound(prefs: list[Preference]) -> int:
    """How many pairs a group will hold at most: its pairs across levels with one subgroup, else the square of
    its documents (the closure's matrix), counted before anything of that size is made."""
    if len({p.jsg for p in prefs}) > 1:
        return len({p.docno for p in prefs}) ** 2
    per_level: dict[float, int] = {}
    for p in prefs:
        per_level[p.level] = per_level.get(p.level, 0) + 1
    return (len(prefs) ** 2 - sum(n * n for n in per_level.values())) // 2


class _Contradiction(Exception):
    def __init__(self, template: str, *places: int):
        super().__init__(template)
        self.template, self.places = template, places

    def describe(self, names: list[str]) -> str:
        return self.template.format(*(repr(names[place]) for place in self.places))


def _judgment_group(prefs: list[Preference], place: dict[str, int], num_judged_ret: int) -> JudgmentGroup:
    subgroups: dict[str, list[tuple[float, int]]] = {}
    for p in prefs:
        subgroups.setdefault(p.jsg, []).append((p.level, place[p.docno]))
    if len(subgroups) == 1:
        return _classes_group(next(iter(subgroups.values())), num_judged_ret)
    return _closed_group(subgroups.values(), num_judged_ret)


def _classes_group(entries: list[tuple[float, int]], num_judged_ret: int) -> JudgmentGroup:
    by_level: dict[float, list[int]] = {}
    for level, rank in entries:
        by_level.setdefault(level, []).append(rank)
    levels = sorted(by_level, reverse=True)
    classes = [np.sort(np.array(by_level[level], dtype=np.int64)) for level in levels]
    seen: dict[int, float] = {}
    for level, ranks in zip(levels, classes):
        for rank in set(ranks.tolist()):
            if rank in seen:
                raise _Contradiction(f"document {{}} has two levels ({seen[rank]:g} and {level:g}) in one subgroup",
                                     rank)
            seen[rank] = level
    better, worse = _class_pairs(classes)
    group = JudgmentGroup(better, worse, classes)
    for level, ranks in zip(levels, classes):
        retrieved = int(np.count_nonzero(ranks < num_judged_ret))
        if level > 0.0:
            group.num_rel += len(ranks)
            group.num_rel_ret += retrieved
        else:
            group.num_nonrel += len(ranks)
            group.num_nonrel_ret += retrieved
    return group


def _class_pairs(classes: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    better, worse = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    for i, upper in enumerate(classes):
        lower = np.concatenate(classes[i + 1:]) if i + 1 < len(classes) else np.empty(0, np.int64)
        better.append(np.repeat(upper, len(lower)))
        worse.append(np.tile(lower, len(upper)))
    return np.concatenate(better), np.concatenate(worse)


def _closed_group(subgroups: Iterable[list[tuple[float, int]]], num_judged_ret: int) -> JudgmentGroup:
    docs = sorted({rank for entries in subgroups for _, rank in entries})
    local = {rank: i for i, rank in enumerate(docs)}
    prefers = np.zeros((len(docs), len(docs)), dtype=bool)
    levels: dict[int, float] = {}
    for entries in subgroups:
        for level, rank in entries:
            if rank in levels and (levels[rank] > 0.0) != (level > 0.0):
                raise _Contradiction(f"document {{}} is both non-relevant (level 0) and relevant "
                                     f"(level {max(level, levels[rank]):g})", rank)
            levels[rank] = level
        level_of = np.array([level for level, _ in entries])
        index = np.array([local[rank] for _, rank in entries])
        above = level_of[:, None] > level_of[None, :]
        rows, cols = np.nonzero(above)
        prefers[index[rows], index[cols]] = True
    closure = _transitive_closure(prefers)
    conflicts = np.argwhere(closure & closure.T)
    if len(conflicts):
        i, j = conflicts[0]
        raise _Contradiction("inconsistent preferences: documents {} and {} are each preferred to the other",
                             docs[i], docs[j])
    rows, cols = np.nonzero(closure)
    order = np.array(docs, dtype=np.int64)
    group = JudgmentGroup(order[rows], order[cols], None, levels)
    for rank, level in levels.items():
        retrieved = rank < num_judged_ret
        if level > 0.0:
            group.num_rel += 1
            group.num_rel_ret += retrieved
        else:
            group.num_nonrel += 1
            group.num_nonrel_ret += retrieved
    return group


def _transitive_closure(prefers: np.ndarray) -> np.ndarray:
    """Every preference implied by chains of preferences (Warshall), without a document preferred to itself.

    Boolean row updates, no matrix product: no BLAS threads, and each step touches only the rows that reach k.
    """
    reach = prefers.copy()
    for k in range(len(reach)):
        rows = np.flatnonzero(reach[:, k])
        reach[rows] |= reach[k]
    np.fill_diagonal(reach, False)
    return reach


def prefs_measures(query: QueryPrefs) -> dict[str, float]:
    """Every ``all_prefs`` measure of one query, as trec_eval 10.0 computes it."""
    counts = query.counts
    ful = sum(c.fulfilled for c in counts)
    ful_ret = sum(c.fulfilled_ret for c in counts)
    poss = sum(c.possible for c in counts)
    poss_ret = sum(c.possible_ret for c in counts)
    poss_imp = sum(c.possible_ret + c.possible_imp for c in counts)
    pair, pair_ret, pair_imp = _pair_ratios(query)
    return {
        "prefs_num_prefs_poss": poss,
        "prefs_num_prefs_ful": ful,
        "prefs_num_prefs_ful_ret": ful_ret,
        "prefs_simp": ful / poss if poss else 0.0,
        "prefs_pair": pair,
        "prefs_avgjg": _average_over_groups([(c.fulfilled, c.possible) for c in counts]),
        "prefs_avgjg_Rnonrel": _average_over_groups(
            [_rnonrel(query, g, c, retrieved_only=False) for g, c in zip(query.groups, counts)], skip_empty=False),
        "prefs_simp_ret": ful_ret / poss_ret if poss_ret else 0.0,
        "prefs_pair_ret": pair_ret,
        "prefs_avgjg_ret": _average_over_groups([(c.fulfilled_ret, c.possible_ret) for c in counts]),
        "prefs_avgjg_Rnonrel_ret": _average_over_groups(
            [_rnonrel(query, g, c, retrieved_only=True) for g, c in zip(query.groups, counts)], skip_empty=False),
        "prefs_simp_imp": ful / poss_imp if poss_imp else 0.0,
        "prefs_pair_imp": pair_imp,
        "prefs_avgjg_imp": _average_over_groups([(c.fulfilled, c.possible_ret + c.possible_imp) for c in counts]),
    }


def _ratio(numerator: int, denominator: int) -> float:
    # C's double division: 0/0 is NaN, which makes trec_eval's "sum > 0" test fail for the whole query.
    if denominator:
        return numerator / denominator
    return math.nan if numerator == 0 else math.copysign(math.inf, numerator)


def _average_over_groups(ratios: list[tuple[int, int]], skip_empty: bool = True) -> float:
    total = 0.0
    for fulfilled, possible in ratios:
        if possible or not skip_empty:
            total += _ratio(fulfilled, possible)
    return total / len(ratios) if total > 0.0 else 0.0


def _pair_ratios(query: QueryPrefs) -> tuple[float, float, float]:
    """prefs_pair, _ret and _imp: each document pair scores the share of groups' preferences it fulfils."""
    better = np.concatenate([g.better for g in query.groups])
    worse = np.concatenate([g.worse for g in query.groups])
    width = max(query.num_judged, 1)
    keys, index = np.unique(np.minimum(better, worse) * width + np.maximum(better, worse), return_inverse=True)
    total = np.bincount(index, minlength=len(keys))
    fulfilled = np.bincount(index, weights=(better < worse).astype(np.float64), minlength=len(keys))
    first, second = keys // width, keys % width
    share = fulfilled / np.maximum(total, 1)
    njr = query.num_judged_ret
    both, one = second < njr, (first < njr) & (second >= njr)
    # trec_eval adds pair by pair, both-retrieved pairs first: cumsum adds in that order (sum() would not).
    running = np.cumsum(np.concatenate([share[both], share[one]]))
    num_both, num_imp = int(both.sum()), int(both.sum() + one.sum())
    ret_sum = float(running[num_both - 1]) if num_both else 0.0
    imp_sum = float(running[-1]) if num_imp else 0.0
    return (imp_sum / len(keys) if len(keys) else 0.0, ret_sum / num_both if num_both else 0.0,
            imp_sum / num_imp if num_imp else 0.0)


def _rnonrel(query: QueryPrefs, group: JudgmentGroup, counts: Counts, *, retrieved_only: bool) -> tuple[int, int]:
    """A group's counts with its non-relevant documents cut (or padded) to R, the number of relevant ones.

    With ``retrieved_only`` (prefs_avgjg_Rnonrel_ret) R and N count retrieved documents and only pairs with
    both retrieved count.
    """
    if retrieved_only:
        rel, nonrel, scan = group.num_rel_ret, group.num_nonrel_ret, query.num_judged_ret
        fulfilled, possible = counts.fulfilled_ret, counts.possible_ret
    else:
        rel, nonrel, scan = group.num_rel, group.num_nonrel, query.num_judged
        fulfilled, possible = counts.fulfilled, counts.possible
    if rel >= nonrel:
        # trec_eval pads with num_rel_ret fulfilled and num_rel possible preferences per missing one, in both.
        return fulfilled + group.num_rel_ret * (rel - nonrel), possible + group.num_rel * (rel - nonrel)
    if group.classes is not None:
        return _classes_with_nonrel_cut(group.classes, rel, query.num_judged_ret, retrieved_only=retrieved_only)
    kept = _closed_with_nonrel_cut(group, scan, group.num_rel)
    cut = Counts.of(group.better[kept], group.worse[kept], query.num_judged_ret)
    return (cut.fulfilled_ret, cut.possible_ret) if retrieved_only else (cut.fulfilled, cut.possible)


def _classes_with_nonrel_cut(classes: list[np.ndarray], keep: int, njr: int, *,
                             retrieved_only: bool) -> tuple[int, int]:
    """trec_eval's recount for a one-subgroup group: the lowest class cut to its first ``keep`` places.

    As trec_eval does, the lowest class's own places are paired with the cut class too (a place with itself
    counts as possible, not fulfilled).
    """
    if retrieved_only:
        classes = [ranks[ranks < njr] for ranks in classes]
    cut = classes[-1][:keep]
    fulfilled = possible = 0
    for i, upper in enumerate(classes):
        for lower in classes[i + 1:-1] + [cut]:
            wins = upper[:, None] < lower[None, :]
            if not retrieved_only:
                wins &= (upper < njr)[:, None]
            fulfilled += int(np.count_nonzero(wins))
            possible += wins.size
    return fulfilled, possible


def _closed_with_nonrel_cut(group: JudgmentGroup, scan: int, keep: int) -> np.ndarray:
    """Which of a closed group's preferences survive dropping its non-relevant places after the first ``keep``.

    trec_eval scans places ``0 .. scan-1`` for the (keep+1)-th non-relevant one; non-relevant places from
    there on are dropped.
    """
    nonrel = sorted(rank for rank, level in group.levels.items() if level == 0.0 and rank < scan)
    first_dropped = nonrel[keep] if len(nonrel) > keep else scan
    dropped = np.array([rank for rank, level in group.levels.items() if level == 0.0 and rank >= first_dropped],
                       dtype=np.int64)
    return ~(np.isin(group.better, dropped) | np.isin(group.worse, dropped))

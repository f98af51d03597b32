"""Qrels with judgment groups (trec_eval's ``-R qrels_jg``) and the ``qrels_jg`` measures.

A line ``qid jg docno rel`` says that judge (or user) ``jg`` graded ``docno``; each measure is computed once per
judgment group as if its judgments were the only qrels, then averaged over the query's groups (trec_eval 10.0's
``form_res_rels_jg.c``, ``m_map_avgjg.c``, ``m_P_avgjg.c``, ``m_Rprec_mult_avgjg.c``, matched exactly).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .lines import read_fields

NOT_POOLED, UNJUDGED = -1, -2  # trec_eval's RELVALUE_NONPOOL and RELVALUE_UNJUDGED (a negative grade in the file)
P_AVGJG_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
RPREC_MULT_AVGJG_CUTOFFS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)


def read_qrels_jg(path: str) -> dict[str, dict[str, dict[str, int]]]:
    """Read a ``qid jg docno rel`` file into ``{qid: {jg: {docno: rel}}}``, queries and groups in byte order.

    A document graded twice by one group of one query is an error, as in trec_eval; grades are whole numbers.
    """
    queries: dict[str, dict[str, dict[str, int]]] = {}
    for line in read_fields(path, 4):
        qid, jg, docno, rel = line.fields
        grades = queries.setdefault(qid, {}).setdefault(jg, {})
        if docno in grades:
            raise line.error(f"document {docno!r} is graded twice for query {qid!r} in judgment group {jg!r}")
        grades[docno] = line.integer(rel, "relevance")
    return {qid: dict(sorted(groups.items(), key=lambda item: item[0].encode()))
            for qid, groups in sorted(queries.items(), key=lambda item: item[0].encode())}


def _group_ranking(grades: dict[str, int], ranking: Sequence[str], judged_only: bool) -> np.ndarray:
    """The group's grades down the ranking; with -J, judged documents only (as trec_eval, whose ranks close up)."""
    rels = np.array([_grade(grades, doc) for doc in ranking], dtype=np.int64)
    return rels[rels >= 0] if judged_only else rels


def _grade(grades: dict[str, int], doc: str) -> int:
    rel = grades.get(doc)
    if rel is None:
        return NOT_POOLED
    return rel if rel >= 0 else UNJUDGED


def qrels_jg_measures(groups: dict[str, dict[str, int]], ranking: Sequence[str], *, level: int,
                      judged_only: bool, p_cutoffs: Sequence[int],
                      rprec_multiples: Sequence[float]) -> dict[str, float | list[float]]:
    """map_avgjg, P_avgjg (one value per cutoff) and Rprec_mult_avgjg (one per multiple of R) for one query."""
    totals = {"map_avgjg": 0.0, "P_avgjg": [0.0] * len(p_cutoffs), "Rprec_mult_avgjg": [0.0] * len(rprec_multiples)}
    for grades in groups.values():
        rels = _group_ranking(grades, ranking, judged_only)
        num_rel = sum(1 for rel in grades.values() if rel >= 0 and rel >= level)
        relevant = rels >= level
        rel_so_far = np.cumsum(relevant)
        totals["map_avgjg"] += _average_precision(relevant, rel_so_far, num_rel)
        for i, cutoff in enumerate(p_cutoffs):
            totals["P_avgjg"][i] += _relevant_within(rel_so_far, cutoff) / cutoff
        num_rel_ret = int(np.count_nonzero(relevant & (rels >= 0)))
        for i, multiple in enumerate(rprec_multiples):
            totals["Rprec_mult_avgjg"][i] += _precision_at_multiple(rel_so_far, int(multiple * num_rel + 0.9),
                                                                    num_rel_ret)
    if len(groups) > 1:
        totals["map_avgjg"] /= len(groups)
        totals["P_avgjg"] = [value / len(groups) for value in totals["P_avgjg"]]
        totals["Rprec_mult_avgjg"] = [value / len(groups) for value in totals["Rprec_mult_avgjg"]]
    return totals


def _average_precision(relevant: np.ndarray, rel_so_far: np.ndarray, num_rel: int) -> float:
    at = np.flatnonzero(relevant)
    if not len(at):
        return 0.0
    total = float(np.cumsum(rel_so_far[at] / (at + 1))[-1])  # trec_eval's order of additions
    return total / num_rel if num_rel else float("inf")


def _relevant_within(rel_so_far: np.ndarray, cutoff: int) -> int:
    if not len(rel_so_far):
        return 0
    return int(rel_so_far[min(cutoff, len(rel_so_far)) - 1])


def _precision_at_multiple(rel_so_far: np.ndarray, cutoff: int, num_rel_ret: int) -> float:
    if cutoff == 0:
        return 0.0
    if cutoff > len(rel_so_far):
        return num_rel_ret / cutoff
    return _relevant_within(rel_so_far, cutoff) / cutoff

"""evaluate(): join a run with qrels, compute measures per query, aggregate, and format the result."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from . import kernels
from .data import Qrels, Run, read_qrels, read_run, run_file_parts
from .errors import EngineInputError
from .measures import Measure, parse_measures


class Evaluation:
    """Per-query values and aggregates for a list of measures.

    ``values[canonical]`` is a float array aligned with ``query_ids``; ``per_query`` gives the same
    as ``{canonical: {qid: value}}``.
    """

    def __init__(self, measures: list[Measure], query_ids: list[str], values: dict[str, np.ndarray],
                 aggregate: dict[str, float], *, run_id: str | None = None, weights: np.ndarray | None = None,
                 missing_from_run: Iterable[str] = ()):
        self.measure_objects = measures
        self.measures = [m.canonical for m in measures]
        self.query_ids = query_ids
        self.values = values
        self.aggregate = aggregate
        self.run_id = run_id
        self.weights = weights
        self.missing_from_run = frozenset(missing_from_run)  # evaluated queries (-c) that the run has no line for

    def __repr__(self) -> str:
        return f"<Evaluation {len(self.query_ids)} queries: " + ", ".join(
            f"{m}={v:.4f}" for m, v in list(self.aggregate.items())[:6]) + ">"

    @property
    def per_query(self) -> dict[str, dict[str, float]]:
        return self.per_query_dict()

    def aggregate_over(self, query_ids: Iterable[str] | None = None,
                       weights: Mapping[str, float] | None = None) -> dict[str, float]:
        """The aggregates over a subset of the evaluated queries (all when None), weighted by
        ``weights`` (query id -> weight; every chosen query needs one) or not, with the same rules as
        ``aggregate``: means, sums for counts, geometric means for gm_*. NaN when no query is chosen."""
        chosen = set(self.query_ids if query_ids is None else query_ids)
        rows = np.array([i for i, qid in enumerate(self.query_ids) if qid in chosen], dtype=np.int64)
        weight_array = None
        if weights is not None:
            missing = [self.query_ids[i] for i in rows if self.query_ids[i] not in weights]
            if missing:
                raise ValueError(f"no weight for {len(missing)} queries, e.g. {missing[:3]}")
            weight_array = np.array([float(weights[self.query_ids[i]]) for i in rows])
            if (weight_array < 0).any() or not np.isfinite(weight_array).all():
                raise ValueError("weights must be finite and >= 0")
        return {m.canonical: _aggregate(m, self.values[m.canonical][rows], weight_array) for m in self.measure_objects}

    def per_query_dict(self) -> dict[str, dict[str, float]]:
        return {m: dict(zip(self.query_ids, self.values[m].tolist())) for m in self.measures}

    def to_trec_text(self, per_query: bool = False, run_id: str | None = None) -> str:
        """trec_eval's output, byte for byte: ``%-22s\\t%s\\t%6.4f`` (``%ld`` for counts).

        Measures trec_eval does not have print under their canonical name. A ``runid`` row heads the
        summary when ``run_id`` (or the run's tag) is given.
        """
        lines = []
        measures = self.measure_objects
        if per_query:
            for i, qid in enumerate(self.query_ids):
                for m in measures:
                    if m.name == "NumQ" or m.family.aggregate == "gmean":
                        continue
                    lines.append(_trec_line(m, qid, self.values[m.canonical][i]))
        run_id = run_id if run_id is not None else self.run_id
        if run_id is not None:
            lines.append(f"{'runid':<22}\tall\t{run_id}")
        lines.extend(_trec_line(m, "all", self.aggregate[m.canonical]) for m in measures
                     if m.family.aggregate != "none")
        return "".join(line + "\n" for line in lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "measures": list(self.measures),
            "aggregate": {m: _json_number(v) for m, v in self.aggregate.items()},
            "per_query": {m: {q: _json_number(v) for q, v in zip(self.query_ids, self.values[m].tolist())}
                          for m in self.measures},
        }

    def to_dataframe(self):
        """Per-query values, one row per query and one column per measure (canonical names)."""
        import pandas as pd

        frame = pd.DataFrame({m: self.values[m] for m in self.measures}, index=pd.Index(self.query_ids, name="query_id"))
        return frame


def _json_number(value: float) -> float | None:
    return None if isinstance(value, float) and math.isnan(value) else value


def _trec_line(m: Measure, qid: str, value: float | str) -> str:
    name = m.trec_name or m.canonical
    if isinstance(value, str):
        return f"{name:<22}\t{qid}\t'{value}'"
    if m.family.integer:
        return f"{name:<22}\t{qid}\t{int(value)}"
    return f"{name:<22}\t{qid}\t{c_float(value)}"


def c_float(value: float) -> str:
    """printf's %6.4f, NaN as glibc prints it: '-nan' for the NaN of C's 0.0 / 0.0 (sign bit set)."""
    if math.isnan(value):
        return f"{'-nan' if math.copysign(1.0, value) < 0 else 'nan':>6}"
    return f"{value:6.4f}"


def evaluate(qrels: Qrels | Any, run: Run | Any, measures: Iterable[str | Measure] | str = "official", *,
             relevance_level: int = 1, all_queries: bool = False, judged_only: bool = False,
             max_docs: int | None = None, weights: Mapping[str, float] | None = None,
             iprec_version: int = 10, num_docs_in_coll: int = 0) -> Evaluation:
    """Evaluate ``run`` against ``qrels`` with trec_eval 10.0 semantics.

    ``relevance_level`` is trec_eval's ``-l`` (relevant means grade >= level; nDCG ignores it),
    ``all_queries`` its ``-c`` (average over every qrels query, missing ones scoring 0; as in trec_eval, the
    summary ``num_rel`` then counts every qrels line graded above 0, whatever ``relevance_level`` is),
    ``judged_only`` its ``-J`` and ``max_docs`` its ``-M``. Without ``all_queries``, qrels queries
    the run lacks are left out (as trec_eval 9 and pytrec_eval do). Run queries without judgments
    are always ignored. ``weights`` turns every mean into a weighted mean (per-query traffic
    weights); every evaluated query needs one. ``iprec_version=9`` selects trec_eval 9's rounding of
    recall levels in iprec_at_recall and 11pt_avg. ``num_docs_in_coll`` is trec_eval's ``-N`` (for utility).
    """
    if not isinstance(qrels, Qrels):
        qrels = read_qrels(qrels)
    if not isinstance(run, Run):
        run = read_run(run)
    measure_list = parse_measures(measures)
    if max_docs is not None and max_docs < 0:
        raise ValueError("max_docs must be >= 0")
    qrels_index = {q: i for i, q in enumerate(qrels.query_ids)}
    if all_queries:
        query_ids = list(qrels.query_ids)
        eval_qrels = np.arange(len(query_ids), dtype=np.int64)
    else:
        query_ids = [q for q in run.query_ids if q in qrels_index]
        eval_qrels = np.array([qrels_index[q] for q in query_ids], dtype=np.int64)
    E = len(query_ids)
    qrels_to_eval = np.full(len(qrels.query_ids) + 1, -1, dtype=np.int64)
    qrels_to_eval[eval_qrels] = np.arange(E)
    run_to_qrels = np.array([qrels_index.get(q, -1) for q in run.query_ids], dtype=np.int64)
    run_to_eval = qrels_to_eval[run_to_qrels] if len(run_to_qrels) else run_to_qrels

    rows = run.order  # ranking position -> row; None: the rows are in ranking order
    run_lengths = np.diff(run.offsets)
    # Query numbers in int32 where they fit: the flat arrays have one entry per run line.
    seg = np.repeat(run_to_eval.astype(np.int32 if E < 2**31 else np.int64), run_lengths)
    keep = seg >= 0
    if max_docs is not None:
        rank = np.arange(len(run), dtype=np.int64) - np.repeat(run.offsets[:-1], run_lengths)
        keep &= rank < max_docs
    if not keep.all():
        rows = np.flatnonzero(keep) if rows is None else rows[keep]
        seg = seg[keep]
    del keep

    rel = np.full(len(seg), kernels.NONPOOL, dtype=_grade_type(qrels.grades))
    if len(seg) and len(qrels):
        dictionary = qrels.doc_dictionary()
        codes = run.doc_codes(dictionary)
        if rows is not None:
            codes = codes[rows]
        matched = np.flatnonzero(codes >= 0)
        keys = eval_qrels[seg[matched]] * max(len(dictionary), 1) + codes[matched]
        qrels_keys = qrels.keys()
        where = np.searchsorted(qrels_keys, keys)
        found = where < len(qrels_keys)
        found[found] = qrels_keys[where[found]] == keys[found]
        grades = qrels.grades[where[found]]
        rel[matched[found]] = np.where(grades < 0, kernels.UNJUDGED, grades)
    if judged_only:
        judged = rel >= 0
        rel, seg = rel[judged], seg[judged]

    qrels_seg = qrels_to_eval[qrels.query_codes] if len(qrels) else np.zeros(0, np.int64)
    in_eval = qrels_seg >= 0
    missing = _lacking(query_ids, run)
    ctx = kernels.Context(
        seg, rel, E, qrels_seg[in_eval], qrels.grades[in_eval], relevance_level=relevance_level,
        iprec_version=iprec_version, max_grade=int(max(qrels.grades.max(initial=0), 0)),
        num_docs_in_coll=num_docs_in_coll, placeholder=missing & (not judged_only and max_docs != 0))  # -J and -M 0 drop trec_eval's placeholder
    for m in measure_list:
        if m.name == "ERR" and m.param is not None and ctx.max_grade > m.param:
            raise EngineInputError(f"grade {ctx.max_grade} is above the top grade of {m.canonical}", path=qrels.name)
        if m.name in ("DCG_burges", "nDCG_burges") and ctx.max_grade > kernels.MAX_EXPONENTIAL_GRADE:
            raise EngineInputError(f"grade {ctx.max_grade} is too large for {m.canonical}: 2^grade overflows above "
                                   f"grade {kernels.MAX_EXPONENTIAL_GRADE}", path=qrels.name)

    weight_array = None
    if weights is not None:
        missing = [q for q in query_ids if q not in weights]
        if missing:
            raise ValueError(f"no weight for {len(missing)} queries, e.g. {missing[:3]}")
        weight_array = np.array([float(weights[q]) for q in query_ids])
        if (weight_array < 0).any() or not np.isfinite(weight_array).all():
            raise ValueError("weights must be finite and >= 0")

    values = {m.canonical: kernels.compute(ctx, m) for m in measure_list}
    ctx.drop_levels()
    aggregate = _aggregates(qrels, measure_list, values, weight_array, all_queries)
    return Evaluation(measure_list, query_ids, values, aggregate, run_id=run.run_id, weights=weight_array,
                      missing_from_run=[q for q, lacks in zip(query_ids, missing) if lacks])


def _lacking(query_ids: list[str], run: Run) -> np.ndarray:
    """Which evaluated queries (-c) the run has no line for."""
    answered = set(run.query_ids)
    return np.array([q not in answered for q in query_ids], dtype=bool)


def _aggregates(qrels: Qrels, measures: list[Measure], values: dict[str, np.ndarray], weights: np.ndarray | None,
                all_queries: bool) -> dict[str, float]:
    aggregate = {m.canonical: _aggregate(m, values[m.canonical], weights) for m in measures}
    if all_queries and weights is None:
        for m in measures:
            if m.name == "NumRel" and m.rel is None:
                # trec_eval's -c summary of num_rel goes back to the qrels: every line with a grade above 0, whatever
                # -l says (its te_calc_avg_num_rel); the per-query lines follow -l.
                aggregate[m.canonical] = float(np.count_nonzero(qrels.grades > 0))
    return aggregate


_PART_BYTES = 8 << 20


def evaluate_run_file(qrels: Qrels, path: str | os.PathLike, measures: Iterable[str | Measure] | str = "official", *,
                      on_duplicate: str = "error", all_queries: bool = False, part_bytes: int = _PART_BYTES,
                      **options: Any) -> Evaluation:
    """``evaluate(qrels, read_run(path, on_duplicate=on_duplicate), measures, ...)`` for a TREC run file, read and
    evaluated a part of about ``part_bytes`` at a time (parts end between queries, see ``run_file_parts``), so
    that memory follows the part, not the file: 7M lines take about as much as 1M. The result is the same:
    a query's values do not depend on other queries, and they are put in query order before averaging.
    Where parts cannot stand for the file (a query's lines not all together, a part that does not read
    cleanly, JSON or Parquet), the file is read whole, which also names a bad line by its place in the file.
    ``options`` are ``evaluate``'s (``relevance_level``, ``judged_only``, ``max_docs``, ``iprec_version``).
    """
    measure_list = parse_measures(measures)
    parts = _evaluate_parts(qrels, path, measure_list, on_duplicate, part_bytes, options)
    if parts is None:
        run = read_run(path, on_duplicate=on_duplicate)
        return evaluate(qrels, run, measure_list, all_queries=all_queries, **options)
    run_id = parts[-1].run_id  # the file's tag is its last line's, as read_run takes it
    if all_queries:  # the qrels' queries no part has, scored as trec_eval -c scores them: an empty ranking
        answered = {q for part in parts for q in part.query_ids}
        empty = evaluate(qrels, _empty_run(), measure_list, all_queries=True, **options)
        missing = [i for i, q in enumerate(empty.query_ids) if q not in answered]
        parts.append(Evaluation(measure_list, [empty.query_ids[i] for i in missing],
                                {m: v[missing] for m, v in empty.values.items()}, {},
                                missing_from_run=[empty.query_ids[i] for i in missing]))
    query_ids = [q for part in parts for q in part.query_ids]
    order = sorted(range(len(query_ids)), key=query_ids.__getitem__)
    values = {m.canonical: np.concatenate([part.values[m.canonical] for part in parts])[order] for m in measure_list}
    aggregate = _aggregates(qrels, measure_list, values, None, all_queries)
    return Evaluation(measure_list, [query_ids[i] for i in order], values, aggregate, run_id=run_id,
                      missing_from_run=[q for part in parts for q in part.missing_from_run])


def _evaluate_parts(qrels: Qrels, path: str | os.PathLike, measures: list[Measure], on_duplicate: str,
                    part_bytes: int, options: dict[str, Any]) -> list[Evaluation] | None:
    """Each part's evaluation, in file order, or None where the file must be read whole."""
    if Path(path).suffix.lower() in (".json", ".parquet") or not os.path.isfile(path) \
            or os.path.getsize(path) < 2 * part_bytes:
        return None
    parts: list[Evaluation] = []
    seen: set[str] = set()
    with open(path, "rb") as handle:
        if handle.read(64).lstrip()[:1] in (b"[", b"{"):
            return None
        handle.seek(0)
        for data in run_file_parts(handle, part_bytes):
            try:
                run = read_run(data, name=str(path), on_duplicate=on_duplicate)
            except EngineInputError:
                return None
            if not seen.isdisjoint(run.query_ids):
                return None
            seen.update(run.query_ids)
            parts.append(evaluate(qrels, run, measures, **options))
            del data, run  # before the next part is read
    return parts


def _empty_run() -> Run:
    return Run(np.zeros(0, np.int32), [], pa.array([], pa.string()), np.zeros(0))


def _grade_type(grades: np.ndarray) -> type:
    """int32 for the run's relevance codes when every grade fits (half the memory of int64), else int64."""
    limits = np.iinfo(np.int32)
    fits = not len(grades) or (limits.min + 2 < grades.min() and grades.max() < limits.max - 2)
    return np.int32 if fits else np.int64


def _aggregate(m: Measure, values: np.ndarray, weights: np.ndarray | None) -> float:
    """trec_eval's averages: arithmetic mean, sums for counts, geometric mean (floor 1e-5) for gm_*; none
    (NaN) for a per-query text such as relstring."""
    kind = m.family.aggregate
    if kind == "none":
        return float("nan")
    if kind == "sum":
        return float(np.cumsum(values)[-1]) if len(values) else 0.0
    if len(values) == 0:
        return float("nan")
    if kind == "gmean":
        logs = np.log(np.maximum(values, kernels.MIN_GEO_MEAN))
        if weights is None:
            return math.exp(float(np.cumsum(logs)[-1]) / len(values))
        return math.exp(float(np.dot(weights, logs) / weights.sum()))
    if weights is None:
        # Sequential sum, like trec_eval's accumulation.
        return float(np.cumsum(values)[-1]) / len(values)
    total = weights.sum()
    return float(np.dot(weights, values) / total) if total > 0 else float("nan")


# --------------------------------------------------------------------------------------- UltraRAG

_ULTRARAG = {"mrr": ("RR", "mrr"), "map": ("AP", "map"), "recall": ("R", "recall@{k}"),
             "ndcg": ("nDCG", "ndcg@{k}"), "precision": ("P", "P@{k}")}


def ultrarag_metrics(qrels: Any, run: Any, ir_metrics: Iterable[str] = ("mrr", "map", "recall", "ndcg", "precision"),
                     ks: Iterable[int] = (1, 5, 10, 20, 50, 100), save_path: str | os.PathLike | None = None,
                     **options: Any) -> dict[str, float]:
    """The metrics JSON of an UltraRAG evaluation request: ``map``, ``mrr`` (over the full ranking)
    and ``ndcg@k``, ``P@k``, ``recall@k`` for each k. Written to ``save_path`` when given.

    When no query is in both the qrels and the run, every metric is 0.0, as UltraRAG writes for
    ``map`` and ``mrr`` (UltraRAG leaves the ``@k`` keys out then; here the keys do not depend on the
    overlap)."""
    ks = [int(k) for k in ks]
    wanted = []
    for metric in ir_metrics:
        key = metric.lower()
        if key not in _ULTRARAG:
            raise ValueError(f"unknown UltraRAG metric {metric!r}; expected one of {sorted(_ULTRARAG)}")
        family, label = _ULTRARAG[key]
        if "{k}" in label:
            wanted.extend((Measure(family, cutoff=k), label.format(k=k)) for k in ks)
        else:
            wanted.append((Measure(family), label))
    evaluation = evaluate(qrels, run, [m for m, _ in wanted], **options)
    # No query in both files: the means are NaN, which JSON cannot hold; UltraRAG writes 0.0 there.
    result = {label: 0.0 if math.isnan(value) else value
              for m, label in wanted for value in [evaluation.aggregate[m.canonical]]}
    if save_path is not None:
        with open(save_path, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2, allow_nan=False)
            handle.write("\n")
    return result

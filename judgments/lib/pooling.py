"""Depth-k pooling: which query/document pairs to judge, who retrieved them, and in which order.

TREC pooling (Sparck Jones & van Rijsbergen 1975; Voorhees & Harman, *TREC*, 2005): a query's pool is the
union of every system's top ``depth`` documents. Each pooled pair records its provenance (system -> rank,
only systems that ranked it within the depth), its best rank and how many systems found it.

When the judging budget is smaller than the pool, ``priority`` (larger = judge first) orders the pairs:

- ``best_rank``: ``n / (n + 1) - best_rank`` with ``n`` the number of systems: best rank first and, within
  a rank, more systems first (the fraction stays below 1, so it never outweighs a rank).
- ``rrf``: reciprocal-rank fusion, ``sum_s 1 / (60 + rank_s)`` (Cormack, Clarke & Buettcher, SIGIR 2009).
- ``rbp``: rank-biased precision weight, ``sum_s (1 - p) p^(rank_s - 1)``, ``p = 0.8`` (Moffat & Zobel,
  TOIS 2008).

``position`` is the 1-based judging order over the whole pool: priority descending, then query order, then
doc id ascending (code-point order), so the best pairs of every query come before the second-best of any.
Sums run over a pair's ranks from best to worst, so pairs with the same ranks get bit-identical priorities
whichever systems found them, and their tie is broken by query and doc id rather than by rounding.

Everything works on whole columns (numpy, pyarrow); the only per-pair Python builds the provenance dicts.
No Django here: ``judgments.ops.pools`` feeds this from stored runs and writes the pairs back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, combinations, islice
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

STRATEGIES = ("best_rank", "rrf", "rbp")
RRF_K = 60
RBP_PERSISTENCE = 0.8
POOL_COLUMNS = ("query_id", "doc_id", "best_rank", "n_systems", "provenance", "provenance_json", "priority", "position")
SUGGESTED_DEPTH_RANGE = (20, 50)

_OVERLAP_BLOCK = 1 << 18  # pairs per block of the incidence matrix behind the overlap counts


@dataclass(frozen=True, eq=False)
class RankedList:
    """One system's results, already restricted to the pool's queries: one row per retrieved document.

    ``ranks`` are 1-based within each query, in the engine's ranking order. The id columns may be numpy
    arrays, lists or pyarrow arrays (plain or dictionary-encoded, as read from Parquet).
    """

    system: str
    query_ids: Any
    doc_ids: Any
    ranks: Any


def suggested_depth(n_systems: int) -> tuple[int, int] | None:
    """The pool depth range to suggest for `n_systems` runs; None while the default depth of 10 is fine."""
    if n_systems < 0:
        raise ValueError(f"the number of systems cannot be negative, got {n_systems}")
    # A handful of systems makes a small depth-10 pool; with more, TREC practice pools 20 to 50 deep.
    return None if n_systems <= 3 else SUGGESTED_DEPTH_RANGE


def build_pool(
    runs: Sequence[RankedList], depth: int, *, strategy: str = "best_rank", query_order: Sequence[str] | None = None
) -> pd.DataFrame:
    """Pool the top `depth` documents of every run: one row per (query_id, doc_id) pair with the columns
    ``POOL_COLUMNS``, rows in query order then doc id order.

    With `query_order`, queries it does not list are dropped and it sets the query tie-break; without it,
    queries tie-break in code-point order of their ids.
    """
    _check_options(depth, strategy)
    order = _check_query_order(query_order)
    rows = _Rows()
    rows.add_runs(runs, depth, first_system=0)
    pool, _ = _aggregate(_encode(rows, order, droppable=None), _check_runs(runs), strategy)
    return pool


def add_runs(
    existing: pd.DataFrame,
    runs: Sequence[RankedList],
    depth: int,
    *,
    strategy: str = "best_rank",
    query_order: Sequence[str] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Pool more runs into `existing`: returns (the updated full pool, only the pairs that are new).

    Existing rows keep their order and any extra columns; their provenance, best rank, number of systems
    and priority are recomputed over old and new systems. New pairs follow in query then doc id order, and
    every position is recomputed. Pairs are never removed: `query_order` filters only the new runs' rows,
    and existing queries it does not list tie-break after those it lists. A new run must not reuse the name
    of a system already in the pool.
    """
    _check_options(depth, strategy)
    order = _check_query_order(query_order)
    new_names = _check_runs(runs)
    missing = [column for column in ("query_id", "doc_id", "provenance") if column not in existing.columns]
    if missing:
        raise ValueError(f"the existing pool lacks the column(s) {', '.join(missing)}")
    rows = _Rows()
    old_names, lengths = rows.add_provenance(existing)
    reused = sorted(set(new_names) & set(old_names))
    if reused:
        raise ValueError(f"system name(s) already in the pool: {', '.join(reused)}")
    n_old_rows = len(rows)
    rows.add_runs(runs, depth, first_system=len(old_names))
    droppable = np.arange(len(rows)) >= n_old_rows
    encoded = _encode(rows, order, droppable=droppable)
    pool, pair_keys = _aggregate(encoded, old_names + new_names, strategy)

    # Existing rows are never dropped and come first, so each one's first long row gives its pair.
    first_rows = np.cumsum(lengths) - lengths
    located = np.searchsorted(pair_keys, encoded.pair[first_rows])
    if len(np.unique(located)) < len(located):
        raise ValueError("the existing pool lists a (query_id, doc_id) pair twice")
    updated = existing.copy()
    for column in POOL_COLUMNS[2:]:
        updated[column] = pool[column].to_numpy()[located]
    is_new = np.ones(len(pool), dtype=bool)
    is_new[located] = False
    new_pairs = pool[is_new].reset_index(drop=True)
    return pd.concat([updated, new_pairs], ignore_index=True), new_pairs


def pool_report(
    pool: pd.DataFrame, runs: Sequence[RankedList], depth: int, judged: set[tuple[str, str]] | None = None
) -> dict:
    """Summary figures for a pool: pairs per query, what each system alone found, pairwise overlap.

    Each system counts as its set of (query, doc) pairs in its top `depth`, for the pool's queries.
    ``unique_by_system`` is how many of those pairs no other system found; ``overlap`` gives the Jaccard
    index |A ∩ B| / |A ∪ B| of every two systems (None when both sets are empty), ``overlap_matrix`` the
    same as a nested dict with the diagonal. With `judged`, ``judged_fraction`` is the share of each
    system's pairs that are judged (None for an empty system) and ``judged_pairs`` how many pool pairs are.
    """
    _check_depth(depth)
    names = _check_runs(runs)
    pool_queries = _as_object(pool["query_id"])
    query_codes, queries = pd.factorize(pool_queries)
    per_query = np.bincount(query_codes, minlength=len(queries))
    report: dict[str, Any] = {
        "pairs_per_query": {str(query): int(count) for query, count in zip(queries, per_query)},
        "total_pairs": len(pool),
    }

    rows = _Rows()
    rows.add_runs(runs, depth, first_system=0)
    encoded = _encode(rows, [str(query) for query in queries], droppable=None)
    pair, _, system = _best_rank_per_system(encoded.pair, encoded.rank, encoded.system, len(names))
    starts = _group_starts(pair)
    found_by = np.diff(np.r_[starts, len(pair)])
    pair_index = np.repeat(np.arange(len(starts)), found_by)
    per_system = np.bincount(system, minlength=len(names))
    alone = np.bincount(system[np.repeat(found_by == 1, found_by)], minlength=len(names))
    report["unique_by_system"] = {name: int(alone[i]) for i, name in enumerate(names)}

    shared = _shared_pairs(pair_index, system, len(starts), len(names))
    union = per_system[:, None] + per_system[None, :] - shared
    matrix = {
        a: {b: (float(shared[i, j] / union[i, j]) if union[i, j] else None) for j, b in enumerate(names)}
        for i, a in enumerate(names)
    }
    report["overlap"] = [{"a": a, "b": b, "jaccard": matrix[a][b]} for a, b in combinations(names, 2)]
    report["overlap_matrix"] = matrix

    if judged is not None:
        judged_count = np.bincount(system[np.isin(pair, _judged_keys(encoded, judged))], minlength=len(names))
        report["judged_fraction"] = {
            name: (float(judged_count[i] / per_system[i]) if per_system[i] else None) for i, name in enumerate(names)
        }
        pool_pairs = pd.MultiIndex.from_arrays([pool_queries, _as_object(pool["doc_id"])])
        report["judged_pairs"] = int(pool_pairs.isin(list(judged)).sum()) if judged else 0
    return report


# ------------------------------------------------------------------------------------------ validation


def _check_options(depth: int, strategy: str) -> None:
    _check_depth(depth)
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown pooling strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")


def _check_depth(depth: int) -> None:
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)):
        raise ValueError(f"depth must be a whole number, got {depth!r}")
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")


def _check_query_order(query_order: Sequence[str] | None) -> list[str] | None:
    if query_order is None:
        return None
    order = [str(query) for query in query_order]
    if len(set(order)) != len(order):
        raise ValueError("query_order lists a query more than once")
    return order


def _check_runs(runs: Sequence[RankedList]) -> list[str]:
    names = [run.system for run in runs]
    if any(not isinstance(name, str) or not name for name in names):
        raise ValueError("every run needs a system name")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"system names must be unique within a pool; repeated: {', '.join(repeated)}")
    for run in runs:
        lengths = (len(run.query_ids), len(run.doc_ids), len(run.ranks))
        if len(set(lengths)) != 1:
            raise ValueError(
                f"run {run.system!r}: query_ids, doc_ids and ranks must have the same length, got {lengths[0]}, "
                f"{lengths[1]} and {lengths[2]}"
            )
    return names


# ------------------------------------------------------------------------------------------ columns


def _as_ranks(values: Any) -> np.ndarray:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if values.null_count:
            raise ValueError("ranks contain missing values")
        values = values.to_numpy()
    ranks = np.asarray(values)
    if ranks.dtype.kind == "f" and np.array_equal(ranks, np.round(ranks)):
        ranks = ranks.astype(np.int64)
    if len(ranks) and ranks.dtype.kind not in "iu":
        raise ValueError("ranks must be whole numbers")
    ranks = ranks.astype(np.int64, copy=False)
    if len(ranks) and ranks.min() < 1:
        raise ValueError(f"ranks are 1-based, got {ranks.min()}")
    return ranks


def _as_object(values: Any) -> np.ndarray:
    """Ids as a numpy object array of str."""
    array = _as_numpy(values)
    if array.dtype != object or pd.api.types.infer_dtype(array, skipna=False) not in ("string", "empty"):
        if pd.isna(array).any():
            raise ValueError("ids contain missing values")
        array = array.astype(str).astype(object)
    return array


def _as_numpy(values: Any) -> np.ndarray:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.DictionaryArray):
        values = values.dictionary.to_numpy(zero_copy_only=False)[values.indices.to_numpy(zero_copy_only=False)]
    elif isinstance(values, pa.Array):
        values = values.to_numpy(zero_copy_only=False)
    elif isinstance(values, pd.Series):
        values = values.to_numpy(dtype=object)
    return values if isinstance(values, np.ndarray) else np.asarray(values, dtype=object)


def _as_arrow(values: Any) -> pa.Array | pa.ChunkedArray:
    """Ids as a pyarrow string array (large_string beyond 2 GiB of text)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        array = values.dictionary_decode() if pa.types.is_dictionary(values.type) else values
    else:
        array = np.asarray(values, dtype=object) if isinstance(values, list) else values
        try:
            array = pa.array(array, type=pa.string() if array.dtype == object else None)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            array = pa.array(_as_object(array), type=pa.string())
    if array.null_count:
        raise ValueError("ids contain missing values")
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        array = array.cast(pa.string())
    return array


def _run_length(queries: np.ndarray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The first query id of every stretch of equal ids (as str objects), and the stretches' lengths."""
    if not len(queries):
        return np.zeros(0, object), np.zeros(0, np.int64)
    if isinstance(queries, pa.Array):
        changes = pc.not_equal(queries.slice(1), queries.slice(0, len(queries) - 1)).to_numpy(zero_copy_only=False)
    else:
        changes = queries[1:] != queries[:-1]
    heads = np.flatnonzero(np.r_[True, changes])
    repeats = np.diff(np.r_[heads, len(queries)])
    return _as_object(queries.take(pa.array(heads)) if isinstance(queries, pa.Array) else queries[heads]), repeats


class _Rows:
    """Long rows (query, doc, system, rank) gathered from runs or from a pool's provenance.

    Query ids are kept run-length encoded: runs list a query's documents together, so only the first of
    each stretch is hashed.
    """

    def __init__(self) -> None:
        self.query_heads: list[np.ndarray] = []
        self.query_repeats: list[np.ndarray] = []
        self.docs: list[pa.Array] = []
        self.systems: list[np.ndarray] = []
        self.ranks: list[np.ndarray] = []

    def __len__(self) -> int:
        return sum(len(rank) for rank in self.ranks)

    def add(self, queries: np.ndarray, docs: pa.Array, systems: np.ndarray, ranks: np.ndarray,
            repeats: np.ndarray | None = None) -> None:
        """Add rows; `queries` has one id per row, or per stretch of `repeats` rows."""
        if repeats is None:
            queries, repeats = _run_length(queries)
        self.query_heads.append(queries)
        self.query_repeats.append(repeats)
        self.docs.append(docs)
        self.systems.append(systems)
        self.ranks.append(ranks)

    def add_runs(self, runs: Sequence[RankedList], depth: int, *, first_system: int) -> None:
        _check_runs(runs)
        for index, run in enumerate(runs):
            try:
                ranks = _as_ranks(run.ranks)
                within = ranks <= depth
                queries, docs = run.query_ids, _as_arrow(run.doc_ids)
                if isinstance(queries, (pa.Array, pa.ChunkedArray)):
                    queries = _as_arrow(queries)
                else:
                    queries = _as_numpy(queries)
                if not within.all():
                    keep = pa.array(within)
                    docs, ranks = docs.filter(keep), ranks[within]
                    queries = queries.filter(keep) if isinstance(queries, pa.Array) else queries[within]
                self.add(queries, docs, np.full(len(ranks), first_system + index, dtype=np.int64), ranks)
            except ValueError as error:
                raise ValueError(f"run {run.system!r}: {error}") from None

    def add_provenance(self, pool: pd.DataFrame) -> tuple[list[str], np.ndarray]:
        """Add a pool's provenance as rows; returns the pool's system names and each pair's row count."""
        provenance = pool["provenance"].tolist()
        if any(not isinstance(entry, dict) or not entry for entry in provenance):
            raise ValueError("every provenance in the existing pool must be a non-empty dict of system -> rank")
        lengths = np.fromiter(map(len, provenance), dtype=np.int64, count=len(provenance))
        system_codes, names = pd.factorize(np.array(list(chain.from_iterable(provenance)), dtype=object))
        ranks = np.fromiter(chain.from_iterable(entry.values() for entry in provenance), dtype=np.int64,
                            count=int(lengths.sum()))
        if len(ranks) and ranks.min() < 1:
            raise ValueError("the existing pool has a rank below 1 in its provenance")
        docs = np.repeat(_as_object(pool["doc_id"]), lengths)
        self.add(_as_object(pool["query_id"]), pa.array(docs, type=pa.string()), system_codes.astype(np.int64),
                 ranks, repeats=lengths)
        return [str(name) for name in names], lengths


@dataclass
class _Encoded:
    """Rows as integers. ``pair`` is query rank * n_docs + doc rank, so it sorts in canonical pool order."""

    pair: np.ndarray
    system: np.ndarray
    rank: np.ndarray
    query_by_rank: np.ndarray
    doc_labels: np.ndarray

    @property
    def n_docs(self) -> int:
        return max(len(self.doc_labels), 1)


def _encode(rows: _Rows, query_order: list[str] | None, *, droppable: np.ndarray | None) -> _Encoded:
    """Encode the rows; with `query_order`, rows of queries it does not list are dropped (only `droppable`
    ones if that is given) and the rest ranked in its order, unlisted queries after in code-point order."""
    heads = np.concatenate(rows.query_heads) if rows.query_heads else np.zeros(0, object)
    head_codes, labels = pd.factorize(heads)
    labels = np.asarray(labels, dtype=object)
    label_rank = _query_ranks(labels, query_order)
    query_rank = np.repeat(label_rank[head_codes], np.concatenate(rows.query_repeats) if rows.query_repeats else [])
    system = np.concatenate(rows.systems) if rows.systems else np.zeros(0, np.int64)
    rank = np.concatenate(rows.ranks) if rows.ranks else np.zeros(0, np.int64)
    docs = _chunked(rows.docs)
    if query_order is not None:
        dropped = query_rank >= len(query_order)
        if droppable is not None:
            dropped &= droppable
        if dropped.any():
            kept = ~dropped
            query_rank, system, rank, docs = query_rank[kept], system[kept], rank[kept], docs.filter(pa.array(kept))
    doc_rank, doc_labels = _sorted_codes(docs)
    query_by_rank = np.empty(int(label_rank.max()) + 1 if len(labels) else 0, dtype=object)
    query_by_rank[label_rank] = labels
    return _Encoded(query_rank * max(len(doc_labels), 1) + doc_rank, system, rank, query_by_rank, doc_labels)


def _query_ranks(labels: np.ndarray, query_order: list[str] | None) -> np.ndarray:
    """Each query's place in `query_order`, then unlisted queries in code-point order."""
    listed = (pd.Index(query_order, dtype=object).get_indexer(labels) if query_order is not None
              else np.full(len(labels), -1))
    ranks = listed.astype(np.int64)
    unlisted = np.flatnonzero(listed < 0)
    by_label = sorted(unlisted.tolist(), key=labels.__getitem__)
    ranks[by_label] = len(query_order or ()) + np.arange(len(by_label))
    return ranks


def _chunked(arrays: list[pa.Array]) -> pa.ChunkedArray:
    if any(pa.types.is_large_string(array.type) for array in arrays):
        arrays = [array.cast(pa.large_string()) for array in arrays]
    return pa.chunked_array(arrays, type=arrays[0].type if arrays else pa.string())


def _sorted_codes(strings: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes that sort like the strings (code-point order), and the distinct strings in that order."""
    if not len(strings):
        return np.zeros(0, np.int64), np.zeros(0, object)
    encoded = strings.dictionary_encode()
    labels = encoded.chunks[-1].dictionary
    # pyarrow gives every chunk the same, unified dictionary; make sure rather than trust it.
    if not all(chunk.dictionary.equals(labels) for chunk in encoded.chunks):
        encoded = pa.chunked_array([strings.combine_chunks().dictionary_encode()])
        labels = encoded.chunks[0].dictionary
    order = pc.sort_indices(labels).to_numpy()
    rank_of = np.empty(len(order), dtype=np.int64)
    rank_of[order] = np.arange(len(order))
    codes = np.concatenate([chunk.indices.to_numpy(zero_copy_only=False) for chunk in encoded.chunks])
    return rank_of[codes], labels.take(pa.array(order)).to_numpy(zero_copy_only=False)


# ------------------------------------------------------------------------------------------ pooling


def _best_rank_per_system(pair: np.ndarray, rank: np.ndarray, system: np.ndarray,
                          n_systems: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows sorted by (pair, rank, system), keeping only each system's best rank of a pair (a run may
    list a document twice)."""
    if not len(pair):
        return pair, rank, system
    rank_bits, system_bits = int(rank.max()).bit_length(), max(n_systems - 1, 1).bit_length()
    packable = int(pair.max()).bit_length() + rank_bits + system_bits <= 63
    pair, rank, system = _sort_rows(pair, rank, system, rank_bits, system_bits, packable)
    starts = _group_starts(pair)
    if n_systems <= 62:
        seen = np.bitwise_or.reduceat(np.left_shift(1, system), starts)
        if np.array_equal(np.bitwise_count(seen), np.diff(np.r_[starts, len(pair)])):
            return pair, rank, system
    pair, system, rank = _sort_rows(pair, system, rank, system_bits, rank_bits, packable, kind="stable")
    first = np.r_[True, (pair[1:] != pair[:-1]) | (system[1:] != system[:-1])]
    return _sort_rows(pair[first], rank[first], system[first], rank_bits, system_bits, packable, kind="stable")


def _sort_rows(first: np.ndarray, second: np.ndarray, third: np.ndarray, second_bits: int, third_bits: int,
               packable: bool, kind: str = "quicksort") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Non-negative integer columns sorted by (first, second, third); "stable" (timsort) suits nearly
    sorted input."""
    if not packable:
        order = np.lexsort((third, second, first))
        return first[order], second[order], third[order]
    # Sorting one packed integer is several times faster than a lexsort of three keys.
    key = np.sort((first << (second_bits + third_bits)) | (second << third_bits) | third, kind=kind)
    return key >> (second_bits + third_bits), (key >> third_bits) & ((1 << second_bits) - 1), \
        key & ((1 << third_bits) - 1)


def _group_starts(sorted_keys: np.ndarray) -> np.ndarray:
    if not len(sorted_keys):
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])


def _aggregate(encoded: _Encoded, names: list[str], strategy: str) -> tuple[pd.DataFrame, np.ndarray]:
    """One row per pair, in canonical order (query rank, doc id), and the pairs' integer keys."""
    pair, rank, system = _best_rank_per_system(encoded.pair, encoded.rank, encoded.system, len(names))
    starts = _group_starts(pair)
    sizes = np.diff(np.r_[starts, len(pair)])
    keys = pair[starts]
    best_rank = rank[starts]
    entries = zip(np.array(names, dtype=object)[system].tolist(), rank.tolist())
    provenance = [dict(islice(entries, size)) for size in sizes.tolist()]
    provenance_json = _provenance_json(names, system, rank, starts)
    priority = _priority(strategy, rank, starts, sizes, best_rank)
    position = np.empty(len(priority), dtype=np.int64)
    # Rows are in (query order, doc id) order, so a stable sort on priority alone breaks ties as specified.
    position[np.argsort(-priority, kind="stable")] = np.arange(1, len(priority) + 1)
    pool = pd.DataFrame({
        "query_id": pd.Series(encoded.query_by_rank[keys // encoded.n_docs], dtype=object),
        "doc_id": pd.Series(encoded.doc_labels[keys % encoded.n_docs], dtype=object),
        "best_rank": best_rank.astype(np.int64),
        "n_systems": sizes.astype(np.int64),
        "provenance": pd.Series(provenance, dtype=object),
        "provenance_json": pd.Series(provenance_json.to_numpy(zero_copy_only=False), dtype=object),
        "priority": priority.astype(np.float64),
        "position": position,
    })
    return pool, keys


def _provenance_json(names: list[str], system: np.ndarray, rank: np.ndarray, starts: np.ndarray) -> pa.Array:
    """The provenance dicts as JSON text, built on whole columns (a database bulk-loads these)."""
    quoted = pa.array([json.dumps(name) for name in names], pa.string())
    entries = pc.binary_join_element_wise(pc.take(quoted, pa.array(system)), pa.array(rank).cast(pa.string()), ":")
    offsets = pa.array(np.r_[starts, len(rank)].astype(np.int64))
    joined = pc.binary_join(pa.LargeListArray.from_arrays(offsets, entries), ",")
    return pc.binary_join_element_wise("{", joined, "}", "")


def _priority(strategy: str, rank: np.ndarray, starts: np.ndarray, sizes: np.ndarray,
              best_rank: np.ndarray) -> np.ndarray:
    if strategy == "best_rank":
        return sizes / (sizes + 1) - best_rank
    if not len(rank):
        return np.zeros(0)
    # Weights from Python floats, summed left to right over each pair's ranks (best first): the naive loop
    # gives bit-identical values. numpy's reduceat sums pairwise, which could split exact ties.
    if strategy == "rrf":
        weights = np.array([1 / (RRF_K + r) for r in range(int(rank.max()) + 1)])
    else:
        weights = np.array([(1 - RBP_PERSISTENCE) * RBP_PERSISTENCE ** (r - 1) for r in range(int(rank.max()) + 1)])
    total = np.zeros(len(starts))
    for step in range(int(sizes.max())):
        live = np.flatnonzero(sizes > step)
        total[live] += weights[rank[starts[live] + step]]
    return total


def _shared_pairs(pair_index: np.ndarray, system: np.ndarray, n_pairs: int, n_systems: int) -> np.ndarray:
    """How many pairs every two systems have in common, from (pair, system) rows without repeats."""
    shared = np.zeros((n_systems, n_systems), dtype=np.int64)
    bounds = np.searchsorted(pair_index, np.arange(0, n_pairs + _OVERLAP_BLOCK, _OVERLAP_BLOCK))
    for block, (low, high) in enumerate(zip(bounds[:-1], bounds[1:])):
        incidence = np.zeros((_OVERLAP_BLOCK, n_systems), dtype=np.float32)
        incidence[pair_index[low:high] - block * _OVERLAP_BLOCK, system[low:high]] = 1
        # float32 counts stay exact: a block has fewer than 2**24 pairs.
        shared += np.rint(incidence.T @ incidence).astype(np.int64)
    return shared


def _judged_keys(encoded: _Encoded, judged: set[tuple[str, str]]) -> np.ndarray:
    if not judged:
        return np.zeros(0, np.int64)
    queries, docs = zip(*judged)
    present = np.flatnonzero(pd.notna(encoded.query_by_rank))  # query_order may list queries without rows
    found = pd.Index(encoded.query_by_rank[present], dtype=object).get_indexer(np.array(queries, dtype=object))
    query_rank = np.where(found >= 0, present[found], -1)
    doc_rank = pd.Index(encoded.doc_labels, dtype=object).get_indexer(np.array(docs, dtype=object))
    known = (query_rank >= 0) & (doc_rank >= 0)
    return query_rank[known] * encoded.n_docs + doc_rank[known]

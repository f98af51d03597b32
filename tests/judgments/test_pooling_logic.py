"""Pooling logic without a database: hand-worked examples, and a naive reference on random runs."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgments.lib.pooling import POOL_COLUMNS, RankedList, add_runs, build_pool, pool_report, suggested_depth


def ranked(system: str, rankings: dict[str, list[str]]) -> RankedList:
    """A run from {query: [doc at rank 1, doc at rank 2, ...]}."""
    rows = [(query, doc, rank) for query, docs in rankings.items() for rank, doc in enumerate(docs, start=1)]
    queries, docs, ranks = zip(*rows) if rows else ((), (), ())
    return RankedList(system, np.array(queries, dtype=object), np.array(docs, dtype=object), np.array(ranks))


def pairs(pool: pd.DataFrame) -> dict[tuple[str, str], dict]:
    return {(row.query_id, row.doc_id): row._asdict() for row in pool.itertuples(index=False)}


def judging_order(pool: pd.DataFrame) -> list[tuple[str, str]]:
    ordered = pool.sort_values("position")
    return list(zip(ordered.query_id, ordered.doc_id))


# A: q1 d1 d2 d3 d4, q2 d5 d6.  B: q1 d3 d1 d7, q2 d6 d8 d5.  At depth 2, d3 (A's 3rd), d4, d7 and B's d5 stay out.
RUN_A = ranked("A", {"q1": ["d1", "d2", "d3", "d4"], "q2": ["d5", "d6"]})
RUN_B = ranked("B", {"q1": ["d3", "d1", "d7"], "q2": ["d6", "d8", "d5"]})


def test_the_pool_is_the_union_of_every_systems_top_k():
    pool = build_pool([RUN_A, RUN_B], depth=2)

    assert list(pool.columns) == list(POOL_COLUMNS)
    assert list(zip(pool.query_id, pool.doc_id)) == [
        ("q1", "d1"), ("q1", "d2"), ("q1", "d3"), ("q2", "d5"), ("q2", "d6"), ("q2", "d8"),
    ]


def test_each_pair_records_which_systems_found_it_at_which_rank_and_its_best_rank():
    pool = pairs(build_pool([RUN_A, RUN_B], depth=2))

    assert pool[("q1", "d1")]["provenance"] == {"A": 1, "B": 2}
    assert pool[("q1", "d1")]["best_rank"] == 1
    assert pool[("q1", "d1")]["n_systems"] == 2
    assert pool[("q2", "d6")]["provenance"] == {"B": 1, "A": 2}
    assert pool[("q2", "d6")]["best_rank"] == 1
    assert pool[("q1", "d2")]["provenance"] == {"A": 2}
    assert pool[("q1", "d2")]["n_systems"] == 1


def test_ranks_beyond_the_depth_are_left_out_even_of_the_provenance():
    pool = pairs(build_pool([RUN_A, RUN_B], depth=2))

    assert ("q1", "d4") not in pool and ("q1", "d7") not in pool
    # B has d5 at rank 3 and A has d3 at rank 3: the pairs are pooled through the other system only.
    assert pool[("q2", "d5")]["provenance"] == {"A": 1}
    assert pool[("q1", "d3")]["provenance"] == {"B": 1}


def test_a_deeper_pool_takes_in_the_deeper_ranks():
    pool = pairs(build_pool([RUN_A, RUN_B], depth=3))

    assert pool[("q1", "d3")]["provenance"] == {"B": 1, "A": 3}
    assert ("q1", "d7") in pool and ("q1", "d4") not in pool


def test_best_rank_priority_breaks_ties_by_number_of_systems_then_query_then_doc_id():
    pool = build_pool([RUN_A, RUN_B], depth=2, strategy="best_rank")

    # Rank 1 by two systems (q1 d1, q2 d6), then rank 1 by one (q1 d3, q2 d5), then rank 2 by one.
    assert judging_order(pool) == [("q1", "d1"), ("q2", "d6"), ("q1", "d3"), ("q2", "d5"), ("q1", "d2"), ("q2", "d8")]
    assert sorted(pool.position) == [1, 2, 3, 4, 5, 6]
    assert pairs(pool)[("q1", "d1")]["priority"] == pytest.approx(2 / 3 - 1)
    assert pairs(pool)[("q2", "d8")]["priority"] == pytest.approx(1 / 2 - 2)


def test_query_order_sets_the_query_tie_break():
    pool = build_pool([RUN_A, RUN_B], depth=2, query_order=["q2", "q1"])

    assert judging_order(pool) == [("q2", "d6"), ("q1", "d1"), ("q2", "d5"), ("q1", "d3"), ("q2", "d8"), ("q1", "d2")]
    assert list(pool.query_id) == ["q2"] * 3 + ["q1"] * 3


def test_without_query_order_queries_tie_break_in_code_point_order():
    runs = [ranked("A", {"q2": ["d1"], "q10": ["d1"], "Q3": ["d1"]})]

    assert judging_order(build_pool(runs, depth=1)) == [("Q3", "d1"), ("q10", "d1"), ("q2", "d1")]


# One query, depth 5. z: rank 2 in all three runs; y: rank 5 in two; x, b1, c1: rank 1 in one run each.
THREE_RUNS = [
    ranked("A", {"q": ["x", "z", "a3", "a4", "y"]}),
    ranked("B", {"q": ["b1", "z", "b3", "b4", "y"]}),
    ranked("C", {"q": ["c1", "z", "c3", "c4", "c5"]}),
]


def test_best_rank_strategy_judges_the_best_ranked_documents_first():
    order = [doc for _, doc in judging_order(build_pool(THREE_RUNS, depth=5, strategy="best_rank"))]

    assert order == ["b1", "c1", "x", "z", "a3", "b3", "c3", "a4", "b4", "c4", "y", "c5"]


def test_rrf_strategy_sums_reciprocal_ranks_with_k_60():
    pool = build_pool(THREE_RUNS, depth=5, strategy="rrf")
    priority = {doc: value for doc, value in zip(pool.doc_id, pool.priority)}

    assert priority["z"] == pytest.approx(0.04838709677419355)  # 3 / 62
    assert priority["y"] == pytest.approx(0.03076923076923077)  # 2 / 65
    assert priority["x"] == pytest.approx(0.01639344262295082)  # 1 / 61
    assert priority["a3"] == pytest.approx(0.015873015873015872)  # 1 / 63
    assert priority["c5"] == pytest.approx(0.015384615384615385)  # 1 / 65
    order = [doc for _, doc in judging_order(pool)]
    assert order == ["z", "y", "b1", "c1", "x", "a3", "b3", "c3", "a4", "b4", "c4", "c5"]


def test_rbp_strategy_sums_rank_biased_precision_weights_with_persistence_0_8():
    pool = build_pool(THREE_RUNS, depth=5, strategy="rbp")
    priority = {doc: value for doc, value in zip(pool.doc_id, pool.priority)}

    assert priority["z"] == pytest.approx(0.48)  # 3 * 0.2 * 0.8
    assert priority["x"] == pytest.approx(0.2)
    assert priority["y"] == pytest.approx(0.16384)  # 2 * 0.2 * 0.8 ** 4
    assert priority["a3"] == pytest.approx(0.128)
    assert priority["c5"] == pytest.approx(0.08192)
    order = [doc for _, doc in judging_order(pool)]
    assert order == ["z", "b1", "c1", "x", "y", "a3", "b3", "c3", "a4", "b4", "c4", "c5"]


@pytest.mark.parametrize("strategy", ["best_rank", "rrf", "rbp"])
def test_pairs_with_the_same_ranks_from_different_systems_tie_exactly(strategy):
    # d has ranks 1, 2, 3 from A, B, C for q1 and 3, 2, 1 for q2.
    runs = [
        ranked("A", {"q1": ["d", "a2", "a3"], "q2": ["a1", "a2", "d"]}),
        ranked("B", {"q1": ["b1", "d", "b3"], "q2": ["b1", "d", "b3"]}),
        ranked("C", {"q1": ["c1", "c2", "d"], "q2": ["d", "c2", "c3"]}),
    ]
    pool = build_pool(runs, depth=3, strategy=strategy)
    by_pair = pairs(pool)

    assert by_pair[("q1", "d")]["priority"] == by_pair[("q2", "d")]["priority"]
    assert judging_order(pool)[:2] == [("q1", "d"), ("q2", "d")]


def test_a_document_listed_twice_by_a_run_keeps_its_best_rank():
    runs = [ranked("A", {"q": ["d1", "d2", "d1"]}), ranked("B", {"q": ["d2"]})]

    pool = pairs(build_pool(runs, depth=3))

    assert pool[("q", "d1")]["provenance"] == {"A": 1}
    assert pool[("q", "d1")]["n_systems"] == 1


def test_query_order_drops_queries_it_does_not_list():
    pool = build_pool([RUN_A, RUN_B], depth=2, query_order=["q2", "q9"])

    assert set(pool.query_id) == {"q2"}
    assert sorted(pool.position) == [1, 2, 3]


def test_it_accepts_lists_and_pyarrow_arrays():
    as_lists = RankedList("A", ["q1", "q1", "q2"], ["d1", "d2", "d5"], [1, 2, 1])
    as_arrow = RankedList(
        "B", pa.array(["q1", "q2", "q2"]).dictionary_encode(), pa.chunked_array([["d3"], ["d6", "d8"]]),
        pa.array([1, 1, 2]),
    )

    pool = build_pool([as_lists, as_arrow], depth=2)

    assert set(zip(pool.query_id, pool.doc_id)) == {
        ("q1", "d1"), ("q1", "d2"), ("q1", "d3"), ("q2", "d5"), ("q2", "d6"), ("q2", "d8"),
    }


def test_an_empty_pool_has_the_columns_and_no_rows():
    pool = build_pool([ranked("A", {})], depth=10)

    assert list(pool.columns) == list(POOL_COLUMNS) and pool.empty


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: build_pool([RUN_A], depth=0), "depth must be at least 1"),
        (lambda: build_pool([RUN_A], depth=2.5), "depth must be a whole number"),
        (lambda: build_pool([RUN_A], depth=2, strategy="borda"), "unknown pooling strategy 'borda'"),
        (lambda: build_pool([RUN_A, RUN_A], depth=2), "system names must be unique.*A"),
        (lambda: build_pool([RankedList("A", ["q"], ["d1", "d2"], [1, 2])], depth=2), "same length, got 1, 2 and 2"),
        (lambda: build_pool([RankedList("A", ["q"], ["d"], [0])], depth=2), "run 'A': ranks are 1-based"),
        (lambda: build_pool([RankedList("A", ["q"], [None], [1])], depth=2), "run 'A': ids contain missing values"),
        (lambda: build_pool([RUN_A], depth=2, query_order=["q1", "q1"]), "lists a query more than once"),
    ],
)
def test_it_rejects_bad_input_with_a_clear_message(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_adding_runs_keeps_the_old_pairs_and_reports_only_the_new_ones():
    existing = build_pool([RUN_A], depth=2)
    existing["pk"] = [11, 12, 13, 14]

    full, new = add_runs(existing, [RUN_B], depth=2)

    assert list(zip(new.query_id, new.doc_id)) == [("q1", "d3"), ("q2", "d8")]
    assert list(full.pk[:4]) == [11, 12, 13, 14]
    assert list(zip(full.query_id, full.doc_id))[:4] == list(zip(existing.query_id, existing.doc_id))
    assert pairs(full)[("q1", "d1")]["provenance"] == {"A": 1, "B": 2}
    assert pairs(full)[("q2", "d6")]["n_systems"] == 2


def test_adding_runs_gives_the_same_pool_as_building_it_at_once():
    full, _ = add_runs(build_pool([RUN_A], depth=2, strategy="rrf"), [RUN_B], depth=2, strategy="rrf")
    at_once = build_pool([RUN_A, RUN_B], depth=2, strategy="rrf")

    columns = list(POOL_COLUMNS)
    assert_same_pool(full[columns].sort_values(["query_id", "doc_id"]), at_once)


def test_adding_runs_never_removes_pairs_of_queries_left_out_of_query_order():
    existing = build_pool([RUN_A], depth=2)

    full, new = add_runs(existing, [RUN_B], depth=2, query_order=["q2"])

    assert list(zip(new.query_id, new.doc_id)) == [("q2", "d8")]
    assert {("q1", "d1"), ("q1", "d2")} <= set(zip(full.query_id, full.doc_id))
    assert pairs(full)[("q1", "d1")]["provenance"] == {"A": 1}
    assert sorted(full.position) == list(range(1, 6))


def test_adding_a_run_whose_name_is_already_in_the_pool_is_refused():
    with pytest.raises(ValueError, match="already in the pool: A"):
        add_runs(build_pool([RUN_A], depth=2), [ranked("A", {"q1": ["d9"]})], depth=2)


# Depth 2. A: q1 d1 d2, q2 d5 d6. B: q1 d3 d1, q2 d6 d8. C: q1 d1 d9, nothing for q2.
REPORT_RUNS = [RUN_A, RUN_B, ranked("C", {"q1": ["d1", "d9"]})]


def test_the_report_counts_pairs_and_what_each_system_found_alone():
    pool = build_pool(REPORT_RUNS, depth=2)

    report = pool_report(pool, REPORT_RUNS, depth=2)

    assert report["pairs_per_query"] == {"q1": 4, "q2": 3}
    assert report["total_pairs"] == 7
    assert report["unique_by_system"] == {"A": 2, "B": 2, "C": 1}  # A: q1 d2, q2 d5; B: q1 d3, q2 d8; C: q1 d9


def test_the_report_gives_the_jaccard_overlap_of_every_two_systems():
    report = pool_report(build_pool(REPORT_RUNS, depth=2), REPORT_RUNS, depth=2)

    # A and B share q1 d1 and q2 d6 of 6 pairs between them; C shares only q1 d1 with either, of 5.
    assert report["overlap"] == [
        {"a": "A", "b": "B", "jaccard": pytest.approx(2 / 6)},
        {"a": "A", "b": "C", "jaccard": pytest.approx(1 / 5)},
        {"a": "B", "b": "C", "jaccard": pytest.approx(1 / 5)},
    ]
    assert report["overlap_matrix"]["C"]["A"] == pytest.approx(1 / 5)
    assert report["overlap_matrix"]["B"]["B"] == 1.0


def test_the_report_gives_the_judged_fraction_of_each_systems_top_k():
    judged = {("q1", "d1"), ("q2", "d6"), ("q2", "d8"), ("q1", "d9"), ("q3", "d1")}

    report = pool_report(build_pool(REPORT_RUNS, depth=2), REPORT_RUNS, depth=2, judged=judged)

    assert report["judged_fraction"] == {"A": 2 / 4, "B": 3 / 4, "C": 2 / 2}
    assert report["judged_pairs"] == 4


def test_the_report_counts_systems_only_on_the_pools_queries():
    with_d = REPORT_RUNS + [ranked("D", {"q7": ["d1"], "q8": ["d2"]})]
    pool = build_pool(with_d, depth=2, query_order=["q7", "q8", "q2"])

    report = pool_report(pool, REPORT_RUNS, depth=2, judged={("q2", "d6"), ("q8", "d2")})

    assert report["pairs_per_query"] == {"q7": 1, "q8": 1, "q2": 3}
    assert report["unique_by_system"] == {"A": 1, "B": 1, "C": 0}  # q2 d5 and q2 d8
    assert report["judged_fraction"] == {"A": 1 / 2, "B": 1 / 2, "C": None}
    assert report["overlap_matrix"]["A"]["C"] == 0.0 and report["overlap_matrix"]["C"]["C"] is None
    assert report["judged_pairs"] == 2


def test_the_report_leaves_out_judged_figures_unless_asked():
    report = pool_report(build_pool(REPORT_RUNS, depth=2), REPORT_RUNS, depth=2)

    assert "judged_fraction" not in report and "judged_pairs" not in report


@pytest.mark.parametrize(("n_systems", "suggestion"), [(0, None), (1, None), (3, None), (4, (20, 50)), (12, (20, 50))])
def test_a_depth_of_20_to_50_is_suggested_beyond_three_systems(n_systems, suggestion):
    assert suggested_depth(n_systems) == suggestion


# ------------------------------------------------------------------------------- against a naive reference


def naive_pool(runs, depth, strategy, query_order):
    """Pooling spelled out with dicts and sorts, one row at a time."""
    found: dict[tuple[str, str], dict[str, int]] = {}
    for run in runs:
        for query, doc, rank in zip(run.query_ids, run.doc_ids, run.ranks):
            query, doc, rank = str(query), str(doc), int(rank)
            if rank > depth or (query_order is not None and query not in query_order):
                continue
            systems = found.setdefault((query, doc), {})
            systems[run.system] = min(rank, systems.get(run.system, rank))

    def query_key(query):
        return query_order.index(query) if query_order is not None else query

    rows = []
    for (query, doc), systems in found.items():
        ranks = sorted(systems.values())
        if strategy == "best_rank":
            priority = len(ranks) / (len(ranks) + 1) - ranks[0]
        else:
            priority = 0.0
            for rank in ranks:
                priority += 1 / (60 + rank) if strategy == "rrf" else 0.2 * 0.8 ** (rank - 1)
        rows.append({"query_id": query, "doc_id": doc, "best_rank": ranks[0], "n_systems": len(ranks),
                     "provenance": systems, "priority": priority})
    rows.sort(key=lambda row: (query_key(row["query_id"]), row["doc_id"]))
    judging = sorted(range(len(rows)), key=lambda i: (-rows[i]["priority"], query_key(rows[i]["query_id"]),
                                                      rows[i]["doc_id"]))
    for position, index in enumerate(judging, start=1):
        rows[index]["position"] = position
    return pd.DataFrame(rows, columns=list(POOL_COLUMNS))


def assert_same_pool(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    assert list(actual.query_id) == list(expected.query_id)
    assert list(actual.doc_id) == list(expected.doc_id)
    assert list(actual.best_rank) == list(expected.best_rank)
    assert list(actual.n_systems) == list(expected.n_systems)
    assert list(actual.provenance) == list(expected.provenance)
    assert list(actual.priority) == pytest.approx(list(expected.priority), rel=1e-12)
    assert list(actual.position) == list(expected.position)


QUERY_IDS = ["q1", "q2", "q10", "Q3", "qé"]
DOC_IDS = ["d1", "d2", "d10", "D3", "dé", "d4", "d5"]


@st.composite
def random_runs(draw):
    runs = []
    for index in range(draw(st.integers(1, 4))):
        rows = []
        for query in draw(st.lists(st.sampled_from(QUERY_IDS), unique=True, max_size=4)):
            # Drawn with replacement: a run may list a document twice.
            docs = draw(st.lists(st.sampled_from(DOC_IDS), max_size=6))
            rows += [(query, doc, rank) for rank, doc in enumerate(docs, start=1)]
        rows = draw(st.permutations(rows)) if draw(st.booleans()) else rows
        queries, docs, ranks = ([row[i] for row in rows] for i in range(3))
        container = draw(st.sampled_from(["list", "numpy", "arrow"]))
        if container == "numpy":
            queries, docs, ranks = np.array(queries, dtype=object), np.array(docs, dtype=object), np.array(ranks)
        elif container == "arrow":
            queries, docs = pa.array(queries, pa.string()), pa.array(docs, pa.string())
        runs.append(RankedList(f"run{index}", queries, docs, ranks))
    return runs


query_orders = st.none() | st.lists(st.sampled_from(QUERY_IDS), unique=True, max_size=5)


@settings(max_examples=300, deadline=None)
@given(runs=random_runs(), depth=st.integers(1, 6), strategy=st.sampled_from(["best_rank", "rrf", "rbp"]),
       query_order=query_orders)
def test_build_pool_matches_a_naive_reference_on_random_runs(runs, depth, strategy, query_order):
    assert_same_pool(build_pool(runs, depth, strategy=strategy, query_order=query_order),
                     naive_pool(runs, depth, strategy, query_order))


@settings(max_examples=150, deadline=None)
@given(runs=random_runs(), depth=st.integers(1, 6), strategy=st.sampled_from(["best_rank", "rrf", "rbp"]),
       query_order=query_orders, split=st.integers(0, 4))
def test_adding_runs_matches_building_the_pool_at_once(runs, depth, strategy, query_order, split):
    first, later = runs[:split], runs[split:]
    existing = build_pool(first, depth, strategy=strategy, query_order=query_order)

    full, new = add_runs(existing, later, depth, strategy=strategy, query_order=query_order)

    expected = naive_pool(runs, depth, strategy, query_order)
    assert_same_pool(full.sort_values("position").reset_index(drop=True),
                     expected.sort_values("position").reset_index(drop=True))
    before = set(zip(existing.query_id, existing.doc_id))
    assert list(zip(new.query_id, new.doc_id)) == [
        pair for pair in zip(expected.query_id, expected.doc_id) if pair not in before
    ]

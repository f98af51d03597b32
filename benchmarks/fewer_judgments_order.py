"""The ordering half of the fewer-judgments benchmark: relevant documents found against judgments spent, for the
judging orders a round offers (pool order, random, Move-To-Front, MM-NS; `judgments.lib.judging_order`).

Data: the DBpedia-Entity v2 test qrels and the seeded simulated runs of ``benchmarks/fewer_judgments_data.py``
(8 runs of graded quality, depth 100). Each query's pool is the union of the runs' top ``depth`` (built by
`judgments.lib.pooling.build_pool`, whose ``best_rank`` priority is the pool order); a document is relevant when its
qrels grade is 1 or more, and a pooled document the qrels do not judge counts as not relevant. Each order judges
every query's pool one document at a time, the label revealed as it is judged; after 10%, 25%, 50% and 75% of each
query's pool (rounded half up) we count the relevant documents found, summed over the queries. Random,
Move-To-Front and MM-NS depend on the seed (the shuffle, the runs' tie-breaks): their counts are means over seeds.

Targets (issue 30): MM-NS finds at least as many as Move-To-Front at each point, and more than pool order at 25%.

    .venv/bin/python benchmarks/fewer_judgments_order.py [--seeds 10] [--queries N]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.fewer_judgments_data import load_qrels, simulated_runs  # noqa: E402
from judgments.lib import judging_order, pooling  # noqa: E402
from judgments.lib.verdicts import Verdict, decide  # noqa: E402

POINTS = (0.10, 0.25, 0.50, 0.75)
ORDERS = {"pool": "Pool order", "random": "Random", "mtf": "Move-To-Front", "mmns": "MM-NS"}
RELEVANT_FROM = 1


def ordering_report(qrels: dict[str, dict[str, int]], runs: dict[str, dict[str, list[str]]], *, seeds=range(10),
                    depth: int = 100) -> dict:
    """Relevant documents found after each share of every query's pool, per order (see the module docstring)."""
    pools = _query_pools(runs, depth)
    budgets = {point: {query: _budget(point, len(pool["pool_order"])) for query, pool in pools.items()} for point in POINTS}
    seeds = list(seeds)
    found = {}
    for order in ORDERS:
        per_seed = [_found(order, pools, qrels, budgets, seed) for seed in (seeds[:1] if order == "pool" else seeds)]
        found[order] = {point: float(np.mean([counts[point] for counts in per_seed])) for point in POINTS}
    return {
        "queries": len(pools), "runs": len(runs), "depth": depth, "seeds": len(seeds),
        "pooled": sum(len(pool["pool_order"]) for pool in pools.values()),
        "relevant_in_pools": sum(_relevant(qrels, query, doc) for query, pool in pools.items() for doc in pool["pool_order"]),
        "judgments": {point: sum(budgets[point].values()) for point in POINTS},
        "found": found,
        "targets": _targets(found).to_json(),
    }


def _query_pools(runs: dict[str, dict[str, list[str]]], depth: int) -> dict[str, dict]:
    """query -> its pool order (pool priority, best first) and each run's pooled documents in rank order."""
    lists = [pooling.RankedList(system=name, query_ids=[q for q, ranked in by_query.items() for _ in ranked[:depth]],
                                doc_ids=[doc for ranked in by_query.values() for doc in ranked[:depth]],
                                ranks=[rank for ranked in by_query.values() for rank in range(1, len(ranked[:depth]) + 1)])
             for name, by_query in runs.items()]
    frame = pooling.build_pool(lists, depth, strategy="best_rank").sort_values("position")
    pools: dict[str, dict] = {}
    for query, doc, provenance in zip(frame["query_id"], frame["doc_id"], frame["provenance"]):
        pool = pools.setdefault(query, {"pool_order": [], "rankings": {}})
        pool["pool_order"].append(doc)
        for run, rank in provenance.items():
            pool["rankings"].setdefault(run, []).append((rank, doc))
    for pool in pools.values():
        pool["rankings"] = {run: [doc for _rank, doc in sorted(ranked)] for run, ranked in pool["rankings"].items()}
    return pools


def _budget(point: float, pool_size: int) -> int:
    return math.floor(point * pool_size + 0.5)


def _relevant(qrels, query: str, doc: str) -> bool:
    return qrels.get(query, {}).get(doc, 0) >= RELEVANT_FROM


def _found(order: str, pools: dict, qrels, budgets: dict, seed: int) -> dict[float, int]:
    counts = dict.fromkeys(POINTS, 0)
    for query, pool in pools.items():
        labels = {doc: _relevant(qrels, query, doc) for doc in pool["pool_order"]}
        sequence = judging_order.judging_sequence(order, pool["rankings"], labels, pool_order=pool["pool_order"], seed=seed)
        hits = np.cumsum([labels[doc] for doc in sequence])
        for point in POINTS:
            spent = budgets[point][query]
            counts[point] += int(hits[spent - 1]) if spent else 0
    return counts


def _targets(found: dict) -> Verdict:
    mmns, mtf, pool = found["mmns"], found["mtf"], found["pool"]
    failures = [f"at {point:.0%} of the pool MM-NS found {mmns[point]:,.1f}, fewer than Move-To-Front's {mtf[point]:,.1f}"
                for point in POINTS if mmns[point] < mtf[point]]
    if mmns[0.25] <= pool[0.25]:
        failures.append(f"at 25% of the pool MM-NS found {mmns[0.25]:,.1f}, not more than pool order's {pool[0.25]:,.1f}")
    grounds = [f"MM-NS >= Move-To-Front at {', '.join(f'{p:.0%}' for p in POINTS)}",
               f"MM-NS {mmns[0.25]:,.1f} > pool order {pool[0.25]:,.1f} at 25%"]
    return decide(failures=failures, grounds=grounds)


def print_report(report: dict) -> None:
    print(f"Relevant documents found against judgments spent: {report['queries']} queries, {report['runs']} simulated runs, "
          f"depth-{report['depth']} pools ({report['pooled']:,} pooled documents, {report['relevant_in_pools']:,} of them relevant "
          f"by the qrels); random, Move-To-Front and MM-NS are means over {report['seeds']} seeds.")
    header = ["Order"] + [f"{point:.0%} ({report['judgments'][point]:,} judgments)" for point in POINTS]
    rows = [[label] + [f"{report['found'][order][point]:,.1f}" for point in POINTS] for order, label in ORDERS.items()]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) if i == 0 else cell.rjust(width) for i, (cell, width) in enumerate(zip(row, widths))))
    targets = report["targets"]
    print(f"Targets (MM-NS >= Move-To-Front at every point, > pool order at 25%): {targets['label']}: {'; '.join(targets['reasons'])}")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10, help="seeds to average the seeded orders over (default 10)")
    parser.add_argument("--queries", type=int, default=None, help="only the first N queries, in sorted order (default: all)")
    args = parser.parse_args(argv)
    qrels = load_qrels()
    if args.queries:
        qrels = {query: qrels[query] for query in sorted(qrels)[:args.queries]}
    started = time.perf_counter()
    report = ordering_report(qrels, simulated_runs(qrels), seeds=range(args.seeds))
    print_report(report)
    print(f"({time.perf_counter() - started:.1f} s)")
    return report


if __name__ == "__main__":
    main()

"""Evaluating an MS MARCO-sized stored run against a round in the app, on PostgreSQL, against a peer.

    make bench-evaluate        (or: .venv/bin/python benchmarks/evaluate.py [--queries 6980] [--depth 1000])

Case (target from the evaluation issue, on the 2-core machine): one stored run of 6,980 queries x 1,000
results (6.98 million rows, Parquet behind the storage API) scored against a round with 10,000 labels,
as the evaluation job does it: build the qrels from the round's consensus labels, read the run, compute
the default measures (MRR, MAP, and R, P, nDCG at 1, 5, 10, 20, 50, 100) with the unjudged shares at
each cutoff, the tier breakdown and the per-query values, and store them         -> at most 5 s of job time
peer: pytrec_eval (trec_eval's C code) on the same qrels and run given as Python dicts, the same measures,
timed from the run's TREC file to the aggregates (dict building included; it needs them).

The project, its run and its round are built once and kept in the benchmark database.
"""

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from bench_django import DATA, ROOT, judged_round, setup_django

SLUG = "bench-evaluate"
TARGET_SECONDS = 5.0
N_LABELS = 10_000


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_file(n_queries: int, depth: int) -> Path:
    """A TREC run: query i returns documents D<i>-<r> at rank r (scores falling)."""
    path = DATA / f"evaluate_run_q{n_queries}_d{depth}.txt"
    if path.exists():
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    queries = np.repeat(np.arange(n_queries), depth)
    ranks = np.tile(np.arange(1, depth + 1), n_queries)
    qid = pc.binary_join_element_wise("q", pa.array(queries).cast(pa.string()), "")
    doc = pc.binary_join_element_wise(pc.binary_join_element_wise("D", pa.array(queries).cast(pa.string()), ""),
                                      pa.array(ranks).cast(pa.string()), "-")
    table = pa.table({"qid": qid, "q0": pa.array(np.full(len(queries), "Q0")), "doc": doc, "rank": ranks,
                      "score": (depth + 1 - ranks).astype(np.float64), "tag": pa.array(np.full(len(queries), "bench"))})
    pa_csv.write_csv(table, path, pa_csv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none"))
    return path


def labels(n_queries: int) -> list[tuple[str, str, int]]:
    """10,000 labels spread over the queries: one per query among its top 20, a second for the first ones."""
    out = []
    for i in range(n_queries):
        out.append((f"q{i}", f"D{i}-{i * 37 % 20 + 1}", 1 + i % 3))
    for i in range(min(N_LABELS - n_queries, n_queries)):
        out.append((f"q{i}", f"D{i}-{i * 53 % 100 + 21}", i % 4))
    return out


def build(n_queries: int, depth: int):
    from django.contrib.auth import get_user_model

    from judgments.models import Project, Query, QueryCollection, Round
    from judgments.ops.imports import import_run

    project = Project.objects.filter(slug=SLUG).first()
    if project and project.rounds.filter(name="bench round").exists() and project.runs.filter(n_rows=n_queries * depth).exists():
        return project.rounds.get(name="bench round"), project.runs.get(n_rows=n_queries * depth)
    if project:
        Round.objects.filter(project=project).delete()
        project.delete()
    project = Project.objects.create(name=SLUG, slug=SLUG)
    rater = get_user_model().objects.get_or_create(username="bench-evaluator")[0]
    collection = QueryCollection.objects.create(project=project, name="queries")
    tiers = ("head", "torso", "tail")
    Query.objects.bulk_create([Query(collection=collection, query_id=f"q{i}", text=f"query {i}", tier=tiers[i % 3], weight=1.0 + i % 7)
                               for i in range(n_queries)], batch_size=5000)
    started = time.perf_counter()
    run, _ = import_run(project, run_file(n_queries, depth), "bench.run", name="bench run", system="bench")
    print(f"imported the run ({run.n_rows:,} rows) in {time.perf_counter() - started:.0f} s")
    wanted = labels(n_queries)
    round = judged_round(project, collection, wanted, rater, author=None)
    return round, run


def ours(n_queries: int, depth: int) -> dict:
    setup_django()
    from evaluation.evaluations import DEFAULT_MEASURES, create_evaluation, run_evaluation

    round, run = build(n_queries, depth)
    evaluation = create_evaluation(round, [run], measures=list(DEFAULT_MEASURES), queue=False)
    started = time.perf_counter()
    run_evaluation(evaluation)
    seconds = time.perf_counter() - started
    row = evaluation.results["runs"][0]
    return {"seconds": seconds, "peak_mb": peak_mb(), "labels": evaluation.n_labels, "queries": row["queries"],
            "ndcg10": row["mean"]["nDCG@10"], "map": row["mean"]["AP"], "unjudged10": row["unjudged"]["10"]["share"]}


def peer(n_queries: int, depth: int) -> dict:
    import pytrec_eval

    qrels: dict = {}
    for q, d, grade in labels(n_queries):
        qrels.setdefault(q, {})[d] = grade
    started = time.perf_counter()
    run: dict = {}
    with open(run_file(n_queries, depth)) as handle:
        for line in handle:
            q, _, d, _, score, _ = line.split()
            run.setdefault(q, {})[d] = float(score)
    cutoffs = "1,5,10,20,50,100"
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "map", f"recall.{cutoffs}", f"P.{cutoffs}", f"ndcg_cut.{cutoffs}"})
    per_query = evaluator.evaluate(run)
    ndcg10 = sum(v["ndcg_cut_10"] for v in per_query.values()) / len(per_query)
    return {"seconds": time.perf_counter() - started, "peak_mb": peak_mb(), "ndcg10": ndcg10}


def in_child(case: str, options) -> dict:
    import json

    result = subprocess.run([sys.executable, __file__, "--case", case, "--queries", str(options.queries), "--depth", str(options.depth)],
                            cwd=ROOT / "benchmarks", capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"the {case} case failed:\n{result.stderr}")
    for line in result.stdout.splitlines()[:-1]:
        print(line)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    import json

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=6980)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--case", choices=("ours", "peer"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.case:
        print(json.dumps((ours if options.case == "ours" else peer)(options.queries, options.depth)))
        return
    verdict, pytrec = in_child("ours", options), in_child("peer", options)
    ok = verdict["seconds"] <= TARGET_SECONDS
    rows = options.queries * options.depth
    print(f"\n| {options.queries:,} queries x {options.depth:,} results ({rows:,} rows), {verdict['labels']:,} labels | seconds | peak RSS | target |")
    print("|---|---:|---:|---|")
    print(f"| Verdict: the evaluation job (qrels from the round, read the run, 20 measures + 6 unjudged shares, tiers, "
          f"per-query values stored) | **{verdict['seconds']:.2f}** | {verdict['peak_mb']:,.0f} MB | {'PASS' if ok else 'FAIL'} (<= 5 s) |")
    print(f"| peer: pytrec_eval from the TREC file (dicts built, the same 20 measures) | {pytrec['seconds']:.2f} | {pytrec['peak_mb']:,.0f} MB | |")
    same = abs(verdict["ndcg10"] - pytrec["ndcg10"]) < 1e-9
    print(f"\nnDCG@10 {verdict['ndcg10']:.6f} (pytrec_eval {pytrec['ndcg10']:.6f}: {'equal' if same else 'DIFFERENT'}), "
          f"MAP {verdict['map']:.6f}, unjudged@10 {verdict['unjudged10']:.3f}; load average {os.getloadavg()[0]:.2f}")
    sys.exit(0 if ok and same else 1)


if __name__ == "__main__":
    main()

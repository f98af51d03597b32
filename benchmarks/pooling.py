"""Run import and pooling speed, on PostgreSQL, against named peers.

    make bench-pooling        (or: .venv/bin/python benchmarks/pooling.py [--quick])

Cases (targets from the pooling issue, on the 2-core machine):
  * import a 7-million-line TREC run (6,980 queries x 1,000) as the import job does: read, validate
    with the engine's reader, sort into ranking order, write Parquet, store   -> at most 20 s
    peer: pandas.read_csv + sort + to_parquet, with no validation at all
  * build a depth-100 pool over 10 runs of 6,980 queries (runs 1,000 deep)   -> at most 60 s
    peer: the judgment-list method's pool_results() (a Python set union per query), no database
  * build a depth-20 pool over 5 runs of 400 queries                         -> at most 2 s
  * import a corpus of 1,000,000 documents (no target: it runs as a job with a progress bar)

Needs PostgreSQL (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/verdict_bench,
created if missing). Generated data is cached under benchmarks/data/.
"""

import argparse
import os
import resource
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from bench_django import DATA, setup_django


def fresh_project(slug: str):
    from judgments.models import Project

    Project.objects.filter(slug=slug).delete()
    return Project.objects.create(name=slug, slug=slug)


def synthetic_run(seed: int, n_queries: int, depth: int, vocabulary: int, noise: float = 0.5) -> pa.Table:
    """One system's run: every system ranks the same candidates per query (3 x depth of them) by a
    shared latent relevance plus its own noise. With noise 0.5, ten systems' top-100 lists overlap
    as TREC runs do: about a third of the pooled entries are distinct pairs."""
    import pandas as pd

    shared = np.random.default_rng(0)
    candidates = shared.integers(0, vocabulary, size=(n_queries, 3 * depth))
    latent = shared.normal(size=candidates.shape)
    scores = latent + np.random.default_rng(seed).normal(scale=noise, size=latent.shape)
    top = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
    frame = pd.DataFrame({"query_id": np.repeat(np.arange(n_queries), depth).astype(str),
                          "doc_id": np.take_along_axis(candidates, top, axis=1).ravel(),
                          "score": np.round(np.take_along_axis(scores, top, axis=1).ravel(), 3)})
    frame = frame.drop_duplicates(["query_id", "doc_id"])
    frame["doc_id"] = "D" + frame["doc_id"].astype(str).str.zfill(7)
    return pa.Table.from_pandas(frame, preserve_index=False)


def run_text(path: Path, n_queries: int, depth: int) -> Path:
    """A TREC run file of n_queries x depth lines (cached)."""
    import pyarrow.csv as csv

    if path.exists():
        return path
    rng = np.random.default_rng(7)
    n = n_queries * depth
    base = rng.integers(0, 8_000, size=n_queries).repeat(depth) * 1000 + np.tile(np.arange(depth), n_queries)
    table = pa.table({
        "qid": pa.array(np.repeat(np.arange(n_queries), depth)).cast(pa.string()),
        "q0": pa.array(["Q0"] * n),
        "doc": pa.compute.binary_join_element_wise("D", pa.array(base).cast(pa.string()), ""),
        "rank": pa.array(np.tile(np.arange(1, depth + 1), n_queries)),
        "score": pa.array(np.round(30 - np.tile(np.arange(depth), n_queries) * 0.02 + rng.random(n) * 0.01, 4)),
        "tag": pa.array(["bench"] * n),
    })
    path.parent.mkdir(parents=True, exist_ok=True)
    csv.write_csv(table, path, csv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none"))
    return path


def timed(call):
    start = time.perf_counter()
    result = call()
    seconds = time.perf_counter() - start
    return seconds, result


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_import(n_queries: int, depth: int, rows: list) -> None:
    import pandas as pd

    from judgments.ops.imports import import_run

    path = run_text(DATA / f"run-{n_queries}x{depth}.txt", n_queries, depth)
    project = fresh_project("bench-import")
    seconds, (stored, _created) = timed(lambda: import_run(project, path, path.name, name="big", system="bench"))
    rows.append(("import a run", f"{stored.n_rows:,} lines", "verdict import_run (validated)", seconds, 20.0))

    def pandas_peer():
        frame = pd.read_csv(path, sep=" ", header=None, names=["q", "z", "doc", "rank", "score", "tag"], dtype={"q": str, "doc": str})
        frame.sort_values(["q", "score", "doc"], ascending=[True, False, False]).to_parquet(DATA / "peer.parquet")

    seconds, _ = timed(pandas_peer)
    rows.append(("import a run", f"{stored.n_rows:,} lines", "pandas read_csv+to_parquet (no validation)", seconds, None))


def bench_corpus(n_docs: int, rows: list) -> None:
    """A corpus import as the job does it (validate, upsert in batches, one transaction); no target."""
    import json

    from judgments.ops.imports import import_corpus

    path = DATA / f"corpus-{n_docs}.jsonl"
    if not path.exists():
        with path.open("w") as handle:
            for i in range(n_docs):
                handle.write(json.dumps({"doc_id": f"D{i:07d}", "title": f"Product {i}", "body": "Light, warm and packable. " * 4,
                                         "price": i % 500, "url": f"https://shop.example/p/{i}"}) + "\n")
    project = fresh_project("bench-corpus")
    with path.open("rb") as stream:
        seconds, counts = timed(lambda: import_corpus(project, stream, path.name))
    rows.append(("import a corpus", f"{n_docs:,} documents", f"verdict import_corpus ({counts['added']:,} added)", seconds, None))


def bench_pool(n_runs: int, n_queries: int, run_depth: int, pool_depth: int, target: float, rows: list, *, vocabulary: int) -> None:
    from evaluation.engine import read_run
    from judgments.models import Query, QueryCollection
    from judgments.ops.imports import store_run
    from judgments.ops.pools import add_runs_to_pool, create_pool

    project = fresh_project(f"bench-pool-{n_runs}x{n_queries}")
    collection = QueryCollection.objects.create(project=project, name="bench")
    Query.objects.bulk_create(Query(collection=collection, query_id=str(q), text=f"query {q}") for q in range(n_queries))
    runs, tables = [], []
    for seed in range(n_runs):
        table = synthetic_run(seed + 1, n_queries, run_depth, vocabulary)
        tables.append(table)
        runs.append(store_run(project, read_run(table), f"{seed:064d}", name=f"system-{seed}", system=f"S{seed}"))
    pool = create_pool(project, name="bench", query_set=collection, depth=pool_depth, strategy="rrf")
    seconds, report = timed(lambda: add_runs_to_pool(pool, runs))
    label = f"{n_runs} runs x {n_queries:,} queries, depth {pool_depth}"
    rows.append(("build a pool", label, f"verdict add_runs_to_pool ({report['total_pairs']:,} pairs, PostgreSQL)", seconds, target))

    def seed_method():
        # The judgment-list method's pool_results(): union of each system's top-depth per query.
        per_query = {}
        for table in tables:
            frame = table.to_pandas().sort_values(["query_id", "score", "doc_id"], ascending=[True, False, False])
            frame = frame[frame.groupby("query_id").cumcount() < pool_depth]
            for qid, docs in frame.groupby("query_id", sort=False)["doc_id"]:
                per_query.setdefault(qid, set()).update(docs)
        return sum(len(docs) for docs in per_query.values())

    seconds, total = timed(seed_method)
    rows.append(("build a pool", label, f"seed pool_results() in Python ({total:,} pairs, no database)", seconds, None))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the script works")
    parser.add_argument("--cases", default="corpus,import,pool", help="comma list of: corpus, import, pool")
    args = parser.parse_args()
    setup_django()
    rows: list = []
    cases = set(args.cases.split(","))
    scale = 0.01 if args.quick else 1
    if "corpus" in cases:
        bench_corpus(int(1_000_000 * scale), rows)
    if "import" in cases:
        bench_import(int(6980 * scale) or 70, 1000, rows)
    if "pool" in cases:
        bench_pool(10, int(6980 * scale) or 70, 1000, 100, 60.0, rows, vocabulary=8_000_000)
        bench_pool(5, 400, 100, 20, 2.0, rows, vocabulary=200_000)
    print(f"\n{'case':<14} {'size':<36} {'tool':<62} {'wall s':>8}  target")
    for case, size, tool, seconds, target in rows:
        verdict = "" if target is None else ("PASS" if seconds <= target else "FAIL") + f" (<= {target:g} s)"
        print(f"{case:<14} {size:<36} {tool:<62} {seconds:>8.2f}  {verdict}")
    print(f"\npeak RSS of this process: {peak_rss_mb():,.0f} MB; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

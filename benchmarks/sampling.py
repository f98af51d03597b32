"""Query sampling from a 10-million-row log: from the file to a saved sample, on PostgreSQL, against a peer.

    make bench-sampling        (or: .venv/bin/python benchmarks/sampling.py [--rows 10000000])

The log (benchmarks/sampling_data.py, cached under benchmarks/data/): one row per search over 120 days,
Zipf-distributed queries (s = 1.05 over 2 million), language and device columns, about 3% spelling
variants, 0.1% personal data and 0.01% bad rows; 10 million rows are about 490 MB of CSV.

Cases, each in a fresh process so that its peak RSS is its own:
  * Verdict, what the import job and the "Save as a query set" button run: read and check every row,
    normalise (NFKC, case folding, whitespace, end punctuation), drop personal data, count per query,
    segment and day, store the three Parquet files and the log's row; then count the 90-day window, cut
    the tiers (share:0.8,0.95), draw 100/150/75 queries and save them as a query set with their raw
    rows                                                                 -> at most 30 s and 2 GB
  * peer: the script a data scientist would write with pandas: read_csv, lower-case and strip, keep the
    last 90 days, value_counts, cut the tiers by cumulative share, DataFrame.sample per tier. No other
    normalisation, no personal-data filter, no bad-row report, nothing stored.

Needs PostgreSQL (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/verdict_bench).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from bench_django import DATA, ROOT, setup_django
from sampling_data import generate_log

TARGET_SECONDS = 30.0
TARGET_PEAK_MB = 2048.0


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def verdict(path: str) -> dict:
    setup_django()
    from judgments.lib.querylog import ColumnMapping
    from judgments.lib.sampling import Boundaries
    from judgments.models import Project
    from judgments.ops.log_sampling import SamplingSettings, draw, import_query_log, save_sample

    Project.objects.filter(slug="bench-sampling").delete()
    project = Project.objects.create(name="bench-sampling", slug="bench-sampling")
    stages, started = {}, time.perf_counter()
    mapping = ColumnMapping(query="query", time="timestamp", segments=("language", "device"))
    log = import_query_log(project, path, os.path.basename(path), name="bench", mapping=mapping, max_bad_share=0.01)
    stages["import (read, normalise, count, store)"] = time.perf_counter() - started
    mark = time.perf_counter()
    drawn = draw(log, SamplingSettings(boundaries=Boundaries.parse("share:0.8,0.95"), seed=1))
    stages["window, tiers, sample"] = time.perf_counter() - mark
    mark = time.perf_counter()
    collection = save_sample(drawn, name="bench sample")
    stages["save the query set"] = time.perf_counter() - mark
    return {"seconds": time.perf_counter() - started, "peak_mb": peak_mb(), "stages": stages,
            "rows": log.rows_read, "queries": log.n_queries, "sampled": collection.queries.count(),
            "summary": drawn.sample.summary[["tier", "queries_in_log", "impressions", "sampled"]].to_dict("records")}


def peer(path: str) -> dict:
    import numpy as np
    import pandas as pd

    started = time.perf_counter()
    frame = pd.read_csv(path, usecols=["timestamp", "query"], dtype={"query": "string"}, engine="pyarrow")
    frame["timestamp"] = pd.to_datetime(frame["timestamp"], errors="coerce", utc=True)
    frame["query"] = frame["query"].str.lower().str.strip()
    end = frame["timestamp"].max()
    recent = frame[frame["timestamp"] > end - pd.Timedelta(days=90)]
    counts = recent["query"].value_counts()
    share = counts.cumsum() / counts.sum()
    tiers = np.where(share.shift(fill_value=0) < 0.8, "head", np.where(share.shift(fill_value=0) < 0.95, "torso", "tail"))
    ranked = pd.DataFrame({"query": counts.index, "traffic": counts.to_numpy(), "tier": tiers})
    parts = [(ranked[ranked.tier == tier], n) for tier, n in (("head", 100), ("torso", 150), ("tail", 75))]
    sample = pd.concat(part.sample(min(len(part), n), random_state=1) for part, n in parts)
    return {"seconds": time.perf_counter() - started, "peak_mb": peak_mb(), "queries": len(counts), "sampled": len(sample)}


def run_case(case: str, path: str) -> dict:
    """Run one case in a child process (its own peak RSS) and read its JSON answer."""
    result = subprocess.run([sys.executable, __file__, "--case", case, "--log", path], cwd=ROOT / "benchmarks",
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"the {case} case failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--case", choices=("verdict", "peer"), help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.case:
        print(json.dumps((verdict if options.case == "verdict" else peer)(options.log)))
        return
    started = time.perf_counter()
    path = generate_log(DATA, rows=options.rows, vocabulary=min(2_000_000, options.rows))
    print(f"log: {path.name}, {path.stat().st_size / 1e6:,.0f} MB ({time.perf_counter() - started:.0f} s to make or find)\n")
    ours, theirs = run_case("verdict", str(path)), run_case("peer", str(path))
    rows = f"{ours['rows']:,}"
    print(f"| from a {rows}-row log file to a saved sample | seconds | peak RSS | target |")
    print("|---|---:|---:|---|")
    for stage, seconds in ours["stages"].items():
        print(f"| Verdict: {stage} | {seconds:.1f} | | |")
    ok = ours["seconds"] <= TARGET_SECONDS and ours["peak_mb"] <= TARGET_PEAK_MB
    print(f"| **Verdict, file to saved query set** | **{ours['seconds']:.1f}** | **{ours['peak_mb']:,.0f} MB** | "
          f"{'PASS' if ok else 'FAIL'} (<= {TARGET_SECONDS:.0f} s, <= {TARGET_PEAK_MB:,.0f} MB) |")
    print(f"| peer: pandas read_csv + lower/strip + value_counts + sample (no checks, nothing stored) | {theirs['seconds']:.1f} | "
          f"{theirs['peak_mb']:,.0f} MB | |")
    print(f"\n{ours['queries']:,} distinct queries after normalisation (peer: {theirs['queries']:,} in its window); "
          f"{ours['sampled']} sampled. Tiers:")
    for cell in ours["summary"]:
        print(f"  {cell['tier']:<6} {cell['queries_in_log']:>10,} queries {cell['impressions']:>12,} impressions  {cell['sampled']} sampled")
    print(f"load average {os.getloadavg()[0]:.2f}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

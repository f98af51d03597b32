"""Publishing a judgment-list version at scale, on PostgreSQL.

    make bench-versions        (or: .venv/bin/python benchmarks/versions.py [--labels 1000000])

Case (target from the issue "Keeping a judgment list fresh", on the 2-core machine):
  * publish a round of 1,000,000 graded pairs (one rater each, 10,000 queries x 100 documents) as a version:
    every pair's final label by the round's consensus rule, written once as Parquet with its sha256
                                                                                  -> at most 10 s
  * then read the version back and export it as qrels (what `qrels@vN` downloads do), for reference.

The round is built with SQL (generate_series) and kept in the benchmark database between runs; the versions
each run publishes are deleted at its end.
"""

import argparse
import os
import resource
import sys
import time

from bench_django import bulk_project, kept_round, setup_django

SLUG = "bench-versions"
TARGET_SECONDS = 10.0


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build_round(n_items: int):
    """A round of n_items pairs, each graded by one rater, written with SQL; reused when present."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from judgments.lib.scales import GRADED
    from judgments.models import Pool, Round

    if (round := kept_round(SLUG, n_items)) is not None:
        return round
    rater = get_user_model().objects.get_or_create(username="bench-rater-0")[0]
    n_queries, per_query = n_items // 100, 100
    project, collection, guidelines = bulk_project(SLUG, n_queries, per_query * 10)
    pool = Pool.objects.create(project=project, name="pool", query_set=collection)
    round = Round.objects.create(project=project, name="bench round", pool=pool, guidelines=guidelines, scale=GRADED.to_json(),
                                 status=Round.Status.OPEN, raters_per_pair=1, overlap_share=0)
    round.raters.set([rater])
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO judgments_rounditem (uuid, round_id, pair_id, query_id, document_id, priority, query_key, pair_key, required, n_judged) "
            "SELECT gen_random_uuid(), %s, q.id * 1000 + k, q.id, d.id, -k, 0, 0, 1, 1 "
            "FROM judgments_query q CROSS JOIN generate_series(0, %s) AS k "
            "JOIN judgments_document d ON d.project_id = %s AND d.doc_id = 'doc' || lpad(((q.id * 7 + k * 13) %% %s)::text, 6, '0') "
            "WHERE q.collection_id = %s",
            [round.pk, per_query - 1, project.pk, per_query * 10, collection.pk])
        cursor.execute(
            "INSERT INTO judgments_judgment (uuid, item_id, rater_id, grade, unrateable, unrateable_note, note, created_at, updated_at) "
            "SELECT gen_random_uuid(), i.id, %s, i.id %% 4, '', '', '', now(), now() FROM judgments_rounditem i WHERE i.round_id = %s",
            [rater.pk, round.pk])
        cursor.execute("ANALYZE judgments_rounditem, judgments_judgment, judgments_query, judgments_document")
    return round


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", type=int, default=1_000_000, help="graded pairs in the round (one rater each)")
    options = parser.parse_args()
    setup_django()
    from judgments.models import JudgmentListVersion
    from judgments.ops import versions

    started = time.perf_counter()
    round = build_round(options.labels)
    print(f"round with {options.labels:,} graded pairs ready in {time.perf_counter() - started:.0f} s\n")
    JudgmentListVersion.objects.filter(round=round).delete()
    before = peak_mb()
    started = time.perf_counter()
    version = versions.publish(round, note="benchmark")
    seconds = time.perf_counter() - started
    publish_peak = peak_mb()
    started = time.perf_counter()
    size = sum(len(chunk) for chunk in versions.export(version, "qrels"))
    export_seconds = time.perf_counter() - started
    with version.file.open("rb") as handle:
        file_mb = len(handle.read()) / 1e6
    ok = seconds <= TARGET_SECONDS and version.n_pairs == options.labels
    print("| case | seconds | peak RSS | target |")
    print("|---|---:|---:|---|")
    print(f"| Verdict: publish v{version.number} of {version.n_pairs:,} labels over {version.n_queries:,} queries "
          f"(Parquet {file_mb:.1f} MB + sha256) | **{seconds:.1f}** | {publish_peak:,.0f} MB (+{publish_peak - before:,.0f} MB) | "
          f"{'PASS' if ok else 'FAIL'} (<= 10 s) |")
    print(f"| Verdict: read the version back and write its qrels ({size / 1e6:.1f} MB) | {export_seconds:.1f} | {peak_mb():,.0f} MB | |")
    print(f"\nload average {os.getloadavg()[0]:.2f}")
    JudgmentListVersion.objects.filter(round=round).delete()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

"""What a round's judging order costs a grade at 500,000 pairs: "save a grade, get the next pair", pool order
against MM-NS, in one process on PostgreSQL.

    .venv/bin/python benchmarks/judging_order_load.py [--pairs 500000] [--grades 300]

What it does:
  * builds (or reuses, in the benchmark database) an open round of --pairs pairs written with SQL: 100 documents
    per query, each pooled from 8 runs that rank the query's documents in 8 different orders (the provenance an
    adaptive order learns from), one rater per pair;
  * for pool order, then MM-NS (ranking every query's pairs again, what the background job started by the lead's
    setting change does, is timed too), one rater
    saves --grades grades, each followed by asking for the next pair, as the grading screen does
    (`grading.record` then `grading.next_item`), and prints the median and p95 of the two together;
  * runs in-process, one rater at a time: the server's own cost per grade, without HTTP or other raters.

The grading-screen targets are `benchmarks/grading_load.py`'s (p95 at most 50 ms, 50 raters over HTTP, 10,000
pairs); this script shows what the order adds at the largest round size the page benchmark uses.
"""

import argparse
import random
import statistics
import time

from bench_django import kept_round, setup_django

SLUG = "bench-judging-order"
RUN_STEPS = (1, 3, 7, 9, 11, 13, 17, 19)  # coprime with 100: rank = k * step mod 100 is a permutation per run
PER_QUERY = 100


def build_round(n_pairs: int):
    """An open round of n_pairs pairs with 8 runs' provenance, written with SQL; reused when present."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from judgments.lib.scales import GRADED
    from judgments.models import Document, GuidelinesVersion, Pool, Project, Query, QueryCollection, Round
    from judgments.ops.grading import count_round

    if (round := kept_round(SLUG, n_pairs)) is not None:
        return round
    project = Project.objects.create(name=SLUG, slug=SLUG)
    rater = get_user_model().objects.get_or_create(username="bench-order-rater")[0]
    collection = QueryCollection.objects.create(project=project, name="queries")
    Query.objects.bulk_create([Query(collection=collection, query_id=f"q{i:05d}", text=f"query {i}") for i in range(n_pairs // PER_QUERY)],
                              batch_size=5000)
    Document.objects.bulk_create([Document(project=project, doc_id=f"doc{i:03d}", fields={"title": f"Document {i}"}) for i in range(PER_QUERY)])
    guidelines = GuidelinesVersion.objects.create(project=project, number=1, text="# Rules")
    pool = Pool.objects.create(project=project, name="pool", query_set=collection,
                               report={"total_pairs": n_pairs, "pairs_per_query": {}, "missing_from_corpus": 0, "missing_examples": []})
    round = Round.objects.create(project=project, name="bench round", pool=pool, guidelines=guidelines, scale=GRADED.to_json(),
                                 status=Round.Status.OPEN, raters_per_pair=1, overlap_share=0, seed=7)
    round.raters.set([rater])
    provenance = "json_build_object(" + ", ".join(f"'run{r}', ((k * {step}) %% {PER_QUERY}) + 1" for r, step in enumerate(RUN_STEPS, 1)) + ")"
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO judgments_poolpair (pool_id, query_id, doc_id, document_id, best_rank, n_systems, provenance, priority) "
            f"SELECT %s, q.id, d.doc_id, d.id, 1, {len(RUN_STEPS)}, {provenance}, -k FROM judgments_query q "
            f"CROSS JOIN generate_series(0, {PER_QUERY - 1}) AS k JOIN judgments_document d ON d.project_id = %s AND d.doc_id = 'doc' || lpad(k::text, 3, '0') "
            "WHERE q.collection_id = %s", [pool.pk, project.pk, collection.pk])
        cursor.execute(
            "INSERT INTO judgments_rounditem (uuid, round_id, pair_id, query_id, document_id, priority, query_key, pair_key, required, n_judged) "
            "SELECT gen_random_uuid(), %s, p.id, p.query_id, p.document_id, p.priority, (p.query_id * 2654435761) %% 2147483648, "
            "(p.id * 2654435761) %% 2147483648, 1, 0 FROM judgments_poolpair p WHERE p.pool_id = %s", [round.pk, pool.pk])
        cursor.execute("ANALYZE judgments_rounditem")
    count_round(round)
    return round


def grade_and_next(round, rater, grades: int, rng: random.Random) -> list[float]:
    """Milliseconds for each "save a grade, get the next pair"."""
    from judgments.ops import grading

    item, times = grading.next_item(round, rater), []
    for _ in range(grades):
        started = time.perf_counter()
        grading.record(item, rater, grading.Verdict(grade=rng.choice([0, 0, 1, 2, 3])))
        item = grading.next_item(round, rater)
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=500_000, help="pairs in the round, 100 per query (default 500,000)")
    parser.add_argument("--grades", type=int, default=300, help="grades timed per order (default 300)")
    args = parser.parse_args()
    setup_django()
    from judgments.ops import serving_order

    started = time.perf_counter()
    round = build_round(args.pairs)
    rater = round.raters.get()
    print(f"round of {round.items.count():,} pairs from {len(RUN_STEPS)} runs ready in {time.perf_counter() - started:.1f} s")
    rng = random.Random(0)
    print(f"\n| judging order | ranking every pair (the job) | grade + next pair: median / p95 ms ({args.grades} grades) |")
    print("|---|---:|---:|")
    for order in ("pool", "mmns"):
        round.judging_order = order
        round.save(update_fields=["judging_order"])
        started = time.perf_counter()
        serving_order.reorder(round)  # what the lead's change starts: a background job at this size
        setting = time.perf_counter() - started
        times = sorted(grade_and_next(round, rater, args.grades, rng))
        p95 = times[max(0, round_half_up(0.95 * len(times)) - 1)]
        print(f"| {order} | {setting:.1f} s | {statistics.median(times):.1f} / {p95:.1f} |")


def round_half_up(value: float) -> int:
    return int(value + 0.5)


if __name__ == "__main__":
    main()

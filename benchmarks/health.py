"""The whole staleness check of one project at scale, on PostgreSQL.

    .venv/bin/python benchmarks/health.py [--labels-per-round-query 8]

The project (issue 17's size): 10 rounds over a query set of 6,980 queries (8 pairs per query and round, each
graded by 2 raters: 1,116,800 labels), the first five rounds on guidelines v1 and the rest on v2, labels
spread over a year; 20 stored runs of 6,980 queries x 1,000 documents, each with a finished evaluation on the
newest round; two query logs of 10 million rows each (counted per query and day, as the import stores them),
the newer one drifted. Target: `health.check_project` (every trigger, recorded) in at most 30 s on 2 cores.

What the check reads: the evaluations' stored unjudged shares (the engine measured them when the runs were
evaluated; the check does not re-read the 140-million-row runs, so their Parquet files are not written here),
the two logs' daily counts, the query sets' texts, and counts over the labels in PostgreSQL.
The data are built with SQL and Parquet and cached in the benchmark database between runs.
"""

import argparse
import time
import uuid

import numpy as np
import pyarrow as pa

from bench_django import drop_project, setup_django

SLUG = "bench-health"
N_QUERIES = 6_980
N_ROUNDS = 10
N_RUNS = 20
RUN_DEPTH = 1_000
LOG_ROWS = 10_000_000
LOG_QUERIES = 2_000_000  # distinct queries a 10-million-row log reaches (Zipf)
LOG_DAYS = 90
TARGET_SECONDS = 30.0


def daily_table(rows: int, seed: int, shift: int) -> pa.Table:
    """A log of `rows` searches counted per (query, day): Zipf traffic over LOG_QUERIES queries; `shift` moves
    the popularity ranking (drift) so that a newer log's head is partly new."""
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(1.15, size=rows), LOG_QUERIES) - 1
    ids = (ranks + shift) % LOG_QUERIES
    days = rng.integers(0, LOG_DAYS, size=rows)
    key = ids.astype(np.int64) * LOG_DAYS + days
    unique, counts = np.unique(key, return_counts=True)
    query_ids, day_offsets = unique // LOG_DAYS, unique % LOG_DAYS
    texts = pa.array(np.char.add("query ", query_ids.astype(str)).astype(object), pa.string())
    start = np.datetime64("2026-08-01", "D")
    return pa.table({"query": texts, "day": pa.array((start + day_offsets.astype("timedelta64[D]")), pa.date32()),
                     "count": pa.array(counts, pa.int64())})


def build(per_query: int):
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from evaluation.models import EvaluatedRun, Evaluation
    from judgments.lib.scales import GRADED
    from judgments.models import (Document, GuidelinesVersion, Pool, Project, Query, QueryCollection, QueryLog, Round,
                                  StoredRun)
    from judgments.ops import log_sampling

    project = Project.objects.filter(slug=SLUG).first()
    if project is not None and project.rounds.count() == N_ROUNDS and project.query_logs.count() == 2 \
            and project.rounds.first().items.count() == N_QUERIES * per_query:
        return project
    if project is not None:
        drop_project(project)
    print("building the project (once; cached in the benchmark database)...", flush=True)
    project = Project.objects.create(name=SLUG, slug=SLUG)
    users = [get_user_model().objects.get_or_create(username=f"bench-health-rater-{i}")[0] for i in range(2)]
    collection = QueryCollection.objects.create(project=project, name="queries")
    # Half the set is the old log's busiest queries; the rest are rarer ones.
    Query.objects.bulk_create([Query(collection=collection, query_id=f"q{i:05d}", text=f"query {i if i % 2 == 0 else 50_000 + i}")
                               for i in range(N_QUERIES)], batch_size=5000)
    Document.objects.bulk_create([Document(project=project, doc_id=f"doc{i:06d}", fields={}) for i in range(per_query * 10)],
                                 batch_size=5000)
    now = timezone.now()
    v1 = GuidelinesVersion.objects.create(project=project, number=1, text="# Rules", created_at=now - timezone.timedelta(days=400))
    v2 = GuidelinesVersion.objects.create(project=project, number=2, text="# Rules, stricter", created_at=now - timezone.timedelta(days=150))
    pool = Pool.objects.create(project=project, name="pool", query_set=collection)
    for n in range(N_ROUNDS):
        round = Round.objects.create(project=project, name=f"round {n + 1}", pool=pool, guidelines=v1 if n < 5 else v2,
                                     scale=GRADED.to_json(), status=Round.Status.CLOSED, raters_per_pair=2, overlap_share=0,
                                     created_at=now - timezone.timedelta(days=360 - 35 * n))
        round.raters.set(users)
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO judgments_rounditem (uuid, round_id, pair_id, query_id, document_id, priority, query_key, pair_key, required, n_judged) "
                "SELECT gen_random_uuid(), %s, q.id * 1000 + k, q.id, d.id, -k, 0, 0, 2, 2 "
                "FROM judgments_query q CROSS JOIN generate_series(0, %s) AS k "
                "JOIN judgments_document d ON d.project_id = %s AND d.doc_id = 'doc' || lpad(((q.id * 7 + k * 13) %% %s)::text, 6, '0') "
                "WHERE q.collection_id = %s",
                [round.pk, per_query - 1, project.pk, per_query * 10, collection.pk])
            for i, user in enumerate(users):
                cursor.execute(
                    "INSERT INTO judgments_judgment (uuid, item_id, rater_id, grade, unrateable, unrateable_note, note, created_at, updated_at) "
                    "SELECT gen_random_uuid(), i.id, %s, (i.id + %s) %% 4, '', '', '', "
                    "%s::timestamptz + (i.id %% 30) * interval '1 day', %s::timestamptz + (i.id %% 30) * interval '1 day' "
                    "FROM judgments_rounditem i WHERE i.round_id = %s",
                    [user.pk, i, round.created_at, round.created_at, round.pk])
    newest = project.rounds.order_by("-created_at").first()
    rng = np.random.default_rng(5)
    for n in range(N_RUNS):
        run = StoredRun(project=project, name=f"system-{n:02d}", system=f"system {n}", sha256=uuid.uuid4().hex * 2,
                        n_queries=N_QUERIES, n_rows=N_QUERIES * RUN_DEPTH, n_documents=N_QUERIES * RUN_DEPTH, depth=RUN_DEPTH)
        run.file.name = f"runs/{SLUG}/not-written-{n}.parquet"  # the check never opens it (see the docstring)
        run.save()
        shares = {str(k): {"share": float(min(1, rng.uniform(0.02, 0.4) * (1 + k / 100))), "level": ""} for k in (1, 5, 10, 20, 50, 100)}
        evaluation = Evaluation.objects.create(project=project, round=newest, measures=["nDCG@10"], consensus_rule="majority",
                                               state=Evaluation.State.DONE,
                                               results={"runs": [{"run": run.name, "run_uuid": str(run.uuid), "unjudged": shares}]})
        EvaluatedRun.objects.create(evaluation=evaluation, run=run, position=0, sha256=run.sha256)
    for n, (name, shift) in enumerate((("September", 0), ("November", 300))):
        started = time.perf_counter()
        table = daily_table(LOG_ROWS, seed=n, shift=shift)
        log = QueryLog(project=project, name=name, original_name=f"{name}.csv", mapping={"query": "query", "time": "timestamp"},
                       rows_read=LOG_ROWS, rows_good=LOG_ROWS, impressions=LOG_ROWS,
                       n_queries=len(set(table["query"].to_pylist())), created_at=now - timezone.timedelta(days=60 * (1 - n)))
        log.folder = f"logs/{SLUG}/{log.uuid.hex}"
        for which, data in (("daily", table), ("variants", pa.table({"query": pa.array([], pa.string()), "raw": pa.array([], pa.string()),
                                                                       "count": pa.array([], pa.int64())})),
                            ("rows", pa.table({"query": pa.array([], pa.string())}))):
            log_sampling._store(f"{log.folder}/{which}.parquet", data)
        log.save()
        print(f"  log {name}: {table.num_rows:,} (query, day) counts from {LOG_ROWS:,} rows in {time.perf_counter() - started:.0f} s",
              flush=True)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE judgments_rounditem, judgments_judgment, judgments_query")
    return project


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--labels-per-round-query", type=int, default=8, help="pairs per query and round (8: 1.1 million labels)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    setup_django()
    from judgments.models import Judgment
    from judgments.ops import health

    project = build(args.labels_per_round_query)
    labels = Judgment.objects.filter(item__round__project=project).count()
    print(f"project: {project.rounds.count()} rounds, {project.runs.count()} runs, {labels:,} labels, "
          f"{project.query_logs.count()} logs of {LOG_ROWS:,} rows")
    times = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        check = health.check_project(project, notify=False)
        times.append(time.perf_counter() - started)
        print(f"  check: {times[-1]:.2f} s; " + "; ".join(f"{key} {t['state']}" for key, t in check.triggers.items()), flush=True)
    best = min(times)
    print(f"whole check: best {best:.2f} s of {args.repeat} (target <= {TARGET_SECONDS:.0f} s): {'PASS' if best <= TARGET_SECONDS else 'FAIL'}")
    for key, trigger in check.triggers.items():
        print(f"  {key}: {trigger['summary']}")


if __name__ == "__main__":
    main()

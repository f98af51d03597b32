"""Shared by the benchmark scripts that need the app: Django set up on the benchmark PostgreSQL."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
DATABASE_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/verdict_bench")


def setup_django() -> None:
    """Create the benchmark database if missing, point Django at it, and migrate."""
    import psycopg

    admin = DATABASE_URL.rsplit("/", 1)[0] + "/postgres"
    name = DATABASE_URL.rsplit("/", 1)[1]
    with psycopg.connect(admin.replace("postgres://", "postgresql://", 1), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = DATABASE_URL
    os.environ["MEDIA_ROOT"] = str(DATA / "media")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DEBUG", "true")  # the development settings, as `make bench` sets them
    sys.path.insert(0, str(ROOT))
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def judged_round(project, collection, wanted: list[tuple[str, str, int]], rater, author):
    """An open round over a pool of the `wanted` (query id, doc id, grade) triples of `collection`, each graded by
    `rater`, its documents added to the project: built in bulk, not through the actions, as the benchmarks need
    far more labels than a test."""
    from judgments.lib.scales import GRADED
    from judgments.models import Document, Judgment, Pool, PoolPair, Round, RoundItem
    from judgments.ops.actions import save_guidelines

    Document.objects.bulk_create([Document(project=project, doc_id=doc, fields={}) for _, doc, _ in wanted], batch_size=5000)
    query_pk = dict(collection.queries.values_list("query_id", "pk"))
    document_pk = dict(project.documents.values_list("doc_id", "pk"))
    pool = Pool.objects.create(project=project, name="pool", query_set=collection)
    PoolPair.objects.bulk_create([PoolPair(pool=pool, query_id=query_pk[q], doc_id=d, document_id=document_pk[d], best_rank=1,
                                           n_systems=1, priority=0.0) for q, d, _ in wanted], batch_size=5000)
    pair_pk = {(p.query_id, p.doc_id): p.pk for p in pool.pairs.all()}
    guidelines = save_guidelines(project, "# Rules", author=author)[0]
    round = Round.objects.create(project=project, name="bench round", pool=pool, guidelines=guidelines, scale=GRADED.to_json(),
                                 status=Round.Status.OPEN, overlap_share=0)
    items = RoundItem.objects.bulk_create([RoundItem(round=round, pair_id=pair_pk[(query_pk[q], d)], query_id=query_pk[q],
                                                     document_id=document_pk[d], priority=0.0, n_judged=1) for q, d, _ in wanted],
                                          batch_size=5000)
    Judgment.objects.bulk_create([Judgment(item=item, rater=rater, grade=grade) for item, (_, _, grade) in zip(items, wanted)], batch_size=5000)
    return round


def drop_project(project) -> None:
    """Delete a benchmark project built for another size: its judgments, claims, round items and pool pairs with SQL
    (the ORM would load every row to delete it), after what holds its rounds (evaluations, list versions: RESTRICT)."""
    from django.db import connection

    from evaluation.models import Evaluation
    from judgments.models import JudgmentListVersion, Round

    Evaluation.objects.filter(project=project).delete()
    JudgmentListVersion.objects.filter(project=project).delete()
    with connection.cursor() as cursor:
        for table in ("judgments_judgment j USING judgments_rounditem i, judgments_round r WHERE j.item_id = i.id AND i.round_id = r.id AND",
                      "judgments_claim c USING judgments_rounditem i, judgments_round r WHERE c.item_id = i.id AND i.round_id = r.id AND",
                      "judgments_rounditem i USING judgments_round r WHERE i.round_id = r.id AND",
                      "judgments_poolpair p USING judgments_pool r WHERE p.pool_id = r.id AND"):
            cursor.execute(f"DELETE FROM {table} r.project_id = %s", [project.pk])
    Round.objects.filter(project=project).delete()
    project.delete()


def kept_round(slug: str, n_items: int):
    """The round of the benchmark project `slug` when it has `n_items` items (built by an earlier run); otherwise None,
    and the project, built for another size, is dropped."""
    from judgments.models import Project, Round

    project = Project.objects.filter(slug=slug).first()
    round = Round.objects.filter(project=project).first() if project else None
    if round is not None and round.items.count() == n_items:
        return round
    if project is not None:
        drop_project(project)
    return None


def bulk_project(slug: str, n_queries: int, n_documents: int):
    """A fresh benchmark project `slug` with a query set of `n_queries` queries (q00000, q00001...), `n_documents`
    documents with no fields (doc000000...) and guidelines v1, written in bulk: (project, query set, guidelines)."""
    from judgments.models import Document, GuidelinesVersion, Project, Query, QueryCollection

    project = Project.objects.create(name=slug, slug=slug)
    collection = QueryCollection.objects.create(project=project, name="queries")
    Query.objects.bulk_create([Query(collection=collection, query_id=f"q{i:05d}", text=f"query {i}") for i in range(n_queries)],
                              batch_size=5000)
    Document.objects.bulk_create([Document(project=project, doc_id=f"doc{i:06d}", fields={}) for i in range(n_documents)],
                                 batch_size=5000)
    return project, collection, GuidelinesVersion.objects.create(project=project, number=1, text="# Rules")

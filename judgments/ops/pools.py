"""Pools in the database: build or extend a pool from stored runs, and keep its report; answer pools.

The pooling itself (union of top-k, provenance, priorities, overlap) is `judgments.lib.pooling`, which
knows nothing of Django; this module feeds it from Parquet runs and writes its pairs back.
"""

import hashlib
import io
import json
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
from django.db import connection, transaction

from ..lib import pooling
from ..models import AnswerRun, Document, Pool, PoolPair, Project, QueryCollection, StoredRun
from .actions import ActionRefused
from .answers import answered_query_ids, read_answer_run
from .imports import load_run_table
from .jobs import Job, Progress, job_kind


class PoolRefused(ActionRefused):
    """The pool cannot be built as asked; the message says why."""


@transaction.atomic
def create_pool(project: Project, *, name: str, query_set: QueryCollection, depth: int, strategy: str, user=None) -> Pool:
    if project.pools.filter(name=name).exists():
        raise PoolRefused(f"The project already has a pool named {name!r}.")
    if query_set.project_id != project.pk:
        raise PoolRefused("The query set belongs to another project.")
    if depth < 1:
        raise PoolRefused("The depth must be at least 1.")
    return Pool.objects.create(project=project, name=name, query_set=query_set, depth=depth, strategy=strategy, created_by=user)


def run_query_ids(run: StoredRun) -> set[str]:
    """The ids of the queries a stored run has results for."""
    return set(pc.unique(load_run_table(run, columns=["query_id"]).column("query_id")).to_pylist())


def coverage(run: StoredRun, query_ids: set[str], answered: set[str] | None = None) -> dict:
    """How much of a query set the run answers: queries with results and the ones missing. `answered`: the
    run's query ids, when already read."""
    missing = sorted(query_ids - (run_query_ids(run) if answered is None else answered))
    return {"with_results": len(query_ids) - len(missing), "missing": len(missing), "missing_examples": missing[:20]}


def run_coverage(project: Project, query_set: QueryCollection | None, answered: dict[int, set[str]] | None = None) -> list[tuple]:
    """Each of the project's runs with its coverage of the query set (None without a query set).
    `answered`: each run's query ids by its pk, when already read."""
    query_ids = set(query_set.queries.values_list("query_id", flat=True)) if query_set else set()
    answered = answered or {}
    return [(run, coverage(run, query_ids, answered.get(run.pk)) if query_set else None) for run in project.runs.select_related("uploaded_by", "project")]


@dataclass(frozen=True)
class AnsweredSet:
    """The query set that most runs have results for: `runs_with_results` of `runs` have a result for one
    of its queries at least. `query_set` is None when the project has no query set."""

    query_set: QueryCollection | None
    runs_with_results: int
    runs: int


def _answering(ids: set[str], answered: list[set[str]]) -> tuple[int, int]:
    """How many runs (each given by its query ids) answer a query of `ids` at least, and how many (run,
    query) pairs they answer."""
    return sum(1 for run_ids in answered if ids & run_ids), sum(len(ids & run_ids) for run_ids in answered)


def runs_answering(query_set: QueryCollection, answered: list[set[str]]) -> AnsweredSet:
    """How many of the runs (`answered`: each run's query ids) have a result for a query of the set."""
    return AnsweredSet(query_set, _answering(set(query_set.queries.values_list("query_id", flat=True)), answered)[0], len(answered))


def the_set_runs_answer(project: Project, answered: list[set[str]]) -> AnsweredSet:
    """Of the project's query sets, the one the most runs (`answered`: each run's query ids) have results
    for; on a tie, the one with the most (run, query) pairs answered, then the newest. Runs and query sets
    meet on query ids only, so a run made for one set shows 0 with results against any other."""
    best, best_key = None, (-1, -1)
    for query_set in project.query_sets.all():  # newest first: only a greater key replaces the first of equals
        key = _answering(set(query_set.queries.values_list("query_id", flat=True)), answered)
        if key > best_key:
            best, best_key = query_set, key
    return AnsweredSet(best, max(best_key[0], 0), len(answered))


def coverage_set(project: Project, asked: QueryCollection | None, answered: list[set[str]]) -> AnsweredSet:
    """The query set a run list shows coverage of: the one asked for, else the one the runs answer."""
    return runs_answering(asked, answered) if asked is not None else the_set_runs_answer(project, answered)


def check_runs_match(query_set: QueryCollection, runs: list[StoredRun], outcome: str = "The pool would have no pairs") -> None:
    """Refuse to pool runs that have no results for any query of the set (`outcome` says what that would
    mean). Runs and query sets meet on query ids only, so the message shows some ids from both sides."""
    set_ids = set(query_set.queries.values_list("query_id", flat=True))
    run_ids = set().union(*(run_query_ids(run) for run in runs))
    if set_ids & run_ids:
        return
    if not set_ids:
        raise PoolRefused(f"The query set “{query_set.name}” has no queries.")
    raise PoolRefused(
        f"{outcome}: none of the chosen runs has results for a query of “{query_set.name}”. "
        f"Runs and query sets are matched by query id, and the set's ids ({_examples(set_ids)}) are not the "
        f"runs' ({_examples(run_ids)}). Choose runs made for this query set, or the query set the runs answer.")


def _examples(ids: set[str]) -> str:
    shown = sorted(ids)[:3]
    return ", ".join(shown) + (", ..." if len(ids) > len(shown) else "") if shown else "none"


def ranked_list(run: StoredRun, depth: int, query_ids: list[str]) -> pooling.RankedList:
    """A stored run's top `depth` for the given queries, as the pooling module takes it."""
    table = load_run_table(run, columns=["query_id", "doc_id", "rank"], filters=[("rank", "<=", depth)])
    table = table.filter(pc.is_in(table.column("query_id"), value_set=pc.cast(query_ids, "string")))
    # Arrow columns go straight in: no Python string per row.
    return pooling.RankedList(
        system=run.name, query_ids=table.column("query_id"), doc_ids=table.column("doc_id"), ranks=table.column("rank")
    )


def add_runs_to_pool(pool: Pool, runs: list[StoredRun], progress: Progress | None = None) -> dict:
    """Pool the runs' top `pool.depth`, adding only new pairs; existing pairs (and their grades) stay.

    Returns the pool report, which is also saved on the pool.
    """
    report = progress or (lambda *args, **kwargs: None)
    if pool.kind == Pool.Kind.ANSWERS:
        raise PoolRefused(f"“{pool.name}” is a pool of answers: it takes no stored runs.")
    new_runs = [run for run in runs if not pool.runs.filter(pk=run.pk).exists()]
    foreign = [run.name for run in new_runs if run.project_id != pool.project_id]
    if foreign:
        raise PoolRefused(f"These runs belong to another project: {', '.join(foreign)}.")
    all_runs = list(pool.runs.all()) + new_runs
    if not pool.pairs.exists():
        check_runs_match(pool.query_set, all_runs)
    queries = list(pool.query_set.queries.values_list("query_id", "pk"))
    query_ids = [query_id for query_id, _ in queries]
    steps = len(all_runs) + 2
    lists = []
    for index, run in enumerate(all_runs):
        report(index, steps, f"Reading the top {pool.depth} of {run.name}")
        lists.append(ranked_list(run, pool.depth, query_ids))
    new_lists = lists[len(all_runs) - len(new_runs):]

    report(len(all_runs), steps, "Pooling")
    existing = _pairs_frame(pool)
    options = {"strategy": pool.strategy, "query_order": query_ids}
    if existing.empty:
        full = pooling.build_pool(new_lists, pool.depth, **options) if new_lists else existing
        added, changed = full, existing
    else:
        full, added = pooling.add_runs(existing, new_lists, pool.depth, **options)
        changed = _changed_pairs(existing, full)

    report(len(all_runs) + 1, steps, f"Saving {len(added):,} new pairs")
    with transaction.atomic():
        query_pk = dict(queries)
        _insert_pairs(pool, added, query_pk)
        _update_pairs(pool, changed, query_pk)
        _link_documents(pool)
        pool.runs.add(*new_runs)
        pool.report = _report(pool, full, lists)
        pool.save(update_fields=["report"])
    report(steps, steps, "Done")
    return pool.report


def add_pairs(pool: Pool, run: StoredRun, pairs: pd.DataFrame) -> int:
    """Pool chosen documents of a run (`pairs`: query_id, doc_id, rank), such as its unjudged top k,
    adding only pairs the pool lacks. Their provenance names the run and the depth they came from
    (the run may be pooled already at a smaller depth). Returns how many pairs were added."""
    if pool.kind == Pool.Kind.ANSWERS:
        raise PoolRefused(f"“{pool.name}” is a pool of answers: it takes no documents.")
    existing = _pairs_frame(pool)
    if not existing.empty:
        known = pairs.merge(existing[["query_id", "doc_id"]], on=["query_id", "doc_id"], how="left", indicator=True)
        pairs = pairs[(known["_merge"] == "left_only").to_numpy()]
    if pairs.empty:
        return 0
    depth = max(pool.depth, int(pairs["rank"].max()))
    systems = {system for provenance in existing.get("provenance", []) for system in provenance}
    name, n = f"{run.name} (top {int(pairs['rank'].max())})", 1
    while name in systems:
        n += 1
        name = f"{run.name} (top {int(pairs['rank'].max())}, {n})"
    chosen = pooling.RankedList(system=name, query_ids=pairs["query_id"].to_numpy(), doc_ids=pairs["doc_id"].to_numpy(),
                                ranks=pairs["rank"].to_numpy())
    options = {"strategy": pool.strategy, "query_order": list(pool.query_set.queries.values_list("query_id", flat=True))}
    if existing.empty:
        added, changed = pooling.build_pool([chosen], depth, **options), existing
    else:
        full, added = pooling.add_runs(existing, [chosen], depth, **options)
        changed = _changed_pairs(existing, full)
    with transaction.atomic():
        query_pk = dict(pool.query_set.queries.values_list("query_id", "pk"))
        _insert_pairs(pool, added, query_pk)
        _update_pairs(pool, changed, query_pk)
        _link_documents(pool)
    return len(added)


def _pairs_frame(pool: Pool) -> pd.DataFrame:
    rows = pool.pairs.order_by().values_list("query__query_id", "doc_id", "best_rank", "n_systems", "provenance", "priority")
    return pd.DataFrame(list(rows), columns=["query_id", "doc_id", "best_rank", "n_systems", "provenance", "priority"])


def _changed_pairs(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    merged = after.merge(before[["query_id", "doc_id", "n_systems", "priority"]], on=["query_id", "doc_id"], suffixes=("", "_before"))
    return merged[(merged.n_systems != merged.n_systems_before) | (merged.priority != merged.priority_before)]


PAIR_COLUMNS = ("pool_id", "query_id", "doc_id", "best_rank", "n_systems", "provenance", "priority")


def _pair_rows(pool: Pool, pairs: pd.DataFrame, query_pk: dict[str, int]) -> pa.Table:
    """The pairs as rows of the pair table, column for column (query ids become Query keys)."""
    return pa.table({
        "pool_id": pa.array(np.full(len(pairs), pool.pk, dtype=np.int64)),
        "query_id": pa.array(pairs.query_id.map(query_pk).to_numpy(dtype=np.int64)),
        "doc_id": pa.array(pairs.doc_id.to_numpy(dtype=object), pa.string()),
        "best_rank": pa.array(pairs.best_rank.to_numpy(dtype=np.int64)),
        "n_systems": pa.array(pairs.n_systems.to_numpy(dtype=np.int64)),
        "provenance": pa.array(pairs.provenance_json.to_numpy(dtype=object), pa.string()),
        "priority": pa.array(pairs.priority.to_numpy(dtype=np.float64)),
    })


def _copy_rows(cursor, table_name: str, rows: pa.Table) -> None:
    """Bulk-load rows into a PostgreSQL table with COPY (CSV), an order of magnitude faster than INSERT."""
    buffer = io.BytesIO()
    pa_csv.write_csv(rows, buffer, pa_csv.WriteOptions(include_header=False))
    with cursor.cursor.copy(f"COPY {table_name} ({', '.join(rows.column_names)}) FROM STDIN WITH (FORMAT csv)") as copy:
        view = buffer.getbuffer()
        for start in range(0, len(view), 8 << 20):
            copy.write(view[start:start + (8 << 20)])


def _insert_pairs(pool: Pool, pairs: pd.DataFrame, query_pk: dict[str, int]) -> None:
    if pairs.empty:
        return
    rows = _pair_rows(pool, pairs, query_pk)
    table = PoolPair._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            _copy_rows(cursor, table, rows)
        else:
            marks = ", ".join(["%s"] * len(PAIR_COLUMNS))
            cursor.executemany(f"INSERT INTO {table} ({', '.join(PAIR_COLUMNS)}) VALUES ({marks})", list(zip(*rows.to_pydict().values())))


def _update_pairs(pool: Pool, pairs: pd.DataFrame, query_pk: dict[str, int]) -> None:
    """Rewrite the provenance, best rank and priority of pairs that newly pooled systems also found."""
    if pairs.empty:
        return
    rows = _pair_rows(pool, pairs, query_pk)
    table = PoolPair._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"CREATE TEMPORARY TABLE changed_pairs (LIKE {table} INCLUDING DEFAULTS) ON COMMIT DROP")
            cursor.execute("ALTER TABLE changed_pairs DROP COLUMN id")
            _copy_rows(cursor, "changed_pairs", rows)
            cursor.execute(
                f"UPDATE {table} p SET best_rank = c.best_rank, n_systems = c.n_systems, provenance = c.provenance, "
                f"priority = c.priority FROM changed_pairs c "
                f"WHERE p.pool_id = c.pool_id AND p.query_id = c.query_id AND p.doc_id = c.doc_id"
            )
            cursor.execute("DROP TABLE changed_pairs")
        else:
            values = rows.to_pydict()
            cursor.executemany(
                f"UPDATE {table} SET best_rank = %s, n_systems = %s, provenance = %s, priority = %s "
                f"WHERE pool_id = %s AND query_id = %s AND doc_id = %s",
                list(zip(values["best_rank"], values["n_systems"], values["provenance"], values["priority"],
                         values["pool_id"], values["query_id"], values["doc_id"])),
            )


def _link_documents(pool: Pool) -> None:
    """Point pairs at their corpus documents in one join; pairs without one stay listed as missing."""
    pairs, documents = PoolPair._meta.db_table, Document._meta.db_table
    # An UPDATE ... FROM join (PostgreSQL, SQLite 3.33+): a correlated subquery per pair led
    # PostgreSQL, before the new documents had statistics, into a nested loop over the whole corpus.
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Until autovacuum samples them, documents imported lately look like a handful of rows: the planner then
            # walks all the pool's pairs once per document (linking 30,000 new pairs took 16 s, 80,000 took 174 s).
            cursor.execute(f"ANALYZE {documents}, {pairs}")
        cursor.execute(
            f"UPDATE {pairs} SET document_id = d.id FROM {documents} d "
            f"WHERE {pairs}.pool_id = %s AND {pairs}.document_id IS NULL AND d.project_id = %s AND d.doc_id = {pairs}.doc_id "
            f"AND d.answer_run_id IS NULL",  # the corpus only (Document.objects.corpus())
            [pool.pk, pool.project_id],
        )


def _report(pool: Pool, pairs: pd.DataFrame, lists: list[pooling.RankedList]) -> dict:
    report = pooling.pool_report(pairs, lists, pool.depth) if lists else {"total_pairs": 0, "pairs_per_query": {}}
    missing = pool.pairs.missing_from_corpus()
    report["missing_from_corpus"] = missing.count()
    report["missing_examples"] = list(missing.values_list("query__query_id", "doc_id")[:50])
    report["queries_without_pairs"] = pool.query_set.queries.count() - len(report["pairs_per_query"])
    return report


@job_kind("build_pool", "Build a pool")
def build_pool_job(job: Job, progress: Progress) -> dict:
    pool = Pool.objects.get(pk=job.params["pool"], project=job.project)
    runs = list(StoredRun.objects.filter(project=job.project, pk__in=job.params["runs"]))
    report = add_runs_to_pool(pool, runs, progress)
    return {"pool": pool.name, "pairs": report["total_pairs"], "missing from corpus": report["missing_from_corpus"],
            "link": pool.get_absolute_url()}


# Answer pools: each query paired with the answer each answer run gave it, graded like a document.

def answer_doc_id(run: AnswerRun, query_id: str) -> str:
    """The opaque id of a run's answer to a query: raters grading blind never see the system's name."""
    return "answer-" + hashlib.sha256(f"{run.uuid}/{query_id}".encode()).hexdigest()[:16]


def read_answers(run: AnswerRun) -> dict[str, tuple[str, list[str]]]:
    """The run's answers: query id -> (answer, ids of the documents it cites)."""
    return {query_id: (answer.answer or "", [str(doc) for doc in answer.cites]) for query_id, answer in read_answer_run(run).items()}


@transaction.atomic
def create_answer_pool(project: Project, *, name: str, query_set: QueryCollection, answer_runs: list[AnswerRun], user=None) -> Pool:
    """A pool that pairs each query of the set with every chosen answer run's answer to it.

    Each answer becomes a Document of the project outside the corpus (opaque doc_id, fields `answer` and
    `cites`, `answer_run` set), made once per run and query: a second pool over the same run reuses it,
    so its grades stay comparable. Refuses runs that answer none of the set's queries.
    """
    if project.pools.filter(name=name).exists():
        raise PoolRefused(f"The project already has a pool named {name!r}.")
    if query_set.project_id != project.pk:
        raise PoolRefused("The query set belongs to another project.")
    if not answer_runs:
        raise PoolRefused("Choose at least one answer run.")
    foreign = [run.name for run in answer_runs if run.project_id != project.pk]
    if foreign:
        raise PoolRefused(f"These answer runs belong to another project: {', '.join(foreign)}.")
    queries = dict(query_set.queries.values_list("query_id", "pk"))
    if not queries:
        raise PoolRefused(f"The query set “{query_set.name}” has no queries.")
    answered = {}
    for run in answer_runs:
        answers = read_answers(run)
        matched = {query_id: answers[query_id] for query_id in answers.keys() & queries.keys()}
        if not matched:
            raise PoolRefused(
                f"The answer run “{run.name}” has no answer for a query of “{query_set.name}”. Answers and query sets "
                f"are matched by query id, and the set's ids ({_examples(set(queries))}) are not the run's "
                f"({_examples(set(answers))}). Choose answer runs made for this query set.")
        answered[run] = matched
    pool = Pool.objects.create(project=project, name=name, query_set=query_set, kind=Pool.Kind.ANSWERS, depth=1,
                               strategy=Pool.Strategy.BEST_RANK, created_by=user)
    pool.answer_runs.set(answer_runs)
    order = {query_id: index for index, query_id in enumerate(query_set.queries.order_by("pk").values_list("query_id", flat=True))}
    rows, per_query = [], {}
    for run, matched in answered.items():
        ids = {query_id: answer_doc_id(run, query_id) for query_id in matched}
        Document.objects.bulk_create(
            [Document(project=project, doc_id=ids[query_id], answer_run=run, fields={"answer": answer, "cites": cites})
             for query_id, (answer, cites) in matched.items()], ignore_conflicts=True, batch_size=2_000)
        documents = set(Document.objects.filter(project=project, answer_run=run, doc_id__in=ids.values()).values_list("doc_id", flat=True))
        taken = sorted(set(ids.values()) - documents)  # a corpus document holds the id (imported by hand)
        if taken:
            raise PoolRefused(f"The corpus has a document with the id {taken[0]!r}, which answer pools give to an answer of "
                              f"“{run.name}”: rename that corpus document.")
        provenance = json.dumps({run.name: 1})
        for query_id in matched:
            per_query[query_id] = per_query.get(query_id, 0) + 1
            # Queries in the set's order come first; a query's answers are judged one after another.
            rows.append((query_id, ids[query_id], 1, 1, provenance, float(len(order) - order[query_id])))
    pairs = pd.DataFrame(rows, columns=["query_id", "doc_id", "best_rank", "n_systems", "provenance_json", "priority"])
    _insert_pairs(pool, pairs, queries)  # COPY on PostgreSQL: the ORM's bulk_create took most of the time
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {PoolPair._meta.db_table} SET document_id = d.id FROM {Document._meta.db_table} d "
            f"WHERE {PoolPair._meta.db_table}.pool_id = %s AND d.project_id = %s AND d.doc_id = {PoolPair._meta.db_table}.doc_id "
            f"AND d.answer_run_id IS NOT NULL", [pool.pk, project.pk])
    pool.report = {
        "total_pairs": len(pairs), "pairs_per_query": per_query, "missing_from_corpus": 0, "missing_examples": [],
        "queries_without_pairs": len(queries) - len(per_query),
        "answers_by_run": {run.name: len(matched) for run, matched in answered.items()},
    }
    pool.save(update_fields=["report"])
    return pool


def answer_coverage(project: Project, query_set: QueryCollection | None) -> list[tuple]:
    """Each of the project's answer runs with how many of the query set's queries it answers."""
    query_ids = set(query_set.queries.values_list("query_id", flat=True)) if query_set else set()
    rows = []
    for run in project.answer_runs.all():
        if query_set is None:
            rows.append((run, None))
            continue
        missing = sorted(query_ids - answered_query_ids(run))
        rows.append((run, {"with_results": len(query_ids) - len(missing), "missing": len(missing), "missing_examples": missing[:20]}))
    return rows

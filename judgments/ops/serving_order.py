"""A round's judging order applied to its pairs: the `RoundItem.priority` that grouped serving walks within a query.

The orders themselves are pure logic in `judgments.lib.judging_order` (its twin); this module feeds it a query's pool
provenance and labels so far and writes back the priorities of the pairs still to judge: when pairs enter the
round, when the lead changes the order, and (Move-To-Front, MM-NS) when one of the query's pairs gets its first
judgment or that judgment's grade changes.

A pair's label for the order is its first judgment's grade: relevant when above the scale's lowest grade (an
unrateable flag counts as not relevant). A refresh round's carried pairs count as judged first, with their label.
"""

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable

from django.db import connection
from django.db.models import OuterRef, Subquery

from ..lib import judging_order
from ..models import Job, Judgment, PoolPair, Round, RoundItem
from .jobs import Progress, job_kind, start_job

ADAPTIVE = judging_order.ADAPTIVE
_ITEM, _PAIR, _JUDGMENT = (model._meta.db_table for model in (RoundItem, PoolPair, Judgment))
_QUERIES_AT_ONCE = 200  # a whole round is reordered this many queries per read
# Up to this many pairs a whole round is ranked again in the request that asks for it (a few seconds at most);
# a bigger round in a background job: every pair is rewritten, a minute or more at 500,000 pairs.
INLINE_PAIRS = 20_000


def entering_priority(round: Round, pool_priority: float, doc_id: str) -> float:
    """The priority a pair enters the round with: the pool's, or its seeded random one (the adaptive orders are
    laid out by `reorder` once the query's pairs are all in)."""
    if round.judging_order == Round.JudgingOrder.RANDOM:
        return judging_order.random_priority(round.seed, doc_id)
    return pool_priority


def reorder(round: Round, query_ids: Iterable[int] | None = None, progress: Progress | None = None) -> int:
    """Set the priorities of the round's pairs (of `query_ids` only, when given) from its judging order.
    Returns how many pairs changed."""
    if round.judging_order == Round.JudgingOrder.POOL:
        return _restore_pool_priorities(round, query_ids)
    if query_ids is None:
        query_ids = round.items.order_by("query_id").values_list("query_id", flat=True).distinct()
    query_ids, changed = list(query_ids), 0
    for start in range(0, len(query_ids), _QUERIES_AT_ONCE):
        if progress is not None:
            progress(start, len(query_ids), f"Ranking the pairs of {len(query_ids):,} queries")
        for rows in _rows_by_query(round, query_ids[start:start + _QUERIES_AT_ONCE]).values():
            changed += _write(_query_priorities(round, rows))
    return changed


def reorder_round(round: Round, *, user=None, query_ids: Iterable[int] | None = None) -> Job | None:
    """Rank the round's pairs (of `query_ids`, when given) again: at once for a small round, else in a background
    job (returned), during which the queries not reached yet are served in their previous order."""
    items = round.items.all() if query_ids is None else round.items.filter(query_id__in=list(query_ids))
    if not items[INLINE_PAIRS:INLINE_PAIRS + 1].exists():
        reorder(round, query_ids)
        return None
    return start_job(kind="reorder_round", project=round.project, owner=user,
                     params={"round": str(round.uuid), "judging_order": round.judging_order})


def ranking_job(round: Round) -> Job | None:
    """The background job still ranking the round's pairs in its judging order, if any."""
    return (Job.objects.filter(kind="reorder_round", project=round.project_id, params__round=str(round.uuid),
                               state__in=[Job.State.QUEUED, Job.State.RUNNING]).order_by("-created_at").first())


@job_kind("reorder_round", "Rank a round's pairs in its judging order")
def reorder_round_job(job: Job, progress: Progress) -> dict:
    round = Round.objects.get(uuid=job.params["round"], project=job.project)
    if round.judging_order != job.params["judging_order"]:
        return {"changed": 0, "skipped": "the judging order changed again since: a newer job ranks the pairs"}
    return {"changed": reorder(round, progress=progress)}


def after_judgment(round: Round, query_id: int) -> None:
    """A pair of the query got its first judgment or a changed grade: an adaptive order looks again."""
    if round.judging_order in ADAPTIVE:
        reorder(round, [query_id])


def after_bulk_change(round: Round) -> None:
    """Judgments were imported or reset in bulk: an adaptive order looks at every query again."""
    if round.judging_order in ADAPTIVE:
        reorder_round(round)


def lock_query(round: Round, query_id: int) -> None:
    """Grade one pair of an adaptive round's query at a time (until the transaction ends): each reorder then sees
    the query's judgments committed before it, and two of them never wait on each other's rows."""
    if round.judging_order not in ADAPTIVE or connection.vendor != "postgresql":
        return  # SQLite writes one transaction at a time anyway
    digest = hashlib.blake2b(f"judging-order:{round.pk}:{query_id}".encode(), digest_size=8).digest()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [int.from_bytes(digest, "big", signed=True)])


def _restore_pool_priorities(round: Round, query_ids) -> int:
    items = round.items.all() if query_ids is None else round.items.filter(query_id__in=list(query_ids))
    return items.exclude(priority=Subquery(_pool_priority())).update(priority=Subquery(_pool_priority()))


def _pool_priority():
    return PoolPair.objects.filter(pk=OuterRef("pair_id")).values("priority")[:1]


# A query's pairs with what the order needs, read in one statement (raw: this runs on every grade of an adaptive
# round, and building it with the ORM cost more than running it). A pair's first judgment is the one its label is.
_FIRST_JUDGMENT = f"(SELECT j.{{column}} FROM {_JUDGMENT} j WHERE j.item_id = i.id ORDER BY j.created_at, j.id LIMIT 1)"
_ROWS = (f"SELECT i.query_id, i.id, p.doc_id, p.provenance, p.priority, i.priority, {_FIRST_JUDGMENT.format(column='grade')}, "
         f"{_FIRST_JUDGMENT.format(column='created_at')}, i.required, i.old_label FROM {_ITEM} i JOIN {_PAIR} p ON p.id = i.pair_id "
         f"WHERE i.round_id = %s AND i.query_id IN ({{queries}})")


def _rows_by_query(round: Round, query_ids: list[int]) -> dict[int, list[tuple]]:
    """Each query's pairs: (item pk, doc id, provenance, pool priority, current priority, label or None, since)."""
    with connection.cursor() as cursor:
        cursor.execute(_ROWS.format(queries=", ".join(["%s"] * len(query_ids))), [round.pk, *query_ids])
        found = cursor.fetchall()
    scale = round.grading_scale
    grouped = defaultdict(list)
    for query_id, pk, doc_id, provenance, pool_priority, priority, grade, at, required, old_label in found:
        if at is not None:
            label, since = (grade is not None and scale.is_relevant(grade)), (1, at, pk)
        elif required == 0 and old_label is not None:  # carried from the refreshed version: known before any grade
            label, since = scale.is_relevant(old_label), (0, "", pk)
        else:
            label, since = None, None
        provenance = provenance if isinstance(provenance, dict) else json.loads(provenance)  # SQLite gives JSON as text
        grouped[query_id].append((pk, doc_id, provenance, pool_priority, priority, label, since))
    return grouped


def _query_priorities(round: Round, rows: list[tuple]) -> dict[int, tuple[float, float]]:
    """item pk -> (current priority, new priority) for the query's pairs still to judge."""
    pool_order = [doc_id for _pk, doc_id, _prov, _pool, *_rest in sorted(rows, key=lambda row: (-row[3], row[1]))]
    rankings = defaultdict(list)
    for _pk, doc_id, provenance, *_rest in rows:
        for system, rank in provenance.items():
            rankings[system].append((rank, doc_id))
    rankings = {system: [doc for _rank, doc in sorted(ranked)] for system, ranked in rankings.items()}
    # Carried labels first, then the judgments in the order they were made.
    judged = {row[1]: row[5] for row in sorted((row for row in rows if row[6] is not None), key=lambda row: row[6])}
    new = judging_order.priorities(round.judging_order, rankings, judged, pool_order=pool_order, seed=round.seed)
    return {pk: (priority, new[doc_id]) for pk, doc_id, _prov, _pool, priority, *_rest in rows if doc_id in new}


def _write(priorities: dict[int, tuple[float, float]]) -> int:
    """Save the priorities that changed, in one statement."""
    changed = sorted((pk, new) for pk, (old, new) in priorities.items() if old != new)
    if changed:
        values = ", ".join(["(CAST(%s AS bigint), CAST(%s AS double precision))"] * len(changed))
        with connection.cursor() as cursor:
            # Both databases name a VALUES list's columns column1, column2 (SQLite takes no column aliases there).
            cursor.execute(f"UPDATE {_ITEM} SET priority = v.column2 FROM (SELECT * FROM (VALUES {values}) AS pairs) AS v "
                           f"WHERE {_ITEM}.id = v.column1", [value for row in changed for value in row])
    return len(changed)

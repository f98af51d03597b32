"""What a rater does in a round: get the next pair, grade it or flag it, put it off, go back.

The rules (issue "judgment rounds"): a rater gets a pair they have not judged, that still needs
judgments, fewest judgments first and pool priority next, staying on one query for a while (or fully
shuffled). Nobody gets the same pair twice. A pair on a rater's screen, put off for later, or handed
to them by a lead is *claimed*: other raters do not get it while the claim holds, so a pair that
needs one judgment is not graded by two people at once.
"""

import hashlib
from dataclasses import dataclass
import functools
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, Max, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce, Least
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ..core import rows
from ..models import Claim, Document, Judgment, JudgmentEdit, PoolPair, Query, RaterTotals, Round, RoundItem, RoundTotals, UnrateableReason
from . import serving_order

# Each rater walks the round's queries (grouped order) or pairs (shuffled order) in the order of a
# seeded hash, starting from a point of their own, so that fifty raters starting at once spread over
# the pool instead of queueing for the same query. The keys are indexed with the judgment count, so
# finding the next pair is a short index walk at the lowest count that still has free pairs.
_KEY_RANGE = 2**31
_CANDIDATES = 8
# A rater's explanation of a grade is a few sentences; the reason for "unrateable: other" a phrase.
NOTE_MAX_LENGTH = 2_000
UNRATEABLE_NOTE_MAX_LENGTH = Judgment._meta.get_field("unrateable_note").max_length


class GradingRefused(ValueError):
    """The verdict cannot be recorded; the message tells the rater why, and what to do."""


@dataclass(frozen=True)
class Verdict:
    """What the rater said about a pair: a grade, or unrateable with a reason."""

    grade: int | None = None
    faithfulness: int | None = None  # on the round's faithfulness scale, in answer rounds that have one
    unrateable: str = ""
    unrateable_note: str = ""
    note: str = ""


def serving_key(seed: int, kind: str, key) -> int:
    """A stable pseudo-random number in [0, 2**31) for a query, pair or rater of a round."""
    digest = hashlib.blake2b(f"{seed}:{kind}:{key}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") % _KEY_RANGE


# A pair is free for a rater when it needs more judgments than it has plus the live claims of
# others on it. Raw SQL: this runs several times per grade, and building it with the ORM cost more
# than running it.
_ITEM, _JUDGMENT, _CLAIM, _TOTALS, _RATER_TOTALS = (model._meta.db_table for model in (RoundItem, Judgment, Claim, RoundTotals, RaterTotals))
_FREE = (f"i.n_judged < i.required AND i.required - i.n_judged > (SELECT COUNT(*) FROM {_CLAIM} o "
         f"WHERE o.item_id = i.id AND o.rater_id <> %(rater)s AND (o.kind IN ('later', 'handed') OR o.since >= %(held_since)s))")
_UNTOUCHED = (f"NOT EXISTS (SELECT 1 FROM {_JUDGMENT} j WHERE j.item_id = i.id AND j.rater_id = %(rater)s) "
              f"AND NOT EXISTS (SELECT 1 FROM {_CLAIM} c WHERE c.item_id = i.id AND c.rater_id = %(rater)s)")
_GROUPED = "i.query_key, i.query_id, i.priority DESC, i.id"
_SHUFFLED = "i.pair_key, i.id"


def _held_since():
    return connection.ops.adapt_datetimefield_value(timezone.now() - timedelta(seconds=settings.GRADING_HOLD_SECONDS))


def _free_ids(where: str, params: dict, order: str = "i.id", limit: int | None = None) -> list[int]:
    sql = f"SELECT i.id FROM {_ITEM} i WHERE {where} AND {_FREE} ORDER BY {order}" + (f" LIMIT {int(limit)}" if limit else "")
    with connection.cursor() as cursor:
        cursor.execute(sql, {**params, "held_since": _held_since()})
        return [row[0] for row in cursor.fetchall()]


def _candidates(round: Round, rater, level: int, current_query_id: int | None) -> list[int]:
    """The first few free pairs with `level` judgments the rater has not judged or claimed, in the
    rater's serving order: their current query first (grouped order), then from their starting point
    on, wrapping around. Each part is a short walk along an index."""
    params = {"round": round.pk, "rater": rater.pk, "level": level, "query": current_query_id,
              "start": serving_key(round.seed, "rater", rater.pk)}
    base = f"i.round_id = %(round)s AND i.n_judged = %(level)s AND {_UNTOUCHED}"
    if round.order == Round.Order.SHUFFLED:
        parts = [("i.pair_key >= %(start)s", _SHUFFLED), ("i.pair_key < %(start)s", _SHUFFLED)]
    else:
        parts = [("i.query_key >= %(start)s", _GROUPED), ("i.query_key < %(start)s", _GROUPED)]
        if current_query_id is not None:
            parts.insert(0, ("i.query_id = %(query)s", "i.priority DESC, i.id"))
    for where, order in parts:
        found = _free_ids(f"{base} AND {where}", params, order, _CANDIDATES)
        if found:
            return found
    return []


def _free_now(item_pk: int, rater) -> str:
    """SQL selecting the pair `item_pk` if it is still free for the rater, locked; a pair another
    request holds (claiming or grading it right now) is skipped: a rater never waits for another."""
    lock = " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    return f"SELECT i.id FROM {_ITEM} i WHERE i.id = %(item)s AND {_FREE}{lock}"


def _claimable(item_pk: int, rater) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(_free_now(item_pk, rater), {"item": item_pk, "rater": rater.pk, "held_since": _held_since()})
        return cursor.fetchone() is not None


def _claim(item_pk: int, rater, now) -> bool:
    """Claim the pair for the rater if it is still free: one statement, so the look and the claim
    happen as one. False when it was taken meanwhile (or this rater claimed it in another request)."""
    params = {"item": item_pk, "rater": rater.pk, "held_since": _held_since(), "now": connection.ops.adapt_datetimefield_value(now)}
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {_CLAIM} (item_id, rater_id, kind, since) SELECT free.id, %(rater)s, 'shown', %(now)s "
            f"FROM ({_free_now(item_pk, rater)}) free WHERE true ON CONFLICT (item_id, rater_id) DO NOTHING RETURNING id",
            params)
        claimed = cursor.fetchone()
        if claimed is None or not connection.features.has_select_for_update_skip_locked:
            return claimed is not None
        # PostgreSQL looked at the other raters' claims in a snapshot taken when the statement began, and
        # may have locked the pair only after another claim on it committed. Holding the lock now, look
        # again in a fresh snapshot, which sees every claim that could have been missed, and give the
        # pair up if it is no longer free (tests/judgments/test_concurrency.py saw two raters get one pair).
        cursor.execute(f"DELETE FROM {_CLAIM} c WHERE c.id = %(claim)s AND NOT EXISTS "
                       f"(SELECT 1 FROM {_ITEM} i WHERE i.id = %(item)s AND {_FREE}) RETURNING c.id",
                       {**params, "claim": claimed[0]})
        return cursor.fetchone() is None


_ITEM_AND_RELATED = (RoundItem, Query, Document, PoolPair)
_UUID_OF_ITEM = RoundItem._meta.get_field("uuid")


@functools.cache
def _item_sql(related: bool, by_uuid: bool) -> str:
    item = rows.table(RoundItem)
    joins = "".join(f" JOIN {rows.table(model)} ON {rows.table(model)}.id = {item}.{name}_id"
                    for model, name in ((Query, "query"), (Document, "document"), (PoolPair, "pair"))) if related else ""
    where = f"{item}.round_id = %s AND {item}.uuid = %s" if by_uuid else f"{item}.id = %s"
    return f"SELECT {rows.columns(*(_ITEM_AND_RELATED if related else (RoundItem,)))} FROM {item}{joins} WHERE {where}"


def load_item(*, pk: int | None = None, round: Round | None = None, uuid=None, related: bool = True) -> RoundItem | None:
    """A pair by its pk, or by its round and uuid; with `related`, its query, document and pool pair
    come in the same query (raw: a grade loads two pairs, and the ORM's query building was the cost)."""
    params = [pk] if round is None else [round.pk, _UUID_OF_ITEM.get_db_prep_value(uuid, connection)]
    with connection.cursor() as cursor:
        cursor.execute(_item_sql(related, round is not None), params)
        row = cursor.fetchone()
    if row is None:
        return None
    item, *others = rows.instances(row, _ITEM_AND_RELATED if related else (RoundItem,))
    if related:
        item.query, item.document, item.pair = others
    return item


def _served(item_pk: int) -> RoundItem:
    return load_item(pk=item_pk)


def _show(claim: Claim, now) -> RoundItem:
    claim.kind, claim.since = Claim.Kind.SHOWN, now
    claim.save(update_fields=["kind", "since"])
    return _served(claim.item_id)


def latest_judgments_of(round: Round, rater) -> "QuerySet[Judgment]":
    """The rater's judgments in the round, newest first, from their latest one there (RaterTotals.last_at): the
    walk back along judgment_rater_latest starts in this round, not at their latest judgment in any round."""
    last_at = RaterTotals.objects.filter(round=round, rater=rater).values("last_at")
    return (Judgment.objects.filter(item__round=round, rater=rater, created_at__lte=Subquery(last_at))
            .order_by("-created_at", "-pk"))


def current_query_of(round: Round, rater) -> int | None:
    latest = latest_judgments_of(round, rater).values("item__query_id").first()
    return latest["item__query_id"] if latest else None


def _claims_of(round: Round, rater) -> list[tuple[Claim, bool]]:
    """The rater's claims in the round, oldest first, each with whether its pair still needs judgments."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT c.id, c.item_id, c.kind, c.since, i.n_judged < i.required FROM {_CLAIM} c "
                       f"JOIN {_ITEM} i ON i.id = c.item_id WHERE i.round_id = %s AND c.rater_id = %s ORDER BY c.since, c.id",
                       [round.pk, rater.pk])
        rows = cursor.fetchall()
    return [(Claim(id=pk, item_id=item_pk, rater=rater, kind=kind, since=_aware(since)), bool(needed))
            for pk, item_pk, kind, since, needed in rows]


@transaction.atomic
def next_item(round: Round, rater, *, current_query_id: int | None = None) -> RoundItem | None:
    """The pair this rater should judge now, claimed for them; None when nothing is left for them.

    In turn: the pair already on their screen, pairs a lead handed them, free pairs (fewest judgments
    first), and last the pairs they put off for later. `current_query_id` (the query of the pair just
    judged) saves looking it up.
    """
    now = timezone.now()
    claims = _claims_of(round, rater)
    for claim, needed in claims:
        if claim.kind == Claim.Kind.SHOWN:
            if needed or claim.since >= now - timedelta(seconds=settings.GRADING_HOLD_SECONDS):
                return _served(claim.item_id)
            claim.delete()  # the hold ran out and others completed the pair meanwhile
    for claim, _needed in claims:
        if claim.kind == Claim.Kind.HANDED:
            return _show(claim, now)
    if current_query_id is None:
        current_query_id = current_query_of(round, rater)
    for level in range(round.max_required):
        for _attempt in range(3):  # candidates can be taken by others between the look and the claim
            candidates = _candidates(round, rater, level, current_query_id)
            if not candidates:
                break
            for pk in candidates:
                if _claim(pk, rater, now):
                    return _served(pk)
    for claim, needed in claims:
        if claim.kind == Claim.Kind.LATER:
            if needed:
                return _show(claim, now)
            claim.delete()
    return None


def _check(round: Round, verdict: Verdict) -> None:
    if not round.is_open:
        raise GradingRefused(f"The round is {round.get_status_display().lower()}: it takes no judgments now.")
    if verdict.grade is not None:
        if verdict.unrateable:
            raise GradingRefused("A pair is either graded or unrateable, not both.")
        if verdict.grade not in round.grading_scale.values:
            raise GradingRefused(f"{verdict.grade} is not a grade of this round's scale.")
        faithfulness = round.faithfulness_grading_scale
        if faithfulness is None and verdict.faithfulness is not None:
            raise GradingRefused("This round grades no faithfulness: give the grade alone.")
        if faithfulness is not None and verdict.faithfulness is None:
            raise GradingRefused("Give the faithfulness grade too: this round grades both the answer and its support "
                                 "in the cited documents. Nothing was saved.")
        if faithfulness is not None and verdict.faithfulness not in faithfulness.values:
            raise GradingRefused(f"{verdict.faithfulness} is not a grade of this round's faithfulness scale.")
    elif verdict.faithfulness is not None:
        raise GradingRefused("An unrateable pair takes no faithfulness grade.")
    elif verdict.unrateable not in UnrateableReason.values:
        raise GradingRefused("Choose a grade, or say why the pair is unrateable.")
    elif verdict.unrateable == UnrateableReason.OTHER and not verdict.unrateable_note.strip():
        raise GradingRefused("Say what makes the pair unrateable.")
    for text, limit, what in ((verdict.note, NOTE_MAX_LENGTH, "explanation"),
                              (verdict.unrateable_note, UNRATEABLE_NOTE_MAX_LENGTH, "reason")):
        if len(text) > limit:
            raise GradingRefused(f"The {what} is {len(text):,} characters long; the limit is {limit:,}. Shorten it: nothing was saved.")


def record(item: RoundItem, rater, verdict: Verdict) -> tuple[Judgment, bool]:
    """Record a rater's verdict on a pair, or change it. Returns (judgment, created).

    Safe to repeat: a double click or a retried request finds the first judgment and changes it (or
    nothing), so there is never more than one judgment per rater and pair. The time on the pair is
    counted from when it was put on the rater's screen.
    """
    _check(item.round, verdict)
    try:
        return _record(item, rater, verdict)
    except IntegrityError:  # a concurrent first submit won the race on the unique constraint
        return _record(item, rater, verdict, trust_claim=False)


@transaction.atomic
def _record(item: RoundItem, rater, verdict: Verdict, trust_claim: bool = True) -> tuple[Judgment, bool]:
    serving_order.lock_query(item.round, item.query_id)
    now = timezone.now()
    claim = _release_claim(item.pk, rater)
    if claim is None or not trust_claim:
        # Not held by this rater: an edit, a repeated submit, bulk mode, or a hold that ran out. Lock
        # the pair so that "does it still need a judgment?" and the judgment happen as one.
        RoundItem.objects.select_for_update().filter(pk=item.pk).values_list("pk").get()
        judgment = Judgment.objects.filter(item=item, rater=rater).first()
        if judgment is not None:
            return _change(item, judgment, verdict, now), False
        if claim is None and not _claimable(item.pk, rater):
            raise GradingRefused("This pair already has all the judgments it needs: go on to your next pair.")
    kind, since = claim or (None, None)
    judgment = Judgment.objects.create(
        item=item, rater=rater, grade=verdict.grade, faithfulness=verdict.faithfulness, unrateable=verdict.unrateable, unrateable_note=verdict.unrateable_note,
        note=verdict.note, seconds=(now - since).total_seconds() if kind == Claim.Kind.SHOWN else None,
        created_at=now, updated_at=now)
    if _count_judgment(item.pk, judgment) == 1:
        serving_order.after_judgment(item.round, item.query_id)
    return judgment, True


# A new judgment counts on its pair, its round's totals and its rater's totals, taken in that order by every
# writer (count_round takes the round's totals before its raters'), so none waits on another in a circle.
# The pair's first judgment sets its spread (0, or none for a flag) in the same statement; a later grade
# needs the pair's other grades: they are read in a statement of their own, with the pair locked, whose
# snapshot holds every grade committed before. On PostgreSQL the counts are one statement (data-modifying
# WITHs, each fed by the one before), so a grade costs no extra round trip.
_COUNT_PAIR = (f"UPDATE {_ITEM} SET n_judged = n_judged + 1, spread = CASE WHEN n_judged = 0 THEN %(first_spread)s ELSE spread END "
               f"WHERE id = %(item)s RETURNING round_id, n_judged, required")
_COUNT_TOTALS = (f"UPDATE {_TOTALS} SET done = done + CASE WHEN {{judged}} <= {{required}} THEN 1 ELSE 0 END, "
                 f"complete = complete + CASE WHEN {{judged}} = {{required}} THEN 1 ELSE 0 END")
_COUNT_RATER = (f"INSERT INTO {_RATER_TOTALS} (round_id, rater_id, judgments, unrateable, last_at) "
                "SELECT {round}, %(rater)s, 1, %(flagged)s, %(at)s {source} "
                f"ON CONFLICT (round_id, rater_id) DO UPDATE SET judgments = {_RATER_TOTALS}.judgments + 1, "
                f"unrateable = {_RATER_TOTALS}.unrateable + excluded.unrateable, "
                f"last_at = CASE WHEN {_RATER_TOTALS}.last_at > excluded.last_at THEN {_RATER_TOTALS}.last_at ELSE excluded.last_at END")
_COUNT_JUDGMENT_ONCE = (
    f"WITH i AS ({_COUNT_PAIR}), "
    f"t AS ({_COUNT_TOTALS.format(judged='i.n_judged', required='i.required')} FROM i WHERE {_TOTALS}.round_id = i.round_id "
    f"RETURNING {_TOTALS}.round_id), "
    f"r AS ({_COUNT_RATER.format(round='t.round_id', source='FROM t')} RETURNING 1) "
    f"SELECT i.n_judged FROM i LEFT JOIN r ON true")
_SPREAD = f"(SELECT MAX(j.grade) - MIN(j.grade) FROM {_JUDGMENT} j WHERE j.item_id = {_ITEM}.id)"
_SET_SPREAD = f"UPDATE {_ITEM} SET spread = {_SPREAD} WHERE id = %(item)s"


def _count_judgment(item_pk: int, judgment: Judgment) -> int:
    """Count the new judgment; returns how many judgments its pair has now."""
    params = {"item": item_pk, "rater": judgment.rater_id, "flagged": int(judgment.grade is None),
              "first_spread": None if judgment.grade is None else 0, "at": connection.ops.adapt_datetimefield_value(judgment.created_at)}
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(_COUNT_JUDGMENT_ONCE, params)
            judged = cursor.fetchone()[0]
        else:
            cursor.execute(_COUNT_PAIR, params)
            round_pk, judged, required = cursor.fetchone()
            cursor.execute(_COUNT_TOTALS.format(judged=judged, required=required) + " WHERE round_id = %s", [round_pk])
            cursor.execute(_COUNT_RATER.format(round="%(round)s", source="WHERE true"), {**params, "round": round_pk})
        if judged > 1 and judgment.grade is not None:
            cursor.execute(_SET_SPREAD, params)
    return judged


def _recount_changed(judgment: Judgment, flagged: int) -> None:
    """A changed grade: the pair's spread again and, when it became unrateable or a grade again, the
    rater's count of unrateable flags (the pair is locked: see _record)."""
    params = {"item": judgment.item_id, "rater": judgment.rater_id, "flagged": flagged}
    with connection.cursor() as cursor:
        cursor.execute(_SET_SPREAD, params)
        if flagged:
            # The round's totals row first, as a new judgment takes it before its rater's row: count_round
            # sums the raters' rows afresh only while it holds that lock, so this change is in its sum or after it.
            RoundTotals.objects.select_for_update(of=("self",)).filter(round__items=judgment.item_id).values_list("pk").first()
            cursor.execute(f"UPDATE {_RATER_TOTALS} SET unrateable = unrateable + %(flagged)s WHERE rater_id = %(rater)s "
                           f"AND round_id = (SELECT round_id FROM {_ITEM} WHERE id = %(item)s)", params)


def _change(item: RoundItem, judgment: Judgment, verdict: Verdict, now) -> Judgment:
    old_grade = judgment.grade
    if (judgment.grade, judgment.faithfulness, judgment.unrateable, judgment.note) != (verdict.grade, verdict.faithfulness, verdict.unrateable, verdict.note):
        JudgmentEdit.objects.create(item_id=judgment.item_id, rater_id=judgment.rater_id, editor_id=judgment.rater_id, at=now,
                                    old_grade=judgment.grade, old_unrateable=judgment.unrateable, old_note=judgment.note,
                                    new_grade=verdict.grade, new_unrateable=verdict.unrateable, new_note=verdict.note,
                                    old_faithfulness=judgment.faithfulness, new_faithfulness=verdict.faithfulness)
    judgment.grade, judgment.unrateable, judgment.unrateable_note = verdict.grade, verdict.unrateable, verdict.unrateable_note
    judgment.faithfulness, judgment.note, judgment.updated_at = verdict.faithfulness, verdict.note, now
    judgment.save(update_fields=["grade", "faithfulness", "unrateable", "unrateable_note", "note", "updated_at"])
    if old_grade != verdict.grade:
        _recount_changed(judgment, flagged=(verdict.grade is None) - (old_grade is None))
        serving_order.after_judgment(item.round, item.query_id)
    return judgment


def _release_claim(item_pk: int, rater) -> tuple[str, datetime] | None:
    """Drop the rater's claim on the pair (they answered it); its kind and since when there was one."""
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {_CLAIM} WHERE item_id = %s AND rater_id = %s RETURNING kind, since", [item_pk, rater.pk])
        row = cursor.fetchone()
    if row is None:
        return None
    return row[0], _aware(row[1])


def _aware(value) -> datetime:
    """A datetime read with raw SQL: SQLite returns text, without a zone."""
    since = value if isinstance(value, datetime) else parse_datetime(value)
    return since if timezone.is_aware(since) else timezone.make_aware(since, UTC)


@transaction.atomic
def put_off(item: RoundItem, rater) -> Claim:
    """Judge later: back to the end of this rater's own queue. It is not a judgment."""
    if not item.round.is_open:
        raise GradingRefused(f"The round is {item.round.get_status_display().lower()}: it takes no judgments now.")
    if Judgment.objects.filter(item=item, rater=rater).exists():
        raise GradingRefused("You have judged this pair already: change your grade instead.")
    claim, _ = Claim.objects.update_or_create(item=item, rater=rater,
                                              defaults={"kind": Claim.Kind.LATER, "since": timezone.now()})
    return claim


def items_for_bulk(round: Round, rater, query) -> list[tuple[RoundItem, Judgment | None]]:
    """One query's pairs the rater may grade on one page: judged by them, held by them, or free;
    best-ranked first. Pairs others are judging or have completed are left out (blind)."""
    items = round.items.filter(query=query)
    mine = {j.item_id: j for j in Judgment.objects.filter(item__in=items, rater=rater)}
    allowed = set(mine) | set(Claim.objects.filter(item__in=items, rater=rater).values_list("item_id", flat=True))
    allowed |= set(_free_ids("i.round_id = %(round)s AND i.query_id = %(query)s",
                             {"round": round.pk, "query": query.pk, "rater": rater.pk}))
    ordered = items.filter(pk__in=allowed).select_related("query", "document", "pair").order_by("-priority", "pk")
    return [(item, mine.get(item.pk)) for item in ordered]


def shown_document(project, document, template) -> dict:
    """What the rater sees of a pair's document: its fields through the display template or, in an
    answer round, the answer and the documents it cites (each through the display template; never the
    system's name)."""
    if document.answer_run_id is None:
        return {"fields": document.display(template)}
    cites = [str(doc_id) for doc_id in document.fields.get("cites", [])]
    found = {d.doc_id: d for d in project.documents.corpus().filter(doc_id__in=cites)}
    cited = [{"number": number, "doc_id": doc_id, "fields": found[doc_id].display(template) if doc_id in found else None}
             for number, doc_id in enumerate(cites, start=1)]
    return {"fields": [], "answer": {"text": document.fields.get("answer", ""), "cited": cited}}


def previous_judgment(round: Round, rater, before: Judgment | None = None) -> Judgment | None:
    """The rater's judgment before `before` (their latest one when None): what the back key opens."""
    mine = latest_judgments_of(round, rater)
    if before is not None:
        mine = mine.filter(Q(created_at__lt=before.created_at) | Q(created_at=before.created_at, pk__lt=before.pk))
    return mine.select_related("item").first()


@dataclass(frozen=True)
class Progress:
    judged: int
    remaining: int
    later: int
    round_done: int
    round_needed: int

    @property
    def round_percent(self) -> int:
        return round(100 * self.round_done / self.round_needed) if self.round_needed else 100


# A round's totals over its pairs: judgments made (at most the required number per pair) and
# needed, pairs, and pairs complete.
ROUND_TOTALS = {"done": Coalesce(Sum(Least("n_judged", "required")), 0), "needed": Coalesce(Sum("required"), 0),
                "pairs": Count("pk"), "complete": Count("pk", filter=Q(n_judged__gte=F("required")))}


def round_totals(round: Round) -> dict:
    return round.items.aggregate(**ROUND_TOTALS)


def kept_totals(round: Round) -> dict:
    """The round's totals as kept in RoundTotals (zeros before its pairs are laid out): one row read."""
    found = RoundTotals.objects.filter(round=round).values("pairs", "complete", "done", "needed", "carried").first()
    return found or {"pairs": 0, "complete": 0, "done": 0, "needed": 0, "carried": 0}


def rater_totals(round: Round) -> list[dict]:
    """Each rater's RaterTotals fields summed over the round's judgments."""
    return list(Judgment.objects.filter(item__round=round).values("rater").annotate(
        judgments=Count("pk"), unrateable=Count("pk", filter=Q(grade__isnull=True)), last_at=Max("created_at")))


@transaction.atomic
def count_round(round: Round) -> None:
    """Sum the round's totals and its raters' totals afresh, after its pairs changed in bulk (pairs added,
    judgments imported or reset). Call it after those changes, in their transaction. The totals row is
    locked before the sums, and a grade takes it before its rater's row, so a grade saved meanwhile is
    either in the sums or added on top of them."""
    RoundTotals.objects.bulk_create([RoundTotals(round_id=round.pk)], ignore_conflicts=True)
    RoundTotals.objects.select_for_update().filter(round_id=round.pk).values_list("pk").get()
    RoundTotals.objects.filter(round_id=round.pk).update(**round_totals(round), carried=round.items.filter(required=0).count())
    RaterTotals.objects.filter(round=round).delete()
    RaterTotals.objects.bulk_create([RaterTotals(round=round, rater_id=row.pop("rater"), **row) for row in rater_totals(round)])


def recount_pairs(round: Round) -> None:
    """Each pair's judgment count and spread, then the round's totals, after judgments were written in bulk
    (an import, the demo), in their transaction."""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {_ITEM} SET n_judged = (SELECT COUNT(*) FROM {_JUDGMENT} j WHERE j.item_id = {_ITEM}.id), "
                       f"spread = {_SPREAD} WHERE round_id = %s", [round.pk])
    count_round(round)
    serving_order.after_bulk_change(round)


# The rater's judgment of each pair in progress. On PostgreSQL a LATERAL ... LIMIT 1 keeps it a walk of those
# pairs, each probed in the (item, rater) index: the planner cannot estimate how few pairs the partial index
# round_item_in_progress holds, and would otherwise hash all the rater's judgments.
_MINE = (f"CROSS JOIN LATERAL (SELECT 1 FROM {_JUDGMENT} j WHERE j.item_id = i.id AND j.rater_id = %(rater)s LIMIT 1) mine"
         if connection.vendor == "postgresql" else f"JOIN {_JUDGMENT} j ON j.item_id = i.id AND j.rater_id = %(rater)s")


def progress_of(round: Round, rater) -> Progress:
    """The rater's counts and the round's, exact: judgments made of those needed, and the pairs still
    open to the rater (needing judgments, not judged by them). One query over kept counts (RoundTotals,
    RaterTotals); the rater's judgments on pairs still short of judgments are found among the pairs in
    progress alone (round_item_in_progress), not among all their judgments."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COALESCE((SELECT r.judgments FROM {_RATER_TOTALS} r WHERE r.round_id = %(round)s AND r.rater_id = %(rater)s), 0), "
            f"(SELECT COUNT(*) FROM {_ITEM} i {_MINE} WHERE i.round_id = %(round)s AND i.n_judged > 0 AND i.n_judged < i.required), "
            f"(SELECT COUNT(*) FROM {_CLAIM} c JOIN {_ITEM} ci ON ci.id = c.item_id "
            f" WHERE c.rater_id = %(rater)s AND c.kind = 'later' AND ci.round_id = %(round)s), "
            f"COALESCE(t.pairs, 0), COALESCE(t.complete, 0), COALESCE(t.done, 0), COALESCE(t.needed, 0) "
            f"FROM (SELECT 1) AS one LEFT JOIN {_TOTALS} t ON t.round_id = %(round)s",
            {"rater": rater.pk, "round": round.pk})
        judged, still_open, later, pairs, complete, done, needed = cursor.fetchone()
    return Progress(judged=judged, remaining=pairs - complete - still_open, later=later, round_done=done, round_needed=needed)

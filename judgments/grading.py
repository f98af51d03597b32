"""What a rater does in a round: get the next pair, grade it or flag it, put it off, go back.

The rules (issue "judgment rounds"): a rater gets a pair they have not judged, that still needs
judgments, fewest judgments first and pool priority next, staying on one query for a while (or fully
shuffled). Nobody gets the same pair twice. A pair on a rater's screen, put off for later, or handed
to them by a lead is *claimed*: other raters do not get it while the claim holds, so a pair that
needs one judgment is not graded by two people at once.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import BigIntegerField, Case, Count, Exists, F, IntegerField, OuterRef, Q, Subquery, Sum, Value, When
from django.db.models.functions import Cast, Coalesce, Least, Mod
from django.utils import timezone

from .models import Claim, Judgment, JudgmentEdit, Round, RoundItem, UnrateableReason

# Raters see queries (grouped order) or pairs (shuffled order) in a stable pseudo-random order of
# their own, so that fifty raters starting at once spread over the pool instead of queueing for the
# same query: (key * a + b) mod p, a Weyl sequence (a/p near the golden ratio spreads consecutive
# keys evenly), with a and b drawn from the rater's id.
_SPREAD_MODULUS = 1_000_003
_CANDIDATE_BATCHES = (8, 64, 512)


class GradingRefused(ValueError):
    """The verdict cannot be recorded; the message tells the rater why, and what to do."""


@dataclass(frozen=True)
class Verdict:
    """What the rater said about a pair: a grade, or unrateable with a reason."""

    grade: int | None = None
    unrateable: str = ""
    unrateable_note: str = ""
    note: str = ""


def _spread(field: str, rater) -> Mod:
    a = 618_034 + (rater.pk * 7_727) % 100_000
    b = (rater.pk * 104_729) % _SPREAD_MODULUS
    return Mod(Cast(F(field), BigIntegerField()) * Value(a) + Value(b), Value(_SPREAD_MODULUS))


def _active_claims_of_others(rater, now):
    held_since = now - timedelta(seconds=settings.GRADING_HOLD_SECONDS)
    return (Claim.objects.filter(item=OuterRef("pk")).exclude(rater=rater)
            .filter(Q(kind__in=[Claim.Kind.LATER, Claim.Kind.HANDED]) | Q(since__gte=held_since)))


def _free_for(items, rater, now):
    """The items that still need a judgment nobody else is about to give."""
    claimed = _active_claims_of_others(rater, now).values("item").annotate(n=Count("pk")).values("n")
    return (items.incomplete().annotate(claimed=Coalesce(Subquery(claimed, output_field=IntegerField()), 0))
            .filter(n_judged__lt=F("required") - F("claimed")))


def _fresh_candidates(round: Round, rater, now, current_query_id: int | None):
    mine = Claim.objects.filter(item=OuterRef("pk"), rater=rater)
    items = _free_for(round.items.not_judged_by(rater).exclude(Exists(mine)), rater, now)
    if round.order == Round.Order.SHUFFLED:
        return items.order_by("n_judged", _spread("id", rater), "pk")
    stay = Case(When(query_id=current_query_id, then=0), default=1) if current_query_id else Value(1)
    return items.order_by("n_judged", stay, _spread("query_id", rater), "-priority", "pk")


def _lock(item_pk: int) -> RoundItem | None:
    # Skip an item another request is claiming or grading right now: a rater never waits for another.
    return RoundItem.objects.select_for_update(skip_locked=True).filter(pk=item_pk).first()


def _still_free(item: RoundItem, rater, now) -> bool:
    return _free_for(RoundItem.objects.filter(pk=item.pk), rater, now).exists()


def _show(item: RoundItem, rater, now) -> RoundItem:
    Claim.objects.update_or_create(item=item, rater=rater, defaults={"kind": Claim.Kind.SHOWN, "since": now})
    return item


def current_query_of(round: Round, rater) -> int | None:
    latest = Judgment.objects.filter(item__round=round, rater=rater).order_by("-created_at", "-pk").values("item__query_id").first()
    return latest["item__query_id"] if latest else None


@transaction.atomic
def next_item(round: Round, rater) -> RoundItem | None:
    """The pair this rater should judge now, claimed for them; None when nothing is left for them."""
    now = timezone.now()
    claims = Claim.objects.filter(item__round=round, rater=rater).select_related("item")
    shown = claims.filter(kind=Claim.Kind.SHOWN).first()
    if shown:
        if shown.item.n_judged < shown.item.required or shown.since >= now - timedelta(seconds=settings.GRADING_HOLD_SECONDS):
            return shown.item
        shown.delete()  # the hold ran out and others completed the pair meanwhile
    for claim in claims.filter(kind=Claim.Kind.HANDED).order_by("since", "pk"):
        return _show(claim.item, rater, now)
    candidates = _fresh_candidates(round, rater, now, current_query_of(round, rater))
    for batch in _CANDIDATE_BATCHES:  # a wider net when other requests hold the first candidates
        for candidate in candidates[:batch]:
            item = _lock(candidate.pk)
            if item is not None and _still_free(item, rater, now):
                return _show(item, rater, now)
    for claim in claims.filter(kind=Claim.Kind.LATER).order_by("since", "pk"):
        if claim.item.n_judged < claim.item.required:
            return _show(claim.item, rater, now)
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
    elif verdict.unrateable not in UnrateableReason.values:
        raise GradingRefused("Choose a grade, or say why the pair is unrateable.")
    elif verdict.unrateable == UnrateableReason.OTHER and not verdict.unrateable_note.strip():
        raise GradingRefused("Say what makes the pair unrateable.")


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
        return _record(item, rater, verdict)


@transaction.atomic
def _record(item: RoundItem, rater, verdict: Verdict) -> tuple[Judgment, bool]:
    now = timezone.now()
    item = RoundItem.objects.select_for_update().get(pk=item.pk)  # one request at a time per pair
    judgment = Judgment.objects.filter(item=item, rater=rater).first()
    created = judgment is None
    if created:
        claim = Claim.objects.filter(item=item, rater=rater).first()
        if claim is None and not _still_free(item, rater, now):
            raise GradingRefused("This pair already has all the judgments it needs: go on to your next pair.")
        seconds = (now - claim.since).total_seconds() if claim and claim.kind == Claim.Kind.SHOWN else None
        judgment = Judgment.objects.create(
            item=item, rater=rater, grade=verdict.grade, unrateable=verdict.unrateable,
            unrateable_note=verdict.unrateable_note, note=verdict.note, seconds=seconds, created_at=now, updated_at=now)
        RoundItem.objects.filter(pk=item.pk).update(n_judged=F("n_judged") + 1)
    else:
        if (judgment.grade, judgment.unrateable) != (verdict.grade, verdict.unrateable):
            JudgmentEdit.objects.create(item=item, rater=rater, editor=rater, at=now,
                                        old_grade=judgment.grade, old_unrateable=judgment.unrateable,
                                        new_grade=verdict.grade, new_unrateable=verdict.unrateable)
        judgment.grade, judgment.unrateable, judgment.unrateable_note = verdict.grade, verdict.unrateable, verdict.unrateable_note
        judgment.note, judgment.updated_at = verdict.note, now
        judgment.save(update_fields=["grade", "unrateable", "unrateable_note", "note", "updated_at"])
    Claim.objects.filter(item=item, rater=rater).delete()
    return judgment, created


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
    allowed |= set(_free_for(items, rater, timezone.now()).values_list("pk", flat=True))
    ordered = items.filter(pk__in=allowed).select_related("query", "document", "pair").order_by("-priority", "pk")
    return [(item, mine.get(item.pk)) for item in ordered]


def previous_judgment(round: Round, rater, before: Judgment | None = None) -> Judgment | None:
    """The rater's judgment before `before` (their latest one when None): what the back key opens."""
    mine = Judgment.objects.filter(item__round=round, rater=rater).order_by("-created_at", "-pk")
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


def round_totals(round: Round) -> dict:
    """Judgments made (at most the required number per pair) and needed, and pairs complete."""
    return round.items.aggregate(
        done=Coalesce(Sum(Least("n_judged", "required")), 0), needed=Coalesce(Sum("required"), 0),
        pairs=Count("pk"), complete=Count("pk", filter=Q(n_judged__gte=F("required"))))


def progress_of(round: Round, rater) -> Progress:
    """The rater's counts and the round's: judgments made of those needed."""
    totals = round_totals(round)
    return Progress(
        judged=Judgment.objects.filter(item__round=round, rater=rater).count(),
        remaining=round.items.incomplete().not_judged_by(rater).count(),
        later=Claim.objects.filter(item__round=round, rater=rater, kind=Claim.Kind.LATER).count(),
        round_done=totals["done"], round_needed=totals["needed"],
    )

"""Judgment rounds as a lead runs them: set up, open, hand pairs around, reset flags, close.

Views, commands and (later) the API call these; what a rater does is in `grading`.
"""

import random
import statistics
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Count, Exists, F, OuterRef, Q, Sum
from django.utils import timezone

from ..lib.scales import Scale
from ..models import (Claim, GuidelinesVersion, HumanSample, Job, Judgment, JudgmentEdit, JudgmentListVersion, Pool, Project,
                      RaterTotals, Round, RoundItem)
from . import serving_order, versions
from .actions import ActionRefused, first_free
from .grading import count_round, latest_judgments_of, serving_key

OVERLAP_RANGE = (0.10, 0.20)
_BATCH = 2_000


def check_policy(raters_per_pair: int, overlap_share: float) -> None:
    if not 1 <= raters_per_pair <= 10:
        raise ActionRefused("Between 1 and 10 raters can judge each pair.")
    low, high = OVERLAP_RANGE
    if raters_per_pair == 1 and not (overlap_share == 0 or low <= overlap_share <= high):
        raise ActionRefused(f"The overlap share is 0 (no agreement measurement) or between {low:.0%} and {high:.0%}.")


def check_judging_order(order: str, judging_order: str) -> None:
    """A judging order ranks the pairs within a query: refuse it where pairs are not served query by query."""
    if judging_order != Round.JudgingOrder.POOL and order == Round.Order.SHUFFLED:
        raise ActionRefused(f"The judging order “{Round.JudgingOrder(judging_order).label}” ranks each query's pairs, but "
                            f"“{Round.Order.SHUFFLED.label}” serves pairs from every query at random: choose "
                            f"“{Round.Order.GROUPED.label}”, or pool order.")


def check_pool_has_pairs(pool: Pool) -> None:
    """Refuse a round on a pool with nothing to judge, saying whether its build is still under way."""
    if pool.pairs.exists():
        return
    building = Job.objects.filter(kind="build_pool", project=pool.project_id, params__pool=pool.pk,
                                  state__in=[Job.State.QUEUED, Job.State.RUNNING]).exists()
    if building:
        raise ActionRefused(f"The pool “{pool.name}” is still being built: wait for its job to finish.")
    raise ActionRefused(f"The pool “{pool.name}” has no pairs: its runs have no results for its query set's queries. "
                        f"Build a pool over runs that answer them.")


def _check_raters(project: Project, raters) -> None:
    graders = set(project.memberships.filter(role__in=["lead", "rater"]).values_list("user_id", flat=True))
    outside = [user.username for user in raters if user.pk not in graders]
    if outside:
        raise ActionRefused(f"Only the project's raters and leads can grade: {', '.join(outside)} cannot.")


@transaction.atomic
def create_round(project: Project, *, name: str, pool: Pool, guidelines: GuidelinesVersion, scale: Scale,
                 raters=(), raters_per_pair: int = 1, overlap_share: float = 0.15, order: str = Round.Order.GROUPED,
                 judging_order: str = Round.JudgingOrder.POOL, show_rank: bool = False, user=None, seed: int | None = None, faithfulness_scale: Scale | None = None) -> Round:
    """A draft round. Nothing is served until it is opened. A round over a pool of answers may also
    grade each answer's faithfulness to the documents it cites, on `faithfulness_scale`."""
    if pool.project_id != project.pk or guidelines.project_id != project.pk:
        raise ActionRefused("The pool and the guidelines must belong to this project.")
    _check_faithfulness(pool, faithfulness_scale)
    check_policy(raters_per_pair, overlap_share)
    check_judging_order(order, judging_order)
    check_pool_has_pairs(pool)
    _check_raters(project, raters)
    round = Round.objects.create(
        project=project, name=name, pool=pool, guidelines=guidelines, scale=scale.to_json(),
        faithfulness_scale=faithfulness_scale.to_json() if faithfulness_scale else None, raters_per_pair=raters_per_pair, overlap_share=overlap_share if raters_per_pair == 1 else 0,
        order=order, judging_order=judging_order, show_rank=show_rank, created_by=user,
        seed=random.SystemRandom().randrange(2**31) if seed is None else seed)
    round.raters.set(raters)
    return round


def _check_faithfulness(pool: Pool, faithfulness_scale: Scale | None) -> None:
    if faithfulness_scale is not None and pool.kind != Pool.Kind.ANSWERS:
        raise ActionRefused("Only a round over a pool of answers grades faithfulness to the cited documents.")


_UNCHANGED = object()


@transaction.atomic
def update_round(round: Round, *, version: int | None = None, scale: Scale | None = None,
                 guidelines: GuidelinesVersion | None = None, raters=None, faithfulness_scale=_UNCHANGED, user=None,
                 **settings) -> Round:
    """Change a round's settings, refusing what would mix incomparable judgments.

    `version` is the round's version the lead's form was loaded with: when another edit was saved since,
    nothing changes and EditConflict says so (None: change whatever is saved now).
    """
    round = Round.objects.select_for_update().get(pk=round.pk)
    if scale is not None and scale.to_json() != round.scale:
        if round.has_judgments():
            raise ActionRefused("The scale cannot change once the round has judgments: start a new round instead.")
        round.scale = scale.to_json()
    if faithfulness_scale is not _UNCHANGED:
        wanted = faithfulness_scale.to_json() if faithfulness_scale else None
        if wanted != round.faithfulness_scale:
            if round.has_judgments():
                raise ActionRefused("The faithfulness scale cannot change once the round has judgments: start a new round instead.")
            _check_faithfulness(round.pool, faithfulness_scale)
            round.faithfulness_scale = wanted
    if guidelines is not None and guidelines.pk != round.guidelines_id:
        if round.status != Round.Status.DRAFT:
            raise ActionRefused("An opened round keeps its guidelines version (grades under two versions are not "
                                "comparable): start a new round with the new version instead.")
        round.guidelines = guidelines
    policy = {key: settings.pop(key) for key in ("raters_per_pair", "overlap_share") if key in settings}
    if policy and round.status != Round.Status.DRAFT and any(getattr(round, k) != v for k, v in policy.items()):
        raise ActionRefused("How many raters judge each pair is fixed once the round is opened.")
    reordered = settings.get("judging_order", round.judging_order) != round.judging_order
    for key, value in {**policy, **settings}.items():
        setattr(round, key, value)
    check_policy(round.raters_per_pair, round.overlap_share)
    check_judging_order(round.order, round.judging_order)
    if round.raters_per_pair > 1:
        round.overlap_share = 0
    round.save_edit(round.version if version is None else version, ["scale", "faithfulness_scale", "guidelines", "raters_per_pair", "overlap_share", *settings])
    if raters is not None:
        _check_raters(round.project, raters)
        round.raters.set(raters)
    if reordered:
        serving_order.reorder_round(round, user=user)
    return round


def required_judgments(n_pairs: int, raters_per_pair: int, overlap_share: float, rng: random.Random) -> list[int]:
    """How many judgments each of `n_pairs` pairs needs: the overlap share drawn at random gets two."""
    if raters_per_pair > 1:
        return [raters_per_pair] * n_pairs
    overlap = set(rng.sample(range(n_pairs), round(n_pairs * overlap_share)))
    return [2 if i in overlap else 1 for i in range(n_pairs)]


@transaction.atomic
def add_pool_pairs(round: Round) -> dict:
    """Bring the pool's pairs that are not in the round yet into it (all of them when it opens).

    Pairs whose document is missing from the corpus are left out: raters could not see them.
    """
    pairs = round.pool.pairs.exclude(round_items__round=round)
    missing = pairs.filter(document__isnull=True).count()
    rows = list(pairs.filter(document__isnull=False).order_by("pk").values_list("pk", "query_id", "document_id", "priority", "doc_id"))
    rng = random.Random(f"{round.seed}:{round.items.count()}")
    required = required_judgments(len(rows), round.raters_per_pair, round.overlap_share, rng)
    carried = 0
    old = [None] * len(rows)
    if round.refreshed_from_id:  # pairs the refreshed version labels keep their label unless picked for re-judging
        labels = versions.carried_labels(round.refreshed_from)
        served = versions.rejudge_sample(round, labels)
        keys = dict(pairs.filter(document__isnull=False).values_list("pk", "query__query_id").order_by())
        docs = dict(pairs.filter(document__isnull=False).values_list("pk", "document__doc_id").order_by())
        for i, (pk, *_rest) in enumerate(rows):
            key = (keys[pk], docs[pk])
            old[i] = labels.get(key)
            if key in labels and key not in served:
                required[i] = 0
                carried += 1
    for_judge = _leave_to_judge(round, rows, required)
    for start in range(0, len(rows), _BATCH):
        RoundItem.objects.bulk_create([
            RoundItem(round=round, pair_id=pk, query_id=query, document_id=document, priority=serving_order.entering_priority(round, priority, doc_id),
                      required=need, old_label=label, query_key=serving_key(round.seed, "query", query), pair_key=serving_key(round.seed, "pair", pk))
            for (pk, query, document, priority, doc_id), need, label in zip(rows[start:start + _BATCH], required[start:start + _BATCH],
                                                                    old[start:start + _BATCH])
        ])
    if round.judging_order in serving_order.ADAPTIVE:
        serving_order.reorder_round(round, user=round.created_by, query_ids={query for _pk, query, *_rest in rows})
    count_round(round)
    return {"added": len(rows) - carried - for_judge, "overlap": sum(1 for need in required if need > 1),
            "missing_from_corpus": missing, "carried": carried, "for_judge": for_judge}


def _refuse_new_queries(round: Round, queries: set[int]) -> None:
    """Pairs added to a planned round after it opened may not bring queries it lacks: the raters' sample was drawn
    from its queries then, so a new query could never be in it and the sample would no longer be a random one."""
    if not round.items.exists():
        return
    new = queries - set(round.items.filter(query__in=queries).values_list("query", flat=True).distinct())
    if new:
        raise ActionRefused(f"The pool's new pairs bring {len(new):,} quer{'y' if len(new) == 1 else 'ies'} this round "
                            f"lacks; its raters' sample was drawn from its queries when it opened, so the new ones could "
                            f"never be in it and estimates would rest on no random sample. Start a new round over the pool.")


def _leave_to_judge(round: Round, rows: list[tuple], required: list[int]) -> int:
    """In a round planned for prediction-powered estimates (`judgments.ops.planning`), the pairs of queries outside
    the raters' sample need no rater: their required count becomes 0 (an automatic judge labels them). Returns
    how many pairs that left to the judge, carried pairs aside."""
    sample = HumanSample.objects.filter(round=round).values_list("query_ids", flat=True).first()
    if sample is None:
        return 0
    sampled = set(round.pool.query_set.queries.filter(query_id__in=sample).values_list("pk", flat=True))
    _refuse_new_queries(round, {query for _pk, query, *_rest in rows})
    left = 0
    for i, (_pk, query, *_rest) in enumerate(rows):
        if query not in sampled:
            left += required[i] > 0
            required[i] = 0
    return left


@transaction.atomic
def open_round(round: Round) -> dict:
    """Open a draft (its pairs are laid out now) or reopen a closed round."""
    round = Round.objects.select_for_update().get(pk=round.pk)
    if round.status == Round.Status.OPEN:
        raise ActionRefused("The round is open already.")
    n_raters = round.raters.count()
    if n_raters == 0:
        raise ActionRefused("Choose the raters first.")
    needed = round.max_required
    if n_raters < needed:
        raise ActionRefused(f"Pairs need {needed} independent judgments but the round has {n_raters} rater(s).")
    added = add_pool_pairs(round) if round.status == Round.Status.DRAFT else {}
    if round.status == Round.Status.DRAFT and not round.items.exists():
        raise ActionRefused("The pool has no pairs whose documents are in the corpus: nothing to judge.")
    round.status, round.opened_at, round.closed_at = Round.Status.OPEN, round.opened_at or timezone.now(), None
    round.save(update_fields=["status", "opened_at", "closed_at"])
    return added


@transaction.atomic
def close_round(round: Round) -> None:
    round = Round.objects.select_for_update().get(pk=round.pk)
    if round.status != Round.Status.OPEN:
        raise ActionRefused("Only an open round can be closed.")
    round.status, round.closed_at = Round.Status.CLOSED, timezone.now()
    round.save(update_fields=["status", "closed_at"])
    Claim.objects.filter(item__round=round, kind=Claim.Kind.SHOWN).delete()


def successor(round: Round, *, user) -> Round:
    """A draft copy of the round bound to the project's latest guidelines (grades under two versions
    are not comparable, so new guidelines mean a new round), with the round's sample of queries for raters
    if it was planned for prediction-powered estimates."""
    latest = round.project.guideline_versions.first()
    name = f"{round.name} (guidelines v{latest.number})"
    if round.project.rounds.filter(name=name).exists():
        raise ActionRefused(f"A round named “{name}” exists already.")
    copy = create_round(round.project, name=name, pool=round.pool, guidelines=latest, scale=round.grading_scale,
                        faithfulness_scale=round.faithfulness_grading_scale,
                        raters=list(round.raters.all()), raters_per_pair=round.raters_per_pair,
                        overlap_share=round.overlap_share, order=round.order, judging_order=round.judging_order,
                        show_rank=round.show_rank, user=user)
    sample = HumanSample.objects.filter(round=round).first()
    if sample is not None:  # the same random sample of the same pool's queries: the new round is planned alike
        sample.pk, sample.round, sample.created_by = None, copy, user
        sample.save()
    return copy


@transaction.atomic
def reassign(round: Round, from_rater, to_rater=None) -> int:
    """Hand a rater's unjudged claims (on screen, put off, handed) to another rater of the round,
    or back to everyone when `to_rater` is None. Returns how many pairs moved."""
    claims = Claim.objects.select_for_update().filter(item__round=round, rater=from_rater)
    judged_by_target = set(Judgment.objects.filter(item__round=round, rater=to_rater).values_list("item_id", flat=True)) if to_rater else set()
    moved = 0
    for claim in claims:
        if to_rater is not None and claim.item_id not in judged_by_target:
            Claim.objects.update_or_create(item_id=claim.item_id, rater=to_rater,
                                           defaults={"kind": Claim.Kind.HANDED, "since": timezone.now()})
        claim.delete()
        moved += 1
    return moved


@transaction.atomic
def reset_flags(round: Round, *, later: bool = False, unrateable: bool = False, rater=None, by=None) -> dict:
    """Undo raters' flags: put-off pairs go back to everyone, and unrateable pairs are judged again
    (by anyone, their rater included: the page may have been fixed). The history keeps the flag."""
    claims = Claim.objects.filter(item__round=round, kind=Claim.Kind.LATER)
    flagged = Judgment.objects.select_for_update().unrateable().filter(item__round=round)
    if rater is not None:
        claims, flagged = claims.filter(rater=rater), flagged.filter(rater=rater)
    reset = {"later": claims.delete()[0] if later else 0, "unrateable": 0}
    if unrateable:
        for judgment in flagged:
            JudgmentEdit.objects.create(item_id=judgment.item_id, rater_id=judgment.rater_id, editor=by,
                                        old_unrateable=judgment.unrateable, old_note=judgment.note)
            RoundItem.objects.filter(pk=judgment.item_id).update(n_judged=F("n_judged") - 1)
            judgment.delete()
            reset["unrateable"] += 1
        count_round(round)
        serving_order.after_bulk_change(round)
    return reset


def set_gold(item: RoundItem, grade: int | None) -> None:
    if grade is not None and grade not in item.round.grading_scale.values:
        raise ActionRefused(f"{grade} is not a grade of this round's scale.")
    item.gold_grade = grade
    item.save(update_fields=["gold_grade"])


# How many of a rater's latest judgments in a round the median time per pair is taken over: their current
# pace, read by an index walk (judgment_rater_latest) whatever the size of the round.
RECENT_TIMED = 1_000
QUERIES_PER_PAGE = 50


def rater_report(round: Round) -> list[dict]:
    """Per rater: judgments, unrateable flags, pairs put off, time per pair, gold accuracy. Counts
    only: leads never need another rater's grades to see progress. The counts are kept (RaterTotals);
    gold accuracy is read over the gold pairs alone (round_item_gold)."""
    kept = {row.rater_id: row for row in RaterTotals.objects.filter(round=round)}
    gold = {row["rater"]: row for row in Judgment.objects.filter(item__round=round, item__gold_grade__isnull=False, grade__isnull=False)
            .values("rater").annotate(gold=Count("pk"), gold_right=Count("pk", filter=Q(item__gold_grade=F("grade"))))}
    later = dict(Claim.objects.filter(item__round=round, kind=Claim.Kind.LATER).values("rater")
                 .annotate(n=Count("pk")).values_list("rater", "n"))
    report = []
    for rater in round.raters.order_by("username"):
        totals = kept.get(rater.pk) or RaterTotals(round=round, rater=rater)
        graded = gold.get(rater.pk, {})
        report.append({
            "rater": rater, "graded": totals.judgments - totals.unrateable, "unrateable": totals.unrateable,
            "later": later.get(rater.pk, 0), "last": totals.last_at, "median_seconds": _recent_median_seconds(round, rater),
            "gold": graded.get("gold", 0), "gold_right": graded.get("gold_right", 0),
            "gold_accuracy": graded["gold_right"] / graded["gold"] if graded else None,
        })
    return report


def _recent_median_seconds(round: Round, rater) -> float | None:
    recent = latest_judgments_of(round, rater).values_list("seconds", flat=True)[:RECENT_TIMED]
    timed = [seconds for seconds in recent if seconds is not None]
    return statistics.median(timed) if timed else None


@dataclass(frozen=True)
class QueryPage:
    """One page of a round's queries by id (keyset pagination: `after` or `before` a query id)."""

    rows: list[dict]
    has_previous: bool
    has_next: bool

    @property
    def first(self) -> str | None:
        return self.rows[0]["query__query_id"] if self.rows else None

    @property
    def last(self) -> str | None:
        return self.rows[-1]["query__query_id"] if self.rows else None


def query_report(round: Round, *, after: str | None = None, before: str | None = None, size: int = QUERIES_PER_PAGE) -> QueryPage:
    """Per query of one page, by query id: pairs, pairs complete, judgments made, unrateable flags, gold
    pairs. The page's queries are found through the unique (set, query id) index, each checked to be in
    the round (round_item_query), and only their pairs are read: the judgments made are the pairs' kept
    counts (RoundItem.n_judged), the unrateable flags come from the partial index judgment_unrateable, so no
    query reads the judgments that carry a grade."""
    in_round = RoundItem.objects.filter(round=round, query=OuterRef("pk"))
    queries = round.pool.query_set.queries.filter(Exists(in_round))
    if before is not None:
        picked = list(queries.filter(query_id__lt=before).order_by("-query_id").values_list("pk", flat=True)[:size + 1])
        more_before, more_after = len(picked) > size, True
        picked = picked[:size]
    else:
        picked = list(queries.filter(query_id__gt=after or "").order_by("query_id").values_list("pk", flat=True)[:size + 1])
        more_before, more_after = after is not None, len(picked) > size
        picked = picked[:size]
    unrateable = dict(Judgment.objects.unrateable().filter(item__round=round, item__query__in=picked).order_by()
                      .values("item__query").annotate(n=Count("pk")).values_list("item__query", "n"))
    rows = list(round.items.filter(query__in=picked).values("query_id", "query__query_id", "query__text").annotate(
        pairs=Count("pk"), complete=Count("pk", filter=Q(n_judged__gte=F("required"))), judged=Sum("n_judged"),
        gold=Count("pk", filter=Q(gold_grade__isnull=False))).order_by("query__query_id"))
    for row in rows:
        row["unrateable"] = unrateable.get(row["query_id"], 0)
    return QueryPage(rows=rows, has_previous=more_before and bool(picked), has_next=more_after and bool(picked))


def missing_pairs(round: Round, totals: dict) -> int:
    """The pool's pairs not in the round yet: the round's pairs all come from its pool, once each, so the
    difference of two counts rather than a search of the pool for pairs the round lacks. The pool's count
    is its report's, kept by every change to its pairs (judgments.ops.pools)."""
    in_pool = round.pool.report.get("total_pairs")
    return max(0, (round.pool.pairs.count() if in_pool is None else in_pool) - totals["pairs"])


def flag_counts(round: Round) -> dict:
    """How many unrateable judgments (kept per rater) and judge-later claims the round has."""
    kept = RaterTotals.objects.filter(round=round).aggregate(n=Sum("unrateable"))["n"] or 0
    return {"unrateable": kept, "later": Claim.objects.filter(item__round=round, kind=Claim.Kind.LATER).count()}


def after_row(found, start: dict | None, key: str, *, key_descending: bool, pk_descending: bool):
    """Keyset pagination: `found` (ordered by `key`, then pk, each the way named) from just after the row whose
    `key` and pk `start` holds; all of it when `start` is None."""
    if start is None:
        return found
    key_op, pk_op = ("lt" if key_descending else "gt"), ("lt" if pk_descending else "gt")
    return found.filter(Q(**{f"{key}__{key_op}": start[key]}) | Q(**{key: start[key], f"pk__{pk_op}": start["pk"]}))


FLAGS_PER_PAGE = 50


@dataclass(frozen=True)
class FlagPage:
    """One page of a round's flags (keyset pagination): `rows` after the flag the page starts after
    (`after`, None on the first page), and whether more follow."""

    rows: list
    has_next: bool
    after: object | None


def unrateable_flags(round: Round, *, after=None, size: int = FLAGS_PER_PAGE) -> FlagPage:
    """The round's unrateable verdicts with their reasons, newest first, `size` a page after the judgment
    whose uuid is `after`: a walk of the partial index judgment_unrateable_latest (unrateable verdicts
    alone, newest first), never a read of the round's grades."""
    found = (Judgment.objects.unrateable().filter(item__round=round)
             .select_related("rater", "item__query", "item__document").order_by("-created_at", "-pk"))
    start = Judgment.objects.unrateable().filter(item__round=round, uuid=after).values("created_at", "pk").first() if after else None
    found = after_row(found, start, "created_at", key_descending=True, pk_descending=True)
    rows = list(found[:size + 1])
    return FlagPage(rows=rows[:size], has_next=len(rows) > size, after=after if start is not None else None)


def later_flags(round: Round, *, after: tuple | None = None, size: int = FLAGS_PER_PAGE) -> FlagPage:
    """The pairs put off for later, longest put off first, `size` a page after the claim `after` names by
    (pair uuid, rater's username): a walk of the partial index claim_later."""
    later = Claim.objects.filter(item__round=round, kind=Claim.Kind.LATER)
    found = later.select_related("rater", "item__query", "item__document").order_by("since", "pk")
    start = later.filter(item__uuid=after[0], rater__username=after[1]).values("since", "pk").first() if after else None
    found = after_row(found, start, "since", key_descending=False, pk_descending=False)
    rows = list(found[:size + 1])
    return FlagPage(rows=rows[:size], has_next=len(rows) > size, after=after if start is not None else None)


def create_refresh(version: JudgmentListVersion, *, user=None, rejudge: str = Round.Rejudge.KEEP, share: float = 0.1,
                   name: str | None = None) -> Round:
    """A draft round over the pool of the version's round, on the project's latest guidelines, carrying the
    version's labels forward: pairs already labelled are served again only as `rejudge` says."""
    if rejudge not in Round.Rejudge.values:
        raise ActionRefused(f"Choose how old pairs are re-judged: {', '.join(Round.Rejudge.values)}.")
    if rejudge == Round.Rejudge.SAMPLE and not 0 < share <= 1:
        raise ActionRefused("The re-judged sample is a share of the old pairs above 0% and at most 100%.")
    source = version.round
    latest = source.project.guideline_versions.first()
    name = name or first_free(source.project.rounds, f"{version.lineage.name} refresh of v{version.number}")
    with transaction.atomic():
        refresh = create_round(source.project, name=name, pool=source.pool, guidelines=latest, scale=source.grading_scale,
                                      faithfulness_scale=source.faithfulness_grading_scale, raters=list(source.raters.all()),
                                      raters_per_pair=source.raters_per_pair, overlap_share=source.overlap_share, order=source.order,
                                      show_rank=source.show_rank, user=user)
        refresh.refreshed_from, refresh.rejudge, refresh.rejudge_share = version, rejudge, share
        Round.objects.filter(pk=refresh.pk).update(refreshed_from=version, rejudge=rejudge, rejudge_share=share)
    return refresh

"""A round planned for prediction-powered estimates: raters label a seeded random sample of its queries
(`HumanSample`), an automatic judge labels every pair, and the estimate (`evaluation.engine.ppi`) corrects the
judge's mean by the raters' sample.

The lead plans on a draft round: N queries for raters, typed or suggested from a target interval half-width for
a measure (`suggest_size`): a calibrated judge of the project (one with a calibration report) and a run of its
round's pool are scored per query under the raters' labels and under the judge's, on the queries of that round
whose every pair has both; their variances give the smallest N that reaches the width (``plan_sample_size``).
When the round opens its pairs of other queries need no rater (required 0, `rounds.add_pool_pairs`); the sample
is fixed from then on, since an estimate needs it drawn before anyone saw a label.
"""

import random
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Count, Exists, OuterRef

from evaluation.engine import evaluate, read_qrels
from evaluation.engine.measures import parse_measure
from evaluation.engine.ppi import MIN_LABELLED, calibration_variances, plan_sample_size

from ..lib import verdicts
from ..lib.sampling import draw_human_sample
from ..models import HumanSample, JudgeCalibration, PoolPair, Round, RoundJudge, StoredRun
from .actions import ActionRefused
from .automatic import shared_labels
from .imports import load_run

DEFAULT_MEASURE = "nDCG@10"
ALPHA = 0.05


def round_queries(round: Round) -> dict[str, str]:
    """The queries a round serves (query id -> tier, "" without one): its pool's queries with a pair whose
    document is in the corpus, as `rounds.add_pool_pairs` lays them out."""
    return dict(round.pool.pairs.filter(document__isnull=False).order_by()
                .values_list("query__query_id", "query__tier").distinct())


def has_tiers(round: Round) -> bool:
    return any(round_queries(round).values())


def _check_draft(round: Round, doing: str) -> None:
    if round.status != Round.Status.DRAFT:
        raise ActionRefused(f"The round is {round.get_status_display().lower()}: its sample of queries for raters cannot "
                            f"{doing} once the round has opened (an estimate needs the sample drawn before any label was "
                            f"seen). Start a new round to plan another sample.")
    if round.items.exists():
        raise ActionRefused("The round's pairs are laid out already: plan its sample before pairs are added.")


@transaction.atomic
def plan_round(round: Round, *, size: int, by_tier: bool, seed: int | None = None, suggested_from: dict | None = None,
               user=None) -> HumanSample:
    """Draw the round's sample of `size` queries for raters (replacing a draft's earlier plan). ActionRefused once
    the round has opened; ValueError for a plan the round's queries cannot have (a size outside 1..M, tiers
    where no query has one)."""
    round = Round.objects.select_for_update().get(pk=round.pk)
    _check_draft(round, "change")
    queries = round_queries(round)
    if not queries:
        raise ActionRefused("The round's pool has no pairs whose documents are in the corpus: no query to sample.")
    if not 1 <= size <= len(queries):
        raise ValueError(f"Raters can label between 1 and the round's {len(queries):,} queries; {size:,} asked.")
    if by_tier and not any(queries.values()):
        raise ValueError("The round's queries have no tiers: draw the sample without tiers.")
    seed = random.SystemRandom().randrange(2**31) if seed is None else seed
    draw = draw_human_sample(queries, size, seed, tiers=queries if by_tier else None)
    HumanSample.objects.filter(round=round).delete()
    return HumanSample.objects.create(round=round, size=size, seed=seed, by_tier=by_tier, query_ids=draw.query_ids,
                                      tier_shares=draw.tier_shares, suggested_from=suggested_from or {}, created_by=user)


@transaction.atomic
def remove_plan(round: Round) -> None:
    """Raters label every query again; refused once the round has opened."""
    round = Round.objects.select_for_update().get(pk=round.pk)
    if not HumanSample.objects.filter(round=round).exists():
        raise ActionRefused("The round has no sample of queries for raters.")
    _check_draft(round, "be removed")
    HumanSample.objects.filter(round=round).delete()


def plan_summary(round: Round, totals: dict) -> dict:
    """What the round page says of the plan: the sample (None without a plan), N of M queries, the pairs of the
    queries outside the sample (no rater is served them), and the pairs keeping a refreshed version's label
    without being served (`totals["carried"]` without a plan, where no pair is left to a judge)."""
    sample = HumanSample.objects.filter(round=round).select_related("created_by").first()
    if sample is None:
        return {"sample": None, "carried": totals["carried"]}
    n_queries = count_round_queries(round)
    if round.refreshed_from_id:  # pairs keep the old label (required 0) in sampled queries too: count them apart
        carried_old = round.items.filter(required=0, old_label__isnull=False).count()
        for_judge = round.items.exclude(query__query_id__in=sample.query_ids).count()
    else:  # every pair that needs no rater is one of a query outside the sample: the kept count, no scan
        carried_old, for_judge = 0, totals["carried"]
    return {"sample": sample, "n": len(sample.query_ids), "m": n_queries, "others": n_queries - len(sample.query_ids),
            "for_judge": for_judge, "carried": carried_old, "judges": round.judges.count()}


def count_round_queries(round: Round) -> int:
    """How many queries `round_queries` holds, by an index probe per query of the set rather than a read of the pool."""
    with_pairs = PoolPair.objects.filter(pool=round.pool_id, query=OuterRef("pk"), document__isnull=False)
    return round.pool.query_set.queries.filter(Exists(with_pairs)).count()


def mark_left_to_judge(rows: list[dict], plan: dict) -> None:
    """Mark the rows of `rounds.query_report` whose query is outside the raters' sample (``for_judge``): their
    pairs count as complete for raters, but only the judge labels them."""
    sampled = set(plan["sample"].query_ids) if plan["sample"] else None
    for row in rows:
        row["for_judge"] = sampled is not None and row["query__query_id"] not in sampled


def plan_initial(round: Round, judges: list[RoundJudge]) -> dict:
    """The plan form's first values: the current plan's, or a first calibrated judge and a run of its pool."""
    sample = HumanSample.objects.filter(round=round).first()
    suggested = sample.suggested_from if sample else {}
    judge = next((j for j in judges if str(j.uuid) == suggested.get("judge_uuid")), judges[0] if judges else None)
    run = judge.round.pool.runs.order_by("name").values_list("uuid", flat=True).first() if judge else None
    return {"size": sample.size if sample else None, "seed": sample.seed if sample else None,
            "by_tier": sample.by_tier if sample else has_tiers(round), "measure": suggested.get("measure", DEFAULT_MEASURE),
            "half_width": suggested.get("half_width"), "judge": str(judge.uuid) if judge else None,
            "run": suggested.get("run_uuid", run)}


# ------------------------------------------------------------------------------------------ suggesting N


def calibrated_judges(project) -> list[RoundJudge]:
    """The project's judges with a calibration report: those whose grades a suggestion of N can rest on."""
    return list(RoundJudge.objects.filter(round__project=project, calibration__isnull=False)
                .select_related("round__pool").order_by("round__name", "name"))


@dataclass(frozen=True)
class Suggestion:
    """N for a target half-width, or why there is none (`verdict` insufficient, naming what is missing).
    `grounds` is what it rests on, stored as `HumanSample.suggested_from`."""

    verdict: verdicts.Verdict
    n: int | None = None
    grounds: dict = field(default_factory=dict)


STEPS = ("Add an automatic judge to a round the raters have labelled, run it on every pair and compute its "
         "calibration report; or type N.",)
NO_JUDGE = Suggestion(verdicts.decide(missing=["no judge of the project has a calibration report"], steps=STEPS))


def suggest_size(round: Round, *, half_width: float, measure: str, judge: RoundJudge | None,
                 run: StoredRun | None) -> Suggestion:
    """The fewest queries raters must label in `round` for a PPI interval of ± `half_width` on `measure`, with
    the judge's error on `run` as its calibration round shows it (see the module docstring)."""
    n_queries = count_round_queries(round)
    if judge is None:
        return NO_JUDGE
    if run is None:
        return Suggestion(verdicts.decide(missing=[f"the pool of the judge's round “{judge.round.name}” has no run to score"],
                                          steps=STEPS))
    grounds = {"judge": judge.name, "judge_uuid": str(judge.uuid), "judge_round": judge.round.name,
               "judge_round_uuid": str(judge.round.uuid), "run": run.name, "run_uuid": str(run.uuid),
               "measure": measure, "half_width": half_width, "alpha": ALPHA, "n_queries": n_queries}
    if n_queries < MIN_LABELLED:
        missing = (f"the round has {n_queries} queries; an estimate gives a verdict only with at least {MIN_LABELLED} "
                   f"labelled by raters")
        return Suggestion(verdicts.decide(missing=[missing], steps=("Type N: all of the round's queries.",)), grounds=grounds)
    if not JudgeCalibration.objects.filter(judge=judge).exists():
        return Suggestion(verdicts.decide(missing=[f"judge “{judge.name}” has no calibration report"], steps=STEPS), grounds=grounds)
    human, machine = per_query_values(judge, run, measure)
    grounds["queries"] = len(human)
    if len(human) < MIN_LABELLED:
        missing = (f"only {len(human)} of the queries of round “{judge.round.name}” have every pair labelled by both the "
                   f"raters and judge “{judge.name}”; a suggestion needs at least {MIN_LABELLED}")
        return Suggestion(verdicts.decide(missing=[missing], steps=STEPS), grounds=grounds)
    variances = calibration_variances(human, machine)
    grounds.update(var_residual=variances["var_residual"], var_judge=variances["var_judge"])
    n = plan_sample_size(n_queries=n_queries, half_width=half_width, var_residual=variances["var_residual"],
                         var_judge=variances["var_judge"], alpha=ALPHA)
    if n is None:
        missing = (f"even raters labelling all {n_queries:,} queries would not give an interval of ±{half_width:g} on "
                   f"{measure} with this judge")
        return Suggestion(verdicts.decide(missing=[missing], steps=("Ask for a wider interval, or type N.",)), grounds=grounds)
    grounds["n"] = n
    return Suggestion(verdicts.decide(grounds=[f"{n} of {n_queries} queries"]), n=n, grounds=grounds)


def per_query_values(judge: RoundJudge, run: StoredRun, measure: str) -> tuple[dict[str, float], dict[str, float]]:
    """`run`'s `measure` per query under the raters' labels and under the judge's, on the queries of the judge's
    round whose every pair has both (a query missing from the run scores 0, as in every evaluation of the set)."""
    human, machine = shared_labels(judge.round, judge)
    pairs = dict(judge.round.items.order_by().values("query__query_id").annotate(n=Count("pk")).values_list("query__query_id", "n"))
    complete = [query for query, docs in human.items() if len(docs) == pairs.get(query)]
    if not complete:
        return {}, {}
    ranking = load_run(run)
    canonical = parse_measure(measure).canonical
    return tuple(evaluate(read_qrels({query: labels[query] for query in complete}), ranking, [canonical], all_queries=True)
                 .per_query[canonical] for labels in (human, machine))

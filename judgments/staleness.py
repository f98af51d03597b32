"""When a judgment list goes stale: each trigger's measured value against its thresholds, as ok, warn or stale.

The judgment-list method (step 7) asks for a refresh when new systems surface documents nobody graded, when
traffic drifts to queries nobody sampled, when guidelines change, when labels age, and when raters stop
agreeing. This module turns measured values into states and computes the drift figures from traffic counts;
`judgments.health` measures the values from a project and records each check. No Django import.
"""

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

OK, WARN, STALE = "ok", "warn", "stale"
UNMEASURED = "unmeasured"  # nothing to measure yet (no log, no run): never fires
FIRING = (WARN, STALE)
TRIGGERS = ("new_systems", "query_drift", "guidelines", "age", "agreement")
TITLES = {"new_systems": "New systems", "query_drift": "Query drift", "guidelines": "Guidelines changed",
          "age": "Label age", "agreement": "Agreement"}


@dataclass(frozen=True)
class Thresholds:
    """A project's thresholds; the defaults are the method's."""

    unjudged_warn: float = 0.20  # unjudged share at a reported cutoff above this: warn
    unjudged_stale: float = 0.30  # ... above this: stale
    cutoffs: tuple[int, ...] = (10, 20)
    head_judged_share: float = 0.50  # judged share of the head's traffic below this: stale
    new_head_queries: int = 20  # this many head queries of the new log in no query set: stale
    age_days: int = 180
    age_warn: float = 0.25  # share of labels older than age_days above this: warn
    age_stale: float = 0.50


@dataclass
class Trigger:
    """One trigger as measured: its value, the threshold it is held against, its state and what was found."""

    key: str
    state: str
    value: float | None
    threshold: str
    summary: str
    details: dict = field(default_factory=dict)

    @property
    def title(self) -> str:
        return TITLES[self.key]

    @property
    def firing(self) -> bool:
        return self.state in FIRING

    def to_json(self) -> dict:
        return asdict(self)


def level_above(value: float | None, warn: float, stale: float) -> str:
    """ok up to and including `warn`, warn up to and including `stale`, stale above it."""
    if value is None or value != value:
        return UNMEASURED
    return STALE if value > stale else WARN if value > warn else OK


def worst(states) -> str:
    order = [UNMEASURED, OK, WARN, STALE]
    return max(states, key=order.index, default=UNMEASURED)


# ---------------------------------------------------------------------------------------------- drift


def js_divergence(old: pd.Series, new: pd.Series) -> float:
    """Jensen-Shannon divergence (base 2, so between 0 and 1) between two traffic distributions given as
    impressions per query (indexed by query); a query missing from one side has zero traffic there."""
    index = old.index.union(new.index)
    p = old.reindex(index, fill_value=0).to_numpy(dtype=float)
    q = new.reindex(index, fill_value=0).to_numpy(dtype=float)
    if p.sum() <= 0 or q.sum() <= 0:
        return float("nan")
    p, q = p / p.sum(), q / q.sum()
    m = (p + q) / 2

    def kl(a: np.ndarray) -> float:
        there = a > 0
        return float(np.sum(a[there] * np.log2(a[there] / m[there])))

    return max(0.0, min(1.0, (kl(p) + kl(q)) / 2))


def judged_traffic_share(tiered: pd.DataFrame, judged: set[str]) -> dict[str, float]:
    """Per tier (columns query, traffic, tier as from sampling.assign_tiers), the share of the tier's
    impressions on queries in `judged`; a tier without traffic is left out."""
    if tiered.empty:
        return {}
    hit = tiered["query"].isin(judged)
    totals = tiered.groupby("tier", sort=False)["traffic"].sum()
    covered = tiered[hit].groupby("tier", sort=False)["traffic"].sum()
    return {str(tier): float(covered.get(tier, 0) / total) for tier, total in totals.items() if total > 0}


def new_head_queries(tiered: pd.DataFrame, judged: set[str]) -> list[tuple[str, int]]:
    """The head queries missing from `judged`, busiest first (ties by query), with their impressions."""
    head = tiered[(tiered["tier"] == "head") & ~tiered["query"].isin(judged)]
    head = head.groupby("query", sort=False)["traffic"].sum().reset_index()
    head = head.sort_values(["traffic", "query"], ascending=[False, True], kind="stable")
    return [(str(q), int(n)) for q, n in zip(head["query"], head["traffic"])]


# ----------------------------------------------------------------------------------------- triggers


def new_systems(shares: list[dict], unmeasured: list[str], limits: Thresholds) -> Trigger:
    """`shares`: one row per evaluated run, {"run", "cutoff", "share"} at each reported cutoff; `unmeasured`:
    runs imported and never evaluated. The value is the largest share."""
    worst_row = max(shares, key=lambda row: row["share"], default=None)
    threshold = f"unjudged share > {limits.unjudged_warn:.0%} warn, > {limits.unjudged_stale:.0%} stale"
    state = level_above(worst_row["share"], limits.unjudged_warn, limits.unjudged_stale) if worst_row else UNMEASURED
    if worst_row:
        summary = f"largest unjudged share {worst_row['share']:.1%} ({worst_row['run']} at @{worst_row['cutoff']})"
    else:
        summary = "no evaluated run yet"
    if unmeasured:
        summary += f"; {len(unmeasured)} run{'s' * (len(unmeasured) != 1)} not yet measured"
    over = [row for row in shares if row["share"] > limits.unjudged_warn]
    return Trigger("new_systems", state, worst_row["share"] if worst_row else None, threshold, summary,
                   {"over": over, "unmeasured": unmeasured})


def query_drift(judged_share: dict[str, float], new_head: list[tuple[str, int]], divergence: float | None,
                limits: Thresholds, *, log: str = "") -> Trigger:
    """Stale when the head's judged traffic share falls below its threshold or the new head queries reach
    theirs; warn at half way (under 1.5 times the share, or half the count)."""
    threshold = f"judged head traffic < {limits.head_judged_share:.0%} or >= {limits.new_head_queries} new head queries"
    head = judged_share.get("head")
    if head is None:
        return Trigger("query_drift", UNMEASURED, None, threshold, "no search log imported yet" if not log else
                       "the log has no head traffic")
    n_new = len(new_head)
    if head < limits.head_judged_share or n_new >= limits.new_head_queries:
        state = STALE
    elif head < min(1.0, limits.head_judged_share * 1.5) or n_new >= max(1, -(-limits.new_head_queries // 2)):
        state = WARN
    else:
        state = OK
    summary = (f"{head:.1%} of the head's traffic in {log} is judged; {n_new} head quer{'ies' if n_new != 1 else 'y'} "
               f"in no query set")
    if divergence is not None and divergence == divergence:
        summary += f"; JS divergence {divergence:.3f}"
    return Trigger("query_drift", state, head, threshold, summary,
                   {"judged_share": judged_share, "new_head": new_head[:50], "n_new_head": n_new,
                    "divergence": divergence, "log": log})


def guidelines(outdated: list[dict]) -> Trigger:
    """`outdated`: rounds on guidelines older than the current version, {"round", "number", "labels"}; any
    label graded before the change makes it warn (a refresh or re-judge decides, not a count)."""
    labels = sum(row["labels"] for row in outdated)
    state = WARN if labels else OK
    summary = (f"{labels:,} label{'s' * (labels != 1)} in {len(outdated)} round{'s' * (len(outdated) != 1)} predate the "
               "current guidelines") if labels else "every label is on the current guidelines"
    return Trigger("guidelines", state, float(labels), "any label on older guidelines", summary, {"rounds": outdated})


def age(old: int, total: int, limits: Thresholds) -> Trigger:
    threshold = (f"labels older than {limits.age_days} days > {limits.age_warn:.0%} warn, > {limits.age_stale:.0%} "
                 "stale")
    if not total:
        return Trigger("age", UNMEASURED, None, threshold, "no labels yet")
    share = old / total
    return Trigger("age", level_above(share, limits.age_warn, limits.age_stale), share, threshold,
                   f"{old:,} of {total:,} labels ({share:.1%}) older than {limits.age_days} days",
                   {"old": old, "total": total})


def agreement(gate: dict | None, round: str, *, newer_grades: bool) -> Trigger:
    """`gate`: the newest report's gate ({"passed", "label", "value", "threshold"}) or None without a report."""
    threshold = "the newest report's gate passes"
    if not round:
        return Trigger("agreement", UNMEASURED, None, threshold, "no round with grades yet")
    if gate is None:
        return Trigger("agreement", WARN, None, threshold, f"{round} has grades but no agreement report", {"round": round})
    value = gate.get("value")
    if gate.get("passed") is False:
        return Trigger("agreement", STALE, value, threshold,
                       f"{round}: {gate['label']} {value:.3f} is under {gate['threshold']:.2f}", {"round": round})
    if newer_grades:
        return Trigger("agreement", WARN, value, threshold, f"{round} has grades newer than its agreement report",
                       {"round": round})
    return Trigger("agreement", OK, value, threshold,
                   f"{round}: gate passes" + (f" ({gate['label']} {value:.3f})" if value is not None else ""), {"round": round})

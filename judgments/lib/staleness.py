"""When a judgment list goes stale: each trigger's measured value against its thresholds, as ok, warn or stale.

The judgment-list method (step 7) asks for a refresh when new systems surface documents nobody graded, when
traffic drifts to queries nobody sampled, when guidelines change, when labels age, and when raters stop
agreeing. This module turns measured values into states and computes the drift figures from traffic counts;
`judgments.ops.health` measures the values from a project and records each check. No Django import.

Each trigger has a state (ok, warn, stale: how far it fires; unmeasured: nothing to measure yet) and a verdict
(`judgments.lib.verdicts`): pass when measured and quiet, fail when the data prove it fires, not enough evidence
when they cannot tell, naming what is missing and the step that supplies it. A trigger without enough evidence
does not fire, except the agreement trigger, whose rule fires it after a settable number of grades (and on a
missing or outdated report).
"""

from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd

from .verdicts import FAIL, INSUFFICIENT, PASS, Verdict, decide

OK, WARN, STALE = "ok", "warn", "stale"
UNMEASURED = "unmeasured"  # nothing to measure yet (no log, no run): not enough evidence, and it does not fire
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
    agreement_fire_after: int | None = 50  # grades in a round whose gate still lacks evidence: warn (None: never)


@dataclass
class Trigger:
    """One trigger as measured: its value, the threshold it is held against, its state, its verdict and what was
    found. A trigger stored before verdicts existed gets the one its state implies."""

    key: str
    state: str
    value: float | None
    threshold: str
    summary: str
    details: dict = field(default_factory=dict)
    verdict: Verdict | None = None

    def __post_init__(self) -> None:
        if isinstance(self.verdict, dict):
            self.verdict = Verdict.from_json(self.verdict)
        elif self.verdict is None:
            self.verdict = _verdict_of_state(self.state, self.summary)

    @property
    def title(self) -> str:
        return TITLES[self.key]

    @property
    def firing(self) -> bool:
        return self.state in FIRING

    def to_json(self) -> dict:
        """As stored with a check and printed by `check_health --json`: the verdict and whether it fires included."""
        return {"key": self.key, "state": self.state, "value": self.value, "threshold": self.threshold, "summary": self.summary,
                "details": self.details, "verdict": self.verdict.to_json(), "firing": self.firing}

    @classmethod
    def from_json(cls, data: dict) -> "Trigger":
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})


def _verdict_of_state(state: str, summary: str) -> Verdict:
    kind = {OK: PASS, UNMEASURED: INSUFFICIENT}.get(state, FAIL)
    return Verdict(kind, (summary,) if summary else ())


def verdict_of(trigger: dict) -> Verdict:
    """The verdict of a stored trigger (a check's JSON), also of one stored before verdicts existed."""
    if trigger.get("verdict"):
        return Verdict.from_json(trigger["verdict"])
    return _verdict_of_state(trigger.get("state", UNMEASURED), trigger.get("summary", ""))


def _plural(n: int, word: str, many: str = "") -> str:
    return f"{n:,} {word if n == 1 else many or word + 's'}"


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


def new_systems(shares: list[dict], unmeasured: list[str], limits: Thresholds, *, runs: int | None = None) -> Trigger:
    """`shares`: one row per evaluated run, {"run", "cutoff", "share", "round"} at each reported cutoff, from the
    evaluation the run was last evaluated in ("round" names its round, and the published version it pinned);
    `unmeasured`: runs imported and never evaluated on the raters' labels alone (an evaluation a judge filled has
    no unjudged pairs to show); `runs`: how many runs are stored (for the missing-run case).
    The value is the largest share. A run never evaluated is missing evidence: its unjudged share is unknown."""
    worst_row = max(shares, key=lambda row: row["share"], default=None)
    threshold = f"unjudged share > {limits.unjudged_warn:.0%} warn, > {limits.unjudged_stale:.0%} stale"
    state = level_above(worst_row["share"], limits.unjudged_warn, limits.unjudged_stale) if worst_row else UNMEASURED
    if worst_row:
        where = f", last evaluated on {worst_row['round']}" if worst_row.get("round") else ""
        summary = f"largest unjudged share {worst_row['share']:.1%} ({worst_row['run']} at @{worst_row['cutoff']}{where})"
    else:
        summary = "no evaluated run yet"
    missing = []
    if unmeasured:
        summary += f"; {_plural(len(unmeasured), 'run')} not yet measured"
        missing.append(f"{_plural(len(unmeasured), 'run')} never evaluated on the raters' labels, so {'its' if len(unmeasured) == 1 else 'their'} "
                       f"unjudged share is unknown: {', '.join(unmeasured[:5])}" + (", ..." if len(unmeasured) > 5 else ""))
    elif not worst_row:
        missing.append("no run imported yet" if runs == 0 else "no run evaluated yet")
    steps = []
    if state in FIRING:
        steps.append("Queue the unjudged top k of each run over the threshold into a new round, so raters grade them.")
    if unmeasured:
        steps.append("Evaluate each run not yet measured on a round, without a judge filling its unjudged pairs (the buttons "
                     "below, or Evaluations → Evaluate runs).")
    elif not worst_row:
        steps.append("Import a run (Data → Runs) and evaluate it on a round." if runs == 0 else "Evaluate a run on a round.")
    over = [row for row in shares if row["share"] > limits.unjudged_warn]
    return Trigger("new_systems", state, worst_row["share"] if worst_row else None, threshold, summary,
                   {"over": over, "unmeasured": unmeasured},
                   decide(failures=[summary] if state in FIRING else [], missing=missing, grounds=[summary], steps=steps))


def query_drift(judged_share: dict[str, float], new_head: list[tuple[str, int]], divergence: float | None,
                limits: Thresholds, *, log: str = "") -> Trigger:
    """Stale when the head's judged traffic share falls below its threshold or the new head queries reach
    theirs; warn at half way (under 1.5 times the share, or half the count)."""
    threshold = f"judged head traffic < {limits.head_judged_share:.0%} or >= {limits.new_head_queries} new head queries"
    head = judged_share.get("head")
    if head is None:
        missing = "no search log imported yet" if not log else f"the newest log ({log}) has no head traffic"
        step = ("Import a search log (Data → Logs): the trigger compares its busiest queries with the query sets." if not log
                else "Import a log with the traffic of the queries searched (Data → Logs).")
        return Trigger("query_drift", UNMEASURED, None, threshold, missing, {}, decide(missing=[missing], steps=[step]))
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
    steps = ["Draw a refresh sample from the new log (judged queries left out) and grade it."] if state in FIRING else []
    return Trigger("query_drift", state, head, threshold, summary,
                   {"judged_share": judged_share, "new_head": new_head[:50], "n_new_head": n_new,
                    "divergence": divergence, "log": log},
                   decide(failures=[summary] if state in FIRING else [], grounds=[summary], steps=steps))


def guidelines(outdated: list[dict]) -> Trigger:
    """`outdated`: rounds on guidelines older than the current version, {"round", "number", "labels"}; any
    label graded before the change makes it warn (a refresh or re-judge decides, not a count)."""
    labels = sum(row["labels"] for row in outdated)
    state = WARN if labels else OK
    summary = (f"{labels:,} label{'s' * (labels != 1)} in {len(outdated)} round{'s' * (len(outdated) != 1)} predate the "
               "current guidelines") if labels else "every label is on the current guidelines"
    steps = ["Start a new round on the current guidelines that re-judges those pairs."] if labels else []
    return Trigger("guidelines", state, float(labels), "any label on older guidelines", summary, {"rounds": outdated},
                   decide(failures=[summary] if labels else [], grounds=[summary], steps=steps))


def age(old: int, total: int, limits: Thresholds) -> Trigger:
    threshold = (f"labels older than {limits.age_days} days > {limits.age_warn:.0%} warn, > {limits.age_stale:.0%} "
                 "stale")
    if not total:
        return Trigger("age", UNMEASURED, None, threshold, "no labels yet", {},
                       decide(missing=["no labels yet"], steps=["Open a round and grade its pairs."]))
    share = old / total
    state = level_above(share, limits.age_warn, limits.age_stale)
    summary = f"{old:,} of {total:,} labels ({share:.1%}) older than {limits.age_days} days"
    steps = ["Start a new round that re-judges the old labels."] if state in FIRING else []
    return Trigger("age", state, share, threshold, summary, {"old": old, "total": total},
                   decide(failures=[summary] if state in FIRING else [], grounds=[summary], steps=steps))


def agreement(gate: dict | None, round: str, *, grades: int, newer_grades: bool, limits: Thresholds) -> Trigger:
    """The newest graded round's agreement gate. `gate`: its report's gate as `reports.Gate.to_json()` gives it
    (the one verdict the report page shows), None without a report; `grades`: the round's grades now.

    A failing gate is stale. A gate without enough evidence (no pair graded by two raters, a statistic
    undefined) is not enough evidence here too, and warns once the round has `limits.agreement_fire_after`
    grades (never when that is None). A missing report, or grades newer than the report, warn: the report must
    be computed before it can say anything."""
    after = limits.agreement_fire_after
    threshold = ("stale when the newest graded round's gate fails; warn when it has no report or an outdated one" +
                 (f", or when its gate still lacks evidence after {after:,} grades" if after is not None else
                  " (a gate that lacks evidence does not fire)"))
    if not round:
        return Trigger("agreement", UNMEASURED, None, threshold, "no round with grades yet", {},
                       decide(missing=["no round with grades yet"], steps=["Open a round and grade its pairs."]))
    if gate is None:
        missing = f"{round} has {_plural(grades, 'grade')} but no agreement report"
        return Trigger("agreement", WARN, None, threshold, missing, {"round": round, "grades": grades},
                       Verdict(INSUFFICIENT, (missing,), ("Compute the agreement report.",)))
    verdict, value = verdict_of(gate), gate.get("value")
    details = {"round": round, "grades": grades, "gate": verdict.state}
    if verdict.failed:
        return Trigger("agreement", STALE, value, threshold, f"{round}: {verdict.reasons[0]}", details, verdict)
    if newer_grades:
        missing = f"{round} has grades newer than its agreement report (which read: {verdict.label})"
        return Trigger("agreement", WARN, value, threshold, missing, details,
                       Verdict(INSUFFICIENT, (missing,), ("Compute the agreement report again.",)))
    if verdict.insufficient:
        fires = after is not None and grades >= after
        when = (f"fires at {after:,} grades" if not fires else f"fires: {after:,} grades or more") if after is not None else "never fires"
        reasons = tuple(f"{round}: {reason}" for reason in verdict.reasons) + (f"{_plural(grades, 'grade')} so far; {when}",)
        summary = "; ".join(reasons)
        return Trigger("agreement", WARN if fires else UNMEASURED, None, threshold, summary, details,
                       Verdict(INSUFFICIENT, reasons, verdict.steps))
    return Trigger("agreement", OK, value, threshold, f"{round}: gate passes, {verdict.reasons[0]}" if verdict.reasons else
                   f"{round}: gate passes", details, verdict)

"""Where a project stands, for its home page: its rounds with their progress and gate, the latest
agreement report and evaluation, its jobs, and what needs a lead's attention.

Every count comes from the database in a few aggregate queries (the rounds' totals are kept in
RoundTotals), so the page costs the same for a round of 100 pairs as for one of 100,000.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, F, Sum
from django.db.models.functions import Greatest
from django.urls import reverse
from django.utils import timezone

from evaluation import evaluations
from evaluation.models import Evaluation

from .models import AgreementReport, Claim, Job, Project, RaterTotals, Round, RoundItem, RoundTotals
from .ops import reports

PREFERRED_MEASURE = "nDCG@10"
# A failed job needs attention for a week: by then it was retried, redone as a new job, or let go (the
# Jobs page keeps it).
FAILED_JOB_ATTENTION = timedelta(days=7)


@dataclass(frozen=True)
class Attention:
    """One thing a lead should look at: what, why, and where to do something about it."""

    kind: str
    text: str
    link: str


def round_rows(project: Project) -> list[dict]:
    """Every round of the project, newest first, with its totals, raters and gate (None before a report)."""
    rounds = list(project.rounds.select_related("guidelines").annotate(n_raters=Count("raters", distinct=True)))
    totals = {row.round_id: row for row in RoundTotals.objects.filter(round__in=rounds)}
    stored = {report.round_id: report for report in AgreementReport.objects.filter(round__in=rounds)}
    rows = []
    for round in rounds:
        total = totals.get(round.pk) or RoundTotals(round=round)
        report = stored.get(round.pk)
        rows.append({"round": round, "totals": total, "percent": round_percent(total),
                     "gate": reports.gate(round, report.data["summary"]) if report else None, "report": report})
    return rows


def round_percent(totals: RoundTotals) -> int:
    """Judgments made of those needed, in whole percent; 100 only when every judgment is in."""
    if not totals.needed:
        return 0
    return totals.done * 100 // totals.needed


def pending_adjudication(rounds) -> dict[int, int]:
    """Per round: pairs whose grades differ by at least the round's margin and that no lead has labelled
    yet (the adjudication queue's pairs still waiting)."""
    wide = RoundItem.objects.filter(round__in=rounds, spread__gte=1, adjudication__isnull=True).filter(
        spread__gte=Greatest(F("round__adjudication_margin"), 1))  # spread >= 1 alone names the partial index
    return dict(wide.values("round").annotate(n=Count("pk")).values_list("round", "n"))


def needs_attention(project: Project, rows: list[dict]) -> list[Attention]:
    """Jobs failed this week, rounds whose gate fails or lacks evidence, pairs waiting for adjudication or flagged unrateable or put
    off, open rounds on outdated guidelines: each with a link to where it is dealt with."""
    items = []
    failed = project.jobs.filter(state=Job.State.FAILED, finished_at__gte=timezone.now() - FAILED_JOB_ATTENTION)
    for job in failed[:5]:
        items.append(Attention("job", f"Job “{job.label}” failed: {job.error.splitlines()[0][:120] if job.error else 'see its page'}.",
                               job.get_absolute_url()))
    if failed.count() > 5:
        items.append(Attention("job", f"{failed.count() - 5} more failed jobs.", reverse("judgments:jobs", args=[project.slug])))
    rounds = [row["round"] for row in rows if row["round"].status != Round.Status.DRAFT]
    waiting = pending_adjudication(rounds)
    flags = dict(RaterTotals.objects.filter(round__in=rounds).values("round").annotate(n=Sum("unrateable"))
                 .values_list("round", "n"))
    later = dict(Claim.objects.filter(item__round__in=rounds, kind=Claim.Kind.LATER).values("item__round").annotate(n=Count("pk"))
                 .values_list("item__round", "n"))
    latest_guidelines = project.guideline_versions.first()
    for row in rows:
        round = row["round"]
        base = round.get_absolute_url()
        gate = row["gate"]
        if gate and gate.verdict.failed:
            items.append(Attention("gate", f"{round.name}: the gate fails, {gate.label} {gate.value:.3f} is under "
                                           f"{gate.threshold:.2f}.", base + "agreement/"))
        elif gate and gate.verdict.insufficient:
            items.append(Attention("gate", f"{round.name}: not enough evidence for the agreement gate, "
                                           f"{'; '.join(gate.verdict.reasons)}.", base + "agreement/"))
        if waiting.get(round.pk):
            n = waiting[round.pk]
            items.append(Attention("adjudication", f"{round.name}: {n} pair{'s' * (n != 1)} whose grades differ by "
                                                   f"{round.adjudication_margin} or more wait for a final label.", base + "adjudication/"))
        if flags.get(round.pk) or later.get(round.pk):
            items.append(Attention("flags", f"{round.name}: {flags.get(round.pk, 0)} unrateable, {later.get(round.pk, 0)} put off "
                                            "for later.", base + "flags/"))
        if round.is_open and latest_guidelines and round.guidelines_id != latest_guidelines.pk:
            items.append(Attention("guidelines", f"{round.name} grades under guidelines v{round.guidelines.number}; "
                                                 f"v{latest_guidelines.number} is out.", base))
    return items


def latest_evaluation(project: Project) -> dict | None:
    """The newest finished evaluation (with its label source) and the top of its round's leaderboard as the
    leaderboard opens: on the raters' labels only (nDCG@10 when it was measured, else its first measure);
    `judge_filled_only` names the runs only judge-filled evaluations scored."""
    found = (Evaluation.objects.filter(project=project, state=Evaluation.State.DONE).select_related("round", "fill_judge")
             .order_by("-created_at").first())
    if found is None:
        return None
    measure = PREFERRED_MEASURE if PREFERRED_MEASURE in found.measures else found.measures[0]
    leaders = evaluations.leaderboard(project, found.round, measure)
    return {"evaluation": found, "measure": measure, "leaders": leaders[:3], "n_runs": len(leaders),
            "judge_filled_only": evaluations.judge_filled_only(project, found.round, measure)}


def latest_agreement(rows: list[dict]) -> dict | None:
    """The most recently computed agreement report of the project's rounds."""
    with_report = [row for row in rows if row["report"]]
    return max(with_report, key=lambda row: row["report"].computed_at) if with_report else None


def jobs(project: Project) -> dict:
    """Queued and running jobs, and the latest failed ones."""
    return {"active": list(project.jobs.active().select_related("owner")[:10]),
            "failed": list(project.jobs.filter(state=Job.State.FAILED).select_related("owner")[:5])}

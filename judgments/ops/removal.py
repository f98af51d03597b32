"""Deleting stored runs, answer runs and evaluations (their files too, through the storage API, so also on S3),
refused while something uses them; and the retention of the runs the CI gate uploads."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import ProtectedError
from django.utils import timezone

from ..models import AnswerRun, Project, StoredRun
from .actions import ActionRefused

# A refusal names at most this many users of the object, then counts the rest.
NAMED_USES = 5


def uses_of_run(run: StoredRun) -> list[str]:
    """Whatever keeps a stored run: each evaluation, judge-only evaluation, estimate with a judge and pool using it."""
    return [*(f"evaluation “{used}”" for used in run.evaluations.select_related("round")),
            *(f"judge-only evaluation “{used}”" for used in run.judge_only_evaluations.select_related("query_set")),
            *(f"estimate “{used}”" for used in run.judge_estimates.select_related("round")),
            *(f"pool “{used.name}”" for used in run.pools.all())]


def uses_of_answer_run(run: AnswerRun) -> list[str]:
    return [*(f"answer evaluation “{used}”" for used in run.evaluations.select_related("query_set")),
            *(f"pool “{used.name}”" for used in run.pools.all())]


def delete_run(run: StoredRun) -> None:
    """Delete a stored run and its Parquet file; ActionRefused naming what uses it, if anything does."""
    _delete_unused(run, f"The run “{run.name}”", uses_of_run(run), [run.file.name])


def delete_answer_run(run: AnswerRun) -> None:
    """Delete an answer run (and the answer documents made from it) and its file, unless something uses it."""
    _delete_unused(run, f"The answer run “{run.name}”", uses_of_answer_run(run), [run.file.name])


def delete_evaluation(evaluation) -> None:
    """Delete an evaluation (run or answer evaluation) and its per-query file; refused while its job computes it."""
    if evaluation.state == evaluation.State.QUEUED:
        raise ActionRefused(f"“{evaluation}” is still being computed: delete it once its job has ended.")
    _delete_unused(evaluation, f"“{evaluation}”", [], [evaluation.per_query_file])


def _delete_unused(found, what: str, uses: list[str], files: list[str]) -> None:
    if uses:
        more = f" and {len(uses) - NAMED_USES} more" if len(uses) > NAMED_USES else ""
        raise ActionRefused(f"{what} is used by {', '.join(uses[:NAMED_USES])}{more}: delete those first.")
    try:
        with transaction.atomic():
            found.delete()
    except ProtectedError:  # an evaluation took it between the check and the delete
        raise ActionRefused(f"{what} has just come into use: reload to see by what.") from None
    # The files go once the row is surely gone: a rolled-back delete keeps a run whose file is there.
    transaction.on_commit(lambda: [default_storage.delete(name) for name in files if name])


@dataclass
class Sweep:
    deleted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # expired but in use: "name: why"


def expired_runs(now: datetime | None = None) -> list[StoredRun]:
    """Every gate run past its project's retention and not promoted, in use or not."""
    now = now or timezone.now()
    found = []
    for project in Project.objects.filter(gate_run_days__isnull=False):
        cutoff = now - timedelta(days=project.gate_run_days)
        found += project.runs.filter(origin=StoredRun.Origin.GATE, promoted_at__isnull=True, uploaded_at__lt=cutoff).select_related("project")
    return found


def delete_expired_runs(now: datetime | None = None, *, dry_run: bool = False) -> Sweep:
    """Delete the expired gate runs nothing uses (the beat task and the `delete_expired_runs` command); the ones in
    use stay, with the reason, until what uses them is deleted."""
    sweep = Sweep()
    for run in expired_runs(now):
        uses = uses_of_run(run)
        if uses:
            sweep.kept.append(f"{run.project.slug}/{run.name}: used by {len(uses)} ({uses[0]}…)")
            continue
        if not dry_run:
            try:
                delete_run(run)
            except ActionRefused as refusal:
                sweep.kept.append(f"{run.project.slug}/{run.name}: {refusal}")
                continue
        sweep.deleted.append(f"{run.project.slug}/{run.name}")
    return sweep

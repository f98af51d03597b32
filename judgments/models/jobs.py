"""Background jobs and the chunks several workers share (`judgments.ops.jobs`)."""

import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from .projects import Project


class JobQuerySet(models.QuerySet):
    def active(self) -> "JobQuerySet":
        return self.filter(state__in=[Job.State.QUEUED, Job.State.RUNNING])

    def stale(self, silent_since: datetime) -> "JobQuerySet":
        return self.filter(state=Job.State.RUNNING, heartbeat_at__lt=silent_since)

class Job(models.Model):
    """Long work done by a Celery worker, with the progress a person watches."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        # It ended and kept its work, but some of its parts failed (a judge run's pairs): `result["failures"]`.
        PARTIAL = "partial", "Finished with failures"
        FAILED = "failed", "Failed"

    # Set in params when imports.clean_uploads removed the upload a failed job imports: it cannot run again.
    UPLOAD_REMOVED = "upload_removed"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    kind = models.CharField(max_length=64)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="jobs")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="jobs")
    params = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    progress_done = models.BigIntegerField(default=0)
    progress_total = models.BigIntegerField(null=True, blank=True)
    progress_message = models.CharField(max_length=300, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["state", "heartbeat_at"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.uuid} ({self.state})"

    def get_absolute_url(self) -> str:
        return reverse("judgments:job", args=[self.project.slug, self.uuid])

    @property
    def is_finished(self) -> bool:
        return self.state in (self.State.SUCCEEDED, self.State.PARTIAL, self.State.FAILED)

    @property
    def progress_label(self) -> str:
        """A job list's progress cell: a share while the job runs; once it has ended, how it ended (a job
        that succeeded is done whatever its last report said, a failed one stopped where it failed)."""
        share = min(100, round(100 * self.progress_done / self.progress_total)) if self.progress_total else None
        if self.state == self.State.SUCCEEDED:
            return "done"
        if self.state == self.State.PARTIAL:
            return f"done, {self.failure_count:,} failed"
        if self.state == self.State.FAILED:
            return f"stopped at {share}%" if share is not None else "stopped"
        if self.state == self.State.RUNNING:
            return f"{share}%" if share is not None else "started"
        return "waiting"

    @property
    def failures(self) -> list[tuple[str, int]]:
        """The parts of a job that failed, by cause (`result["failures"]`), the most frequent first (the database's
        JSON does not keep the order the job wrote)."""
        counts = (self.result or {}).get("failures") or {}
        return sorted(counts.items(), key=lambda item: (-item[1], item[0])) if isinstance(counts, dict) else []

    @property
    def failure_count(self) -> int:
        """How many parts of a job that finished with failures failed."""
        return sum(n for _, n in self.failures)

    @property
    def upload_removed_note(self) -> str:
        """Why this job cannot be retried, when its upload was removed; "" when it was not."""
        removed = self.params.get(self.UPLOAD_REMOVED)
        if not removed:
            return ""
        return (f"Its uploaded file {self.params['upload'].rsplit('/', 1)[-1]} was removed on {removed[:10]}: the uploads "
                f"of failed jobs are kept {settings.UPLOAD_FAILED_KEEP_DAYS} days. Upload it again to import it.")

    @property
    def label(self) -> str:
        from ..core.job_kinds import JOB_KINDS

        kind = JOB_KINDS.get(self.kind)
        return kind.label if kind else self.kind

    @property
    def cancellable(self) -> bool:
        from ..core.job_kinds import JOB_KINDS

        kind = JOB_KINDS.get(self.kind)
        return bool(kind and kind.cancellable) and not self.is_finished

class JobChunk(models.Model):
    """A part of a job that any free worker may take (`judgments.ops.judge_runs`): a judge run's pairs, split so that
    every worker grades some. Its worker claims it with a conditional UPDATE, reports how many pairs it finished
    and its heartbeat, and leaves its counts in ``result``."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        CANCELLED = "cancelled", "Cancelled"  # never started: its job was cancelled or stopped first

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    items = models.JSONField(default=list)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    done = models.PositiveIntegerField(default=0)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    worker = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job", "index"]
        constraints = [models.UniqueConstraint(fields=["job", "index"], name="one_chunk_per_index")]

    def __str__(self) -> str:
        return f"chunk {self.index} of {self.job} ({self.state})"

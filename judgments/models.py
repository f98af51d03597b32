import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone


class Project(models.Model):
    """One judgment effort for one search product or index."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("judgments:project", args=[self.slug])


class Role(models.TextChoices):
    LEAD = "lead", "Lead"
    RATER = "rater", "Rater"
    VIEWER = "viewer", "Viewer"


class MembershipQuerySet(models.QuerySet):
    def leads(self) -> "MembershipQuerySet":
        return self.filter(role=Role.LEAD)


class Membership(models.Model):
    """A user's role in a project. What each role may do is decided here and nowhere else."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)
    added_at = models.DateTimeField(default=timezone.now)

    objects = MembershipQuerySet.as_manager()

    class Meta:
        ordering = ["user__username"]
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="one_membership_per_user")]

    def __str__(self) -> str:
        return f"{self.user} ({self.role}) in {self.project}"

    @property
    def can_manage(self) -> bool:
        return self.role == Role.LEAD

    @property
    def can_read_reports(self) -> bool:
        return self.role in (Role.LEAD, Role.VIEWER)

    @property
    def can_grade(self) -> bool:
        return self.role in (Role.LEAD, Role.RATER)


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
        FAILED = "failed", "Failed"

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
        return self.state in (self.State.SUCCEEDED, self.State.FAILED)

    @property
    def percent(self) -> int | None:
        if not self.progress_total:
            return 100 if self.state == self.State.SUCCEEDED else None
        return min(100, round(100 * self.progress_done / self.progress_total))

    @property
    def label(self) -> str:
        from .jobs import JOB_KINDS

        kind = JOB_KINDS.get(self.kind)
        return kind.label if kind else self.kind

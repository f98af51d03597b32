"""Published judgment-list versions."""

import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from .projects import Project
from .rounds import Round


def _version_path(version: "JudgmentListVersion", filename: str) -> str:
    return f"versions/{version.project.slug}/{version.sha256}.parquet"

class JudgmentListVersion(models.Model):
    """A published judgment list (v1, v2, ...): a round's final labels frozen as Parquet, never changed.

    Versions are numbered along a round's lineage: the round first published, then each refresh round made
    from one of its versions (`Round.refreshed_from`). A refresh continues its lineage's numbers, so "v3" of a
    list stays the successor of "v2" however many unrelated rounds the project has.
    """

    class Source(models.TextChoices):
        HUMAN = "human", "The consensus of the raters' grades"
        ADJUDICATED = "adjudicated", "A lead's adjudication"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="list_versions")
    round = models.ForeignKey(Round, on_delete=models.RESTRICT, related_name="list_versions")
    lineage = models.ForeignKey(Round, on_delete=models.RESTRICT, related_name="+")  # the lineage's first round
    number = models.PositiveIntegerField()
    consensus_rule = models.CharField(max_length=10, choices=Round.Consensus.choices)
    threshold = models.SmallIntegerField(null=True, blank=True)  # qrels exports: grade >= threshold is relevant
    guidelines_number = models.PositiveIntegerField()
    n_pairs = models.PositiveIntegerField()
    n_queries = models.PositiveIntegerField()
    grade_counts = models.JSONField()  # {"grade": pairs}, grades as strings (JSON keys)
    sha256 = models.CharField(max_length=64)
    file = models.FileField(upload_to=_version_path, max_length=300)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    note = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["lineage", "-number"]
        constraints = [models.UniqueConstraint(fields=["lineage", "number"], name="list_version_number_per_lineage")]

    def __str__(self) -> str:
        return f"{self.lineage.name} v{self.number}"

    def get_absolute_url(self) -> str:
        return reverse("judgments:list-version", args=[self.project.slug, self.uuid])

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            raise ValueError("A published judgment-list version is never changed: publish a new one.")
        super().save(*args, **kwargs)

    @property
    def previous(self) -> "JudgmentListVersion | None":
        return JudgmentListVersion.objects.filter(lineage=self.lineage_id, number__lt=self.number).order_by("-number").first()

    @property
    def grades(self) -> list[tuple[int, int]]:
        """(grade, pairs), lowest grade first."""
        return sorted((int(grade), n) for grade, n in self.grade_counts.items())

"""Query sets, queries and query logs; the corpus; stored runs and answer runs."""

import uuid
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from .projects import DisplayField, ID_LENGTH, Project, Versioned


class QueryCollection(models.Model):
    """A query set: the queries a project wants judged (imported, typed in, or sampled from logs)."""

    class Source(models.TextChoices):
        UPLOAD = "upload", "Imported file"
        MANUAL = "manual", "Typed in"
        SAMPLE = "sample", "Sampled from a log"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="query_sets")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.MANUAL)
    parameters = models.JSONField(default=dict, blank=True)  # how it was made, e.g. sampling settings and seed
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "query set"
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="query_set_name_per_project")]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("judgments:query-set", args=[self.project.slug, self.uuid])

class Query(Versioned):
    collection = models.ForeignKey(QueryCollection, on_delete=models.CASCADE, related_name="queries")
    query_id = models.CharField(max_length=ID_LENGTH)
    text = models.TextField()
    information_need = models.TextField(blank=True)
    tier = models.CharField(max_length=32, blank=True)
    weight = models.FloatField(null=True, blank=True)
    segment = models.CharField(max_length=200, blank=True)
    extra = models.JSONField(default=dict, blank=True)
    # Reference answers or passages (a list of texts): what the overlap and semantic judges compare with.
    references = models.JSONField(default=list, blank=True)

    class Meta:
        verbose_name_plural = "queries"
        ordering = ["pk"]
        constraints = [models.UniqueConstraint(fields=["collection", "query_id"], name="query_id_per_set")]

    def __str__(self) -> str:
        return f"{self.query_id}: {self.text}"

class QueryLog(models.Model):
    """An imported query log, counted: the log file itself is not kept.

    Its counts per query, segment values and day, the raw spellings merged into each query, and up to
    `keep_rows` raw log rows per query live in three immutable Parquet files behind the storage API
    (like stored runs): the window is chosen when sampling, so the counts must keep their days. A
    sampled query copies its raw rows into the database with it.
    """

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="query_logs")
    name = models.CharField(max_length=200)
    original_name = models.CharField(max_length=300)
    sha256 = models.CharField(max_length=64, blank=True, db_index=True)  # of the uploaded file: the same log twice is named
    mapping = models.JSONField(default=dict)  # {"query", "time", "count", "segments"}: the columns used
    normalization = models.JSONField(default=dict)  # the switches of querylog.Normalization
    drop_personal = models.BooleanField(default=True)
    rows_read = models.PositiveBigIntegerField(default=0)
    rows_good = models.PositiveBigIntegerField(default=0)
    rows_bad = models.PositiveBigIntegerField(default=0)
    bad_examples = models.JSONField(default=list, blank=True)  # [[line, problem, excerpt], ...]
    rows_personal = models.PositiveBigIntegerField(default=0)
    impressions_personal = models.PositiveBigIntegerField(default=0)
    queries_personal = models.PositiveBigIntegerField(default=0)
    impressions = models.PositiveBigIntegerField(default=0)
    n_queries = models.PositiveBigIntegerField(default=0)
    first_time = models.DateTimeField(null=True, blank=True)
    last_time = models.DateTimeField(null=True, blank=True)
    folder = models.CharField(max_length=300)  # storage folder of daily.parquet, variants.parquet, rows.parquet
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="query_log_name_per_project")]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("judgments:query-log", args=[self.project.slug, self.uuid])

    @property
    def segments(self) -> list[str]:
        return list(self.mapping.get("segments", []))

    @property
    def has_time(self) -> bool:
        return bool(self.mapping.get("time"))

class DocumentQuerySet(models.QuerySet):
    def corpus(self) -> "DocumentQuerySet":
        """The project's corpus: every document but the generated answers that answer rounds grade."""
        return self.filter(answer_run__isnull=True)

class Document(models.Model):
    """A corpus document as raters see it: any fields, shown through the project's display template.

    A generated answer graded in an answer round is a document too (`answer_run` set, fields `answer`
    and `cites`), so that rounds, grading, agreement and exports serve it like any pair; it is never
    part of the corpus (`Document.objects.corpus()`).
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="documents")
    doc_id = models.CharField(max_length=ID_LENGTH)
    fields = models.JSONField(default=dict)
    updated_at = models.DateTimeField(default=timezone.now)
    answer_run = models.ForeignKey("AnswerRun", null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="answer_documents")

    objects = DocumentQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "doc_id"], name="doc_id_per_project")]

    def __str__(self) -> str:
        return self.doc_id

    def display(self, template) -> list[dict]:
        """The document as raters see it: the display template's fields in order, or every field."""
        if not template:
            return [{"label": name, "value": value, "render": "text"} for name, value in self.fields.items()]
        return [{"label": line.label, "value": self.fields.get(line.field, ""), "render": line.render} for line in template]

    def title(self, template) -> str:
        """What a list shows of the document: the first text the display template shows (its title, in
        most templates), or its id when it shows none. A generated answer's title is the answer."""
        if self.answer_run_id is not None:
            return str(self.fields.get("answer", "")).strip() or self.doc_id
        for shown in self.display(template):
            if shown["render"] != DisplayField.Render.IMAGE and str(shown["value"]).strip():
                return str(shown["value"])
        return self.doc_id

def _run_path(run: "StoredRun", filename: str) -> str:
    return f"runs/{run.project.slug}/{run.sha256}.parquet"

class StoredRun(models.Model):
    """A system's result list, stored once and never changed, as Parquet in the engine's ranking order."""

    class Origin(models.TextChoices):
        UPLOAD = "upload", "Upload"
        GATE = "gate", "CI gate"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="runs")
    name = models.CharField(max_length=200)
    system = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    file = models.FileField(upload_to=_run_path, max_length=300)
    original_name = models.CharField(max_length=300, blank=True)
    sha256 = models.CharField(max_length=64)
    run_tag = models.CharField(max_length=200, blank=True)
    uploaded_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    uploaded_at = models.DateTimeField(default=timezone.now)
    n_queries = models.PositiveIntegerField()
    n_rows = models.PositiveBigIntegerField()
    n_documents = models.PositiveBigIntegerField()
    depth = models.PositiveIntegerField()
    # Runs the CI gate uploads fall under the project's gate_run_days unless promoted (kept for good).
    origin = models.CharField(max_length=8, choices=Origin.choices, default=Origin.UPLOAD)
    promoted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-uploaded_at"]
        constraints = [
            models.UniqueConstraint(fields=["project", "sha256"], name="run_bytes_once_per_project"),
            models.UniqueConstraint(fields=["project", "name"], name="run_name_per_project"),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("judgments:run", args=[self.project.slug, self.uuid])

    @property
    def expires_at(self):
        """When retention deletes this run (if nothing uses it then); None for a run kept for good."""
        days = self.project.gate_run_days
        if self.origin != self.Origin.GATE or self.promoted_at is not None or days is None:
            return None
        return self.uploaded_at + timedelta(days=days)

    def promote(self) -> None:
        """Keep a gate run for good, out of the project's retention."""
        if self.promoted_at is None:
            self.promoted_at = timezone.now()
            self.save(update_fields=["promoted_at"])

def _answer_run_path(run: "AnswerRun", filename: str) -> str:
    return f"answers/{run.project.slug}/{run.sha256}.parquet"

class AnswerRun(models.Model):
    """A system's generated answers, at most one per query, stored once and never changed, as Parquet
    (query_id, answer, cites: the ids of the documents the answer cites)."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="answer_runs")
    name = models.CharField(max_length=200)
    system = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    file = models.FileField(upload_to=_answer_run_path, max_length=300)
    original_name = models.CharField(max_length=300, blank=True)
    sha256 = models.CharField(max_length=64)
    uploaded_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    uploaded_at = models.DateTimeField(default=timezone.now)
    n_queries = models.PositiveIntegerField()  # answers: one per query
    n_citing = models.PositiveIntegerField(default=0)  # answers that cite at least one document

    class Meta:
        ordering = ["-uploaded_at"]
        constraints = [
            models.UniqueConstraint(fields=["project", "sha256"], name="answer_run_bytes_once_per_project"),
            models.UniqueConstraint(fields=["project", "name"], name="answer_run_name_per_project"),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("judgments:answer-run", args=[self.project.slug, self.uuid])

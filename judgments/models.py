import base64
import hashlib
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import salted_hmac

# Query and document ids hold up to 512 characters, so that every id the readers accept (INPUT_ID_MAX_BYTES,
# at most 512 UTF-8 bytes) fits.
ID_LENGTH = 512


class EditConflict(Exception):
    """Someone saved the object after the editor loaded it; `current` is the object as saved now."""

    def __init__(self, current):
        super().__init__(f"{current} was saved by someone else meanwhile")
        self.current = current


class Versioned(models.Model):
    """An object leads edit in forms. `version` counts its saved edits: a form sends back the version it
    was loaded with, and a save based on an older one is refused rather than silently undoing the edit
    saved in between (optimistic locking: nothing stays locked while a lead reads the form)."""

    version = models.PositiveIntegerField(default=1, editable=False)

    class Meta:
        abstract = True

    def save_edit(self, based_on: int, fields) -> None:
        """Write `fields` if the row is still at version `based_on`, counting the edit; raises EditConflict
        with the row as saved now when another edit came first."""
        manager = type(self)._default_manager
        values = {column: getattr(self, column) for column in (self._meta.get_field(name).attname for name in fields)}
        if manager.filter(pk=self.pk, version=based_on).update(version=F("version") + 1, **values) != 1:
            raise EditConflict(manager.get(pk=self.pk))
        self.version = based_on + 1


class Project(Versioned):
    """One judgment effort for one search product or index."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    gate_run_days = models.PositiveIntegerField(
        "Keep runs the CI gate uploads (days)", null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(3650)],
        help_text="Runs uploaded with origin “gate” are deleted this many days after upload unless promoted or used by an "
                  "evaluation or a pool; leave empty to keep them.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("judgments:project", args=[self.slug])

    def display_template(self) -> list["DisplayField"]:
        """The display template's lines in order. Every pair a rater sees is shown through it, so it is
        cached: for a minute at most, and saving or deleting a line clears it at once (in every web
        process when CACHE_URL is shared)."""
        return cache.get_or_set(DisplayField.cache_key(self.pk), lambda: list(self.display_fields.all()), 60)


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


class InvitationQuerySet(models.QuerySet):
    def pending(self) -> "InvitationQuerySet":
        return self.filter(accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now())

    def for_token(self, token: str) -> "InvitationQuerySet":
        return self.filter(token_hash=Invitation.hash_of(token))


class Invitation(models.Model):
    """An invitation to join a project with a role, sent to an e-mail address, accepted through a secret link.

    The link's token is an HMAC of the invitation's random uuid under SECRET_KEY, so a lead can copy the
    link again; the database keeps only the token's SHA-256, which finds the invitation from a link but
    cannot be turned back into one. A new SECRET_KEY voids every link."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        ACCEPTED = "accepted", "Accepted"
        REVOKED = "revoked", "Revoked"
        EXPIRED = "expired", "Expired"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    role = models.CharField(max_length=16, choices=Role.choices)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    accepted_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = InvitationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.email} ({self.role}) to {self.project}"

    def save(self, *args, **kwargs) -> None:
        self.token_hash = self.hash_of(self.token)
        super().save(*args, **kwargs)

    @property
    def token(self) -> str:
        digest = salted_hmac("judgments.Invitation", self.uuid.hex, algorithm="sha256").digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    @staticmethod
    def hash_of(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def get_absolute_url(self) -> str:
        return reverse("judgments:invitation", args=[self.token])

    @property
    def status(self) -> str:
        if self.accepted_at:
            return self.Status.ACCEPTED
        if self.revoked_at:
            return self.Status.REVOKED
        return self.Status.PENDING if self.expires_at > timezone.now() else self.Status.EXPIRED


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
        from .core.job_kinds import JOB_KINDS

        kind = JOB_KINDS.get(self.kind)
        return kind.label if kind else self.kind

    @property
    def cancellable(self) -> bool:
        from .core.job_kinds import JOB_KINDS

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


class DisplayField(models.Model):
    """One line of a project's display template: which document field raters see, and how."""

    class Render(models.TextChoices):
        TEXT = "text", "Text"
        LINK = "link", "Link"
        IMAGE = "image", "Image"
        LONG_TEXT = "long", "Long text (folded)"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="display_fields")
    field = models.CharField(max_length=100)
    label = models.CharField(max_length=100)
    render = models.CharField(max_length=8, choices=Render.choices, default=Render.TEXT)
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["order", "pk"]
        constraints = [models.UniqueConstraint(fields=["project", "field"], name="display_field_once")]

    @staticmethod
    def cache_key(project_pk: int) -> str:
        return f"display-template:{project_pk}"

    def save(self, *args, **kwargs) -> None:
        super().save(*args, **kwargs)
        cache.delete(self.cache_key(self.project_id))

    def delete(self, *args, **kwargs):
        cache.delete(self.cache_key(self.project_id))
        return super().delete(*args, **kwargs)


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


class Pool(models.Model):
    """The pairs to judge. A document pool is the union of every pooled system's top `depth` per query; an
    answer pool pairs each query with the answers its answer runs gave (one document per answer)."""

    class Kind(models.TextChoices):
        DOCUMENTS = "documents", "Documents"
        ANSWERS = "answers", "Answers"

    class Strategy(models.TextChoices):
        BEST_RANK = "best_rank", "Best rank first"
        RRF = "rrf", "Reciprocal-rank fusion"
        RBP = "rbp", "Rank-biased precision weight"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="pools")
    name = models.CharField(max_length=200)
    query_set = models.ForeignKey(QueryCollection, on_delete=models.RESTRICT, related_name="pools")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.DOCUMENTS)
    runs = models.ManyToManyField(StoredRun, related_name="pools", blank=True)
    answer_runs = models.ManyToManyField(AnswerRun, related_name="pools", blank=True)
    depth = models.PositiveIntegerField(default=10)
    strategy = models.CharField(max_length=16, choices=Strategy.choices, default=Strategy.BEST_RANK)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    report = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="pool_name_per_project")]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("judgments:pool", args=[self.project.slug, self.uuid])


class PoolPairQuerySet(models.QuerySet):
    def missing_from_corpus(self) -> "PoolPairQuerySet":
        return self.filter(document__isnull=True)


class PoolPair(models.Model):
    """One query/document pair of a pool, with the systems that retrieved it and their ranks."""

    # Pools hold millions of pairs, bulk-loaded by judgments.ops.pools alone, which writes only keys it
    # has just read. Database-level foreign keys would re-check every row at commit (as long as the
    # load itself), so Django enforces these relations and their deletions; the unique constraint
    # below already indexes `pool`, and documents are too rarely deleted to index `document`.
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="pairs", db_index=False, db_constraint=False)
    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="pool_pairs", db_constraint=False)
    doc_id = models.CharField(max_length=ID_LENGTH)
    # Null when the corpus lacks the document: the pool report lists those instead of dropping them.
    document = models.ForeignKey(Document, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                 db_index=False, db_constraint=False)
    best_rank = models.PositiveIntegerField()
    n_systems = models.PositiveSmallIntegerField()
    provenance = models.JSONField(default=dict)
    # Larger is judged first; ties go by query, then document (judging order of pooling.build_pool).
    priority = models.FloatField()

    objects = PoolPairQuerySet.as_manager()

    class Meta:
        ordering = ["-priority", "query_id", "doc_id"]
        constraints = [models.UniqueConstraint(fields=["pool", "query", "doc_id"], name="pair_once_per_pool")]
        indexes = [models.Index(fields=["pool", "-priority", "query"], name="pair_judging_order")]


class GuidelinesVersion(models.Model):
    """One saved version of a project's rater guidelines. Versions are never edited: every change
    is a new version, and a judgment round is bound to exactly one."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="guideline_versions")
    number = models.PositiveIntegerField()
    text = models.TextField()
    note = models.CharField(max_length=300, blank=True, help_text="What changed, in a sentence.")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-number"]
        constraints = [models.UniqueConstraint(fields=["project", "number"], name="guidelines_version_number")]

    def __str__(self) -> str:
        return f"{self.project} guidelines v{self.number}"

    def get_absolute_url(self) -> str:
        return reverse("judgments:guidelines-version", args=[self.project.slug, self.number])

    @property
    def previous(self) -> "GuidelinesVersion | None":
        return self.project.guideline_versions.filter(number__lt=self.number).first()


class Round(Versioned):
    """A judgment round: a pool graded on one scale under one guidelines version, by chosen raters."""

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        OPEN = "open", "Open"
        CLOSED = "closed", "Closed"

    class Order(models.TextChoices):
        GROUPED = "grouped", "Grouped by query"
        SHUFFLED = "shuffled", "Fully shuffled"

    class JudgingOrder(models.TextChoices):
        """Which of a query's pairs is served first (judgments.lib.judging_order)."""

        POOL = "pool", "Pool order"
        RANDOM = "random", "Random"
        MTF = "mtf", "Move-To-Front"
        MMNS = "mmns", "MM-NS bandit"

    class Consensus(models.TextChoices):
        """How several grades of a pair become its one label (judgments.lib.agreement.consensus)."""

        MAJORITY = "majority", "Majority vote (a tie goes to the lower grade)"
        MEDIAN = "median", "Median"
        MEAN = "mean", "Mean, rounded to the scale"
        MIN_TOP3 = "min_top3", "Lowest of the top three"

    class GateStatistic(models.TextChoices):
        ALPHA = "alpha", "Krippendorff's alpha"
        KAPPA = "kappa", "Cohen's kappa (mean over rater pairs)"
        AC1 = "ac1", "Gwet's AC1"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="rounds")
    name = models.CharField(max_length=200)
    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="rounds")
    guidelines = models.ForeignKey(GuidelinesVersion, on_delete=models.PROTECT, related_name="rounds")
    scale = models.JSONField()  # judgments.lib.scales.Scale.to_json()
    # Answer rounds may grade a second aspect: the answer's faithfulness to the documents it cites.
    faithfulness_scale = models.JSONField(null=True, blank=True)  # judgments.lib.scales.Scale.to_json(), or none
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.DRAFT)
    raters = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="rounds", blank=True)
    raters_per_pair = models.PositiveSmallIntegerField(default=1)
    # With one rater per pair, this share of pairs gets a second, independent judgment for agreement.
    overlap_share = models.FloatField(default=0.15)
    order = models.CharField(max_length=8, choices=Order.choices, default=Order.GROUPED)
    # Within a query (grouped order only): the priority its pairs are served by (RoundItem.priority).
    judging_order = models.CharField(max_length=8, choices=JudgingOrder.choices, default=JudgingOrder.POOL)
    show_rank = models.BooleanField(default=False)
    seed = models.PositiveIntegerField(default=0)
    consensus_rule = models.CharField(max_length=10, choices=Consensus.choices, default=Consensus.MAJORITY)
    # Pairs whose grades differ by at least this much go to the lead's adjudication queue.
    adjudication_margin = models.PositiveSmallIntegerField(default=2)
    # The agreement a round must reach before its list is trusted: gate_statistic >= gate.
    gate_statistic = models.CharField(max_length=8, choices=GateStatistic.choices, default=GateStatistic.ALPHA)
    gate = models.FloatField(default=0.6)
    # A refresh round carries a published version's labels forward: its pairs already labelled there are not
    # served again, except those the re-judge rule picks (all of them, or a seeded sample to measure drift).
    class Rejudge(models.TextChoices):
        KEEP = "keep", "Keep the old labels: grade only new pairs"
        SAMPLE = "sample", "Re-judge a seeded sample of the old pairs, to measure drift (kappa, old vs new)"
        ALL = "all", "Re-judge every old pair under the new guidelines"

    refreshed_from = models.ForeignKey("JudgmentListVersion", null=True, blank=True, on_delete=models.RESTRICT, related_name="refreshes")
    rejudge = models.CharField(max_length=8, choices=Rejudge.choices, default=Rejudge.KEEP)
    rejudge_share = models.FloatField(default=0.1)  # of the old pairs, with Rejudge.SAMPLE
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    opened_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="round_name_per_project")]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("judgments:round", args=[self.project.slug, self.uuid])

    @property
    def grading_scale(self):
        from .lib.scales import Scale

        return Scale.from_json(self.scale)

    @property
    def faithfulness_grading_scale(self):
        """The second scale of an answer round (faithfulness to the cited documents), or None."""
        from .lib.scales import Scale

        return Scale.from_json(self.faithfulness_scale) if self.faithfulness_scale else None

    @property
    def judging_order_sentence(self) -> str:
        """What the round's judging order does, for the round page."""
        return _JUDGING_ORDER_SENTENCES[self.judging_order]

    @property
    def is_answers(self) -> bool:
        return self.pool.kind == Pool.Kind.ANSWERS

    @property
    def is_open(self) -> bool:
        return self.status == self.Status.OPEN

    @staticmethod
    def raters_needed(raters_per_pair: int, overlap_share: float) -> int:
        """The most judgments any pair needs under this policy, so the fewest raters a round can open with."""
        return max(raters_per_pair, 2 if raters_per_pair == 1 and overlap_share else 1)

    @property
    def max_required(self) -> int:
        """The most judgments any pair of the round needs."""
        return self.raters_needed(self.raters_per_pair, self.overlap_share)

    def has_judgments(self) -> bool:
        return Judgment.objects.filter(item__round=self).exists()


_JUDGING_ORDER_SENTENCES = {
    Round.JudgingOrder.POOL: "each query's pairs come in the pool's priority order, best ranked first.",
    Round.JudgingOrder.RANDOM: "each query's pairs come in a seeded random order.",
    Round.JudgingOrder.MTF: "each query's pairs come from one run while its documents are graded relevant; a document graded "
                            "not relevant moves the judging to the run with the fewest of those so far (Move-To-Front, Cormack et al. 1998).",
    Round.JudgingOrder.MMNS: "each query's next pair comes from the run most likely to give a relevant document, as learnt from "
                             "the query's grades so far, recent grades counting more (MM-NS bandit, Losada et al. 2016).",
}


class HumanSample(models.Model):
    """The queries raters label in a round planned for prediction-powered estimates: a seeded random sample of
    the pool's query set (``judgments.lib.sampling.draw_human_sample``); the round's pairs of other queries need no
    rater (required 0) and an automatic judge labels them. Fixed once the round opens."""

    round = models.OneToOneField(Round, on_delete=models.CASCADE, related_name="human_sample")
    size = models.PositiveIntegerField()  # queries raters label, as asked for
    seed = models.PositiveIntegerField()
    by_tier = models.BooleanField(default=False)  # drawn within each tier, in proportion to the tier's size
    query_ids = models.JSONField()  # the drawn queries' Query.query_id strings, sorted
    tier_shares = models.JSONField(default=dict)  # tier -> share of the set's queries, when by_tier
    # How N was suggested (judge, its round, run, measure, half-width, variances), or {} when the lead typed N.
    suggested_from = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.size} queries for raters in {self.round_id}"


class RoundItem(models.Model):
    """A pool pair as a round serves it: how many judgments it needs, has, and its gold grade if any."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="items")
    pair = models.ForeignKey(PoolPair, on_delete=models.CASCADE, related_name="round_items", db_constraint=False)
    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="+")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="+")
    priority = models.FloatField()
    # Serving order keys (see judgments.ops.grading): a seeded hash of the query (grouped order) and of
    # the pair (shuffled order), so "the next pair" is an index walk, never a sort of the round.
    query_key = models.PositiveIntegerField(default=0)
    pair_key = models.PositiveIntegerField(default=0)
    required = models.PositiveSmallIntegerField(default=1)
    # Judgments (grades and unrateable flags) that count; kept here so "next pair" needs no count.
    n_judged = models.PositiveSmallIntegerField(default=0)
    # Its highest grade minus its lowest (none without a grade), kept with every grade so that the
    # adjudication queue is an index walk (round_item_disagreement), never a read of the round's grades.
    spread = models.PositiveSmallIntegerField(null=True, blank=True)
    gold_grade = models.SmallIntegerField(null=True, blank=True)
    # In a refresh round: the label the refreshed version gives this pair (None for a pair it does not label),
    # set when the pair is laid out, so that the drift between old and new labels reads the old pairs judged
    # again (round_item_rejudged), not the round's every grade and the version's file.
    old_label = models.SmallIntegerField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["round", "pair"], name="pair_once_per_round")]
        # Each index ends with the full ORDER BY of the "next pair" query it serves (id last), so that query
        # walks it in order and stops after a few rows whatever the planner estimates; with a sort step
        # left over, a bad estimate once made PostgreSQL sort a whole round on every grade.
        indexes = [models.Index(fields=["round", "query", "n_judged", "-priority", "id"], name="round_item_query"),
                   models.Index(fields=["round", "n_judged", "query_key", "query", "-priority", "id"], name="round_item_grouped"),
                   models.Index(fields=["round", "n_judged", "pair_key", "id"], name="round_item_shuffled"),
                   models.Index(fields=["round", "-spread", "id"], name="round_item_disagreement", condition=models.Q(spread__gte=1)),
                   models.Index(fields=["round", "id"], name="round_item_gold", condition=models.Q(gold_grade__isnull=False)),
                   # Pairs with some of their judgments, not all: where a rater's judged pairs still count against
                   # the pairs open to them (judgments.ops.grading.progress_of).
                   models.Index(fields=["round"], name="round_item_in_progress",
                                condition=models.Q(n_judged__gt=0, n_judged__lt=models.F("required"))),
                   # A refresh round's old pairs with judgments (the drift), and those served again (the sample).
                   models.Index(fields=["round"], name="round_item_rejudged", condition=models.Q(old_label__isnull=False, n_judged__gt=0)),
                   models.Index(fields=["round"], name="round_item_resampled", condition=models.Q(old_label__isnull=False, required__gt=0))]

    def __str__(self) -> str:
        return f"{self.query_id}/{self.document_id} in {self.round_id}"


class RoundTotals(models.Model):
    """A round's totals over its pairs (`judgments.ops.grading.ROUND_TOTALS`), kept current in the same
    transaction as every change to its pairs, so a rater's counts are exact without summing the round
    on every grade. A table of its own, not columns of Round: each grade updates this row, and leads
    lock the round's row (open, close, settings) while they touch its pairs and claims."""

    round = models.OneToOneField(Round, on_delete=models.CASCADE, primary_key=True, related_name="+")
    pairs = models.PositiveIntegerField(default=0)
    complete = models.PositiveIntegerField(default=0)  # pairs with all the judgments they need
    done = models.PositiveIntegerField(default=0)  # judgments made, at most the required number per pair
    needed = models.PositiveIntegerField(default=0)  # judgments required, summed over the pairs
    # Pairs that need no judgment (a refresh round's old pairs keeping their label): set when pairs are laid out,
    # which is the only time a pair's required count is set.
    carried = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.round_id}: {self.done} of {self.needed} judgments"


class LabelsChange(models.Model):
    """A write that may have changed a round's final labels: a judgment or adjudication added, changed or
    deleted, or a query's or document's text or id edited. Rows are written only by database triggers
    (migration 0020), so no writer can forget one; each statement adds a row per round it touched and
    takes no lock another writer waits on. A round's newest row (`judgments.labels_state`) names the state
    of its labels: cached exports are kept under it, and older rows are pruned when one is written."""

    id = models.BigAutoField(primary_key=True)
    round_id = models.BigIntegerField()  # no foreign key: a round being deleted still gets rows as its judgments go

    class Meta:
        indexes = [models.Index(fields=["round_id", "id"], name="labels_change_newest")]

    def __str__(self) -> str:
        return f"change {self.id} of round {self.round_id}"


class RaterTotals(models.Model):
    """One rater's counts in a round (`judgments.ops.grading.RATER_TOTALS`), kept current like RoundTotals: in
    the same transaction as each of their judgments, and summed afresh by `count_round` after bulk changes,
    so the round page reads a row per rater instead of counting the round's judgments."""

    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="+")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    judgments = models.PositiveIntegerField(default=0)  # grades and unrateable flags
    unrateable = models.PositiveIntegerField(default=0)
    last_at = models.DateTimeField(null=True, blank=True)  # their latest judgment's time

    class Meta:
        constraints = [models.UniqueConstraint(fields=["round", "rater"], name="rater_totals_once")]

    def __str__(self) -> str:
        return f"{self.rater_id} in {self.round_id}: {self.judgments} judgments"


class UnrateableReason(models.TextChoices):
    LOGIN_WALL = "login_wall", "Login wall"
    BROKEN = "broken", "Broken page"
    FOREIGN = "foreign_language", "Foreign language"
    OTHER = "other", "Other"


class JudgmentQuerySet(models.QuerySet):
    def grades(self) -> "JudgmentQuerySet":
        """Judgments that carry a grade; unrateable flags are kept apart from grades everywhere."""
        return self.filter(grade__isnull=False)

    def unrateable(self) -> "JudgmentQuerySet":
        return self.filter(grade__isnull=True)

    def of_query(self, project: Project, query_id: str) -> "JudgmentQuerySet":
        """Every round's judgments of a query (by its id) in the project."""
        return self.filter(item__round__project=project, item__query__query_id=query_id)


class Judgment(models.Model):
    """One rater's verdict on one pair: a grade, or unrateable with a reason. One per rater and pair."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    item = models.ForeignKey(RoundItem, on_delete=models.CASCADE, related_name="judgments")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="judgments")
    grade = models.SmallIntegerField(null=True, blank=True)
    # On the round's faithfulness scale, in answer rounds that have one.
    faithfulness = models.SmallIntegerField(null=True, blank=True)
    unrateable = models.CharField(max_length=20, choices=UnrateableReason.choices, blank=True)
    unrateable_note = models.CharField(max_length=300, blank=True)
    note = models.TextField(blank=True)
    seconds = models.FloatField(null=True, blank=True)  # time on the pair before the first verdict
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = JudgmentQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["item", "rater"], name="one_judgment_per_rater_and_pair"),
            models.CheckConstraint(
                condition=(models.Q(grade__isnull=False, unrateable="") | models.Q(grade__isnull=True) & ~models.Q(unrateable="")),
                name="grade_or_unrateable",
            ),
        ]
        # id ends the rater's index as it ends their "latest judgment" ordering, so that ordering is an index walk
        # even when many judgments share a time (a bulk import).
        indexes = [models.Index(fields=["rater", "created_at", "id"], name="judgment_rater_latest"),
                   models.Index(fields=["item"], name="judgment_unrateable", condition=models.Q(grade__isnull=True)),
                   # The flags page walks a round's unrateable verdicts newest first, 50 at a time (rounds.unrateable_flags).
                   models.Index(fields=["-created_at", "-id"], name="judgment_unrateable_latest", condition=models.Q(grade__isnull=True))]

    def __str__(self) -> str:
        return f"{self.rater} on {self.item}: {self.verdict}"

    @property
    def verdict(self) -> str:
        if self.grade is not None:
            return str(self.grade)
        return f"unrateable ({self.get_unrateable_display().lower()})"

    def in_words(self, scale, faithfulness_scale=None) -> str:
        """The verdict as the rater chose it: "2 Good", "2 Right, faithfulness 1 Partly supported",
        "unrateable (broken page)"."""
        if self.grade is None:
            return self.verdict
        words = f"{self.grade} {scale.label_of(self.grade)}"
        if faithfulness_scale and self.faithfulness is not None:
            words += f", faithfulness {self.faithfulness} {faithfulness_scale.label_of(self.faithfulness)}"
        return words


class Adjudication(models.Model):
    """A lead's final label for a pair whose raters disagree: it overrides the consensus rule."""

    item = models.OneToOneField(RoundItem, on_delete=models.CASCADE, related_name="adjudication")
    grade = models.SmallIntegerField()
    note = models.CharField(max_length=300, blank=True)
    lead = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    at = models.DateTimeField(default=timezone.now)


class AgreementReport(models.Model):
    """A round's agreement statistics as last computed (by a job: bootstrap intervals take a while)."""

    round = models.OneToOneField(Round, on_delete=models.CASCADE, related_name="agreement_report")
    data = models.JSONField()
    judgments = models.PositiveIntegerField()  # how many judgments it was computed from
    computed_at = models.DateTimeField(default=timezone.now)


class AnswerMetricsReport(models.Model):
    """An answer round's "which answer metric agrees with the raters" report as last computed (by its page,
    a download or the `answer_metrics` command), kept so that the answer leaderboard can rank by the metric
    it names and say of when."""

    round = models.OneToOneField(Round, on_delete=models.CASCADE, related_name="answer_metrics_report")
    data = models.JSONField()  # judgments.ops.answer_metrics.compute()
    best = models.CharField(max_length=32, blank=True)  # the metric that agrees best; "" when none could be ranked
    computed_at = models.DateTimeField(default=timezone.now)


class JudgmentEdit(models.Model):
    """History of a rater's verdict on a pair: who changed it (grade, unrateable reason or explanation
    note), from what, to what, and when. It names the pair and rater rather than the judgment so that it
    outlives a flag a lead resets."""

    item = models.ForeignKey(RoundItem, on_delete=models.CASCADE, related_name="edits")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    editor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    old_grade = models.SmallIntegerField(null=True, blank=True)
    old_unrateable = models.CharField(max_length=20, blank=True)
    new_grade = models.SmallIntegerField(null=True, blank=True)
    new_unrateable = models.CharField(max_length=20, blank=True)
    # Answer rounds with a faithfulness scale: the second grade, before and after.
    old_faithfulness = models.SmallIntegerField(null=True, blank=True)
    new_faithfulness = models.SmallIntegerField(null=True, blank=True)
    old_note = models.TextField(blank=True)
    new_note = models.TextField(blank=True)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["at", "pk"]

    @property
    def note_changed(self) -> bool:
        return self.old_note != self.new_note

    @property
    def verdict_changed(self) -> bool:
        return (self.old_grade, self.old_unrateable) != (self.new_grade, self.new_unrateable)

    @property
    def faithfulness_changed(self) -> bool:
        return self.old_faithfulness != self.new_faithfulness


class Claim(models.Model):
    """A rater's hold on a pair they have not judged yet: the pair on their screen, one they put off
    for later, or one a lead handed to them. Claims keep the pair from other raters, so that a pair
    needing one judgment is not graded by two people at once."""

    class Kind(models.TextChoices):
        SHOWN = "shown", "On screen"
        LATER = "later", "Judge later"
        HANDED = "handed", "Reassigned by a lead"

    item = models.ForeignKey(RoundItem, on_delete=models.CASCADE, related_name="claims")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    since = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "rater"], name="one_claim_per_rater_and_pair")]
        indexes = [models.Index(fields=["rater", "kind"], name="claim_rater_kind"),
                   models.Index(fields=["since", "id"], name="claim_later", condition=models.Q(kind="later"))]


# ------------------------------------------------------------------------------ automatic judges


class KeyedEndpoint(models.Model):
    """An endpoint a project's judges call, with its API key: kept encrypted (`secrets.seal`, a key derived from
    SECRET_KEY) or named as an environment variable of the workers, one the operator allows
    (`judgments.core.outbound_policy`); no page ever shows it back, only whether it is set."""

    KEY_PURPOSE = ""  # what a sealed key is bound to, with the project's id: a key sealed for one opens for no other

    api_key_sealed = models.TextField(blank=True)
    api_key_env = models.CharField(max_length=100, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True

    def set_api_key(self, key: str) -> None:
        from .core.secrets import seal

        self.api_key_sealed = seal(key, purpose=self.key_purpose) if key else ""

    @property
    def key_purpose(self) -> str:
        return f"{self.KEY_PURPOSE}:{self.project_id}"

    @property
    def key_status(self) -> str:
        """Whether a key is set and where it comes from, in words; "NOT USABLE: ..." with the reason when the
        variable it names is not one the operator allows, or is not set in this server's environment."""
        import os

        from .core.outbound_policy import key_variable_allowed

        if self.api_key_env and not key_variable_allowed(self.api_key_env):
            return f"NOT USABLE: the environment variable {self.api_key_env} is not one the operator allows"
        if self.api_key_env and not os.environ.get(self.api_key_env):
            return (f"NOT USABLE: the environment variable {self.api_key_env} is not set on this server "
                    "(the workers read it: set it in their environment and restart them)")
        if self.api_key_env:
            return f"from the environment variable {self.api_key_env}"
        return "set" if self.api_key_sealed else "not set"

    def api_key(self) -> str | None:
        """The key to send: the environment variable's value, or the stored key; None without one.
        SecretUnreadable when the variable is not one the operator allows (checked again here: a name saved
        before the operator changed the list, or written past the form, is refused at run time too)."""
        import os

        from .core.outbound_policy import key_variable_problem
        from .core.secrets import SecretUnreadable, unseal

        if self.api_key_env:
            if problem := key_variable_problem(self.api_key_env):
                raise SecretUnreadable(problem)
            return os.environ.get(self.api_key_env) or None
        return unseal(self.api_key_sealed, purpose=self.key_purpose) if self.api_key_sealed else None


class LLMEndpoint(KeyedEndpoint):
    """A project's OpenAI-compatible chat endpoint for LLM judges (its key: `KeyedEndpoint`)."""

    KEY_PURPOSE = "llm-endpoint"

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="llm_endpoint")
    base_url = models.CharField(max_length=2000)
    model = models.CharField(max_length=200)
    # Shared by every worker and run that asks it (`judgments.core.rate_limits`); 0: no limit a minute.
    max_in_flight = models.PositiveIntegerField(default=16, help_text="Requests in flight at once, all workers together.")
    requests_per_minute = models.PositiveIntegerField(default=1000, help_text="Requests a minute, all workers together; 0: no limit.")
    tokens_per_minute = models.PositiveIntegerField(default=1_000_000, help_text="Tokens a minute (prompt and reply), all workers together; 0: no limit.")

    def __str__(self) -> str:
        return f"{self.model} at {self.base_url}"


class EmbeddingEndpoint(KeyedEndpoint):
    """A project's embeddings: the backend its semantic judges use unless a judge names one
    (`judgments.judges.embedders.BACKENDS`), and its OpenAI-compatible ``/v1/embeddings`` endpoint for the
    ``endpoint`` backend (text-embeddings-inference, vLLM, Ollama, OpenAI), under the LLM endpoint's rules.
    Without a row, the default backend is ``numpy`` and there is no endpoint."""

    KEY_PURPOSE = "embedding-endpoint"

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="embedding_endpoint")
    default_backend = models.CharField(max_length=30, default="numpy")
    base_url = models.CharField(max_length=2000, blank=True)  # empty: no endpoint
    model = models.CharField(max_length=200, blank=True)
    max_length = models.PositiveIntegerField(default=0)  # word pieces the endpoint's model reads; 0: unknown
    batch_size = models.PositiveIntegerField(default=64)  # texts per request

    def __str__(self) -> str:
        return f"{self.model} at {self.base_url}" if self.base_url else f"{self.default_backend} (no endpoint)"


class RoundJudge(models.Model):
    """An automatic judge of a round: a kind (`judgments.judges.KINDS`) with its settings, grading through an
    account of its own that is marked automatic: inactive (it cannot log in), in no project and among no
    round's raters, so it never gets claims, never counts in progress, and its grades (`MachineGrade`) stay
    apart from the raters'. The gate's thresholds say how well it must calibrate before an evaluation may use
    its grades to fill unjudged pairs."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="judges")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=20)
    account = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="automatic_judge")
    min_kappa = models.FloatField(default=0.40)
    min_tau = models.FloatField(default=0.90)
    # The evidence the gate needs before it may pass (`judgments.judges.calibration.GateThresholds`).
    min_pairs = models.PositiveIntegerField(default=100)
    min_runs = models.PositiveIntegerField(default=4)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    # The judge's settings as `Judge.settings` holds them; after the fields that read django.conf.settings,
    # which this name shadows in the class body.
    settings = models.JSONField(default=dict)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["round", "name"], name="judge_name_per_round")]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("judgments:judge", args=[self.round.project.slug, self.round.uuid, self.uuid])


class MachineGrade(models.Model):
    """A judge's verdict on one pair, with its provenance (`Judge.describe()`: kind, version, settings, model,
    prompt version). Kept apart from the raters' `Judgment`s: consensus, agreement, progress and exports
    of human grades never read this table; "could not judge" is an outcome of its own with no grade."""

    item = models.ForeignKey(RoundItem, on_delete=models.CASCADE, related_name="machine_grades")
    judge = models.ForeignKey(RoundJudge, on_delete=models.CASCADE, related_name="grades")
    outcome = models.CharField(max_length=20)  # judgments.judges.OUTCOMES
    grade = models.SmallIntegerField(null=True, blank=True)
    score = models.FloatField(null=True, blank=True)
    rationale = models.TextField(blank=True)
    problem = models.CharField(max_length=30, blank=True)  # judgments.judges.PROBLEMS when it could not judge
    reply = models.TextField(null=True, blank=True)  # the model's reply as it came
    provenance = models.JSONField(default=dict)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["judge", "item"], name="one_machine_grade_per_judge_and_pair"),
            models.CheckConstraint(condition=models.Q(outcome="judged", grade__isnull=False)
                                   | ~models.Q(outcome="judged") & models.Q(grade__isnull=True),
                                   name="machine_grade_only_when_judged"),
        ]

    def __str__(self) -> str:
        return f"{self.judge} on {self.item_id}: {self.grade if self.grade is not None else self.problem}"


class JudgeCalibration(models.Model):
    """A judge's calibration report as last computed (a job: bootstrap intervals and run evaluations)."""

    judge = models.OneToOneField(RoundJudge, on_delete=models.CASCADE, related_name="calibration")
    data = models.JSONField()
    computed_at = models.DateTimeField(default=timezone.now)


class LLMReply(models.Model):
    """The database's `judgments.judges.ReplyCache`: a model's reply to one prompt, so no prompt is paid twice.
    Kept per project, as `EmbeddingVector` is: a shared table would tell a lead, through a run's "from the cache"
    count and its speed, whether another project had asked the same model about a query and document they guessed;
    and a deleted project takes its replies with it."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    model = models.CharField(max_length=200)
    prompt_version = models.CharField(max_length=50)
    texts_sha256 = models.CharField(max_length=64)
    reply = models.TextField()
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "model", "prompt_version", "texts_sha256"],
                                               name="llm_reply_once_per_project")]


class EmbeddingVector(models.Model):
    """The database's `judgments.judges.embedding_cache.EmbeddingCache`: a text's embedding under one model and
    maximum length, so each distinct text is embedded once across a project's queries, rounds, runs and re-runs.
    Kept per project: a shared table would tell a lead, through a run's "from the cache" count, whether another
    project had embedded a text they guessed; and a deleted project takes its vectors with it. ``model`` is the
    embedder's ``cache_model`` (backend included: vectors of two backends are never mixed); ``vector`` holds
    ``dim`` little-endian float32 values."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    model = models.CharField(max_length=500)
    max_length = models.PositiveIntegerField()
    text_sha256 = models.CharField(max_length=64)
    dim = models.PositiveIntegerField()
    vector = models.BinaryField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        # Also the index of `DatabaseEmbeddingCache.get_many`: project, model and max_length equal, text_sha256 IN (...).
        constraints = [models.UniqueConstraint(fields=["project", "model", "max_length", "text_sha256"],
                                               name="embedding_once_per_project")]


class HealthSettings(models.Model):
    """A project's staleness checks: how often, against which thresholds, and whom to tell."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="health_settings")
    every_days = models.PositiveIntegerField(default=30)  # the scheduled check runs when the last is this old
    cutoffs = models.JSONField(default=list)  # reported cutoffs for the unjudged share; [] = 10 and 20
    unjudged_warn = models.FloatField(default=0.20)
    unjudged_stale = models.FloatField(default=0.30)
    head_judged_share = models.FloatField(default=0.50)
    new_head_queries = models.PositiveIntegerField(default=20)
    age_days = models.PositiveIntegerField(default=180)
    age_warn = models.FloatField(default=0.25)
    age_stale = models.FloatField(default=0.50)
    # The agreement trigger fires (warn) once the newest graded round has this many grades and its gate still lacks
    # evidence (no pair graded by two raters); empty: it never fires for that, it only says so.
    agreement_fire_after = models.PositiveIntegerField(null=True, blank=True, default=50)
    notify = models.BooleanField(default=True)
    webhook_url = models.URLField(max_length=500, blank=True)
    webhook_secret_sealed = models.TextField(blank=True, editable=False)  # judgments.core.secrets.seal

    def thresholds(self):
        from .lib.staleness import Thresholds

        return Thresholds(unjudged_warn=self.unjudged_warn, unjudged_stale=self.unjudged_stale,
                          cutoffs=tuple(self.cutoffs or (10, 20)), head_judged_share=self.head_judged_share,
                          new_head_queries=self.new_head_queries, age_days=self.age_days, age_warn=self.age_warn,
                          age_stale=self.age_stale, agreement_fire_after=self.agreement_fire_after)

    @property
    def secret_purpose(self) -> str:
        return f"health-webhook:{self.project_id}"

    def set_webhook_secret(self, secret: str) -> None:
        from .core.secrets import seal

        self.webhook_secret_sealed = seal(secret, purpose=self.secret_purpose) if secret else ""

    def webhook_secret(self) -> str:
        from .core.secrets import unseal

        return unseal(self.webhook_secret_sealed, purpose=self.secret_purpose) if self.webhook_secret_sealed else ""


class HealthCheck(models.Model):
    """One run of the staleness checks: each trigger's value and state, as measured then."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="health_checks")
    at = models.DateTimeField(default=timezone.now)
    triggers = models.JSONField(default=dict)  # {key: staleness.Trigger.to_json()}
    firing = models.BooleanField(default=False)
    seconds = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["project", "at"], name="health_check_project_time")]


class TriggerState(models.Model):
    """Where a trigger stands between checks: since when it fires (None: it does not), and a lead's snooze."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="trigger_states")
    trigger = models.CharField(max_length=20)
    first_fired_at = models.DateTimeField(null=True, blank=True)
    notified_at = models.DateTimeField(null=True, blank=True)
    snoozed_until = models.DateTimeField(null=True, blank=True)
    snooze_reason = models.CharField(max_length=300, blank=True)
    snoozed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "trigger"], name="trigger_state_per_project")]

    def is_snoozed(self, now=None) -> bool:
        return bool(self.snoozed_until and self.snoozed_until > (now or timezone.now()))


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


class Webhook(models.Model):
    """A URL that hears, from the worker, when each job of the project ends: a JSON POST signed with its own secret
    (judgments.ops.webhooks). Leads set it; its secret is sealed (judgments.core.secrets), shown once when made."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField("URL", max_length=500)
    secret_sealed = models.TextField(editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return self.url

    @property
    def secret_purpose(self) -> str:
        return f"job-webhook:{self.uuid}"

    def set_secret(self, secret: str) -> None:
        from .core.secrets import seal

        self.secret_sealed = seal(secret, purpose=self.secret_purpose)

    def secret(self) -> str:
        from .core.secrets import unseal

        return unseal(self.secret_sealed, purpose=self.secret_purpose)


class WebhookDelivery(models.Model):
    """One event for one webhook, as signed and sent (the same bytes on every try), and how its tries went."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    job = models.ForeignKey(Job, null=True, on_delete=models.SET_NULL, related_name="+")
    event = models.CharField(max_length=40)
    body = models.TextField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

"""Automatic judges: endpoints, the judges of a round, their grades, calibration, caches."""

import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from .projects import Project
from .rounds import Round, RoundItem


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
        from ..core.secrets import seal

        self.api_key_sealed = seal(key, purpose=self.key_purpose) if key else ""

    def replace_api_key(self, key: str, clear: bool) -> None:
        """A form's or the API's answer about the key: a new one replaces the stored one, `clear` removes it, neither
        keeps it (no page ever shows the key back, so an empty field means "unchanged")."""
        if key or clear:
            self.set_api_key(key)

    @property
    def key_purpose(self) -> str:
        return f"{self.KEY_PURPOSE}:{self.project_id}"

    @property
    def key_status(self) -> str:
        """Whether a key is set and where it comes from, in words; "NOT USABLE: ..." with the reason when the
        variable it names is not one the operator allows, or is not set in this server's environment."""
        import os

        from ..core.outbound_policy import key_variable_allowed

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

        from ..core.outbound_policy import key_variable_problem
        from ..core.secrets import SecretUnreadable, unseal

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

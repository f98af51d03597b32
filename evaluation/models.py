"""Evaluations of stored runs against a round's labels. The metric engine (evaluation/engine/) needs no models."""

import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import cached_property

from .provenance import LabelSource, label_source


class Evaluation(models.Model):
    """Runs scored against a round's consensus labels, with everything needed to score them again.

    The per-query values are an immutable Parquet file behind the storage API (run, query_id, measure,
    value); the aggregates, breakdowns, unjudged shares and comparisons are small and kept here.
    """

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey("judgments.Project", on_delete=models.CASCADE, related_name="evaluations")
    round = models.ForeignKey("judgments.Round", on_delete=models.CASCADE, related_name="evaluations")
    runs = models.ManyToManyField("judgments.StoredRun", related_name="evaluations", through="EvaluatedRun")
    measures = models.JSONField()  # canonical measure strings, in order
    consensus_rule = models.CharField(max_length=10)
    relevance_level = models.PositiveSmallIntegerField(default=1)  # trec_eval -l
    all_queries = models.BooleanField(default=False)  # -c
    judged_only = models.BooleanField(default=False)  # -J
    max_docs = models.PositiveIntegerField(null=True, blank=True)  # -M
    # An automatic judge whose grades label the pairs the raters did not grade; only one whose calibration passed
    # its gate (judgments.ops.automatic.check_gate).
    fill_judge = models.ForeignKey("judgments.RoundJudge", null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="evaluations")
    # A published judgment-list version whose labels are the qrels, instead of the round's live labels.
    list_version = models.ForeignKey("judgments.JudgmentListVersion", null=True, blank=True, on_delete=models.PROTECT,
                                     related_name="evaluations")
    resamples = models.PositiveIntegerField(default=10_000)
    seed = models.PositiveIntegerField(default=42)
    state = models.CharField(max_length=8, choices=State.choices, default=State.QUEUED)
    # Filled by the job: what the labels were, and the results.
    guidelines_number = models.PositiveIntegerField(null=True, blank=True)
    labels_sha256 = models.CharField(max_length=64, blank=True)
    n_labels = models.PositiveIntegerField(default=0)
    results = models.JSONField(default=dict, blank=True)
    per_query_file = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True)  # job time

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Evaluation on {self.round} ({timezone.localtime(self.created_at):%Y-%m-%d %H:%M})"

    def get_absolute_url(self) -> str:
        return reverse("evaluation:evaluation", args=[self.project.slug, self.uuid])

    def ordered_runs(self) -> list:
        return [link.run for link in self.run_links.select_related("run").order_by("position")]

    @cached_property
    def label_source(self) -> LabelSource:
        """The raters' labels alone, or judge-filled: by which judge, and what share of the labels it gave."""
        judge_name = None
        if self.fill_judge_id is not None:
            judge_name = (self.results.get("fill") or {}).get("judge") or self.fill_judge.name
        return label_source(self.results, self.n_labels, judge_name=judge_name, scored=self.state != self.State.QUEUED)


class EvaluatedRun(models.Model):
    """A run of an evaluation, in the order picked (the first is the baseline of comparisons), with the
    sha256 of the bytes that were scored."""

    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="run_links")
    run = models.ForeignKey("judgments.StoredRun", on_delete=models.PROTECT, related_name="+")
    position = models.PositiveSmallIntegerField()
    sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["evaluation", "run"], name="run_once_per_evaluation")]


class AnswerEvaluation(models.Model):
    """Answer runs scored against a query set's reference answers (evaluation/engine/answers.py), with what
    scores them again: each run's sha256, the sha256 of the references, the measures and the options.

    Per-query values are an immutable Parquet file (run, query_id, measure, value), as for run evaluations."""

    State = Evaluation.State

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey("judgments.Project", on_delete=models.CASCADE, related_name="answer_evaluations")
    query_set = models.ForeignKey("judgments.QueryCollection", on_delete=models.CASCADE, related_name="answer_evaluations")
    answer_runs = models.ManyToManyField("judgments.AnswerRun", related_name="evaluations", through="EvaluatedAnswerRun")
    measures = models.JSONField()  # engine answer measure names, in order
    all_queries = models.BooleanField(default=False)  # -c: a query with references but no answer scores 0
    tokenizer = models.CharField(max_length=10, default="ultrarag")
    resamples = models.PositiveIntegerField(default=10_000)
    seed = models.PositiveIntegerField(default=42)
    state = models.CharField(max_length=8, choices=State.choices, default=State.QUEUED)
    references_sha256 = models.CharField(max_length=64, blank=True)
    n_references = models.PositiveIntegerField(default=0)  # queries with reference answers
    results = models.JSONField(default=dict, blank=True)
    per_query_file = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True)  # job time

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Answer evaluation on {self.query_set} ({timezone.localtime(self.created_at):%Y-%m-%d %H:%M})"

    def get_absolute_url(self) -> str:
        return reverse("evaluation:answer-evaluation", args=[self.project.slug, self.uuid])

    def ordered_runs(self) -> list:
        return [link.run for link in self.run_links.select_related("run").order_by("position")]


class EvaluatedAnswerRun(models.Model):
    """An answer run of an answer evaluation, in the order picked (the first is the baseline), with the sha256
    of the bytes that were scored."""

    evaluation = models.ForeignKey(AnswerEvaluation, on_delete=models.CASCADE, related_name="run_links")
    run = models.ForeignKey("judgments.AnswerRun", on_delete=models.PROTECT, related_name="+")
    position = models.PositiveSmallIntegerField()
    sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["evaluation", "run"], name="answer_run_once_per_evaluation")]


class JudgeOnlyEvaluation(models.Model):
    """Runs scored with no relevance labels, Evret's way (evaluation/engine/judge_only.py): an automatic judge matches
    each run's top documents to the query set's reference answers. The scores are "judge-only (uncalibrated)": no
    rater has checked the judge, and every page, file and API answer that shows them says so. `calibration_round` is
    the round built from it so that raters can grade a sample and the same judge be calibrated against them.

    The results (the engine's JSON: means and per-query values per run, questions asked, could-not-judge counts,
    the judge's provenance) are small enough to keep here: a few measures at a few cutoffs per query."""

    State = Evaluation.State
    KIND = "judge-only (uncalibrated)"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey("judgments.Project", on_delete=models.CASCADE, related_name="judge_only_evaluations")
    query_set = models.ForeignKey("judgments.QueryCollection", on_delete=models.CASCADE, related_name="judge_only_evaluations")
    runs = models.ManyToManyField("judgments.StoredRun", related_name="judge_only_evaluations", through="JudgeOnlyRun")
    judge_kind = models.CharField(max_length=16)  # judgments.judges.KINDS
    judge_settings = models.JSONField(default=dict, blank=True)  # never an API key: the LLM endpoint's are the project's
    ks = models.JSONField()  # cutoffs, ascending
    state = models.CharField(max_length=8, choices=State.choices, default=State.QUEUED)
    n_queries = models.PositiveIntegerField(default=0)  # queries with reference answers, scored
    results = models.JSONField(default=dict, blank=True)
    calibration_round = models.ForeignKey("judgments.Round", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True)  # job time

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Judge-only evaluation on {self.query_set} ({timezone.localtime(self.created_at):%Y-%m-%d %H:%M})"

    def get_absolute_url(self) -> str:
        return reverse("evaluation:judge-only-evaluation", args=[self.project.slug, self.uuid])

    def ordered_runs(self) -> list:
        return [link.run for link in self.run_links.select_related("run").order_by("position")]


class JudgeOnlyRun(models.Model):
    """A run of a judge-only evaluation, in the order picked, with the sha256 of the bytes that were scored."""

    evaluation = models.ForeignKey(JudgeOnlyEvaluation, on_delete=models.CASCADE, related_name="run_links")
    run = models.ForeignKey("judgments.StoredRun", on_delete=models.PROTECT, related_name="+")
    position = models.PositiveSmallIntegerField()
    sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["evaluation", "run"], name="run_once_per_judge_only_evaluation")]


class JudgeEstimate(models.Model):
    """Runs estimated with prediction-powered inference (evaluation/engine/ppi.py): raters' labels on a random sample of
    the round's queries (its `HumanSample`) correct an automatic judge's labels on every query. Each mean comes with its
    interval, beside the raters-only estimate over the same labelled queries and the judge's own mean (marked as the
    judge's wherever it is shown).

    The results are the engine's `PPIResult.to_json()` plus what reproduces it: the sample's seed and query ids, the
    sha256 of the human and judge qrels, and the counts of what was left out (sampled queries still being graded,
    pairs the judge could not judge)."""

    State = Evaluation.State

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey("judgments.Project", on_delete=models.CASCADE, related_name="judge_estimates")
    round = models.ForeignKey("judgments.Round", on_delete=models.CASCADE, related_name="judge_estimates")
    judge = models.ForeignKey("judgments.RoundJudge", on_delete=models.PROTECT, related_name="estimates")
    runs = models.ManyToManyField("judgments.StoredRun", related_name="judge_estimates", through="JudgeEstimateRun")
    measures = models.JSONField()  # canonical measure strings, in order
    alpha = models.FloatField(default=0.05)  # intervals at level 1 - alpha; comparisons significant below alpha after Holm
    consensus_rule = models.CharField(max_length=10)
    state = models.CharField(max_length=8, choices=State.choices, default=State.QUEUED)
    human_qrels_sha256 = models.CharField(max_length=64, blank=True)
    judge_qrels_sha256 = models.CharField(max_length=64, blank=True)
    results = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True)  # job time

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Estimate with a judge on {self.round} ({timezone.localtime(self.created_at):%Y-%m-%d %H:%M})"

    def get_absolute_url(self) -> str:
        return reverse("evaluation:judge-estimate", args=[self.project.slug, self.uuid])

    def ordered_runs(self) -> list:
        return [link.run for link in self.run_links.select_related("run").order_by("position")]


class JudgeEstimateRun(models.Model):
    """A run of an estimate with a judge, in the order picked (comparisons pair each run with the later ones), with the
    sha256 of the bytes that were scored."""

    estimate = models.ForeignKey(JudgeEstimate, on_delete=models.CASCADE, related_name="run_links")
    run = models.ForeignKey("judgments.StoredRun", on_delete=models.PROTECT, related_name="+")
    position = models.PositiveSmallIntegerField()
    sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["estimate", "run"], name="run_once_per_judge_estimate")]

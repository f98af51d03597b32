"""Pools: the (query, document) pairs a round judges."""

import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from .projects import ID_LENGTH, Project
from .queries import AnswerRun, Document, Query, QueryCollection, StoredRun


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

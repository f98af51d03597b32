"""Guidelines, rounds, their pairs and totals, judgments, adjudications, reports."""

import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from .pools import Pool, PoolPair
from .projects import Project, Versioned
from .queries import Document, Query


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
        from ..lib.scales import Scale

        return Scale.from_json(self.scale)

    @property
    def faithfulness_grading_scale(self):
        """The second scale of an answer round (faithfulness to the cited documents), or None."""
        from ..lib.scales import Scale

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

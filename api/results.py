"""The typed shapes of stored results the API returns: an evaluation's results (evaluation.evaluations
.run_evaluation writes them), the engine's comparisons and their verdicts. Fields that older stored results lack
have defaults, so that every evaluation ever stored still validates."""

from ninja import Field, Schema

# {canonical measure name: mean}; null where the engine's value is not a number.
Means = dict[str, float | None]


class VerdictOut(Schema):
    """A verdict in three states (judgments.verdicts.Verdict): nothing is drawn as a pass that is not one."""

    state: str = Field(description="pass, fail or insufficient (not enough evidence)")
    label: str
    reasons: list[str]
    steps: list[str] = Field(description="What would settle an insufficient verdict")


class ComparisonValues(Schema):
    """The engine's comparison of run A with run B on one measure (evaluation.engine.significance.Comparison)."""

    measure: str
    A_mean: float | None
    B_mean: float | None
    diff: float | None = Field(description="A_mean - B_mean")
    p_value: float | None = Field(description="Paired permutation test, two-sided")
    t_p_value: float | None = Field(description="Paired t-test, two-sided")
    ci_low: float | None = Field(description="Bootstrap 95% interval of diff")
    ci_high: float | None
    p_corrected: float | None = Field(description="p_value after Holm's correction over the family")
    significant: bool
    significant_corrected: bool
    wins: int
    ties: int
    losses: int
    n_queries: int = Field(description="Queries compared: scored by either run (one missing from a run counts 0 there)")
    missing_a: int
    missing_b: int


class ComparisonRow(ComparisonValues):
    candidate: str = Field(description="Run A's name; B is the baseline")
    verdict: VerdictOut


class UnjudgedShareOut(Schema):
    share: float | None = Field(description="Share of the top k documents (or of the whole ranking) without a label")
    level: str = Field(description="How far to trust the scores there: ok, warn, stale (empty when the share is undefined)")
    queries_over_20: int | None = Field(None, description="Queries with more than 20% unjudged (the run's overall shares only)")


class GroupOut(Schema):
    queries: int
    mean: Means
    unjudged: dict[str, UnjudgedShareOut] = Field(description="By cutoff k (\"10\"...) and `all` for the whole ranking")


class JudgeLabelsOut(Schema):
    total: dict[str, int] = Field(description="Documents of the run labelled by the judge, by cutoff")
    queries: dict[str, dict[str, int]] = Field(description="By cutoff, then query id")


class RunResultsOut(Schema):
    run: str
    run_uuid: str | None = None
    system: str = ""
    sha256: str = ""
    queries: int = Field(description="Queries scored")
    mean: Means
    weighted: Means | None = Field(None, description="Traffic-weighted means; null when a scored query has no weight")
    weighted_reason: str = ""
    by_tier: dict[str, GroupOut] = {}
    by_segment: dict[str, GroupOut] = {}
    unjudged: dict[str, UnjudgedShareOut] = {}
    judge_labels: JudgeLabelsOut | None = Field(None, description="With labels a judge filled only")


class QueryCountsOut(Schema):
    in_set: int = Field(description="Queries in the round's query set")
    labelled: int = Field(description="Queries with labels")


class GateOut(Schema):
    """The fill judge's calibration gate when the evaluation was scored (judgments.judges.calibration.gate_summary)."""

    verdict: VerdictOut | None = None
    passed: bool
    state: str | None = None
    label: str | None = None
    reasons: list[str] = []
    steps: list[str] = []
    failures: list[str] = []
    missing: list[str] = []
    kappa: float | None = None
    kappa_low: float | None = None
    kappa_high: float | None = None
    n_pairs: int | None = None
    unused_grades: list[int] = []
    tau: float | None = None
    n_runs: int | None = None
    min_kappa: float | None = None
    min_tau: float | None = None
    min_pairs: int | None = None
    min_runs: int | None = None


class FillOut(Schema):
    judge: str
    labels: int = Field(description="Labels the judge filled")
    human_labels: int
    share: float | None = None
    gate: GateOut | None = None


class EvaluationResultsOut(Schema):
    runs: list[RunResultsOut]
    queries: QueryCountsOut | None = Field(None, description="Null for evaluations stored before it was kept")
    baseline: str | None = Field(None, description="With two runs or more: the first run's name")
    comparisons: dict[str, list[ComparisonValues]] | None = Field(None, description="{candidate run: its comparisons with the baseline}")
    fill: FillOut | None = Field(None, description="When a judge filled the pairs no rater graded")


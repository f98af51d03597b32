"""The typed shapes of stored results the API returns: an evaluation's results (evaluation.evaluations
.run_evaluation writes them), the engine's comparisons and their verdicts, judge-only results and estimates with a
judge. Fields that older stored results lack have defaults, so that every result ever stored still validates.

A field the jobs store that is not declared here is still sent (extra fields are kept, never silently dropped),
and tests/clients/test_generated_client.py fails on it: declare it here."""

from typing import Any

from ninja import Field
from pydantic import BaseModel, ConfigDict

# {canonical measure name: mean}; null where the engine's value is not a number.
Means = dict[str, float | None]


class Stored(BaseModel):
    """Part of a stored result (plain JSON, read as a dict: django-ninja's Schema would read it as attributes and
    drop what it does not declare): keeps the fields it does not declare (see the module's docstring)."""

    model_config = ConfigDict(extra="allow")


class VerdictOut(Stored):
    """A verdict in three states (judgments.lib.verdicts.Verdict): nothing is drawn as a pass that is not one."""

    state: str = Field(description="pass, fail or insufficient (not enough evidence)")
    label: str
    reasons: list[str]
    steps: list[str] = Field(description="What would settle an insufficient verdict")


class ComparisonValues(Stored):
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


class UnjudgedShareOut(Stored):
    share: float | None = Field(description="Share of the top k documents (or of the whole ranking) without a label")
    level: str = Field(description="How far to trust the scores there: ok, warn, stale (empty when the share is undefined)")
    queries_over_20: int | None = Field(None, description="Queries with more than 20% unjudged (the run's overall shares only)")


class GroupOut(Stored):
    queries: int
    mean: Means
    unjudged: dict[str, UnjudgedShareOut] = Field(description="By cutoff k (\"10\"...) and `all` for the whole ranking")


class JudgeLabelsOut(Stored):
    total: dict[str, int] = Field(description="Documents of the run labelled by the judge, by cutoff")
    queries: dict[str, dict[str, int]] = Field(description="By cutoff, then query id")


class RunResultsOut(Stored):
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


class QueryCountsOut(Stored):
    in_set: int = Field(description="Queries in the round's query set")
    labelled: int = Field(description="Queries with labels")


class GateOut(Stored):
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


class FillOut(Stored):
    judge: str
    labels: int = Field(description="Labels the judge filled")
    human_labels: int
    share: float | None = None
    gate: GateOut | None = None


class EvaluationResultsOut(Stored):
    runs: list[RunResultsOut]
    queries: QueryCountsOut | None = Field(None, description="Null for evaluations stored before it was kept")
    baseline: str | None = Field(None, description="With two runs or more: the first run's name")
    comparisons: dict[str, list[ComparisonValues]] | None = Field(None, description="{candidate run: its comparisons with the baseline}")
    fill: FillOut | None = Field(None, description="When a judge filled the pairs no rater graded")



class JudgeProvenanceOut(Stored):
    """The judge as stored with its scores (judgments.judges describe()): never a key."""

    kind: str
    version: str | int | None = None
    settings: dict[str, Any] = Field({}, description="The judge's settings, as its kind defines them")
    model: str | None = None
    prompt_version: str | None = None


class JudgeOnlyRunOut(Stored):
    mean: Means = Field(description="{measure@k: mean}")
    queries_without_results: int
    could_not_judge: int
    per_query: dict[str, dict[str, float | None]] = Field({}, description="{measure@k: {query_id: value}}")


class JudgeOnlyQueriesOut(Stored):
    scored: int
    without_answers: int = Field(description="Scored queries without a reference answer")
    in_set: int | None = None
    documents_without_text: int | None = None


class QuestionsOut(Stored):
    asked: int = Field(description="Distinct (answer, document) questions put to the judge")
    matched: int
    could_not_judge: int
    rule: str


class JudgeOnlyResultsOut(Stored):
    kind: str
    note: str
    judge: JudgeProvenanceOut
    ks: list[int]
    measures: list[str]
    queries: JudgeOnlyQueriesOut
    questions: QuestionsOut
    runs: dict[str, JudgeOnlyRunOut] = Field(description="By run name")
    runs_order: list[str] = []


class EstimateOut(Stored):
    """One estimate with its interval (evaluation.engine.ppi.Estimate)."""

    mean: float | None
    low: float | None
    high: float | None
    se: float | None
    n_labelled: int
    n_unlabelled: int
    lam: float | None = Field(description="The PPI weight of the judge's labels (null for human-only estimates)")
    df: float | None = None


class EstimatePair(Stored):
    ppi: EstimateOut
    human: EstimateOut


class MeasureEstimateOut(EstimatePair):
    judge_mean: float | None = Field(description="The judge's labels alone, over every query: a judge's number")
    effective_labelled: float | None = Field(description="What the judge was worth, in labelled queries")
    weighted: EstimatePair | None
    weighted_reason: str
    by_tier: dict[str, EstimatePair]


class RunEstimatesOut(Stored):
    run: str
    measures: dict[str, MeasureEstimateOut]


class PairComparisonOut(Stored):
    a: str
    b: str
    ppi: EstimateOut = Field(description="Of the per-query differences a - b")
    human: EstimateOut
    p: float | None
    p_adjusted: float | None = Field(description="Holm-adjusted over the measure's pairs")
    state: str = Field(description="significant, not significant or insufficient")
    reason: str
    queries_needed: int | None
    queries_needed_reason: str


class SampleOut(Stored):
    size: int
    seed: int
    by_tier: bool
    drawn_at: str
    query_ids: list[str]
    tier_shares: dict[str, float] | None = None
    sampled: int


class EstimateJudgeOut(Stored):
    name: str
    kind: str
    pairs: int
    judged: int
    could_not_judge: int
    queries: int
    queries_without_label: int


class EstimateInputsOut(Stored):
    """What reproduces the estimate and what it covers."""

    query_set: str
    in_set: int
    sample: SampleOut
    still_grading: list[str] = Field(description="Sampled queries still being graded")
    fully_labelled: int
    labelled_ids: list[str]
    sampled_without_labels: list[str]
    human_labels: int
    judge_labels: int
    judge: EstimateJudgeOut
    min_labelled: int
    runs_order: list[str] = []


class JudgeEstimateResultsOut(Stored):
    alpha: float
    interval: str = Field(description="t or normal")
    labelled: int = Field(description="Queries labelled by raters and the judge")
    unlabelled: int = Field(description="Queries labelled by the judge only")
    min_labelled: int
    runs: list[RunEstimatesOut]
    comparisons: dict[str, list[PairComparisonOut]] = Field(description="By measure: every pair of runs")
    verdicts: dict[str, list[VerdictOut]] = Field(description="By measure, each comparison's verdict, in the same order")
    inputs: EstimateInputsOut

"""Automatic judges in the app: a round's judges, their runs, the reply cache and calibration reports (the
judges and the calibration statistics themselves are `judgments.judges`, which knows no Django).

A lead adds a judge to a round (`add_judge`); running it (`run_judge`, the job ``run_judge`` and the command
``judge``) grades the round's pairs, all of them, those without a human grade, or a seeded sample, and keeps
each verdict as a `MachineGrade` with its provenance. A pair already graded by the same judge with the same
provenance is skipped, and the LLM judge's replies are cached in the database, so re-running never pays twice;
the semantic judge's embeddings are too (`judgments.ops.embeddings`), so a re-run embeds nothing.
"""

import random
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from evaluation.engine import evaluate, read_qrels

from .. import judges
from ..core import outbound_policy, rate_limits
from ..core.secrets import SecretUnreadable
from ..judges import calibration, embedders
from ..models import (Adjudication, DisplayField, JudgeCalibration, Judgment, LLMEndpoint, LLMReply, MachineGrade, Project, Round,
                      RoundItem, RoundJudge)
from . import embeddings, judgment_files, reports
from .actions import ActionRefused
from .imports import load_run
from .jobs import Job, Progress, job_kind, start_job

# The LLM judge's endpoint and model are the project's (`LLMEndpoint`), not settings of each judge.
ENDPOINT_SETTINGS = ("base_url", "model")
CHUNK = 500  # pairs judged and stored at a time
# Verdicts that say nothing about the pair: asked again on the next run.
RETRIED_PROBLEMS = (judges.CANCELLED, judges.ENDPOINT_FAILED)
PAIRS = ("all", "unjudged")


class DatabaseReplyCache:
    """`judgments.judges.ReplyCache` over the `LLMReply` table: `project`'s replies, shared by its rounds and runs."""

    def __init__(self, project: Project) -> None:
        self.project = project

    def get_many(self, keys: Sequence[judges.CacheKey]) -> dict[judges.CacheKey, judges.CachedReply]:
        found = {}
        by_model: dict[tuple[str, str], list[str]] = {}
        for key in keys:
            by_model.setdefault((key.model, key.prompt_version), []).append(key.texts_sha256)
        for (model, version), hashes in by_model.items():
            for start in range(0, len(hashes), 900):  # SQLite's limit on query parameters
                rows = LLMReply.objects.filter(project=self.project, model=model, prompt_version=version,
                                               texts_sha256__in=hashes[start:start + 900])
                for row in rows:
                    found[judges.CacheKey(model, version, row.texts_sha256)] = judges.CachedReply(
                        row.reply, row.prompt_tokens, row.completion_tokens)
        return found

    def put(self, key: judges.CacheKey, reply: judges.CachedReply) -> None:
        self.put_many({key: reply})

    def put_many(self, replies: Mapping[judges.CacheKey, judges.CachedReply]) -> None:
        # One INSERT ... ON CONFLICT UPDATE for what arrived together: a run stores hundreds of answers a second.
        LLMReply.objects.bulk_create(
            [LLMReply(project=self.project, model=key.model, prompt_version=key.prompt_version, texts_sha256=key.texts_sha256, reply=reply.reply,
                      prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens)
             for key, reply in replies.items()],
            update_conflicts=True, unique_fields=["project", "model", "prompt_version", "texts_sha256"],
            update_fields=["reply", "prompt_tokens", "completion_tokens"])


# ------------------------------------------------------------------------------------------ judges


def _endpoint_settings(kind: str, endpoint: LLMEndpoint | None) -> dict:
    if kind != "llm":
        return {}
    if endpoint is None:
        raise ActionRefused("Set the project's LLM endpoint (base URL and model) before adding an LLM judge.")
    return {"base_url": endpoint.base_url, "model": endpoint.model}


@transaction.atomic
def add_judge(round: Round, *, name: str, kind: str, settings: Mapping, user=None,
              min_kappa: float = calibration.DEFAULT_MIN_KAPPA, min_tau: float = calibration.DEFAULT_MIN_TAU,
              min_pairs: int = calibration.DEFAULT_MIN_PAIRS, min_runs: int = calibration.DEFAULT_MIN_RUNS) -> RoundJudge:
    """A new judge of the round, with an automatic account of its own (inactive: it cannot log in). Its settings
    are checked by the judge itself (JudgeSettingsError names the setting); an LLM judge's endpoint and model are
    the project's, not stored with it."""
    if round.judges.filter(name=name).exists():
        raise ActionRefused(f"The round already has a judge named {name!r}.")
    try:
        calibration.GateThresholds(min_kappa, min_tau, min_pairs, min_runs)
    except ValueError as problem:
        raise ActionRefused(f"The gate's thresholds: {problem}.") from None
    given = {key: value for key, value in settings.items() if key not in ENDPOINT_SETTINGS}
    runtime = {"embedder": _semantic_embedder(round, given.get("backend"))} if kind == "semantic" else {}
    # The judge checks its settings.
    judge = judges.make_judge(kind, {**given, **_endpoint_settings(kind, _project_endpoint(round))}, **runtime)
    judge.check_scale(round.grading_scale)
    stored = {key: value for key, value in judge.settings.items() if key not in ENDPOINT_SETTINGS}
    account = get_user_model().objects.create(username=f"judge-{secrets.token_hex(6)}", first_name=name[:150],
                                              is_active=False)
    account.set_unusable_password()
    account.save(update_fields=["password"])
    return RoundJudge.objects.create(round=round, name=name, kind=kind, settings=stored, account=account,
                                     created_by=user, min_kappa=min_kappa, min_tau=min_tau, min_pairs=min_pairs,
                                     min_runs=min_runs)


def _semantic_embedder(round: Round, backend):
    """The embedder a new semantic judge would run with: a backend that cannot run here is refused when the
    judge is added, as an LLM judge is without an endpoint."""
    if backend is not None and backend not in embedders.BACKENDS:
        raise judges.JudgeSettingsError(f"backend: must be one of {', '.join(embedders.BACKENDS)}, got {backend!r}")
    return embeddings.make_embedder(round.project, backend or embeddings.default_backend(round.project))


def thresholds(judge: RoundJudge) -> calibration.GateThresholds:
    """The judge's gate: what it must reach, and on how many pairs and runs."""
    return calibration.GateThresholds(judge.min_kappa, judge.min_tau, judge.min_pairs, judge.min_runs)


def _project_endpoint(round: Round) -> LLMEndpoint | None:
    return LLMEndpoint.objects.filter(project_id=round.project_id).first()


def make_judge(judge: RoundJudge) -> judges.Judge:
    """The judge object that grades for `judge`: its settings, for an LLM judge the project's endpoint, API key
    and the database reply cache, for a semantic judge the embedder of its backend and the database embedding
    cache (`embeddings.semantic_judge`). ActionRefused when it cannot run here (say why)."""
    if judge.kind == "semantic":
        return embeddings.semantic_judge(judge)
    availability = judges.availability(judge.kind)
    if not availability.available:
        raise ActionRefused(f"This installation cannot run {judge.kind} judges: {availability.reason}. "
                            f"Install with: {availability.install}")
    if judge.kind != "llm":
        return judges.make_judge(judge.kind, judge.settings)
    endpoint = _project_endpoint(judge.round)
    try:
        key = endpoint.api_key() if endpoint else None
    except SecretUnreadable as problem:
        raise ActionRefused(f"The project's LLM API key: {str(problem).rstrip('.')}.") from None
    return judges.make_judge(judge.kind, {**judge.settings, **_endpoint_settings(judge.kind, endpoint)},
                             api_key=key, cache=DatabaseReplyCache(judge.round.project), policy=outbound_policy.policy())


# ------------------------------------------------------------------------------------------ running


@dataclass(frozen=True)
class PairChoice:
    """Which pairs a run grades: ``all``, ``unjudged`` (no human grade yet), a seeded ``sample`` of n, or
    ``calibrate``: a seeded sample of n of the pairs that have a human label, stratified by that label
    (`calibration.calibration_sample`), what the calibration report compares."""

    kind: str = "all"
    n: int | None = None
    seed: int = 0

    @classmethod
    def parse(cls, text: str, seed: int = 0, *, judge: RoundJudge | None = None) -> "PairChoice":
        """From ``all``, ``unjudged``, ``sample:N`` or ``calibrate:N`` (``calibrate`` alone: the `judge`'s
        minimum of shared pairs); ValueError otherwise."""
        if text in PAIRS:
            return cls(text, seed=seed)
        if text == "calibrate" and judge is not None:
            return cls("calibrate", judge.min_pairs, seed)
        kind, _, n = text.partition(":")
        if kind in ("sample", "calibrate") and n.isdigit() and int(n) > 0:
            return cls(kind, int(n), seed)
        raise ValueError(f"pairs must be all, unjudged, sample:N or calibrate:N (N a positive whole number), not {text!r}")

    def __str__(self) -> str:
        return f"{self.kind}:{self.n}" if self.kind in ("sample", "calibrate") else self.kind

    @property
    def label(self) -> str:
        """A short name, as the run form names the choice: "Calibrate, 100 pairs", "Fill", "All pairs"."""
        return {"calibrate": f"Calibrate, {self.n or 0:,} pairs", "unjudged": "Fill", "all": "All pairs",
                "sample": f"Sample of {self.n or 0:,}"}[self.kind]

    def describe(self) -> str:
        if self.kind == "calibrate":
            return f"calibrate: a sample of {self.n:,} pairs the raters graded, stratified by their label (seed {self.seed})"
        if self.kind == "sample":
            return f"a sample of {self.n:,} pairs (seed {self.seed})"
        return {"all": "all pairs", "unjudged": "fill: the pairs without a human grade"}[self.kind]

    def items(self, round: Round) -> list[int]:
        """The chosen pairs' ids, in id order."""
        if self.kind == "calibrate":
            return calibration.calibration_sample(human_labels(round), self.n, self.seed)
        items = round.items.order_by("pk")
        if self.kind == "unjudged":
            items = items.exclude(Exists(Judgment.objects.filter(item=OuterRef("pk"), grade__isnull=False)))
        ids = list(items.values_list("pk", flat=True))
        if self.kind == "sample" and self.n < len(ids):
            ids = sorted(random.Random(self.seed).sample(ids, self.n))
        return ids


def human_labels(round: Round, human=None) -> dict[int, int]:
    """Each human-graded pair's label (item id -> grade): the round's consensus rule, a lead's adjudication first."""
    human = reports.grades_of(round) if human is None else human
    adjudicated = dict(Adjudication.objects.filter(item__round=round).values_list("item_id", "grade"))
    return calibration.consensus_labels(human, list(round.grading_scale.values), round.consensus_rule, adjudicated)


def document_text(fields: Mapping, template: Sequence[DisplayField]) -> str:
    """A document's text as the display template shows it to raters (images are no text)."""
    if not template:
        values = fields.values()
    else:
        values = (fields.get(line.field, "") for line in template if line.render != DisplayField.Render.IMAGE)
    return "\n".join(str(value) for value in values if value not in (None, ""))


def contexts(round: Round, items: Iterable[RoundItem]) -> list[judges.JudgeContext]:
    template = round.project.display_template()
    scale = round.grading_scale
    return [judges.JudgeContext(item.query.text, document_text(item.document.fields, template), scale,
                                information_need=item.query.information_need,
                                references=tuple(item.query.references or ()), guidelines=round.guidelines.text)
            for item in items]


def budget_message(tokens: int) -> str:
    return f"stopped at the token budget: {tokens:,} tokens used"


def attach_limiter(judge: RoundJudge, grader: judges.Judge, run_key: str,
                   budget: int | None) -> rate_limits.RunLimiter | None:
    """Give an LLM judge the run's limiter (the project endpoint's limits, the run's token budget)."""
    if judge.kind != "llm":
        return None
    endpoint = LLMEndpoint.objects.get(project_id=judge.round.project_id)
    limiter = rate_limits.for_run(endpoint, run_key, budget=budget, lease=grader.settings["deadline"] + 60)
    grader.limiter = limiter
    return limiter


def run_judge(judge: RoundJudge, choice: PairChoice = PairChoice(), *, progress: Callable | None = None,
              cancel: Callable[[], bool] | None = None, token_budget: int | None = None) -> dict:
    """Grade the chosen pairs with `judge` in this process, storing each verdict (see the module docstring), under
    the project endpoint's limits and, when given, a token budget (`judgments.core.rate_limits`); the job spreads the
    same work over every free worker (`judgments.ops.judge_runs`). Returns what the run did (`run_result`)."""
    report = progress or (lambda *args, **kwargs: None)
    grader = make_judge(judge)
    chosen, kept, todo = pairs_to_grade(judge, choice, grader.describe())
    limiter = attach_limiter(judge, grader, secrets.token_hex(8), token_budget)
    report(0, len(todo), f"{judge.name}: {len(todo):,} pairs to grade ({len(kept):,} graded before)")
    verdicts = grade_items(judge, grader, todo, cancel=cancel, held=lambda: bool(limiter and limiter.budget_reached),
                           progress=lambda n: report(n, len(todo), f"{judge.name}: {n:,} of {len(todo):,} pairs"
                                                     + texts_said(embed_counts(grader))))
    result = run_result(judge, choice, len(chosen), len(kept), len(todo), [tally(verdicts, grader)])
    if limiter is not None and limiter.budget_reached:
        result["ended"] = budget_message(result["prompt_tokens"] + result["completion_tokens"])
    return result


def pairs_to_grade(judge: RoundJudge, choice: PairChoice, provenance: dict) -> tuple[list[int], set[int], list[int]]:
    """The pairs `choice` chooses, those of them kept from before (graded with the same provenance, not cancelled
    or failed), and those to grade: the rest, in id order."""
    chosen = choice.items(judge.round)
    kept = kept_among(judge, chosen, provenance)
    return chosen, kept, [pk for pk in chosen if pk not in kept]


def kept_among(judge: RoundJudge, item_ids: Sequence[int], provenance: dict) -> set[int]:
    """Those of `item_ids` the judge graded with `provenance`, not cancelled and not failed: not asked again."""
    if not item_ids:
        return set()
    return set(judge.grades.filter(item_id__in=item_ids, provenance=provenance).exclude(problem__in=RETRIED_PROBLEMS)
               .values_list("item_id", flat=True))


def grade_items(judge: RoundJudge, grader: judges.Judge, item_ids: Sequence[int], *, progress: Callable[[int], None],
                cancel: Callable[[], bool] | None = None, held: Callable[[], bool] = lambda: False) -> list[judges.Verdict]:
    """Grade and store the pairs `item_ids`, CHUNK at a time; `progress(n)` after each answer, `held()` true: no
    more batches (a token budget is spent). ActionRefused when the endpoint refuses the settings."""
    verdicts: list[judges.Verdict] = []
    provenance = grader.describe()
    for start in range(0, len(item_ids), CHUNK):
        if (cancel is not None and cancel()) or held():
            break
        batch = list(RoundItem.objects.filter(pk__in=item_ids[start:start + CHUNK]).select_related("query", "document")
                     .order_by("pk"))
        done = len(verdicts)
        try:
            answers = grader.batch_judge(contexts(judge.round, batch), cancel=cancel,
                                         progress=lambda n, _total, _message: progress(done + n))
        except judges.EndpointError as problem:  # a wrong key or model: nothing works until the settings change
            raise ActionRefused(f"{problem} ({len(verdicts):,} pairs graded before it were kept)") from None
        _store(judge, batch, answers, provenance)
        verdicts += answers
        progress(len(verdicts))
    return verdicts


def embed_counts(grader: judges.Judge) -> tuple[int, int] | None:
    """A semantic judge's texts embedded and texts read from the cache so far (None for other judges)."""
    count = getattr(grader, "embed_count", None)
    return None if count is None else (count.embedded, count.cached)


def texts_said(counts: tuple[int, int] | None) -> str:
    """"; 1,200 texts embedded, 300 from the cache" for a semantic judge's progress, "" for other judges."""
    return "" if counts is None else f"; {embedded_words(*counts)}"


def tally(verdicts: Sequence[judges.Verdict], grader: judges.Judge | None = None,
          since: tuple[int, int] | None = None) -> dict:
    """What a part of a run did, as JSON that adds up across parts (`run_result`); for a semantic `grader`, also
    the texts it embedded and read from the cache since `since` (its `embed_counts` when the part began)."""
    cost = judges.usage(verdicts)
    problems: dict[str, int] = {}
    for verdict in verdicts:
        if not verdict.judged and verdict.problem != judges.CANCELLED:
            problems[verdict.problem] = problems.get(verdict.problem, 0) + 1
    part = {"judged": sum(verdict.judged for verdict in verdicts), "could_not_judge": problems,
            "requests": cost.requests, "cached": cost.cached, "prompt_tokens": cost.prompt_tokens,
            "completion_tokens": cost.completion_tokens, "failures": judges.failure_causes(verdicts)}
    counts = embed_counts(grader) if grader is not None else None
    if counts is not None:
        before = since or (0, 0)
        part.update(texts_embedded=counts[0] - before[0], texts_from_the_cache=counts[1] - before[1])
    return part


def run_result(judge: RoundJudge, choice: PairChoice, chosen: int, skipped: int, to_grade: int,
               parts: Iterable[Mapping]) -> dict:
    """What the run did: pairs chosen, skipped (graded before with the same provenance), judged, could not judge
    (by problem), cancelled (not asked), requests, answers from the cache, the tokens paid, failures by cause and
    the outcome; summed over its parts (`tally`; a part's ``recovered``: pairs graded by a worker that died)."""
    total: dict = {"judged": 0, "could_not_judge": {}, "requests": 0, "cached": 0, "prompt_tokens": 0,
                   "completion_tokens": 0, "failures": {}, "recovered": 0}
    parts = list(parts)
    embedding = any("texts_embedded" in part for part in parts)
    if embedding:
        total.update(texts_embedded=0, texts_from_the_cache=0)
    for part in parts:
        for key, value in part.items():
            if isinstance(value, Mapping):
                for name, n in value.items():
                    total[key][name] = total[key].get(name, 0) + n
            elif key in total:
                total[key] += value
    failures = dict(sorted(total["failures"].items(), key=lambda item: (-item[1], item[0])))
    judged, problems, recovered = total["judged"], total["could_not_judge"], total["recovered"]
    result = {"judge": judge.name, "pairs": str(choice), "chosen": chosen, "skipped": skipped, "judged": judged,
              "could_not_judge": problems, "cancelled": to_grade - judged - sum(problems.values()) - recovered,
              "requests": total["requests"], "cached": total["cached"], "prompt_tokens": total["prompt_tokens"],
              "completion_tokens": total["completion_tokens"], "failures": failures,
              "outcome": judges.run_outcome(judged, failures)}
    if embedding:
        result.update(texts_embedded=total["texts_embedded"], texts_from_the_cache=total["texts_from_the_cache"])
    if recovered:  # a part's worker died after grading these; the part was run again without them
        result["graded_by_a_lost_worker"] = recovered
    return result


def embedded_words(embedded: int, cached: int) -> str:
    """"1,200 texts embedded, 300 from the cache": a semantic judge's run. Each text is embedded once; a text read
    from the cache counts once for each chunk of pairs that needs it (a reference shared by many pairs, many times)."""
    return f"{embedded:,} text{'s' if embedded != 1 else ''} embedded, {cached:,} from the cache"


ESTIMATE_SAMPLE = 200  # prompts built to estimate a run's tokens; more pairs are estimated from these


@dataclass(frozen=True)
class Estimate:
    """What a run would cost before it starts: pairs chosen, pairs to grade (not graded before with the same
    settings), requests to the endpoint, tokens (prompt tokens estimated, completion tokens at most), and how."""

    choice: PairChoice
    chosen: int
    to_grade: int
    requests: int
    prompt_tokens: int
    completion_tokens: int
    how: str
    human_labels: int | None = None  # for a calibrate choice: the pairs with a human label it samples from

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def estimate_run(judge: RoundJudge, choice: PairChoice, *, grader: judges.Judge | None = None,
                 sample: int = ESTIMATE_SAMPLE) -> Estimate:
    """The cost of running `judge` on `choice` (see `Estimate`). For an LLM judge the prompts of the pairs to grade
    are built as the run builds them and their cached replies looked up (`LLMJudge.estimate`); past `sample` pairs,
    a seeded sample of `sample` stands for them and is scaled up. Other judges run here: no requests, no tokens."""
    grader = grader or make_judge(judge)
    chosen = choice.items(judge.round)
    kept = set(judge.grades.filter(item_id__in=chosen, provenance=grader.describe())
               .exclude(problem__in=RETRIED_PROBLEMS).values_list("item_id", flat=True)) if chosen else set()
    todo = [pk for pk in chosen if pk not in kept]
    labels = len(human_labels(judge.round)) if choice.kind == "calibrate" else None
    if judge.kind != "llm" or not todo:
        how = ("This judge runs on the server: no requests, no tokens." if judge.kind != "llm"
               else "Every chosen pair was graded before with these settings: nothing to ask.")
        if judge.kind == "semantic":
            how = semantic_cost(judge, grader)
        return Estimate(choice, len(chosen), len(todo), 0, 0, 0, how, labels)
    shown = todo if len(todo) <= sample else sorted(random.Random(0).sample(todo, sample))
    items = RoundItem.objects.filter(pk__in=shown).select_related("query", "document").order_by("pk")
    cost = grader.estimate(contexts(judge.round, items))
    scale = len(todo) / len(shown)
    how = (f"Requests: one per pair to grade whose prompt is not in the reply cache. Prompt tokens: the characters of "
           f"each prompt as it would be sent (system and user message), divided by {judges.llm.CHARS_PER_TOKEN} "
           f"(a rule of thumb for English text; the model's tokenizer decides)"
           + (f", over a sample of {len(shown):,} of the {len(todo):,} pairs, scaled up" if scale > 1 else "")
           + f". Completion tokens: at most max_tokens ({grader.settings['max_tokens']:,}) a request.")
    return Estimate(choice, len(chosen), len(todo), round(cost["requests"] * scale), round(cost["prompt_tokens"] * scale),
                    round(cost["completion_tokens"] * scale), how, labels)


def semantic_cost(judge: RoundJudge, grader: judges.Judge) -> str:
    """What a semantic judge's run asks of others: nothing on the server's own backends; at the embeddings endpoint,
    a request per batch of texts not embedded before (not estimated: the table's requests are chat requests)."""
    described = grader.describe().get("embedder")
    if (described or {}).get("backend") != "endpoint":
        return f"This judge runs on the server, embedding with {embeddings.embedder_label(described)}: no requests, no tokens."
    batch = embeddings.project_embeddings(judge.round.project).batch_size
    return (f"This judge embeds at {embeddings.embedder_label(described)}: one request for each {batch:,} texts not "
            "embedded before (each distinct text once), not counted in the table; no chat tokens.")


def run_estimates(judge: RoundJudge) -> dict:
    """The estimate of each choice of the judge page's run form, at its defaults; or why there is none."""
    try:
        grader = make_judge(judge)
    except ActionRefused as refusal:
        return {"rows": [], "problem": str(refusal)}
    choices = [PairChoice("calibrate", judge.min_pairs), PairChoice("unjudged"), PairChoice("all"),
               PairChoice("sample", judge.min_pairs)]
    rows = [estimate_run(judge, choice, grader=grader) for choice in choices]
    return {"rows": rows, "problem": "", "how": rows[0].how if judge.kind != "llm" else next(
        (row.how for row in rows if row.requests), rows[0].how)}


@transaction.atomic
def _store(judge: RoundJudge, items: list[RoundItem], verdicts: list[judges.Verdict], provenance: dict) -> None:
    kept = [(item, verdict) for item, verdict in zip(items, verdicts) if verdict.problem != judges.CANCELLED]
    judge.grades.filter(item__in=[item for item, _ in kept]).delete()
    MachineGrade.objects.bulk_create(
        MachineGrade(item=item, judge=judge, outcome=verdict.outcome, grade=verdict.grade, score=verdict.score,
                     rationale=verdict.rationale, problem=verdict.problem or "", reply=verdict.reply, provenance=provenance,
                     prompt_tokens=verdict.prompt_tokens, completion_tokens=verdict.completion_tokens)
        for item, verdict in kept)


def start_run(judge: RoundJudge, choice: PairChoice, *, user, token_budget: int | None = None) -> Job:
    params = {"judge": str(judge.uuid), "pairs": str(choice), "seed": choice.seed}
    if token_budget:
        params["token_budget"] = token_budget
    return start_job(kind="run_judge", project=judge.round.project, owner=user, params=params)


def job_judge(job: Job) -> RoundJudge:
    return RoundJudge.objects.select_related("round__project", "round__guidelines").get(
        uuid=job.params["judge"], round__project=job.project)


FAILURE_HELP = ("Check the project's LLM endpoint (its address, that the server is up, the model) and run the judge "
                "again: failed pairs are asked again, judged ones are kept.")


def describe_failures(failures: Mapping[str, int]) -> str:
    """"5 connection refused, 2 HTTP status 503"."""
    return ", ".join(f"{n:,} {cause}" for cause, n in failures.items())


# ------------------------------------------------------------------------------------------ calibration

CALIBRATION_MEASURE = "nDCG@10"
CALIBRATION_RESAMPLES = 1000
SYSTEM_RESAMPLES = 2000
CALIBRATION_SEED = 0
SHOWN_CHARS = 1500  # of each text beside a disagreement


def calibrate(judge: RoundJudge, *, measure: str = CALIBRATION_MEASURE, resamples: int = CALIBRATION_RESAMPLES,
              system_resamples: int = SYSTEM_RESAMPLES, seed: int = CALIBRATION_SEED, progress: Callable | None = None) -> dict:
    """The judge's calibration report (`judgments.judges.calibration` on the round's data), as plain JSON:
    ``pairs`` (the judge against the raters on the pairs that have both grades, with the texts of the pairs
    where they disagree most), ``systems`` (the pool's runs scored with human and with judge labels on those
    same pairs, or None with ``systems_reason``) and ``gate`` (the judge's thresholds)."""
    report = progress or (lambda *args, **kwargs: None)
    round = judge.round
    labels = list(round.grading_scale.values)
    report(0, 3, "The judge against the raters")
    grades = reports.grades_of(round)
    human = grades[["item", "rater", "grade"]]
    machine = dict(judge.grades.values_list("item_id", "grade"))
    adjudicated = dict(Adjudication.objects.filter(item__round=round).values_list("item_id", "grade"))
    pairs = calibration.pair_agreement(human, machine, labels, scale_kind=reports.scale_kind(round),
                                       rule=round.consensus_rule, adjudicated=adjudicated, resamples=resamples, seed=seed,
                                       groups=dict(zip(grades["item"].tolist(), grades["query"].tolist())))
    _add_texts(round, judge, pairs["disagreements"])
    report(1, 3, f"The pool's runs under human and judge labels ({measure})")
    systems, systems_reason = _systems(round, judge, measure, resamples=system_resamples)
    report(2, 3, "The gate")
    made_by = {"embedders": embeddings.grade_embedders(judge)} if judge.kind == "semantic" else {}
    return {"judge": judge.name, "kind": judge.kind, "computed_at": timezone.now().isoformat(), "measure": measure,
            "n_machine_grades": len(machine), **made_by, "pairs": pairs, "systems": systems,
            "systems_reason": systems_reason, "gate": calibration.gate_summary(pairs, systems, thresholds(judge))}


def stored_gate(judge: RoundJudge, stored: JudgeCalibration) -> dict:
    """The gate of a stored report under the judge's thresholds now (`calibration.gate_summary`), decided again
    from the stored numbers: reports stored before the gate asked for evidence read the same way."""
    return calibration.gate_summary(stored.data["pairs"], stored.data.get("systems"), thresholds(judge))


def _add_texts(round: Round, judge: RoundJudge, disagreements: list[dict]) -> None:
    items = RoundItem.objects.select_related("query", "document").in_bulk([row["item"] for row in disagreements])
    rationales = dict(judge.grades.filter(item_id__in=items).values_list("item_id", "rationale"))
    template = round.project.display_template()
    for row in disagreements:
        item = items[row["item"]]
        row.update(query_id=item.query.query_id, query=item.query.text, doc_id=item.document.doc_id,
                   document=document_text(item.document.fields, template)[:SHOWN_CHARS],
                   references=[text[:SHOWN_CHARS] for text in item.query.references or ()],
                   rationale=rationales.get(item.pk, ""))


def shared_labels(round: Round, judge: RoundJudge) -> tuple[dict, dict]:
    """Human labels (consensus or adjudication) and judge grades as qrels ({query_id: {doc_id: grade}}), over the
    pairs that have both."""
    human = {(label.query_id, label.doc_id): label.label for label in judgment_files.final_labels(round)}
    machine = {(query_id, doc_id): grade for query_id, doc_id, grade in judge.grades.filter(grade__isnull=False)
               .values_list("item__query__query_id", "item__document__doc_id", "grade")}
    qrels: tuple[dict, dict] = ({}, {})
    for pair in human.keys() & machine.keys():
        qrels[0].setdefault(pair[0], {})[pair[1]] = human[pair]
        qrels[1].setdefault(pair[0], {})[pair[1]] = machine[pair]
    return qrels


def _systems(round: Round, judge: RoundJudge, measure: str, *, resamples: int) -> tuple[dict | None, str]:
    """The pool's runs scored on the pairs with both labels (judged documents only, trec_eval -J: the others
    have neither label), and how far the two leaderboards agree."""
    human, machine = shared_labels(round, judge)
    runs = list(round.pool.runs.order_by("name"))
    if len(runs) < 2:
        return None, f"the round's pool has {len(runs)} run(s); comparing leaderboards needs at least two"
    if not human:
        return None, "no pair has both a human label and a judge grade"
    scores: tuple[dict, dict] = ({}, {})
    for run in runs:
        ranking = load_run(run)
        for labels, into in zip((human, machine), scores):
            into[run.name] = evaluate(read_qrels(labels), ranking, [measure], judged_only=True).per_query[measure]
    evaluated = {name: values for name, values in scores[0].items() if values}
    if len(evaluated) < 2:
        return None, "fewer than two runs retrieved any pair with both labels"
    result = calibration.leaderboard_agreement(evaluated, {name: scores[1][name] for name in evaluated},
                                               resamples=resamples, seed=42)
    result["n_pairs"] = sum(len(docs) for docs in human.values())
    result["n_queries"] = len(human)
    return result, ""


def store_calibration(judge: RoundJudge, data: dict) -> JudgeCalibration:
    found, _ = JudgeCalibration.objects.update_or_create(judge=judge, defaults={"data": data, "computed_at": timezone.now()})
    return found


def start_calibration(judge: RoundJudge, *, user) -> Job:
    return start_job(kind="calibrate_judge", project=judge.round.project, owner=user, params={"judge": str(judge.uuid)})


@job_kind("calibrate_judge", "Calibrate an automatic judge")
def calibrate_judge_job(job: Job, progress: Progress) -> dict:
    judge = RoundJudge.objects.select_related("round__project", "round__guidelines", "round__pool").get(
        uuid=job.params["judge"], round__project=job.project)
    data = store_calibration(judge, calibrate(judge, progress=progress)).data
    return {"judge": judge.name, "pairs with both grades": data["pairs"]["n_items"],
            "gate": data["gate"]["label"], "link": judge.get_absolute_url() + "calibration/"}


# ------------------------------------------------------------------------------------------ the gate


def check_gate(judge: RoundJudge) -> dict:
    """The judge's gate, from its stored calibration under its current thresholds (`stored_gate`). ActionRefused,
    with every reason, unless it passes (a fail, or not enough evidence), when there is no calibration, when
    the judge graded pairs after it, or when a semantic judge's report came from another embedding backend."""
    stored = JudgeCalibration.objects.filter(judge=judge).first()
    if stored is None:
        raise ActionRefused(f"Judge {judge.name!r} has no calibration report: compute it before its grades fill pairs.")
    if judge.grades.filter(created_at__gt=stored.computed_at).exists():
        raise ActionRefused(f"Judge {judge.name!r} graded pairs after its calibration report: compute the report again.")
    if problem := embeddings.calibration_backend_problem(judge, stored.data):
        raise ActionRefused(f"Judge {judge.name!r}: {problem}.")
    gate = stored_gate(judge, stored)
    if not gate["passed"]:
        said = "did not pass its gate" if gate["state"] == "fail" else "did not pass its gate: not enough evidence"
        raise ActionRefused(f"Judge {judge.name!r} {said}: " + "; ".join(reason.rstrip(".") for reason in gate["reasons"]) + ".")
    return gate


def judge_fill(judge: RoundJudge, labelled: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """The judge's grades of the round's pairs that have no human label: (query_id, doc_id) -> grade."""
    grades = judge.grades.filter(grade__isnull=False).values_list("item__query__query_id", "item__document__doc_id", "grade")
    return {(query_id, doc_id): grade for query_id, doc_id, grade in grades.iterator(chunk_size=5000)
            if (query_id, doc_id) not in labelled}

"""What every judge shares: the question (`JudgeContext`), the answer (`Verdict`), validated settings and
the batch loop with progress and cancellation.

A judge grades one query/document pair the way a rater would, on the round's own scale. "Could not judge"
is an outcome of its own with a reason (no reference texts, an unparseable reply, an endpoint that kept
failing), never a silent lowest grade: the app keeps such pairs apart, as it keeps unrateable ones.

No Django here: the app builds contexts from its models, stores the verdicts and shows `describe()`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from judgments.lib.scales import Scale

JUDGED = "judged"
COULD_NOT_JUDGE = "could_not_judge"
OUTCOMES = (JUDGED, COULD_NOT_JUDGE)

# Why a judge could not judge (`Verdict.problem`); the app may count or filter by these.
NO_REFERENCES = "no_references"
EMPTY_DOCUMENT = "empty_document"
UNPARSEABLE_REPLY = "unparseable_reply"
ENDPOINT_FAILED = "endpoint_failed"
CANCELLED = "cancelled"
PROBLEMS = (NO_REFERENCES, EMPTY_DOCUMENT, UNPARSEABLE_REPLY, ENDPOINT_FAILED, CANCELLED)

# progress(done, total, message): the shape of `judgments.ops.jobs.Progress`, so a job passes its own.
ProgressCallback = Callable[..., None]
# cancel: a callable that turns true, or an object with is_set() (a threading.Event).
CancelCheck = Callable[[], bool]


def cancel_check(cancel: Any) -> CancelCheck | None:
    if cancel is None or callable(cancel):
        return cancel
    if callable(getattr(cancel, "is_set", None)):
        return cancel.is_set
    raise TypeError(f"cancel must be a callable or an event, not {type(cancel).__name__}")


class JudgeSettingsError(ValueError):
    """Settings a judge cannot run with; the message names the setting and what is wrong."""


class JudgeUnavailable(RuntimeError):
    """The judge needs packages this installation lacks; the message gives the install command."""


# --------------------------------------------------------------------------------------------- question


@dataclass(frozen=True)
class JudgeContext:
    """One query/document pair to grade, with what a rater would have in front of them.

    `document` is the document's text as the round's display template renders it for raters. `references`
    are the query's reference answers or passages (may be empty). `scale` is the round's grading scale
    (a `judgments.lib.scales.Scale`, or its JSON form); `guidelines` the round's guidelines text.
    """

    query: str
    document: str
    scale: Scale
    information_need: str = ""
    references: tuple[str, ...] = ()
    guidelines: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.scale, Mapping):
            object.__setattr__(self, "scale", Scale.from_json(dict(self.scale)))
        if not isinstance(self.scale, Scale):
            raise TypeError(f"scale must be a judgments.lib.scales.Scale or its JSON, not {type(self.scale).__name__}")
        if isinstance(self.references, str):
            raise TypeError("references must be a sequence of texts, not one string")
        object.__setattr__(self, "references", tuple(self.references))
        for name in ("query", "document", "information_need", "guidelines"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"{name} must be a string")
        if not all(isinstance(text, str) for text in self.references):
            raise TypeError("every reference must be a string")

    @cached_property
    def usable_references(self) -> tuple[str, ...]:
        """The reference texts that have any text in them."""
        return tuple(text for text in self.references if text.strip())


# --------------------------------------------------------------------------------------------- answer


@dataclass(frozen=True)
class Verdict:
    """A judge's answer for one pair.

    ``outcome`` is ``judged`` (``grade`` is on the round's scale) or ``could_not_judge`` (``grade`` is None,
    ``problem`` one of ``PROBLEMS`` and ``reason`` says why in words). ``score`` is what the grade came from:
    the overlap score, the cosine similarity, or the model's answer (1.0 for YES, 0.0 for NO, the number it
    gave); None when there was none. ``reply`` is the model's reply, kept as it came (also when it could not
    be parsed). ``cached`` says the reply came from the cache (nothing paid); the token counts are what this
    verdict cost, 0 when cached. ``cause`` names a could-not-judge's kind of failure, for counting (``failure_cause``).
    """

    outcome: str
    grade: int | None
    score: float | None
    rationale: str
    problem: str | None = None
    reason: str = ""
    reply: str | None = None
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cause: str = ""  # for could_not_judge, the kind of failure in a few words ("connection refused", "HTTP status 503")

    @property
    def judged(self) -> bool:
        return self.outcome == JUDGED

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(**data)


def judged(grade: int, score: float | None, rationale: str, **extra: Any) -> Verdict:
    return Verdict(JUDGED, grade, score, rationale, **extra)


def could_not_judge(problem: str, reason: str, **extra: Any) -> Verdict:
    return Verdict(COULD_NOT_JUDGE, None, extra.pop("score", None), reason, problem=problem, reason=reason, **extra)


CAUSES = {NO_REFERENCES: "no reference texts", EMPTY_DOCUMENT: "empty document", UNPARSEABLE_REPLY: "unreadable reply",
          ENDPOINT_FAILED: "endpoint failed"}
SUCCEEDED, PARTIAL, FAILED = "succeeded", "partial", "failed"  # a run's outcome; `judgments.models.Job.State`'s values


def failure_cause(verdict: Verdict) -> str | None:
    """What a verdict that could not judge failed on, in a few words: its ``cause`` when the judge named one
    (connection refused, timeout, HTTP status 503, unreadable reply...), else its problem's; None when it
    judged or was cancelled (a cancelled pair did not fail: it was not asked)."""
    if verdict.judged or verdict.problem == CANCELLED:
        return None
    return verdict.cause or CAUSES.get(verdict.problem or "", (verdict.problem or "unknown").replace("_", " "))


def failure_causes(verdicts: Iterable[Verdict]) -> dict[str, int]:
    """How many verdicts failed on each cause, the most frequent first."""
    counts: dict[str, int] = {}
    for verdict in verdicts:
        cause = failure_cause(verdict)
        if cause is not None:
            counts[cause] = counts.get(cause, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def run_outcome(judged: int, failures: Mapping[str, int]) -> str:
    """How a run over pairs ended: ``failed`` when pairs failed and none was judged, ``partial`` (finished with
    failures) when some failed, ``succeeded`` when none did (pairs skipped or cancelled are no failures)."""
    failed = sum(failures.values())
    if failed and not judged:
        return FAILED
    return PARTIAL if failed else SUCCEEDED


@dataclass(frozen=True)
class Usage:
    """Tokens a batch cost (cached verdicts cost nothing), as the endpoint's ``usage`` fields counted them."""

    requests: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def usage(verdicts: Iterable[Verdict]) -> Usage:
    """What a list of verdicts cost: requests paid for, answers taken from the cache, tokens."""
    requests = cached = prompt = completion = 0
    for verdict in verdicts:
        if verdict.cached:
            cached += 1
        elif verdict.reply is not None:
            requests += 1
        prompt += verdict.prompt_tokens
        completion += verdict.completion_tokens
    return Usage(requests, cached, prompt, completion)


# --------------------------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Setting:
    """One setting of a judge: its name, type, default, what it means, and a check returning a problem (or None)."""

    name: str
    type: type
    default: Any
    help: str
    check: Callable[[Any], str | None] | None = None
    optional: bool = False  # None is allowed (and means what `help` says)

    def clean(self, value: Any) -> Any:
        if value is None:
            if self.optional:
                return None
            raise JudgeSettingsError(f"{self.name}: a value is required")
        value = self._typed(value)
        problem = self.check(value) if self.check else None
        if problem:
            raise JudgeSettingsError(f"{self.name}: {problem}, got {value!r}")
        return value

    def _typed(self, value: Any) -> Any:
        # JSON has no int/float distinction to rely on and bool is an int in Python: be strict about both.
        if self.type is bool:
            if not isinstance(value, bool):
                raise JudgeSettingsError(f"{self.name}: must be true or false, got {value!r}")
            return value
        if isinstance(value, bool):
            raise JudgeSettingsError(f"{self.name}: must be a {TYPE_NAMES[self.type]}, got {value!r}")
        if self.type is float and isinstance(value, int):
            value = float(value)
        if self.type is int and isinstance(value, float) and value.is_integer():
            value = int(value)
        if self.type is list and isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, self.type):
            raise JudgeSettingsError(f"{self.name}: must be a {TYPE_NAMES[self.type]}, got {value!r}")
        if self.type is float and not math.isfinite(value):
            raise JudgeSettingsError(f"{self.name}: must be a finite number, got {value!r}")
        return value


TYPE_NAMES = {bool: "true or false", int: "whole number", float: "number", str: "text", list: "list"}


def between(low: float, high: float, *, low_open: bool = False) -> Callable[[Any], str | None]:
    def check(value: float) -> str | None:
        too_low = value <= low if low_open else value < low
        if too_low or value > high:
            return f"must be {'>' if low_open else '>='} {low} and <= {high}"
        return None

    return check


def at_least(low: float) -> Callable[[Any], str | None]:
    return lambda value: None if value >= low else f"must be at least {low}"


def one_of(*choices: str) -> Callable[[Any], str | None]:
    return lambda value: None if value in choices else f"must be one of {', '.join(choices)}"


def clean_settings(schema: Sequence[Setting], given: Mapping[str, Any]) -> dict[str, Any]:
    """Every setting of `schema`, from `given` or its default, checked; unknown names are an error."""
    known = {setting.name for setting in schema}
    unknown = sorted(set(given) - known)
    if unknown:
        raise JudgeSettingsError(f"unknown setting(s) {', '.join(unknown)}; this judge has {', '.join(sorted(known))}")
    return {setting.name: setting.clean(given.get(setting.name, setting.default)) for setting in schema}


RELEVANT_GRADE = Setting(
    "relevant_grade", int, None,
    "The grade a relevant verdict gets on the round's scale; empty: the scale's highest grade. Not relevant is "
    "always the scale's lowest grade.", optional=True)


# --------------------------------------------------------------------------------------------- judges


class Judge(ABC):
    """A judge: ``judge(context)`` and ``batch_judge(contexts)`` give verdicts on the context's scale.

    Construct with a settings dict (what the app stores), keyword arguments, or both::

        TokenOverlapJudge({"min_tokens": 5}), TokenOverlapJudge(min_tokens=5)

    ``settings`` holds every setting with defaults filled in (JSON-serialisable); ``describe()`` is the
    provenance stored with each machine grade.
    """

    kind: ClassVar[str]
    SETTINGS: ClassVar[tuple[Setting, ...]]
    # Bumped when the same settings would grade differently, so stored grades say which algorithm made them.
    VERSION: ClassVar[int] = 1
    # Pairs per step of the default batch loop: how often progress is reported and cancellation checked.
    CHUNK: ClassVar[int] = 500

    def __init__(self, settings: Mapping[str, Any] | None = None, /, **overrides: Any) -> None:
        if settings is not None and not isinstance(settings, Mapping):
            raise JudgeSettingsError(f"settings must be a mapping of names to values, got {type(settings).__name__}")
        self.settings: dict[str, Any] = clean_settings(self.SETTINGS, {**(settings or {}), **overrides})

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.settings!r})"

    @property
    def model(self) -> str | None:
        """The model behind the grades, when there is one."""
        return None

    @property
    def prompt_version(self) -> str | None:
        return None

    def describe(self) -> dict[str, Any]:
        """The judge's provenance: kind, algorithm version, settings, model and prompt version (never a key)."""
        return {"kind": self.kind, "version": self.VERSION, "settings": dict(self.settings), "model": self.model,
                "prompt_version": self.prompt_version}

    def check_scale(self, scale: Scale) -> None:
        """Raise JudgeSettingsError when this judge's settings cannot grade on `scale`."""
        wanted = self.settings.get("relevant_grade")
        if wanted is not None and wanted not in scale.values:
            raise JudgeSettingsError(f"relevant_grade: {wanted} is not a grade of the scale {scale.values}")

    def relevant_grade(self, scale: Scale) -> int:
        wanted = self.settings.get("relevant_grade")
        return scale.highest if wanted is None else wanted

    def binary_grade(self, relevant: bool, scale: Scale) -> int:
        """A relevant/not relevant decision on the round's scale (see ``RELEVANT_GRADE``)."""
        return self.relevant_grade(scale) if relevant else scale.lowest

    def judge(self, context: JudgeContext) -> Verdict:
        return self.batch_judge([context])[0]

    def batch_judge(self, contexts: Sequence[JudgeContext], *, progress: ProgressCallback | None = None,
                    cancel: CancelCheck | None = None) -> list[Verdict]:
        """A verdict per context, in order.

        `progress(done, total, message)` is called from the calling thread after each step (a job's
        ``Progress`` may raise to stop the batch: the exception propagates). When `cancel()` turns true, the
        pairs not started yet get ``could_not_judge`` verdicts with problem ``cancelled``; `cancel` may also be a
        ``threading.Event``.
        """
        contexts = list(contexts)
        cancel = cancel_check(cancel)
        for scale in {context.scale for context in contexts}:
            self.check_scale(scale)
        verdicts: list[Verdict] = []
        for start in range(0, len(contexts), self.CHUNK):
            if cancel is not None and cancel():
                break
            verdicts += self._judge_chunk(contexts[start:start + self.CHUNK])
            if progress is not None:
                progress(len(verdicts), len(contexts), f"{self.kind}: {len(verdicts):,} of {len(contexts):,} pairs")
        return verdicts + [cancelled() for _ in contexts[len(verdicts):]]

    @abstractmethod
    def _judge_chunk(self, contexts: list[JudgeContext]) -> list[Verdict]:
        """Verdicts for a list of contexts whose scales were checked."""

    @classmethod
    def availability(cls) -> Availability:
        return Availability(True)


def cancelled() -> Verdict:
    return could_not_judge(CANCELLED, "the batch was cancelled before this pair was judged")


@dataclass(frozen=True)
class Availability:
    """Whether a judge kind can run here; when not, why and the command that installs what it needs."""

    available: bool
    reason: str = ""
    install: str = ""


@dataclass
class SettingDoc:
    """A setting as a page or a command lists it."""

    name: str
    type: str
    default: Any
    help: str
    optional: bool = field(default=False)


"""Every verdict the app prints has three states: pass, fail, or not enough evidence.

A gate, trigger or badge that cannot know must not look like a pass. `decide` is the one rule: a failure the
data prove is a fail; otherwise anything missing makes it "not enough evidence", naming what is missing and
the step that would supply it; only then is it a pass. The deciding functions for each gate live with their
statistics (agreement reports, calibration, health triggers, jobs) and return a `Verdict`. No Django import.
"""

from collections.abc import Iterable
from dataclasses import dataclass

PASS, FAIL, INSUFFICIENT = "pass", "fail", "insufficient"
LABELS = {PASS: "pass", FAIL: "fail", INSUFFICIENT: "not enough evidence"}


@dataclass(frozen=True)
class Verdict:
    """`reasons`: for a fail, what failed; for not enough evidence, what is missing (and any failure seen so far
    that the data do not yet prove); for a pass, what it rests on. `steps`: what the lead can do next."""

    state: str
    reasons: tuple[str, ...] = ()
    steps: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.state not in LABELS:
            raise ValueError(f"unknown verdict state {self.state!r}")

    @property
    def label(self) -> str:
        return LABELS[self.state]

    @property
    def passed(self) -> bool:
        return self.state == PASS

    @property
    def failed(self) -> bool:
        return self.state == FAIL

    @property
    def insufficient(self) -> bool:
        return self.state == INSUFFICIENT

    def to_json(self) -> dict:
        return {"state": self.state, "label": self.label, "reasons": list(self.reasons), "steps": list(self.steps)}

    @classmethod
    def from_json(cls, data: dict) -> "Verdict":
        return cls(data["state"], tuple(data.get("reasons", ())), tuple(data.get("steps", ())))


def decide(*, failures: Iterable[str] = (), missing: Iterable[str] = (), grounds: Iterable[str] = (),
           steps: Iterable[str] = ()) -> Verdict:
    """`failures`: what the data prove fails; `missing`: evidence not there yet; `grounds`: what a pass rests
    on. A proven failure is a fail whatever is missing; anything missing is not enough evidence; else a pass."""
    failures, missing = tuple(failures), tuple(missing)
    if failures:
        return Verdict(FAIL, failures + missing, tuple(steps))
    if missing:
        return Verdict(INSUFFICIENT, missing, tuple(steps))
    return Verdict(PASS, tuple(grounds), tuple(steps))


def at_least(count: int, minimum: int, what: str, step: str = "") -> str | None:
    """The "missing" line when `count` is under `minimum`, e.g. "tau over 3 runs: at least 4 needed"."""
    if count >= minimum:
        return None
    return f"{what}: {count:,} of the {minimum:,} needed" + (f"; {step}" if step else "")

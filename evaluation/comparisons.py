"""What a comparison of runs says: "significant" as a three-state verdict, and what the tests covered.

Pure (no Django): the comparison page, the answer comparison page, their downloads, the API and the
`compare` commands call it on the engine's stored comparisons (`results["comparisons"]`). The engine
(`evaluation.engine.significance.evidence`) finds what each test rests on; `judgments.lib.verdicts.decide`
turns that into the verdict.
"""

from collections.abc import Mapping

from evaluation.engine.significance import evidence
from judgments.lib.verdicts import FAIL, INSUFFICIENT, PASS, Verdict, decide

ALPHA = 0.05
CORRECTION = "holm"  # as the evaluation jobs and the API correct: across every measure and run at once
SIGNIFICANCE_WORDS = {PASS: "significant", FAIL: "not significant", INSUFFICIENT: "not enough evidence"}


def verdicts(comparisons: Mapping[str, list[dict]], *, resamples: int, alpha: float = ALPHA,
             correction: str = CORRECTION) -> dict[str, list[Verdict]]:
    """Each stored comparison's verdict, run by run in the same order: significant (pass), not significant
    although the test could have been (fail), or not enough evidence (the test could not reach alpha after
    the correction with so few differing queries or resamples). The family is every comparison given, as
    `compare_many` corrected them."""
    flat = [c for rows in comparisons.values() for c in rows]
    found = iter(evidence(flat, resamples=resamples, alpha=alpha, correction=correction))
    return {name: [decide(**next(found).as_dict()) for _ in rows] for name, rows in comparisons.items()}


def with_verdicts(comparisons: Mapping[str, list[dict]], *, resamples: int) -> dict[str, list[dict]]:
    """The comparisons, each with its `verdict` (`Verdict.to_json()`: state, label, reasons, steps)."""
    decided = verdicts(comparisons, resamples=resamples)
    return {name: [c | {"verdict": v.to_json()} for c, v in zip(rows, decided[name])] for name, rows in comparisons.items()}


def covered(rows: list[dict]) -> dict:
    """What the tests of one run against the baseline (`rows`, from `with_verdicts`) covered: the queries
    compared (either run scored; one the other run did not score counts 0 for it), those missing from each
    side, and `unproven`: the measures whose verdict is not enough evidence, grouped by what is missing."""
    def span(key: str) -> str:
        values = sorted({int(c[key]) for c in rows})
        return f"{values[0]:,}" if len(values) == 1 else f"{values[0]:,} to {values[-1]:,}"

    return {"queries": span("n_queries"), "missing_a": span("missing_a"), "missing_b": span("missing_b"),
            "any_missing": any(c["missing_a"] or c["missing_b"] for c in rows),
            "unproven": _grouped([c for c in rows if c["verdict"]["state"] == INSUFFICIENT])}


def _grouped(rows: list[dict]) -> list[dict]:
    groups: dict[tuple, list[str]] = {}
    for c in rows:
        groups.setdefault((tuple(c["verdict"]["reasons"]), tuple(c["verdict"]["steps"])), []).append(c["measure"])
    return [{"measures": measures, "reasons": list(reasons), "steps": list(steps)} for (reasons, steps), measures in groups.items()]


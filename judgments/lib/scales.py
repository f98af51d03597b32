"""Grading scales: the grades a rater can give, with the label and cue shown on each button.

Plain Python (no Django): rounds store a scale as JSON, and later the agreement statistics and the
exports read it to know the full set of labels, not only the ones that happened to be used.
"""

from dataclasses import dataclass


class ScaleError(ValueError):
    """A scale definition that cannot be used; the message says what is wrong and where."""


@dataclass(frozen=True)
class Grade:
    value: int
    label: str
    cue: str = ""


@dataclass(frozen=True)
class Scale:
    kind: str  # "binary", "graded" or "custom"
    grades: tuple[Grade, ...]

    @property
    def values(self) -> list[int]:
        return [grade.value for grade in self.grades]

    @property
    def lowest(self) -> int:
        return self.grades[0].value

    @property
    def highest(self) -> int:
        return self.grades[-1].value

    def is_relevant(self, value: int) -> bool:
        """Relevant is any grade above the lowest (trec_eval's default relevance level, 1, on a scale from 0)."""
        return value > self.lowest

    def label_of(self, value: int | None) -> str:
        for grade in self.grades:
            if grade.value == value:
                return grade.label
        return ""

    def to_json(self) -> dict:
        return {"kind": self.kind, "grades": [{"value": g.value, "label": g.label, "cue": g.cue} for g in self.grades]}

    @classmethod
    def from_json(cls, data: dict) -> "Scale":
        return make_scale(data["kind"], [Grade(g["value"], g["label"], g.get("cue", "")) for g in data["grades"]])


def make_scale(kind: str, grades: list[Grade]) -> Scale:
    """A checked scale: 2 to 10 grades, distinct single-digit values (digit keys select them), labels set."""
    if not 2 <= len(grades) <= 10:
        raise ScaleError(f"A scale needs between 2 and 10 grades, not {len(grades)}.")
    values = [grade.value for grade in grades]
    if len(set(values)) != len(values):
        raise ScaleError("Two grades have the same value.")
    if any(not 0 <= value <= 9 for value in values):
        raise ScaleError("Grade values must be 0 to 9: raters choose them with the digit keys.")
    if any(not grade.label.strip() for grade in grades):
        raise ScaleError("Every grade needs a label.")
    return Scale(kind, tuple(sorted(grades, key=lambda grade: grade.value)))


BINARY = make_scale("binary", [Grade(0, "Not relevant"), Grade(1, "Relevant")])
GRADED = make_scale("graded", [
    Grade(0, "Poor", "These are terrible - I would search elsewhere"),
    Grade(1, "Fair", "I see the connection, but these are not what I am looking for"),
    Grade(2, "Good", "Relevant - I want these results, but haven't found the exact one yet"),
    Grade(3, "Perfect", "This is exactly what I am looking for"),
])
# Answer rounds: is the generated answer right, and (optionally) is it supported by the documents it cites.
ANSWERS = make_scale("answers", [
    Grade(0, "Wrong", "The answer is wrong, or does not answer the question"),
    Grade(1, "Partly right", "Some of it is right, but something important is wrong or missing"),
    Grade(2, "Right", "It answers the question correctly and completely"),
])
SUPPORTED = make_scale("supported", [
    Grade(0, "Not supported", "The cited documents do not say this (or nothing is cited)"),
    Grade(1, "Partly supported", "Some claims are in the cited documents, others are not"),
    Grade(2, "Fully supported", "Every claim is in the cited documents"),
])
PRESETS = {"binary": BINARY, "graded": GRADED, "answers": ANSWERS}
FAITHFULNESS_PRESETS = {"supported": SUPPORTED}


def parse_custom(text: str) -> Scale:
    """A custom scale from lines `value | label | cue` (the cue is optional), lowest grade first or not."""
    grades = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = [part.strip() for part in line.split("|")]
        if len(parts) not in (2, 3):
            raise ScaleError(f"line {number}: write `value | label | cue`, the cue being optional.")
        try:
            value = int(parts[0])
        except ValueError:
            raise ScaleError(f"line {number}: the value {parts[0]!r} is not a whole number.") from None
        grades.append(Grade(value, parts[1], parts[2] if len(parts) == 3 else ""))
    return make_scale("custom", grades)


def custom_text(scale: Scale) -> str:
    """The scale written the way `parse_custom` reads it back."""
    return "\n".join(f"{g.value} | {g.label}" + (f" | {g.cue}" if g.cue else "") for g in scale.grades)

"""Where an evaluation's labels came from: the raters' alone, or the raters' with an automatic judge's grades on the
pairs no rater graded ("judge-filled"), and what share of the labels the judge gave. Every page, download, command
and API answer that shows an evaluation's scores says it through `LabelSource`. No Django import.
"""

from dataclasses import dataclass

HUMAN, JUDGE_FILLED = "human", "judge_filled"  # the `labels_source` field of files and API answers


@dataclass(frozen=True)
class LabelSource:
    """`judge` is None for raters' labels only. `judge_labels` of `labels` came from the judge; None when the
    evaluation did not record it (or has not been scored yet)."""

    judge: str | None = None
    judge_labels: int | None = None
    labels: int | None = None
    scored: bool = True

    @property
    def filled(self) -> bool:
        return self.judge is not None

    @property
    def share(self) -> float | None:
        if not self.filled or self.judge_labels is None or not self.labels:
            return None
        return self.judge_labels / self.labels

    @property
    def percent(self) -> str:
        """The judge's share as a whole percentage that never rounds to 0% or 100% when it is neither."""
        share = self.share
        if share is None:
            return ""
        if 0 < share < 0.005:
            return "under 1%"
        if 0.995 <= share < 1:
            return "over 99%"
        return f"{share:.0%}"

    @property
    def text(self) -> str:
        """"judge-filled: 84% of labels (3,527 of 4,202) from overlap", or "raters' labels only"."""
        if not self.filled:
            return "raters' labels only"
        if self.share is None:
            return f"judge-filled by {self.judge} ({'share not recorded' if self.scored else 'share counted when scored'})"
        return f"judge-filled: {self.percent} of labels ({self.judge_labels:,} of {self.labels:,}) from {self.judge}"

    @property
    def short(self) -> str:
        """For a table cell: "judge-filled: 84% of labels from overlap", or "raters only"."""
        if not self.filled:
            return "raters only"
        return f"judge-filled: {self.percent} of labels from {self.judge}" if self.share is not None else self.text

    def as_dict(self) -> dict:
        """The fields of machine-readable outputs."""
        return {"labels_source": JUDGE_FILLED if self.filled else HUMAN, "judge": self.judge,
                "judge_labels": self.judge_labels if self.filled else 0, "labels": self.labels,
                "judge_label_share": self.share if self.filled else 0.0}


def label_source(results: dict, n_labels: int | None, *, judge_name: str | None, scored: bool = True) -> LabelSource:
    """The label source of an evaluation from what it stored: `results["fill"]` (written by the job since judges
    could fill: the judge's name and its label count, and since this module its share) and its number of labels;
    `judge_name` is the evaluation's fill judge's name, or None when no judge filled it."""
    fill = results.get("fill") or {}
    if judge_name is None and not fill:
        return LabelSource(labels=n_labels if scored else None, scored=scored)
    judge = fill.get("judge") or judge_name
    judge_labels = fill.get("labels")
    labels = n_labels if scored else None
    if judge_labels is not None and not labels and fill.get("human_labels") is not None:
        labels = judge_labels + fill["human_labels"]
    return LabelSource(judge=judge, judge_labels=judge_labels, labels=labels or None, scored=scored)

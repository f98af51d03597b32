"""Grading scales (plain Python, no database)."""

import pytest

from judgments.lib.scales import BINARY, GRADED, Scale, ScaleError, custom_text, parse_custom


def test_the_graded_scale_has_the_four_anchors_with_their_cues():
    assert [(g.value, g.label) for g in GRADED.grades] == [(0, "Poor"), (1, "Fair"), (2, "Good"), (3, "Perfect")]
    assert GRADED.grades[3].cue == "This is exactly what I am looking for"
    assert BINARY.values == [0, 1] and BINARY.label_of(1) == "Relevant"


def test_a_custom_scale_round_trips_through_its_text_and_json():
    scale = parse_custom("2 | Answer | Answers the question\n0 | Off topic\n1 | Related")
    assert scale.values == [0, 1, 2] and scale.kind == "custom"
    assert parse_custom(custom_text(scale)) == scale
    assert Scale.from_json(scale.to_json()) == scale


@pytest.mark.parametrize("text,problem", [
    ("0 | Only one", "between 2 and 10 grades"),
    ("0 | A\n0 | B", "same value"),
    ("0 | A\n12 | B", "0 to 9"),
    ("0 | A\nx | B", "line 2: the value 'x'"),
    ("0 | A\n1 |  ", "needs a label"),
    ("0 | A\n1 B", "line 2: write"),
])
def test_a_bad_custom_scale_says_what_is_wrong(text, problem):
    with pytest.raises(ScaleError, match=problem):
        parse_custom(text)

"""Chart geometry: labels get the room they need (the browser test measures the drawn text too)."""

import itertools

import pytest

from judgments.lib import charts
from judgments.lib.charts import CHAR_WIDTH, LINE_HEIGHT


def x_boxes(chart):
    return [(tick.x - charts.text_width(tick.label) / 2, tick.x + charts.text_width(tick.label) / 2) for tick in chart.x_ticks]


@pytest.mark.parametrize("n, top", [(10, 100), (3_000, 8_000), (200_000, 5_000_000), (10**9, 10**11)])
def test_loglog_tick_labels_neither_overlap_nor_leave_the_chart(n, top):
    points = [(rank, top / rank) for rank in range(1, n + 1, max(1, n // 2000))]
    chart = charts.loglog(points, [(n / 10, "head | torso"), (n / 8, "torso | tail")], width=640, height=280)
    boxes = x_boxes(chart)
    assert boxes[0][0] >= 0 and boxes[-1][1] <= chart.width
    assert all(left_box[1] + 4 <= right_box[0] for left_box, right_box in itertools.pairwise(boxes))
    ys = sorted(tick.x for tick in chart.y_ticks)
    assert all(b - a >= LINE_HEIGHT for a, b in itertools.pairwise(ys))
    assert max(charts.text_width(tick.label) for tick in chart.y_ticks) + 6 <= chart.left
    assert chart.y_title_y + 3 <= min(ys) - LINE_HEIGHT / 2  # the axis title sits above the top tick label
    assert chart.x_tick_y + 4 <= chart.x_title_y - LINE_HEIGHT + 3  # and the x title under the tick labels
    first, second = chart.marks
    if abs(first.label_x - second.label_x) < (charts.text_width(first.label) + charts.text_width(second.label)) / 2:
        assert first.label_y != second.label_y  # close boundaries put their labels on two lines
    for mark in chart.marks:
        assert chart.left <= mark.label_x - charts.text_width(mark.label) / 2
        assert mark.label_x + charts.text_width(mark.label) / 2 <= chart.right


def test_axis_labels_are_short_powers_of_ten():
    assert [charts._power(e) for e in range(0, 13)] == ["1", "10", "100", "1,000", "10k", "100k", "1M", "10M", "100M",
                                                        "1G", "10G", "100G", "1e12"]


def test_the_heatmap_margin_is_as_wide_as_the_longest_name_and_long_column_names_are_shortened():
    names = ["ana", "bartholomew-the-second"]
    heatmap = charts.heatmap(names, lambda a, b: 0.5)
    assert heatmap.left == round(CHAR_WIDTH * len("bartholomew-the-second") + 12)
    assert heatmap.top == 2 * LINE_HEIGHT  # one line for the column names, not a fixed 110 units
    assert [mark.label for mark in heatmap.column_names] == ["ana", "barthol…"]
    assert all(charts.text_width(mark.label) <= heatmap.cell for mark in heatmap.column_names)
    assert heatmap.width == heatmap.left + 2 * heatmap.cell + 2


@pytest.mark.parametrize("weeks", [1, 3, 12, 60])
def test_the_drift_chart_s_date_labels_neither_overlap_nor_leave_the_chart(weeks):
    points = [(f"2026-{1 + i // 5:02d}-{1 + i % 5 * 6:02d}", 0.5) for i in range(weeks)]
    chart = charts.line(points, low=-0.2)
    boxes = x_boxes(chart)
    assert boxes and boxes[0][0] >= 0 and boxes[-1][1] <= chart.width
    assert all(a[1] + 4 <= b[0] for a, b in itertools.pairwise(boxes))


def test_the_stacked_bars_start_after_the_longest_rater_name():
    bars, _legend = charts.stacked_bars({"al": {"0": 1}, "maximiliana-the-rater": {"1": 2}}, ["0", "1"])
    assert all(bar.segments[0].x == round(charts.text_width("maximiliana-the-rater") + 12) for bar in bars)
    assert all(bar.label_x - charts.text_width(bar.label) >= 0 for bar in bars)

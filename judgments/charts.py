"""Geometry for the server-side SVG charts: plain numbers in, coordinates and tick labels out.

No Django and no drawing here: templates draw the SVG from these coordinates, so a chart is real vector
graphics without a JavaScript library.
"""

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Mark:
    x: float
    label: str


@dataclass
class LogLogChart:
    """A line on log-log axes: `path` is the SVG path, ticks and marks are in the same coordinates."""

    width: int
    height: int
    left: int
    bottom: int
    path: str = ""
    x_ticks: list[Mark] = field(default_factory=list)
    y_ticks: list[Mark] = field(default_factory=list)  # Mark.x holds the y coordinate
    marks: list[Mark] = field(default_factory=list)  # vertical lines, e.g. tier boundaries

    @property
    def right(self) -> int:
        return self.width - 10

    @property
    def top(self) -> int:
        return 10


def loglog(points: list[tuple[float, float]], marks: list[tuple[float, str]] = (), *, width: int = 640,
           height: int = 280) -> LogLogChart:
    """Points (x, y), both positive, on log-log axes with ticks at powers of ten; `marks` are labelled
    vertical lines at given x values (outside the data range they are left out)."""
    chart = LogLogChart(width=width, height=height, left=56, bottom=height - 30)
    points = [(x, y) for x, y in points if x > 0 and y > 0]
    if not points:
        return chart
    x_low, x_high = _decades(min(x for x, _ in points), max(x for x, _ in points))
    y_low, y_high = _decades(min(y for _, y in points), max(y for _, y in points))

    def sx(x: float) -> float:
        return chart.left + (math.log10(x) - x_low) / (x_high - x_low) * (chart.right - chart.left)

    def sy(y: float) -> float:
        return chart.bottom - (math.log10(y) - y_low) / (y_high - y_low) * (chart.bottom - chart.top)

    chart.path = "M" + " L".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
    chart.x_ticks = [Mark(round(sx(10**e), 1), _power(e)) for e in range(x_low, x_high + 1)]
    chart.y_ticks = [Mark(round(sy(10**e), 1), _power(e)) for e in range(y_low, y_high + 1)]
    chart.marks = [Mark(round(sx(x), 1), label) for x, label in marks if 10**x_low <= x <= 10**x_high]
    return chart


def _decades(low: float, high: float) -> tuple[int, int]:
    bottom, top = math.floor(math.log10(low)), math.ceil(math.log10(high))
    return bottom, max(top, bottom + 1)


def _power(exponent: int) -> str:
    value = 10**exponent
    return f"{value:,}" if exponent < 6 else f"1e{exponent}"

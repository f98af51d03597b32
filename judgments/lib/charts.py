"""Geometry for the server-side SVG charts: plain numbers in, coordinates and tick labels out.

No Django and no drawing here: templates draw the SVG from these coordinates, so a chart is real vector
graphics without a JavaScript library.
"""

import math
from dataclasses import dataclass, field


# Text is 11px (verdict.css, `.chart text`); a character of its digits is at most this wide, and a line this tall.
CHAR_WIDTH = 6.5
LINE_HEIGHT = 13


@dataclass(frozen=True)
class Mark:
    x: float
    label: str


@dataclass(frozen=True)
class Boundary:
    """A labelled vertical line; its label sits at (label_x, label_y), moved down a line when it would
    overlap the previous boundary's and kept inside the plot."""

    x: float
    label: str
    label_x: float
    label_y: float


@dataclass
class LogLogChart:
    """A line on log-log axes: `path` is the SVG path, ticks and marks are in the same coordinates.

    The margins are made for the labels: the left one fits the widest y tick label, the right one half
    the last x tick label (centred on its tick), the top one the y axis title, the bottom one the x tick
    labels and, under them, the x axis title."""

    width: int
    height: int
    left: float
    right: float
    top: float = 2 * LINE_HEIGHT
    path: str = ""
    x_ticks: list[Mark] = field(default_factory=list)
    y_ticks: list[Mark] = field(default_factory=list)  # Mark.x holds the y coordinate
    marks: list[Boundary] = field(default_factory=list)  # vertical lines, e.g. tier boundaries

    @property
    def bottom(self) -> float:
        return self.height - 3 * LINE_HEIGHT

    @property
    def x_tick_y(self) -> float:
        return self.bottom + LINE_HEIGHT + 3

    @property
    def x_title_y(self) -> float:
        return self.height - 4

    @property
    def y_title_y(self) -> float:
        return LINE_HEIGHT

    @property
    def middle(self) -> float:
        return (self.left + self.right) / 2


def text_width(label: str) -> float:
    return CHAR_WIDTH * len(label)


def loglog(points: list[tuple[float, float]], marks: list[tuple[float, str]] = (), *, width: int = 640,
           height: int = 280) -> LogLogChart:
    """Points (x, y), both positive, on log-log axes with ticks at powers of ten (every second or third
    power when their labels would touch); `marks` are labelled vertical lines at given x values (outside
    the data range they are left out)."""
    points = [(x, y) for x, y in points if x > 0 and y > 0]
    if not points:
        return LogLogChart(width=width, height=height, left=40, right=width - 10)
    x_low, x_high = _decades(min(x for x, _ in points), max(x for x, _ in points))
    y_low, y_high = _decades(min(y for _, y in points), max(y for _, y in points))
    y_labels = {e: _power(e) for e in range(y_low, y_high + 1)}
    chart = LogLogChart(width=width, height=height, left=round(max(map(text_width, y_labels.values())) + 12),
                        right=round(width - max(10.0, text_width(_power(x_high)) / 2 + 4)))

    def sx(x: float) -> float:
        return chart.left + (math.log10(x) - x_low) / (x_high - x_low) * (chart.right - chart.left)

    def sy(y: float) -> float:
        return chart.bottom - (math.log10(y) - y_low) / (y_high - y_low) * (chart.bottom - chart.top)

    chart.path = "M" + " L".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
    x_labels = [_power(e) for e in range(x_low, x_high + 1)]
    x_every = _tick_step((chart.right - chart.left) / (x_high - x_low), max(map(text_width, x_labels)) + 8)
    y_every = _tick_step((chart.bottom - chart.top) / (y_high - y_low), LINE_HEIGHT + 2)
    chart.x_ticks = [Mark(round(sx(10**e), 1), _power(e)) for e in range(x_low, x_high + 1) if (e - x_low) % x_every == 0]
    chart.y_ticks = [Mark(round(sy(10**e), 1), label) for e, label in y_labels.items() if (e - y_low) % y_every == 0]
    chart.marks = _boundaries([(sx(x), label) for x, label in marks if 10**x_low <= x <= 10**x_high], chart)
    return chart


def _tick_step(spacing: float, needed: float) -> int:
    """Label every n-th tick so that labels `spacing` apart get the room each `needed`."""
    return max(1, math.ceil(needed / spacing))


def _boundaries(lines: list[tuple[float, str]], chart: LogLogChart) -> list[Boundary]:
    placed: list[Boundary] = []
    for x, label in sorted(lines):
        half = text_width(label) / 2
        label_x = min(max(x, chart.left + half), chart.right - half)
        row = 0
        while any(abs(other.label_x - label_x) < half + text_width(other.label) / 2 + 6
                  and other.label_y == chart.top + LINE_HEIGHT * (row + 1) for other in placed):
            row += 1
        placed.append(Boundary(round(x, 1), label, round(label_x, 1), chart.top + LINE_HEIGHT * (row + 1)))
    return placed


def _decades(low: float, high: float) -> tuple[int, int]:
    bottom, top = math.floor(math.log10(low)), math.ceil(math.log10(high))
    return bottom, max(top, bottom + 1)


def _power(exponent: int) -> str:
    """1, 10, 100, 1,000, then 10k, 100k, 1M ... 100G, then 1e12: short enough for an axis."""
    if exponent < 4:
        return f"{10**exponent:,}"
    if exponent < 12:
        return f"{10 ** (exponent % 3)}{'kMG'[exponent // 3 - 1]}"
    return f"1e{exponent}"


@dataclass(frozen=True)
class Cell:
    x: float
    y: float
    fill: str
    text: str
    title: str
    size: float

    @property
    def cx(self) -> float:
        return self.x + self.size / 2

    @property
    def cy(self) -> float:
        return self.y + self.size / 2


@dataclass
class Heatmap:
    """A square matrix of values in [-1, 1] as coloured cells, rows named on the left, columns on top;
    the margins are as wide as the names need, so the matrix starts right under its heading."""

    width: float
    height: float
    left: float
    top: float
    cell: int
    cells: list[Cell]
    names: list[Mark]  # row names; Mark.x holds the row's middle y
    column_names: list[Mark]  # shortened to fit a cell; Mark.x is the column's middle x
    zoom: float = 1.4  # drawn this much larger than its coordinates, so its 11px labels read at 15px

    @property
    def drawn_width(self) -> int:
        return round(self.width * self.zoom)

    @property
    def drawn_height(self) -> int:
        return round(self.height * self.zoom)


def heatmap(names: list[str], value_of, *, cell: int = 56) -> Heatmap:
    """`value_of(row, column)` -> float or None for each pair of names; None draws a grey cell."""
    left, top = round(max(map(text_width, names), default=0) + 12), 2 * LINE_HEIGHT
    cells = []
    for i, row in enumerate(names):
        for j, column in enumerate(names):
            value = 1.0 if i == j else value_of(row, column)
            # Three decimals, as the tables beside a heat map print the same values.
            cells.append(Cell(left + j * cell, top + i * cell, _colour(value), "" if value is None else f"{value:.3f}",
                              f"{row} / {column}: {'undefined' if value is None else f'{value:.3f}'}", cell))
    fits = int((cell - 4) // CHAR_WIDTH)
    return Heatmap(width=left + len(names) * cell + 2, height=top + len(names) * cell + 2, left=left, top=top, cell=cell,
                   cells=cells, names=[Mark(top + i * cell + cell / 2, name) for i, name in enumerate(names)],
                   column_names=[Mark(left + i * cell + cell / 2, name if len(name) <= fits else name[:fits - 1] + "…")
                                 for i, name in enumerate(names)])


def _colour(value: float | None) -> str:
    """Red (<= 0) through yellow (0.4) to green (1): agreement bands at a glance."""
    if value is None:
        return "#d0d0d0"
    hue = max(0.0, min(1.0, value)) * 120
    return f"hsl({hue:.0f}, 65%, 55%)"


@dataclass(frozen=True)
class Segment:
    x: float
    width: float
    fill: str
    title: str
    count: int = 0
    share: float = 0.0


@dataclass(frozen=True)
class Bar:
    label: str
    y: float
    segments: list[Segment]

    @property
    def label_x(self) -> float:
        return self.segments[0].x - 6 if self.segments else 0

    @property
    def label_y(self) -> float:
        return self.y + 15


def stacked_bars(rows: dict[str, dict[str, int]], keys: list[str], *, width: int = 520, bar: int = 22,
                 left: int | None = None) -> tuple[list[Bar], list[tuple[str, str]]]:
    """One horizontal bar per row, split by `keys` in proportion, its label on its left (the bars start
    after the longest label unless `left` says where); returns the bars and the legend."""
    left = round(max(map(text_width, rows), default=0) + 12) if left is None else left
    palette = ["#c62828", "#ef6c00", "#f9a825", "#7cb342", "#2e7d32", "#00838f", "#1565c0", "#6a1b9a", "#4e342e", "#37474f"]
    colours = {key: palette[i % len(palette)] for i, key in enumerate(keys)}
    bars = []
    for n, (label, counts) in enumerate(rows.items()):
        total = sum(counts.get(key, 0) for key in keys) or 1
        x, segments = float(left), []
        for key in keys:
            share = counts.get(key, 0) / total
            segments.append(Segment(round(x, 1), round(share * (width - left), 1), colours[key],
                                    f"{label}: grade {key}, {counts.get(key, 0)} ({share:.0%})", counts.get(key, 0), share))
            x += share * (width - left)
        bars.append(Bar(label, 10 + n * (bar + 8), segments))
    return bars, list(colours.items())


@dataclass
class LineChart:
    width: int
    height: int
    left: int
    bottom: int
    right: float
    top: int = 10
    path: str = ""
    points: list[tuple[float, float, str]] = field(default_factory=list)  # x, y, title
    x_ticks: list[Mark] = field(default_factory=list)
    y_ticks: list[Mark] = field(default_factory=list)

    @property
    def x_tick_y(self) -> float:
        return self.bottom + LINE_HEIGHT + 3


def line(points: list[tuple[str, float | None]], *, low: float = 0.0, high: float = 1.0, width: int = 640,
         height: int = 220) -> LineChart:
    """Labelled points (label, value) evenly spaced left to right on a linear y axis from low to high;
    None values break nothing: they are left out of the line. The right margin fits half the last label
    (centred on its point), and labels too close for their width are thinned out."""
    last = text_width(points[-1][0]) / 2 + 4 if points else 0
    chart = LineChart(width=width, height=height, left=max(48, round(text_width(points[0][0]) / 2 + 4)) if points else 48,
                      bottom=height - 30, right=round(width - max(10.0, last)))
    if not points:
        return chart
    step = (chart.right - chart.left) / max(len(points) - 1, 1)

    def sy(value: float) -> float:
        return chart.bottom - (value - low) / (high - low) * (chart.bottom - chart.top)

    drawn = [(chart.left + i * step, sy(max(low, min(high, value))), f"{label}: {value:.3f}")
             for i, (label, value) in enumerate(points) if value is not None]
    chart.points = [(round(x, 1), round(y, 1), title) for x, y, title in drawn]
    chart.path = "M" + " L".join(f"{x:.1f},{y:.1f}" for x, y, _ in drawn) if drawn else ""
    every = max(1, len(points) // 8, _tick_step(step, max(text_width(label) for label, _ in points) + 8) if len(points) > 1 else 1)
    chart.x_ticks = [Mark(round(chart.left + i * step, 1), label) for i, (label, _) in enumerate(points) if i % every == 0]
    chart.y_ticks = [Mark(round(sy(v), 1), f"{v:g}") for v in (low, (low + high) / 2, high)]
    return chart


@dataclass(frozen=True)
class Column:
    x: float
    y: float
    width: float
    height: float
    fill: str
    title: str


@dataclass
class BarChart:
    width: int
    height: int
    zero: float  # the y of value 0
    columns: list[Column]
    y_ticks: list[Mark]
    labels: list[Mark] = field(default_factory=list)  # group labels under the bars
    legend: list[tuple[str, str]] = field(default_factory=list)


def sorted_differences(values: dict[str, float], *, width: int = 640, height: int = 220) -> BarChart:
    """One thin bar per query, sorted from the largest gain to the largest loss: green above zero, red below."""
    items = sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))
    top = max([abs(v) for _, v in items] + [1e-9])
    left, bottom, upper = 48, height - 20, 10
    zero = (upper + bottom) / 2
    step = (width - left - 10) / max(len(items), 1)
    columns = []
    for i, (query, value) in enumerate(items):
        size = abs(value) / top * (bottom - upper) / 2
        columns.append(Column(round(left + i * step, 2), round(zero - size if value >= 0 else zero, 2), round(max(step * 0.9, 0.5), 2),
                              round(size, 2), "#2e7d32" if value >= 0 else "#c62828", f"{query}: {value:+.4f}"))
    ticks = [Mark(round(zero - (bottom - upper) / 2, 1), f"{top:+.2f}"), Mark(zero, "0"), Mark(round(zero + (bottom - upper) / 2, 1), f"{-top:+.2f}")]
    return BarChart(width=width, height=height, zero=zero, columns=columns, y_ticks=ticks)


def grouped_bars(groups: dict[str, dict[str, float | None]], series: list[str], *, width: int = 640, height: int = 240) -> BarChart:
    """For each group (a tier), one bar per series (a run) on a 0-1 axis."""
    palette = ["#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a", "#c62828", "#00838f"]
    left, bottom, upper = 48, height - 30, 10
    slot = (width - left - 10) / max(len(groups), 1)
    bar = slot * 0.8 / max(len(series), 1)
    columns, labels = [], []
    for g, (group, values) in enumerate(groups.items()):
        labels.append(Mark(round(left + g * slot + slot / 2, 1), group))
        for s, name in enumerate(series):
            value = values.get(name)
            if value is None:
                continue
            size = max(0.0, min(1.0, value)) * (bottom - upper)
            columns.append(Column(round(left + g * slot + slot * 0.1 + s * bar, 2), round(bottom - size, 2), round(bar * 0.9, 2),
                                  round(size, 2), palette[s % len(palette)], f"{group}, {name}: {value:.4f}"))
    ticks = [Mark(round(bottom - v * (bottom - upper), 1), f"{v:g}") for v in (0, 0.5, 1)]
    return BarChart(width=width, height=height, zero=bottom, columns=columns, y_ticks=ticks, labels=labels,
                    legend=[(name, palette[s % len(palette)]) for s, name in enumerate(series)])

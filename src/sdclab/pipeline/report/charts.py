"""The report's charts: small inline SVG, no script."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sdclab.core.markup import Source, esc, pct
from sdclab.pipeline.results import number

COLOURS = ("#1b6ca8", "#d1495b", "#e59a1c", "#2e8b57", "#8d6a9f", "#8c564b", "#17becf", "#bcbd22")
BASELINE_COLOUR = "#777"
PRG_LABEL = "guess (PRG"
"""How a baseline series is named: dashed and grey in the charts."""


LEGEND_STEP = 15
"""Pixels between two lines of a chart's legend."""


def _height(n_series: int) -> int:
    """A small chart's height: 280 pixels, more where its legend needs them."""
    return max(280, 30 + 14 + LEGEND_STEP * n_series + 20)


def _grid(
    left: float, top: float, width: float, height: float, top_value: float, percent: bool
) -> list[str]:
    """Five horizontal grid lines with their value labels."""
    parts = []
    for k in range(5):
        v = top_value * k / 4
        y = top + height * (1 - k / 4)
        label = f"{100 * v:.0f}%" if percent else f"{v:.3g}"
        parts.append(
            f'<line x1="{left}" x2="{left + width}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
        )
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{label}</text>'
        )
    return parts


def _x_labels(positions: list[float], labels: list[str], y: float) -> list[str]:
    return [
        f'<text x="{x:.1f}" y="{y}" font-size="11" text-anchor="middle">{esc(text)}</text>'
        for x, text in zip(positions, labels, strict=True)
    ]


def _svg_label(source: Source | None, left: float, y: float) -> list[str]:
    """The source's label written into a chart, so that it travels with a copied image."""
    if source is None:
        return []
    return [
        f'<text x="{left}" y="{y}" font-size="10" fill="{source.colour}">{esc(source.label)}</text>'
    ]


def line_chart(
    title: str,
    categories: list[str],
    series: dict[str, list[Any]],
    percent: bool = True,
    source: Source | None = None,
    notes: list[str] | None = None,
) -> str:
    """A small SVG line chart: one polyline per series over categorical x positions (a figure
    not measured leaves a gap); ``notes``: a second, smaller line under each category."""
    series = {name: [number(v) for v in vs] for name, vs in series.items()}
    width, height, left, right, top, bottom = 530, _height(len(series)), 48, 170, 30, 46
    values = [v for vs in series.values() for v in vs if v is not None]
    top_value = 1.0 if percent else max(values + [1e-9]) * 1.1
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(i: int) -> float:
        return left + (plot_w * i / max(len(categories) - 1, 1))

    def y(v: float) -> float:
        return top + plot_h * (1 - v / top_value)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="{esc(title)}">',
        f'<text x="{left}" y="18" font-size="14" font-weight="bold">{esc(title)}</text>',
    ]
    parts += _grid(left, top, plot_w, plot_h, top_value, percent)
    parts += _x_labels([x(i) for i in range(len(categories))], categories, top + plot_h + 18)
    for i, note in enumerate(notes or []):
        parts.append(
            f'<text x="{x(i):.1f}" y="{top + plot_h + 31}" font-size="9" fill="#555" '
            f'text-anchor="middle">{esc(note)}</text>'
        )
    for s, (name, vs) in enumerate(series.items()):
        baseline = name.startswith(PRG_LABEL)
        colour = BASELINE_COLOUR if baseline else SERIES_COLOURS[s % len(SERIES_COLOURS)]
        dash = ' stroke-dasharray="5,3"' if baseline else ""
        points = [f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(vs) if v is not None]
        if points:
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} '
                f'points="{" ".join(points)}"/>'
            )
        for p in points:
            px, py = p.split(",")
            parts.append(f'<circle cx="{px}" cy="{py}" r="3" fill="{colour}"/>')
        ly = top + 14 + LEGEND_STEP * s
        parts.append(
            f'<line x1="{left + plot_w + 12}" x2="{left + plot_w + 32}" y1="{ly - 4}" '
            f'y2="{ly - 4}" stroke="{colour}" stroke-width="2"{dash}/>'
        )
        parts.append(f'<text x="{left + plot_w + 36}" y="{ly}" font-size="11">{esc(name)}</text>')
    parts += _svg_label(source, 8, height - 6)
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(
    title: str,
    groups: list[str],
    series: dict[str, list[Any]],
    source: Source | None = None,
) -> str:
    """A small SVG grouped bar chart of shares (0–100%; a figure not measured: no bar)."""
    series = {name: [number(v) for v in vs] for name, vs in series.items()}
    width, height, left, right, top, bottom = 530, _height(len(series)), 48, 170, 30, 46
    plot_w, plot_h = width - left - right, height - top - bottom
    slot = plot_w / max(len(groups), 1)
    bar = slot * 0.8 / max(len(series), 1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="{esc(title)}">',
        f'<text x="{left}" y="18" font-size="14" font-weight="bold">{esc(title)}</text>',
    ]
    parts += _grid(left, top, plot_w, plot_h, 1.0, True)
    parts += _x_labels(
        [left + slot * (g + 0.5) for g in range(len(groups))], groups, top + plot_h + 18
    )
    for s, (name, values) in enumerate(series.items()):
        colour = SERIES_COLOURS[s % len(SERIES_COLOURS)]
        for g, v in enumerate(values):
            if v is None:
                continue
            x = left + slot * g + slot * 0.1 + bar * s
            h = plot_h * v
            parts.append(
                f'<rect x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{bar * 0.9:.1f}" '
                f'height="{h:.1f}" fill="{colour}"><title>{esc(name)}: '
                f"{pct(v)}</title></rect>"
            )
        ly = top + 14 + LEGEND_STEP * s
        parts.append(
            f'<rect x="{left + plot_w + 12}" y="{ly - 9}" width="14" height="10" fill="{colour}"/>'
        )
        parts.append(f'<text x="{left + plot_w + 30}" y="{ly}" font-size="11">{esc(name)}</text>')
    parts += _svg_label(source, 8, height - 6)
    parts.append("</svg>")
    return "".join(parts)


SERIES_COLOURS = (
    *COLOURS,
    "#393b79",
    "#e377c2",
    "#637939",
    "#ad494a",
)
"""Twelve colours; with :data:`MARKERS` (seven) every series of up to 84 has its own pair."""
MARKERS = ("circle", "square", "triangle", "diamond", "down", "cross", "star")


def series_style(index: int) -> tuple[str, str]:
    """The colour and marker of the ``index``-th series."""
    return SERIES_COLOURS[index % len(SERIES_COLOURS)], MARKERS[index % len(MARKERS)]


def marker(shape: str, x: float, y: float, colour: str, size: float = 4.5) -> str:
    """One SVG marker centred at (x, y)."""
    s = size
    if shape == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{s:.1f}" fill="{colour}"/>'
    if shape == "square":
        return (
            f'<rect x="{x - s:.1f}" y="{y - s:.1f}" width="{2 * s:.1f}" height="{2 * s:.1f}" '
            f'fill="{colour}"/>'
        )
    if shape == "cross":
        return (
            f'<path d="M{x - s:.1f},{y - s:.1f}L{x + s:.1f},{y + s:.1f}M{x - s:.1f},{y + s:.1f}'
            f'L{x + s:.1f},{y - s:.1f}" stroke="{colour}" stroke-width="2.5"/>'
        )
    corners = {
        "triangle": [(0, -1.2), (1.1, 0.9), (-1.1, 0.9)],
        "down": [(0, 1.2), (1.1, -0.9), (-1.1, -0.9)],
        "diamond": [(0, -1.3), (1.1, 0), (0, 1.3), (-1.1, 0)],
        "star": [
            (0.95 * (1 if k % 2 == 0 else 0.45) * _sin(k), -(1 if k % 2 == 0 else 0.45) * _cos(k))
            for k in range(10)
        ],
    }[shape]
    points = " ".join(f"{x + s * dx:.1f},{y + s * dy:.1f}" for dx, dy in corners)
    return f'<polygon points="{points}" fill="{colour}"/>'


def _sin(k: int) -> float:
    return math.sin(math.pi * k / 5)


def _cos(k: int) -> float:
    return math.cos(math.pi * k / 5)


@dataclass(frozen=True)
class Axis:
    """A numeric axis: its label and whether it is logarithmic."""

    label: str
    log: bool = False


@dataclass(frozen=True)
class XYPoint:
    """A point of an x–y chart, with optional interval bars and a label beside it."""

    x: float
    y: float
    x_interval: tuple[float, float] | None = None
    y_interval: tuple[float, float] | None = None
    label: str = ""


@dataclass(frozen=True)
class Reference:
    """A reference line across the chart at ``value`` of the x (or y) axis, labelled."""

    value: float
    label: str
    vertical: bool = True


def wants_log(values: list[float]) -> bool:
    """A log scale where no value is negative and the positive ones span more than a factor of
    30 (a 0 is drawn at the axis floor)."""
    positive = [v for v in values if v > 0]
    return min(values, default=0) >= 0 and len(positive) > 1 and max(positive) / min(positive) > 30


def _scale(
    low: float, high: float, log: bool, start: float, length: float, flip: bool
) -> tuple[Callable[[float], float], list[float]]:
    """The map from values to pixels, and the tick values."""
    if log:
        lo, hi = math.floor(math.log10(low)), math.ceil(math.log10(high))
        hi = max(hi, lo + 1)
        ticks = [10.0**e for e in range(lo, hi + 1)]

        def place(v: float) -> float:
            share = (math.log10(max(v, 10.0**lo)) - lo) / (hi - lo)
            return start + length * (1 - share if flip else share)

        return place, ticks
    if high == low:
        low, high = low - 1, high + 1
    step = _nice_step((high - low) / 4)
    first, last = math.floor(low / step) * step, math.ceil(high / step) * step
    ticks = [first + k * step for k in range(round((last - first) / step) + 1)]

    def place_linear(v: float) -> float:
        share = (v - first) / (last - first)
        return start + length * (1 - share if flip else share)

    return place_linear, ticks


def _nice_step(raw: float) -> float:
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _tick(v: float) -> str:
    return f"{v:g}"


@dataclass(frozen=True)
class _Plot:
    """Where an x–y chart draws: its plot area in pixels and the maps from values to pixels."""

    left: int
    top: int
    width: int
    height: int
    x: Callable[[float], float]
    y: Callable[[float], float]


def _xy_values(
    series: dict[str, list[XYPoint]], references: list[Reference], x_axis: Axis, y_axis: Axis
) -> tuple[list[float], list[float], bool]:
    """The x and y values a chart must span (points, intervals, references; positive ones only on
    a log axis) and whether a y of 0 is drawn at a floor a decade below the data."""
    xs = [v for ps in series.values() for p in ps for v in (p.x, *(p.x_interval or ()))]
    ys = [v for ps in series.values() for p in ps for v in (p.y, *(p.y_interval or ()))]
    xs += [r.value for r in references if r.vertical]
    ys += [r.value for r in references if not r.vertical]
    if x_axis.log:
        xs = [v for v in xs if v > 0]
    if y_axis.log:
        ys = [v for v in ys if v > 0]
    floor = any(p.y == 0 for ps in series.values() for p in ps)
    if y_axis.log and floor:  # one decade below the data is the floor, where 0 is drawn
        ys.append(10.0 ** (math.floor(math.log10(min(ys))) - 1))
    return xs, ys, floor


def _xy_axes(
    plot: _Plot, x_ticks: list[float], y_ticks: list[float], x_axis: Axis, y_axis: Axis, floor: bool
) -> list[str]:
    """The grid lines with their tick labels, and the axes' labels (a 0 at a log axis' floor)."""
    left, top, plot_w, plot_h, x, y = plot.left, plot.top, plot.width, plot.height, plot.x, plot.y
    parts = []
    for k, t in enumerate(y_ticks):
        label = "0" if y_axis.log and floor and k == 0 else _tick(t)
        parts.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y(t):.1f}" y2="{y(t):.1f}" '
            'stroke="#e4e4e4"/>'
            f'<text x="{left - 6}" y="{y(t) + 4:.1f}" font-size="11" text-anchor="end">'
            f"{label}</text>"
        )
    for t in x_ticks:
        parts.append(
            f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top}" y2="{top + plot_h}" '
            'stroke="#f0f0f0"/>'
            f'<text x="{x(t):.1f}" y="{top + plot_h + 16}" font-size="11" text-anchor="middle">'
            f"{_tick(t)}</text>"
        )
    scale = {True: " (log scale)", False: ""}
    y_scale = " (log scale; 0 at the floor)" if y_axis.log and floor else scale[y_axis.log]
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h + 36}" font-size="12" '
        f'text-anchor="middle">{esc(x_axis.label + scale[x_axis.log])}</text>'
        f'<text x="14" y="{top + plot_h / 2:.1f}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">'
        f"{esc(y_axis.label + y_scale)}</text>"
    )
    return parts


def _xy_references(plot: _Plot, references: list[Reference]) -> list[str]:
    """The reference lines across the plot, dashed and grey, each labelled at its start: a
    vertical line's label on the side of the line towards the plot's middle, so that a line at
    the plot's right edge keeps its label off the legend."""
    left, top, plot_w, plot_h = plot.left, plot.top, plot.width, plot.height
    parts = []
    for k, r in enumerate(references):
        if r.vertical:
            at = plot.x(r.value)
            inward = 'text-anchor="end" ' if at > left + plot_w / 2 else ""
            beside = at - 3 if inward else at + 3
            parts.append(
                f'<line x1="{at:.1f}" x2="{at:.1f}" y1="{top}" y2="{top + plot_h}" '
                f'stroke="{BASELINE_COLOUR}" stroke-dasharray="5,3"/>'
                f'<text x="{beside:.1f}" y="{top + 10 + 12 * k}" {inward}font-size="10" '
                f'fill="#555">{esc(r.label)}</text>'
            )
        else:
            at = plot.y(r.value)
            parts.append(
                f'<line x1="{left}" x2="{left + plot_w}" y1="{at:.1f}" y2="{at:.1f}" '
                f'stroke="{BASELINE_COLOUR}" stroke-dasharray="5,3"/>'
                f'<text x="{left + 3}" y="{at - 3:.1f}" font-size="10" fill="#555">'
                f"{esc(r.label)}</text>"
            )
    return parts


def _xy_point(plot: _Plot, p: XYPoint, colour: str, shape: str) -> list[str]:
    """One point of a series: its interval bars, its marker and its label."""
    x, y = plot.x, plot.y
    px, py = x(p.x), y(p.y)
    parts = []
    if p.x_interval:
        parts.append(
            f'<line x1="{x(p.x_interval[0]):.1f}" x2="{x(p.x_interval[1]):.1f}" '
            f'y1="{py:.1f}" y2="{py:.1f}" stroke="{colour}"/>'
        )
    if p.y_interval:
        parts.append(
            f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{y(p.y_interval[0]):.1f}" '
            f'y2="{y(p.y_interval[1]):.1f}" stroke="{colour}"/>'
        )
    parts.append(marker(shape, px, py, colour))
    if p.label:
        parts.append(
            f'<text x="{px + 7:.1f}" y="{py - 6:.1f}" font-size="10" fill="{colour}">'
            f"{esc(p.label)}</text>"
        )
    return parts


def _xy_series(
    plot: _Plot, index: int, name: str, shown: list[XYPoint], style: tuple[str, str], connect: bool
) -> list[str]:
    """The ``index``-th series: its line (with ``connect``), its points and its legend entry."""
    colour, shape = style
    x, y = plot.x, plot.y
    parts = []
    if connect and len(shown) > 1:
        line = " ".join(f"{x(p.x):.1f},{y(p.y):.1f}" for p in sorted(shown, key=lambda p: p.x))
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{line}"/>'
        )
    for p in shown:
        parts += _xy_point(plot, p, colour, shape)
    ly = plot.top + 10 + 18 * index
    parts.append(marker(shape, plot.left + plot.width + 20, ly - 4, colour))
    parts.append(
        f'<text x="{plot.left + plot.width + 32}" y="{ly}" font-size="11">{esc(name)}</text>'
    )
    return parts


def xy_chart(
    title: str,
    series: dict[str, list[XYPoint]],
    x_axis: Axis,
    y_axis: Axis,
    references: list[Reference] | None = None,
    connect: bool = False,
    source: Source | None = None,
    style_of: Callable[[str], int] | None = None,
) -> str:
    """An SVG chart of numeric x against numeric y: one colour and marker per series, interval
    bars where known, a label beside each point, reference lines (dashed, labelled); with
    ``connect`` the points of a series are joined in order of x. ``style_of`` gives a series'
    style index (so that one entry looks the same in every chart); by default its position."""
    references = references or []
    width, height, left, right, top, bottom = 760, 420, 64, 230, 34, 58
    plot_w, plot_h = width - left - right, height - top - bottom
    xs, ys, floor = _xy_values(series, references, x_axis, y_axis)
    x, x_ticks = _scale(min(xs), max(xs), x_axis.log, left, plot_w, flip=False)
    y, y_ticks = _scale(min(ys), max(ys), y_axis.log, top, plot_h, flip=True)
    plot = _Plot(left, top, plot_w, plot_h, x, y)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="{esc(title)}">',
        f'<text x="{left}" y="20" font-size="14" font-weight="bold">{esc(title)}</text>',
    ]
    parts += _xy_axes(plot, x_ticks, y_ticks, x_axis, y_axis, floor)
    parts += _xy_references(plot, references)
    for s, (name, points) in enumerate(series.items()):
        style = series_style(s if style_of is None else style_of(name))
        shown = [p for p in points if (p.x >= 0 or not x_axis.log) and (p.y >= 0 or not y_axis.log)]
        parts += _xy_series(plot, s, name, shown, style, connect)
    parts += _svg_label(source, 8, height - 6)
    parts.append("</svg>")
    return "".join(parts)

"""The report's charts: small inline SVG, no script."""

from __future__ import annotations

from typing import Any

from sdclab.report.html import Source, esc, pct
from sdclab.results import number

COLOURS = ("#1b6ca8", "#d1495b", "#e59a1c", "#2e8b57", "#8d6a9f", "#8c564b", "#17becf", "#bcbd22")
BASELINE_COLOUR = "#777"
PRG_LABEL = "guess (PRG"
"""How a baseline series is named: dashed and grey in the charts."""


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
) -> str:
    """A small SVG line chart: one polyline per series over categorical x positions (a figure
    not measured leaves a gap)."""
    series = {name: [number(v) for v in vs] for name, vs in series.items()}
    width, height, left, right, top, bottom = 530, 280, 48, 150, 30, 46
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
    for s, (name, vs) in enumerate(series.items()):
        baseline = name.startswith(PRG_LABEL)
        colour = BASELINE_COLOUR if baseline else COLOURS[s % len(COLOURS)]
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
        ly = top + 14 + 18 * s
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
    width, height, left, right, top, bottom = 530, 280, 48, 150, 30, 46
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
        colour = COLOURS[s % len(COLOURS)]
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
        ly = top + 14 + 18 * s
        parts.append(
            f'<rect x="{left + plot_w + 12}" y="{ly - 9}" width="14" height="10" fill="{colour}"/>'
        )
        parts.append(f'<text x="{left + plot_w + 30}" y="{ly}" font-size="11">{esc(name)}</text>')
    parts += _svg_label(source, 8, height - 6)
    parts.append("</svg>")
    return "".join(parts)

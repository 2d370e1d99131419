"""The HTML parts every section of a report is made of: where each number comes from (sources
and their labels), sections, and figures formatted so that "not measured" never reads as a
number. Below the results and the mechanisms, so that a mechanism's diagnostics can render their
own section (:mod:`sdclab.core.diagnostics`)."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

from sdclab.core.figures import NotMeasured, from_json


def esc(value: Any) -> str:
    return html.escape(str(value))


# ---------------------------------------------------------------------------------------------
# Where each number comes from: every section, table and figure declares its source here
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """What a part of the report was computed from, with the label it carries."""

    key: str
    label: str
    mark: str
    """One letter marking a column of a table that mixes sources."""
    colour: str
    background: str
    explanation: str


EVALUATION = Source(
    "evaluation",
    "Evaluation only — computed with the confidential data; not for publication",
    "E",
    "#b3261e",
    "#fbe3e1",
    "Compares a release, or an attack on it, with the confidential records: errors of the "
    "tables, agreement of reconstructed with true records, reidentification (the attacker files "
    "are simulated from the confidential records, so even the putative links are measured on "
    "them), tails and suppression by true size, attacks checked against the true counts, and the "
    "true totals of the population. They are for choosing a method; publishing them would "
    "disclose the data they were measured on.",
)
RELEASE = Source(
    "release",
    "From the release alone",
    "R",
    "#2e7d32",
    "#e4f2e4",
    "Computed from the published tables only, as any user or attacker can: the reconstruction's "
    "solution variability, the cell key method's bound estimate, pinned tuples and (D, V) grid.",
)
CARD = Source(
    "card",
    "From the specification card",
    "C",
    "#1b5e9a",
    "#e3ecf7",
    "Stated by the mechanism's specification card (guarantee, budget, noise scale, margins of "
    "error): they follow from the settings, not from the data.",
)
SOURCES = (EVALUATION, RELEASE, CARD)


def source_label(source: Source) -> str:
    """The visible label of a part of the report."""
    return f'<p class="source {source.key}"><b>{esc(source.label)}</b></p>'


def labelled(source: Source, body: str, tag: str = "div") -> str:
    """``body`` in an element marked with its source, its label first."""
    return f'<{tag} data-source="{source.key}">{source_label(source)}{body}</{tag}>'


def section(title: str, parts: list[tuple[Source, str]]) -> str:
    """An ``<h2>`` section: labelled once when all its parts share a source, else part by part."""
    heading = f'<h2 id="{anchor(title)}">{esc(title)}</h2>'
    sources = {source for source, _ in parts}
    if len(sources) == 1:
        (source,) = sources
        return (
            f'<section data-source="{source.key}">{heading}{source_label(source)}'
            + "".join(body for _, body in parts)
            + "</section>"
        )
    return (
        f'<section data-source="mixed">{heading}'
        + "".join(labelled(source, body) for source, body in parts)
        + "</section>"
    )


def anchor(title: str) -> str:
    """The id of a section's heading, from its title."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def not_measured(value: Any) -> str | None:
    """ "n/a" with the reason on hover for a figure that was not measured (None otherwise)."""
    value = from_json(value)
    if isinstance(value, NotMeasured):
        return f'<span title="{esc(value.reason)}">n/a</span>'
    return None


def formatted(value: Any, scale: float, decimals: int, unit: str, signed: bool = False) -> str:
    """The report's one formatter of figures: n/a with the reason where none was measured, an
    exact 0 as 0 (never the 0.0 a rounded figure would show), a figure below the shown precision
    as <0.1 (signed where negative), else ``scale`` × value to ``decimals`` places."""
    shown = not_measured(value)
    if shown is not None:
        return shown
    if value == 0:
        return f"0{unit}"
    smallest = 10.0**-decimals
    if abs(scale * value) < smallest / 2:
        sign = "−" if value < 0 else "+" if signed else ""
        return f"{sign}<{smallest:.{decimals}f}{unit}"
    return f"{scale * value:{'+' if signed else ''}.{decimals}f}{unit}"


def pct(value: Any) -> str:
    return formatted(value, 100, 1, "%")


def points(value: Any) -> str:
    """A difference in percentage points, signed."""
    return formatted(value, 1, 1, " pp", signed=True)


def count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def decimal(value: Any) -> str:
    return formatted(value, 1, 3, "")

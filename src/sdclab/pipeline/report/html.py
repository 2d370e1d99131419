"""The report's own HTML parts: its table of contents, figures, marked columns, style sheet and
the reconstruction's records; the parts every section shares are :mod:`sdclab.core.markup`'s."""

from __future__ import annotations

import re

from sdclab.core.markup import SOURCES, Source, esc, source_label
from sdclab.pipeline.results import NotMeasured, ReleaseResult


def contents(body: str) -> str:
    """A table of contents of the sections of ``body``, in order."""
    headings = re.findall(r'<h2 id="([^"]+)">(.*?)</h2>', body)
    items = "".join(f'<li><a href="#{key}">{title}</a></li>' for key, title in headings)
    return f'<nav class="contents"><h2>Contents</h2><ol>{items}</ol></nav>'


def figure(source: Source, svg: str) -> str:
    """A chart with its label as caption."""
    return (
        f'<figure data-source="{source.key}"><figcaption>{source_label(source)}</figcaption>'
        f"{svg}</figure>"
    )


def column(header: str, source: Source | None) -> str:
    """A table header, marked with its column's source."""
    if source is None:
        return f"<th>{header}</th>"
    return (
        f'<th data-source="{source.key}">{header} <sup class="mark {source.key}" '
        f'title="{esc(source.label)}">{source.mark}</sup></th>'
    )


STYLE = "".join(
    f".source.{s.key}{{background:{s.background};border-color:{s.colour}}}"
    f".mark.{s.key}{{color:{s.colour}}}"
    for s in SOURCES
) + (
    ".source{margin:6px 0;padding:3px 8px;border-left:5px solid;font-size:13px}"
    ".mark{font-weight:bold}.legend{border:1px solid #ccc;padding:4px 12px;margin:12px 0}"
    ".legend li{list-style:none;margin:6px 0}"
)


def records_shown(release: ReleaseResult, persons: int) -> str:
    """The reconstruction's records against the population's persons ("102,408 / 4,000")."""
    figures = release.evaluation.reconstruction
    if isinstance(figures, NotMeasured):
        return f"n/a <small>({esc(figures.reason)})</small>"
    records = figures.records
    shown = "n/a" if isinstance(records, NotMeasured) else f"{int(records):,}"
    return f"{shown} / {persons:,}"

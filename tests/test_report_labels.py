"""The report says which numbers are evaluation only (computed with the confidential data) and
which come from the release alone or from the specification card."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html.parser import HTMLParser

import pytest

from sdclab.core.markup import CARD, EVALUATION, RELEASE, SOURCES
from sdclab.pipeline.experiment import REPORT_FILE, RESULTS_FILE, Experiment, run_spec
from sdclab.pipeline.report import render_report
from sdclab.pipeline.report.summary import SUMMARY_COLUMNS
from sdclab.pipeline.results import (
    EVALUATION_ONLY,
    TRUTH_BASED_FIELDS,
    ExperimentResult,
    NotMeasured,
    evaluation_only,
)

SMALL = {
    "population": {"persons": 500, "seed": 7},
    "mechanisms": [
        {"name": "none"},
        {"name": "cellkey", "settings": {"ptable": "maxent", "bound": 3, "variance": 2}},
        {"name": "geometric", "settings": {"epsilon": "8"}},
        {"name": "safetab_h"},
        {"name": "suppress"},
    ],
    "attacks": {"workers": 1, "attackers": ["census", "commercial"]},
    "report": {"persons": "all"},  # 500 persons make one block: no vulnerable group to plot
}
"""Every section of the report on a population small enough to run in a few seconds."""


@dataclass
class Part:
    tag: str
    source: str
    parent: Part | None
    depth: int = 1
    text: list[str] = field(default_factory=list)

    @property
    def content(self) -> str:
        return "".join(self.text)


class Parts(HTMLParser):
    """The elements marked ``data-source``, with their text; and tables or charts outside them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[Part] = []
        self.parts: list[Part] = []
        self.unlabelled: list[str] = []
        self.first_part_at: int | None = None
        self.legend_at: int | None = None
        self.offset = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for part in self.open:
            if part.tag == tag:
                part.depth += 1
        attributes = dict(attrs)
        if attributes.get("class") == "legend" and self.legend_at is None:
            self.legend_at = len(self.parts)
        if tag in ("table", "svg", "figure") and not self.open and "data-source" not in attributes:
            self.unlabelled.append(tag)
        source = attributes.get("data-source")
        if source is not None:
            part = Part(tag, source, self.open[-1] if self.open else None)
            self.open.append(part)
            self.parts.append(part)

    def handle_endtag(self, tag: str) -> None:
        for part in list(self.open):
            if part.tag == tag:
                part.depth -= 1
                if part.depth == 0:
                    self.open.remove(part)

    def handle_data(self, data: str) -> None:
        for part in self.open:
            part.text.append(data)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("labels")
    results = run_spec(Experiment.model_validate(SMALL), out, lambda _: None)
    report = (out / REPORT_FILE).read_text(encoding="utf-8")
    parser = Parts()
    parser.feed(report)
    return results, json.loads((out / RESULTS_FILE).read_text()), report, parser


def blocks(parser: Parts) -> list[Part]:
    """The labelled sections, parts of sections and figures (not the summary's column headers)."""
    return [p for p in parser.parts if p.tag != "th"]


def find(parser: Parts, text: str, tag: str | None = None) -> Part:
    found = [
        p
        for p in blocks(parser)
        if text in p.content and (tag is None or p.tag == tag) and p.source != "mixed"
    ]
    assert found, f"no labelled part holds {text!r}"
    return min(found, key=lambda p: len(p.content))  # the innermost


def test_a_legend_at_the_top_explains_every_label(run):
    _, _, report, parser = run
    assert parser.legend_at == 0  # before any labelled part
    legend = report[report.index('class="legend"') : report.index("</div>")]
    for source in SOURCES:
        assert source.label in legend
    assert EVALUATION.label == (
        "Evaluation only — computed with the confidential data; not for publication"
    )


def test_every_table_and_chart_is_inside_a_labelled_part(run):
    _, _, _, parser = run
    assert parser.unlabelled == []
    assert {p.source for p in parser.parts} <= {s.key for s in SOURCES} | {"mixed"}


def test_each_part_shows_its_own_label_and_no_other(run):
    _, _, _, parser = run
    for part in blocks(parser):
        if part.source == "mixed":  # a section whose parts are labelled one by one
            children = [p for p in parser.parts if p.parent is part]
            assert len({c.source for c in children}) > 1
            continue
        source = next(s for s in SOURCES if s.key == part.source)
        assert source.label in part.content
        if source is not EVALUATION:
            assert EVALUATION.label not in part.content, part.content[:200]


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ("Population: 500 persons", "div"),
        ("Summary", "section"),
        ("Precision by block size, all persons (census)", "figure"),
        ("Precision by block size, nonmodal persons (commercial)", "figure"),
        ("Putative and confirmed rates", "figure"),
        ("MAE of P12 (non-empty cells, withheld ones counted) by geography level", "figure"),
        ("MAE of totals (P1, populated geounits, withheld ones counted) by geography", "figure"),
        ("Accuracy against the headline risk", "figure"),
        ("nonmodal precision: reconstruction / PRG / PRG on the exact tables", None),
        ("putative links confirmed on the exact age / on agebin", None),
        ("Choose a method", "section"),
        ("Averaging the release", "div"),
        ("Repeated queries", "div"),
        ("Areas classed by their true total", "div"),
        ("Population-group tables: safetab_h", "section"),
        ("Suppression: suppress", "section"),
    ],
)
def test_truth_based_parts_are_evaluation_only(run, text, tag):
    part = find(run[3], text, tag)
    assert part.source == EVALUATION.key
    assert EVALUATION.label in part.content


@pytest.mark.parametrize(
    ("text", "source"),
    [
        ("Solution variability: share of blocks", RELEASE),
        ("Noise bound of large counts", RELEASE),
        ("Tuples whose published values pin", RELEASE),
        ("Choosing (D, V)", RELEASE),
        ("noise exceeds ±20", CARD),
        ("specification card", CARD),
    ],
)
def test_release_and_card_parts_are_not_evaluation_only(run, text, source):
    part = find(run[3], text)
    assert part.source == source.key
    assert source.label in part.content
    assert EVALUATION.label not in part.content


def test_mixed_sections_split_release_from_evaluation(run):
    _, _, _, parser = run
    ckm = next(p for p in parser.parts if p.source == "mixed" and "Cell key method" in p.content)
    tails = next(
        p for p in parser.parts if p.source == "mixed" and "Tails of per-cell" in p.content
    )
    for section, expected in ((ckm, {"release", "evaluation"}), (tails, {"card", "evaluation"})):
        assert {p.source for p in parser.parts if p.parent is section} == expected


def test_summary_columns_are_marked(run):
    _, _, _, parser = run
    headers = [p for p in parser.parts if p.tag == "th"]
    marked = {h.content.rsplit(" ", 1)[0]: h.source for h in headers}
    for header, source in SUMMARY_COLUMNS:
        if source is not None:
            assert marked[header] == source.key
    assert marked["blocks with solvar 0"] == "release" and marked["guarantee"] == "card"
    assert marked["MAE block: P12, non-empty cells"] == "evaluation"
    assert marked["MAE of block totals (P1, populated blocks)"] == "evaluation"


def test_charts_carry_their_label_inside_the_image(run):
    _, _, report, _ = run
    for svg in report.split("<svg")[1:]:
        svg = svg[: svg.index("</svg>")]
        if "Solution variability" in svg:
            assert RELEASE.label in svg and EVALUATION.label not in svg
        else:
            assert EVALUATION.label in svg


def test_results_mark_their_evaluation_only_figures(run):
    results, written, report, _ = run
    for title, entry in written["mechanisms"].items():
        paths = evaluation_only(entry)
        assert not {"reconstruction", "specification", "budget", "settings"} & set(paths)
        for path in paths:  # every path names a figure of the entry
            node = entry
            for key in path.split("."):
                node = node[key]
        assert {"accuracy_by_level", "reidentification"} <= set(paths), title
        if "reconstruction" in entry:
            assert "reconstruction_agreement" in paths
    cellkey = evaluation_only(written["mechanisms"]["cellkey"])
    assert "risk.averaging.attack" in cellkey and "risk.repeated_queries" in cellkey
    assert EVALUATION_ONLY in written["mechanisms"]["cellkey"]["risk"]
    assert "diagnostics" in evaluation_only(written["mechanisms"]["suppress"])
    assert "by_level" not in written["mechanisms"]["suppress"]["notes"]  # not in the release
    # a mechanism's own evaluation-only figures are its diagnostics
    assert "tails" in written["mechanisms"]["geometric"]["diagnostics"]
    assert "group_accuracy" in written["mechanisms"]["safetab_h"]["diagnostics"]
    assert "diagnostics" in evaluation_only(written["mechanisms"]["geometric"])
    assert set(TRUTH_BASED_FIELDS) >= {"accuracy", "accuracy_by_level"}  # sdclab evaluate's too
    for path in ("accuracy_by_level", "risk.averaging.attack", "diagnostics"):
        assert f"<code>{path}</code>" in report  # the legend names them for results.json readers
    assert results.releases.keys() == written["mechanisms"].keys()
    # the population's figures are counted from the confidential records: every one is listed
    population = written["population"]
    assert set(population[EVALUATION_ONLY]) == set(population) - {"source", EVALUATION_ONLY}
    assert {"persons", "units", "uniques", "block_sizes"} <= set(population[EVALUATION_ONLY])
    for path in population[EVALUATION_ONLY]:
        assert f"<code>{path}</code>" in report
    assert results.tidy()[EVALUATION_ONLY].all()  # every tidy figure is one of the evaluation


def test_results_json_holds_the_typed_results_and_the_report_renders_from_them(run):
    results, written, report, _ = run
    assert results.to_dict() == written
    assert ExperimentResult.from_dict(written).to_dict() == written  # nothing is lost on disk
    axes = Experiment.model_validate(SMALL).report.axes()  # as the run rendered it
    assert render_report(ExperimentResult.from_dict(written), axes) == report
    cellkey = results["cellkey"].evaluation
    assert isinstance(cellkey.reconstruction_agreement.all.agree_agebin, float)
    with pytest.raises(KeyError, match="no release 'nope'"):
        results["nope"]


def test_the_summary_shows_each_reconstruction_against_the_population(run):
    results, _, report, _ = run
    persons = results.population.persons
    for release in results.releases.values():
        figures = release.evaluation.reconstruction
        if not isinstance(figures, NotMeasured):
            assert f"{int(figures.records):,} / {persons:,}" in report

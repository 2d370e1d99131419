"""A mechanism's diagnostics: typed values that read back their JSON form as it was written and
render their own section of the report, kind by kind."""

from __future__ import annotations

import json

import pytest

from sdclab.core.diagnostics import (
    KINDS,
    GroupAccuracy,
    HiddenCells,
    NoiseTails,
    SuppressionByLevel,
    diagnostics_json,
    read_diagnostics,
    sections,
)
from sdclab.core.figures import NotMeasured

CELLS = {
    "nonempty": 4,
    "small": 1,
    "small_share": 0.25,
    "zeroed": 1,
    "zeroed_share": 0.25,
    "null": 0,
    "null_share": 0.0,
}
EMPTY = {
    "nonempty": 0,
    "small": 0,
    "small_share": {"not_measured": "none at this level"},
    "zeroed": 0,
    "zeroed_share": {"not_measured": "none at this level"},
    "null": 0,
    "null_share": {"not_measured": "none at this level"},
}
TAIL_CLASS = {"class": "1-9", "areas": 3} | {
    f"{event}_{kind}": (0.5 if kind == "expected" else 1)
    for event in ("T_error_0.5", "broadband_0.5", "T_error_1", "broadband_1", "depopulated")
    for kind in ("expected", "sampled")
}
WRITTEN = {
    "tails": {
        "block": {
            "scale_total": 40.0,
            "tail_probability": 0.5989,
            "tail_bound": 20,
            "classes": [TAIL_CLASS],
        }
    },
    "group_accuracy": [
        {
            "level": "tract",
            "iteration_level": 2,
            "groups": 95,
            "measured_cells": 190,
            "mae_measured": 1.25,
            "mae_derived": {"not_measured": "no derived cell at this level"},
            "moe": 3,
            "within_moe": 0.99,
        }
    ],
    "by_level": {
        "block": {
            "populated_geounits": 2,
            "person_cells": CELLS,
            "redistricting_cells": EMPTY,
            "unit_cells": CELLS,
            "tables_suppressed_redistricting": {"pairs": 10, "suppressed": 5, "share": 0.5},
            "tables_suppressed_others": {
                "pairs": 0,
                "suppressed": 0,
                "share": {"not_measured": "none at this level"},
            },
            "complement_cells": 7,
        }
    },
    "suppressed_cells": {"tract": 12, "block": 40},
}


def test_every_kind_reads_back_its_json_form_byte_for_byte():
    values = read_diagnostics(WRITTEN)
    assert [type(v) for v in values] == [NoiseTails, GroupAccuracy, SuppressionByLevel, HiddenCells]
    assert json.dumps(diagnostics_json(values)) == json.dumps(WRITTEN)
    groups = values[1]
    assert isinstance(groups, GroupAccuracy)
    assert groups.rows[0].mae_derived == NotMeasured("no derived cell at this level")


def test_an_unknown_kind_or_one_kind_twice_is_refused_in_words():
    with pytest.raises(ValueError, match="unknown kind 'shares'"):
        read_diagnostics({"shares": {}})
    hidden = HiddenCells({"block": 1})
    with pytest.raises(ValueError, match="one kind given twice"):
        diagnostics_json([hidden, hidden])


def test_sections_stand_kind_by_kind_each_in_the_order_of_the_releases():
    by_release = {
        "suppress": read_diagnostics({"by_level": WRITTEN["by_level"]}),
        "geometric": read_diagnostics({"tails": WRITTEN["tails"]}),
        "cellkey": read_diagnostics({"suppressed_cells": WRITTEN["suppressed_cells"]}),
        "geometric-2": read_diagnostics({"tails": WRITTEN["tails"]}),
    }
    html = sections((t, d) for t, values in by_release.items() for d in values)
    titles = ["Tails of per-cell noise: geometric", "Tails of per-cell noise: geometric-2"]
    assert [html.index(t) for t in titles] == sorted(html.index(t) for t in titles)
    assert html.index(titles[1]) < html.index("Suppression: suppress")
    assert "cellkey" not in html  # the hidden cells have no section of their own
    assert list(KINDS) == ["tails", "group_accuracy", "by_level", "suppressed_cells"]


def test_the_suppression_section_keeps_the_redistricting_column_to_the_us_census():
    (figures,) = read_diagnostics({"by_level": WRITTEN["by_level"]})
    us, declared = figures.render("s"), figures.render("s", us_census=False)
    assert "redistricting tables suppressed" in us and "50.0% (5 of 10)" in us
    assert "redistricting" not in declared and "<th>tables suppressed</th>" in declared
    assert 'title="none at this level">n/a' in declared  # never 0 for what was not measured

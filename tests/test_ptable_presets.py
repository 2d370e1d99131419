"""The European p-table presets of the cell key method meet the designs they name.

Each preset is checked against D, V, js and pstay written out here (not read from the preset), by
derived figures of the table it builds: no noise beyond ±D, zero-mean rows of variance V (below V
only in the rows the table flags), no published count in 1..js, p(i→i) ≥ pstay where the bound
was not relaxed (docs/cellkey.md, *p-table presets*).
"""

from __future__ import annotations

import numpy as np
import pytest

from sdclab.protection.cellkey import CellKeyParameters, card, describe, published_noise
from sdclab.protection.ptable import PTable, create_ptable

DESIGNS = {
    "ess-d2": (2, 1.08, 1, None),
    "d8-v3": (8, 3.0, 0, 0.6),
}
"""preset → (D, V, js, pstay), as the ESS recommendation and the D = 8 design state them."""

TOLERANCE = 1e-6
"""How far a row's moments may be from the design: intervals are rounded to 8 decimals."""


def preset_table(name: str) -> PTable:
    """The long-format p-table a preset builds."""
    table = CellKeyParameters(ptable=name).table()
    assert isinstance(table, PTable)
    return table


def row_moments(table: PTable, i: int) -> tuple[float, float, float]:
    """(mean, variance, p(i→i)) of row i's noise."""
    v, p = table.row(i)
    mean = float((v * p).sum())
    return mean, float(((v - mean) ** 2 * p).sum()), float(p[v == 0].sum())


@pytest.mark.parametrize("name", DESIGNS)
def test_noise_stays_within_the_bound_and_reaches_it(name):
    bound = DESIGNS[name][0]
    table = preset_table(name)
    assert int(np.abs(table.v).max()) == bound
    v, p = table.row(table.i_max)  # the symmetry row spans -D..D
    assert v.tolist() == list(range(-bound, bound + 1))
    assert (p > 0).all()


@pytest.mark.parametrize("name", DESIGNS)
def test_every_row_has_mean_zero_and_variance_v_unless_flagged(name):
    variance = DESIGNS[name][1]
    table = preset_table(name)
    short = []
    for i in range(1, table.i_max + 1):
        mean, var, _ = row_moments(table, i)
        assert abs(mean) < TOLERANCE
        assert var <= variance + TOLERANCE
        if var < variance - TOLERANCE:
            short.append(i)
    assert tuple(short) == table.flagged
    assert table.i_max not in short  # the symmetry row, every large count's, is at V
    assert row_moments(table, table.i_max)[1] == pytest.approx(variance, abs=TOLERANCE)


@pytest.mark.parametrize("name", DESIGNS)
def test_no_count_in_1_to_js_is_ever_published(name):
    js = DESIGNS[name][2]
    table = preset_table(name)
    targets = table.i + table.v
    assert not ((targets >= 1) & (targets <= js)).any()
    counts = np.repeat(np.arange(0, 40), 256)
    keys = np.tile(np.arange(256), 40) / 256
    published = counts + table.noise(counts, keys)
    assert not ((published >= 1) & (published <= js)).any()
    assert (published >= 0).all()
    if js:  # the design excludes them from the candidate targets of every row
        assert table.i_max == DESIGNS[name][0] + js + 1


@pytest.mark.parametrize("name", DESIGNS)
def test_pstay_holds_where_it_was_not_relaxed(name):
    pstay = DESIGNS[name][3]
    table = preset_table(name)
    stays = {i: row_moments(table, i)[2] for i in range(1, table.i_max + 1)}
    notes = describe(table, None if pstay is None else CellKeyParameters(ptable=name).preset.pstay)
    if pstay is None:
        assert "pstay_relaxed" not in notes
        return
    relaxed = [i for i, stay in stays.items() if stay < pstay - 1e-8]
    # relaxed only in the small rows whose noise cannot reach V at p(i→i) = pstay; each such
    # row is at V after the relaxation, or flagged
    assert relaxed and max(relaxed) < table.i_max
    for i in relaxed:
        assert i in table.flagged or row_moments(table, i)[1] == pytest.approx(DESIGNS[name][1])
    assert min(stays[i] for i in stays if i not in relaxed) >= pstay - 1e-8
    assert stays[table.i_max] == pytest.approx(pstay, abs=1e-8)
    assert "pstay_relaxed" in notes


@pytest.mark.parametrize("name", DESIGNS)
def test_preset_is_the_maxent_table_of_its_settings(name):
    bound, variance, js, pstay = DESIGNS[name]
    expected = create_ptable(bound, variance, js, pstay)
    assert preset_table(name).to_frame().equals(expected.to_frame())


@pytest.mark.parametrize("name", DESIGNS)
def test_card_and_noise_publication_state_the_settings(name):
    bound, variance, js, pstay = DESIGNS[name]
    p = CellKeyParameters(ptable=name)
    stated = [c for c in card(p).caveats if c.startswith(f"ptable={name} ")]
    assert len(stated) == 1
    for part in (f"D = {bound}", f"V = {variance:g}", f"js = {js}"):
        assert part in stated[0]
    assert (f"pstay = {pstay:g}" if pstay is not None else "no pstay bound") in stated[0]
    settings = published_noise(p).parameters
    assert (settings["bound"], settings["variance"], settings["js"]) == (bound, variance, js)
    assert settings["pstay"] == pstay


@pytest.mark.parametrize("setting", [{"bound": 3}, {"variance": 2}, {"js": 2}, {"pstay": 0.5}])
def test_a_preset_refuses_settings_it_fixes(setting):
    with pytest.raises(ValueError, match="fixes bound, variance, js and pstay"):
        CellKeyParameters(ptable="ess-d2", **setting)


def test_a_preset_release_names_its_design_and_keeps_its_invariants():
    from sdclab.pipeline.api import protect, synthesize

    population = synthesize(3_000, seed=5)
    release = protect(population, "cellkey", seed=1, ptable="ess-d2", tables=["P12", "H1"])
    assert release.notes["ptable"]["preset"].startswith("ess-d2: the max-entropy p-table")
    assert release.parameters["ptable"] == "ess-d2" and not release.artifacts
    for table in release.tables.values():
        for level in table.levels:
            shown = table.matrix(level).data
            assert not (shown == 1).any()  # js = 1

"""The built-in EU 2021 census: its declaration loads, its tables are the regulations' and it is
found by name like the US census."""

from __future__ import annotations

import pickle

import numpy as np

from sdclab.censuses import census_named, is_built_in, is_us2010
from sdclab.censuses.eu2021 import census


def test_found_by_name_built_in_and_not_the_us_census() -> None:
    eu = census_named("eu2021")
    assert eu is census() and is_built_in(eu) and not is_us2010(eu)
    assert pickle.loads(pickle.dumps(eu)) is eu


def test_hypercubes_are_named_and_published_as_in_the_regulation() -> None:
    tables = census().tables
    assert tables["3.1"].title == "GEO.H × SEX × AGE.M"
    assert (tables["3.1"].top, tables["3.1"].bottom) == ("country", "lau")
    assert tables["2.1"].bottom == "nuts3" and tables["4.1"].bottom == "nuts2"
    assert tables["1.1"].bottom == "country"
    # AGE.M: 21 five-year groups; AGE.L: 6 broad groups; the 2 sexes
    assert tables["3.1"].n_cells == 2 * 21
    assert tables["2.1"].n_cells == 2 * 6 * 4 * 6


def test_the_grid_publishes_its_13_variables_on_its_own_geography() -> None:
    eu = census()
    grid = eu.tables["grid"]
    assert grid.n_cells == 13
    assert eu.table_geography["grid"] == "grid" and grid.bottom == "grid1km"
    labels = grid.cell_labels
    assert "total" in labels[0] and len(set(labels)) == 13


def test_the_age_breakdowns_nest() -> None:
    age = census().attribute("AGE")
    fine, broad = age.breakdown("M").membership, age.breakdown("L").membership
    # every five-year group lies in exactly one broad group: L = (L·Mᵀ > 0) · M
    inside = (broad.astype(int) @ fine.T.astype(int)) > 0
    assert (inside.sum(axis=0) == 1).all()
    assert np.array_equal(inside.astype(int) @ fine.astype(int), broad.astype(int))

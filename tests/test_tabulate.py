"""Tabulation: hand-computed tables, universe totals, hierarchy sums, identities between tables."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from conftest import BLOCK_A, BLOCK_B, BLOCK_C, BLOCK_D, random_population
from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.catalog import CATALOG, PERSON_TABLES
from sdclab.censuses.us2010.geography import GEOID_LENGTH, LEVELS
from sdclab.core.tables.published import PublishedTable
from sdclab.core.tables.tabulate import tabulate

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import pandas_peer  # noqa: E402


def long_form(counts):
    """A tabulation in the long form of a release's table files (level, geoid, cell, count)."""
    return PublishedTable.from_counts(counts).frame(labels=False)


def cell(name: str, label: str) -> int:
    return CATALOG[name].cell_labels.index(label)


def value(tables, name: str, level: str, geoid_code: int, label: str) -> int:
    codes, counts = tables[name].at(level)
    row = np.flatnonzero(codes == geoid_code)
    return int(counts[row[0], cell(name, label)]) if len(row) else 0


# ---------------------------------------------------------------------------------------------
# Hand-computed tables of the 10-person population (tests/conftest.py)
# ---------------------------------------------------------------------------------------------


def test_tiny_totals_at_every_level(tiny_population):
    t = tabulate(tiny_population)
    codes, p1 = t["P1"].at("block")
    assert dict(zip(codes.tolist(), p1[:, 0].tolist(), strict=True)) == {
        int(BLOCK_A): 4,
        int(BLOCK_B): 0,
        int(BLOCK_C): 2,
        int(BLOCK_D): 4,
    }
    assert t["P1"].at("block_group")[1][:, 0].tolist() == [4, 2, 4]
    assert t["P1"].at("tract")[1][:, 0].tolist() == [6, 4]
    for level in ("county", "state", "nation"):
        assert t["P1"].at(level)[1][:, 0].tolist() == [10]


def test_tiny_race_tables(tiny_population):
    t = tabulate(tiny_population)
    p6 = t["P6"].at("nation")[1][0].tolist()
    assert p6 == [6, 2, 1, 1, 0, 1]  # the white+black child counts twice
    p8 = dict(zip(CATALOG["P8"].cell_labels, t["P8"].at("nation")[1][0].tolist(), strict=True))
    assert {k: v for k, v in p8.items() if v} == {
        "white": 5,
        "black": 1,
        "aian": 1,
        "asian": 1,
        "sor": 1,
        "white+black": 1,
    }
    assert value(t, "P9", "nation", 0, "Hispanic") == 4
    assert value(t, "P9", "nation", 0, "not Hispanic / white") == 2
    assert value(t, "P7", "nation", 0, "Hispanic / white alone or in combination") == 3
    assert value(t, "P7", "nation", 0, "Hispanic / sor alone or in combination") == 1
    assert t["P10"].at("nation")[1].sum() == 9  # everyone but the 5-year-old
    assert value(t, "P11", "block", int(BLOCK_A), "not Hispanic / white") == 2


def test_tiny_age_tables(tiny_population):
    t = tabulate(tiny_population)
    a = int(BLOCK_A)
    assert value(t, "P12", "block", a, "male / 40-44") == 1
    assert value(t, "P12", "block", a, "female / 35-39") == 1
    assert value(t, "P12", "block", a, "female / 5-9") == 1
    assert value(t, "P12", "block", a, "female / 67-69") == 1
    assert t["P12"].at("block")[1][0].sum() == 4
    assert value(t, "P12H", "block", int(BLOCK_C), "male / 21") == 1
    assert value(t, "P12H", "block", int(BLOCK_D), "male / 85+") == 1
    assert value(t, "P12G", "block", a, "female / 5-9") == 1
    assert value(t, "P12I", "block", a, "male / 40-44") == 1
    assert t["P12I"].at("nation")[1].sum() == 2
    assert value(t, "P14", "block", int(BLOCK_C), "male / 19") == 1
    assert t["P14"].at("nation")[1].sum() == 3
    assert value(t, "PCT12", "tract", 1001000200, "male / 110+") == 1
    assert value(t, "PCT12H", "tract", 1001000200, "female / 20") == 1
    assert "block" not in t["PCT12"].counts


def test_tiny_unit_and_household_tables(tiny_population):
    t = tabulate(tiny_population)
    assert t["H1"].at("nation")[1].tolist() == [[5]]
    assert t["H3"].at("nation")[1].tolist() == [[4, 1]]
    assert value(t, "H3", "block", int(BLOCK_B), "vacant") == 1
    assert t["H4"].at("nation")[1].tolist() == [[1, 1, 2]]
    assert t["H13"].at("nation")[1].tolist() == [[1, 2, 1, 0, 0, 0, 0]]
    assert t["P29"].at("nation")[1].tolist() == [[4, 1, 1, 1, 1, 0, 2]]
    assert value(t, "P42", "block", int(BLOCK_D), "college or university student housing") == 2
    assert t["P42"].at("nation")[1].sum() == 2


# ---------------------------------------------------------------------------------------------
# Properties on random valid populations
# ---------------------------------------------------------------------------------------------

UNIVERSE = {
    "P10": pl.col("age") >= 18,
    "P11": pl.col("age") >= 18,
    "P14": pl.col("age") < 20,
}


def universe_total(population, name: str) -> int:
    """Records in a table's universe, counted directly (tallies count every race bit)."""
    p = population.persons
    if name in ("P6", "P7"):
        return int(schema.race_bit_count(p["race"].to_numpy()).sum())
    if name[:3] == "P12" and len(name) == 4 or name[:5] == "PCT12" and len(name) == 6:
        expr = pandas_peer.ITERATIONS[name[-1]].replace("nbits", "race_bits")
        frame = p.with_columns(race_bits=pl.Series(schema.race_bit_count(p["race"].to_numpy())))
        return len(frame.to_pandas().query(expr))
    if name in UNIVERSE:
        return p.filter(UNIVERSE[name]).height
    if name in PERSON_TABLES or name == "P29":
        return p.height
    if name == "P42":
        return p.filter(pl.col("relationship") == 5).height
    units = population.units
    housing = units.filter(pl.col("unit_type") == 0)
    if name in ("H1", "H3"):
        return housing.height
    return housing.filter(pl.col("occupied")).height  # H4, H13


@pytest.mark.parametrize("seed", [1, 2])
def test_cells_sum_to_universe_total_at_every_level(seed):
    population = random_population(seed)
    tables = tabulate(population)
    for name, counts in tables.items():
        for level in counts.table.levels:
            assert counts.at(level)[1].sum() == universe_total(population, name), (name, level)


@pytest.mark.parametrize("seed", [3, 4])
def test_parent_equals_sum_of_children(seed):
    tables = tabulate(random_population(seed))
    for name, counts in tables.items():
        long = long_form(counts)
        levels = counts.table.levels
        for parent, child in zip(levels[:-1], levels[1:], strict=True):
            digits = GEOID_LENGTH[parent]
            rolled = (
                long.filter(pl.col("level") == child)
                .with_columns(
                    geoid=pl.col("geoid").str.slice(0, digits) if digits else pl.lit("US")
                )
                .group_by("geoid", "cell")
                .agg(pl.col("count").sum())
                .sort("geoid", "cell")
            )
            stored = long.filter(pl.col("level") == parent).select("geoid", "cell", "count")
            assert rolled.equals(stored.sort("geoid", "cell")), (name, parent)


def test_p12_and_p14_pin_down_the_38_agebins(small_population):
    t = tabulate(small_population, ["P12", "P14"])
    _, p12 = t["P12"].at("block")
    _, p14 = t["P14"].at("block")
    derived = np.zeros((p12.shape[0], 2, 38), dtype=np.int64)
    for s in range(2):
        derived[:, s, :20] = p14[:, s * 20 : (s + 1) * 20]
        derived[:, s, 20] = p12[:, s * 23 + 5]  # "20"
        derived[:, s, 21] = p12[:, s * 23 + 6]  # "21"
        derived[:, s, 22:] = p12[:, s * 23 + 7 : (s + 1) * 23]
        # P14's single years must add up to P12's bins under 20
        for b, (lo, hi) in enumerate([(0, 5), (5, 10), (10, 15), (15, 18), (18, 20)]):
            assert np.array_equal(p12[:, s * 23 + b], p14[:, s * 20 + lo : s * 20 + hi].sum(1))
    p = small_population.persons
    truth = np.zeros_like(derived)
    np.add.at(
        truth,
        (
            small_population.person_block_index,
            p["sex"].to_numpy() - 1,
            schema.agebin38(p["age"].to_numpy()),
        ),
        1,
    )
    assert np.array_equal(derived, truth)


def test_p8_with_race_bits_reproduces_p6(small_population):
    t = tabulate(small_population, ["P6", "P8"])
    order = np.array(schema.race_codes_by_bit_count())
    bits = (order[:, None] >> np.arange(6)[None, :]) & 1  # P8 cell × race bit
    for level in LEVELS:
        assert np.array_equal(t["P8"].at(level)[1] @ bits, t["P6"].at(level)[1])


@pytest.mark.parametrize("seed", [5, 6])
def test_every_person_table_matches_a_pandas_group_by(seed):
    population = random_population(seed, n_units=300)
    ours = tabulate(population, PERSON_TABLES)
    peer = pandas_peer.tabulate(population.persons.to_pandas())
    assert set(peer) == set(PERSON_TABLES)
    for name in PERSON_TABLES:
        theirs = pl.from_pandas(peer[name]).with_columns(
            pl.col("cell").cast(pl.Int32), pl.col("count").cast(pl.Int64)
        )
        key = ["level", "geoid", "cell"]
        assert long_form(ours[name]).sort(key).equals(theirs.sort(key)), name


def test_long_form_omits_zeros_and_orders_levels(small_population):
    long = long_form(tabulate(small_population, ["P12"])["P12"])
    assert long["count"].min() > 0
    assert long["level"].unique(maintain_order=True).to_list() == list(LEVELS)


def reference_unit_and_hhgq_tables(population) -> dict[str, pl.DataFrame]:
    """Block-level (geoid, cell, count) of H1, H3, H4, H13, P29, P42 by plain polars group-bys."""
    units = population.units.with_columns(size=pl.Series(population.household_size))
    housing = units.filter(pl.col("unit_type") == 0)
    occupied = housing.filter(pl.col("occupied"))
    persons = population.persons.join(population.units.select("unit_id", "unit_type"), on="unit_id")
    gq = persons.filter(pl.col("relationship") == 5)
    cells = {
        "H1": housing.with_columns(cell=pl.lit(0)),
        "H3": housing.with_columns(cell=pl.when(pl.col("occupied")).then(0).otherwise(1)),
        "H4": occupied.with_columns(cell=pl.col("tenure") - 1),
        "H13": occupied.with_columns(cell=pl.min_horizontal("size", 7) - 1),
        "P29": persons.with_columns(
            cell=pl.when(pl.col("unit_type") == 0)
            .then(pl.col("relationship"))
            .when(pl.col("unit_type") <= 4)
            .then(5)
            .otherwise(6)
        ),
        "P42": gq.with_columns(cell=pl.col("unit_type") - 1),
    }
    return {
        name: frame.group_by(geoid="block", cell=pl.col("cell").cast(pl.Int32))
        .agg(count=pl.len().cast(pl.Int64))
        .sort("geoid", "cell")
        for name, frame in cells.items()
    }


@pytest.mark.parametrize("seed", [8, 9])
def test_unit_and_hhgq_tables_match_group_by(seed):
    population = random_population(seed, n_units=500)
    assert population.household_size.max() >= 7
    assert set(population.units["unit_type"].unique()) == set(range(8))
    names = ["H1", "H3", "H4", "H13", "P29", "P42"]
    ours = tabulate(population, names)
    for name, expected in reference_unit_and_hhgq_tables(population).items():
        got = long_form(ours[name]).filter(pl.col("level") == "block").drop("level")
        assert got.sort("geoid", "cell").equals(expected), name


@pytest.mark.parametrize("weights", ["counts", "count + i key", "complex"])
def test_record_histogram_is_the_coo_sum(weights):
    import scipy.sparse as sp

    from sdclab.core.tables.tabulate import record_histogram

    rng = np.random.default_rng(3)
    shape = (40, 25)
    blocks, cells = rng.integers(0, 40, 5_000), rng.integers(0, 25, 5_000)
    data = {
        "counts": None,
        "count + i key": 1 + 1j * rng.integers(0, 256, 5_000),
        "complex": rng.integers(-3, 4, 5_000) + 1j * rng.integers(0, 256, 5_000),
    }[weights]
    got = record_histogram(blocks, cells, data, shape)
    ones = np.ones(5_000, np.int64) if data is None else data
    want = sp.csr_matrix((ones, (blocks, cells)), shape=shape)
    want.sort_indices()
    assert got.dtype == want.dtype and got.indices.dtype == want.indices.dtype
    for part in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(got, part), getattr(want, part)), part


def reference_tables(records, table, weights=None):
    """A table at each of its levels the plain way: a blocks × marginal COO sum of the records,
    times the query, then each level as the blocks' aggregation into it (no shortcut)."""
    import scipy.sparse as sp

    from sdclab.core.tables.tabulate import record_cells, record_kind

    kind = record_kind(records.census, table.marginal)
    geography = records.geography_of(table)
    blocks = records.block_index(kind, geography)
    data = np.ones(len(blocks), np.int64) if weights is None else weights
    shape = (geography.n_blocks, table.marginal.size)
    histogram = sp.csr_matrix((data, (blocks, record_cells(records, table.marginal))), shape=shape)
    at_blocks = histogram @ table.marginal_query.T
    bottom = geography.levels[-1]
    return {
        level: (
            geography.blocks if level == bottom else geography.codes(level),
            (at_blocks if level == bottom else geography.aggregation(level) @ at_blocks).toarray(),
        )
        for level in table.levels
    }


@pytest.fixture(scope="module")
def european():
    """A small keyed European population in 600 LAUs, 15 NUTS 3 and 4 NUTS 2 regions: tables
    published only at coarse levels (1.1 by country, 2.1 down to NUTS 3), one down to the LAUs,
    and the grid's 13 overlapping variables (a query far narrower than its marginal)."""
    from sdclab.censuses.eu2021 import census
    from sdclab.censuses.eu2021.synth import synthesize
    from sdclab.core.census.records import encode_records

    records = encode_records(census(), synthesize(4_000, 11, laus=600), "synthetic")
    rng = np.random.default_rng(5)
    return records.with_record_keys(
        rng.integers(0, 256, records.n_persons), rng.integers(0, 256, records.n_households)
    )


EUROPEAN_TABLES = ["1.1", "2.1", "3.1", "grid", "population"]


@pytest.mark.parametrize("weights", ["counts", "packed key", "count + i key"])
def test_tables_counted_at_their_lowest_level_are_the_block_sums(european, weights):
    keys = european.record_keys("persons").astype(np.int64)
    data = {"counts": None, "packed key": 1.0 + keys * 2.0**13, "count + i key": 1 + 1j * keys}
    chosen = data[weights]
    ours = tabulate(european, EUROPEAN_TABLES, None if chosen is None else {"persons": chosen})
    for name in EUROPEAN_TABLES:
        table = european.census.table(name)
        want = reference_tables(european, table, chosen)
        assert list(ours[name].counts) == list(table.levels), name
        for level, (codes, dense) in want.items():
            got_codes, got = ours[name].at(level)
            assert np.array_equal(got_codes, codes), (name, level)
            assert got.dtype == dense.dtype and np.array_equal(got, dense), (name, level)


@pytest.mark.parametrize("key_space", [256, 250])  # (a power of two takes the low bits)
def test_keyed_tables_are_the_counts_and_key_sums_mod_k(european, key_space):
    from sdclab.protection.cellkey import keyed_tables

    cells = keyed_tables(european, EUROPEAN_TABLES, key_space)
    plain, keys = cells.tables, cells.key_tables()
    record_keys = european.record_keys("persons").astype(np.int64)
    for name in EUROPEAN_TABLES:
        table = european.census.table(name)
        counts = reference_tables(european, table)
        sums = reference_tables(european, table, record_keys)
        for level in table.levels:
            _, n = plain[name].at(level)
            _, k = keys[name].at(level)
            assert n.dtype == np.int64 and np.array_equal(n, counts[level][1]), (name, level)
            assert np.array_equal(k, sums[level][1] % key_space), (name, level)
            pattern = plain[name].counts[level][1]
            assert np.array_equal(keys[name].counts[level][1].indptr, pattern.indptr)


def test_query_classes_group_cells_counted_in_the_same_outputs():
    import scipy.sparse as sp

    from sdclab.core.tables.tabulate import query_classes

    rows = [[1, 1, 0, 0, 1, 0, 1, 0], [0, 1, 1, 0, 1, 0, 0, 0]]
    query = sp.csr_matrix(np.array(rows, dtype=np.int64))
    grouped = query_classes(query)
    assert grouped is not None
    classes, narrow = grouped
    assert np.array_equal(narrow[:, classes].toarray(), query.toarray())
    assert narrow.shape == (2, 4)  # {}, {0}, {1}, {0, 1}
    assert query_classes(sp.identity(6, dtype=np.int64, format="csr")) is None


def test_kronecker_is_scipys_product_array_for_array():
    from functools import reduce

    import scipy.sparse as sp

    from sdclab.core.tables.definition import kronecker

    rng = np.random.default_rng(4)
    for shapes in ([(3, 4)], [(2, 5), (1, 3)], [(4, 6), (3, 2), (5, 7)]):
        factors = [sp.csr_matrix((rng.random(s) < 0.4).astype(np.int8)) for s in shapes]
        want = reduce(lambda a, b: sp.kron(a, b, format="csr"), factors)
        got = kronecker(factors)
        assert got.shape == want.shape and got.dtype == want.dtype
        for part in ("indptr", "indices", "data"):
            assert np.array_equal(getattr(got, part), getattr(want, part)), (shapes, part)


def hand_built_table(race_tally: bool = False, low: int = 1):
    """A table over A (codes ``low``..``low`` + 3), B (0..2) and C (2..5) of three parts: A in
    two categories (its last code in none) × B, within C ∈ {2, 3}; the total; C with code 4 in no
    category (and, with ``race_tally``, code 2 in two)."""
    from sdclab.core.domain import Attribute, Schema
    from sdclab.core.tables.definition import Dimension, Part, TableDef

    a = Attribute("A", low, low + 3, ("a1", "a2", "a3", "a4"))
    b = Attribute("B", 0, 2, ("b0", "b1", "b2"))
    c = Attribute("C", 2, 5, ("c2", "c3", "c4", "c5"))
    schema = Schema("hand", (a, b, c))
    by_a = Dimension("A", ("x", "y"), np.array([[1, 1, 0, 0], [0, 0, 1, 0]], np.int8))
    by_b = Dimension("B", b.labels, np.eye(3, dtype=np.int8))
    by_c = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [race_tally, 0, 0, 1]], np.int8)
    parts = (
        Part((by_a, by_b), {"C": np.array([True, True, False, False])}, "in C 2-3"),
        Part(label="total"),
        Part((Dimension("C", ("p", "q", "r"), by_c),), label="by C"),
    )
    return TableDef("hand", "hand-built", "persons", schema, parts, "top", "unit", ("top", "unit"))


@pytest.mark.parametrize("weights", ["counts", "signed reals", "integers", "count + i key"])
@pytest.mark.parametrize("n_units", [1, 7])
def test_a_table_counted_from_its_codes_is_its_query_of_the_histogram(weights, n_units):
    from sdclab.core.tables.tabulate import coded_histogram, record_histogram

    table = hand_built_table()
    assert table.coding is not None and [p.drops for p in table.coding] == [True, False, True]
    rng = np.random.default_rng(8)
    n = 3_000
    columns = {a.name: rng.integers(a.low, a.high + 1, n) for a in table.schema.attributes}
    units = rng.integers(0, n_units, n)
    data = {
        "counts": None,
        "signed reals": rng.normal(size=n),
        "integers": rng.integers(-4, 5, n),
        "count + i key": 1 + 1j * rng.integers(0, 256, n),
    }[weights]
    got = coded_histogram(units, n_units, table.coding, columns, data)
    cells = table.marginal.cell_index(columns)
    want = record_histogram(units, cells, data, (n_units, table.marginal.size))
    want = want @ table.marginal_query.T
    assert got.shape == want.shape == (n_units, 2 * 3 + 1 + 3)
    assert np.allclose(got.toarray(), want.toarray(), rtol=0, atol=1e-9)


def test_tables_whose_codes_count_twice_or_below_zero_are_counted_by_their_query():
    assert hand_built_table(race_tally=True).coding is None
    assert hand_built_table(low=-1).coding is None
    assert hand_built_table(low=0).coding is not None


@pytest.mark.parametrize("census", ["us2010", "eu2021"])
def test_every_built_in_table_counted_from_its_codes_equals_its_query(census, european):
    """Each built-in table with a coding whose marginal query fits, counted from its codes and
    then by that query (the coding set aside): the same counts and signed weight sums at every
    level."""
    population = european if census == "eu2021" else random_population(5, 1_500)
    every = population.census.select(None)
    assert sum(t.coding is None for t in every) <= 2  # (the US race tallies)
    tables = [t for t in every if t.marginal.size <= 2_000_000]
    coded = [t for t in tables if t.coding is not None]
    assert len(coded) >= 20
    names = [t.name for t in tables]
    rng = np.random.default_rng(2)
    signed = {k: rng.normal(size=population.n_records(k)) for k in ("persons", "households")}
    for weights in (None, signed):
        direct = tabulate(population, names, weights)
        for table in coded:
            table.__dict__["coding"] = None  # (the cached coding set aside)
        try:
            by_query = tabulate(population, names, weights)
        finally:
            for table in coded:
                del table.__dict__["coding"]
        for table in tables:
            for level in table.levels:
                _, got = direct[table.name].at(level)
                _, want = by_query[table.name].at(level)
                assert np.allclose(got, want, rtol=0, atol=1e-9), (table.name, level)


def coded_against_query(table, columns, units, n_units, numbering=None):
    """(counted from the codes, counted by the marginal query) of ``table``'s records."""
    from sdclab.core.tables.tabulate import coded_histogram, record_histogram

    assert table.coding is not None
    got = coded_histogram(units, n_units, table.coding, columns, None, None, numbering)
    cells = table.marginal.cell_index(columns)
    want = record_histogram(units, cells, None, (n_units, table.marginal.size))
    return got.toarray(), (want @ table.marginal_query.T).toarray()


def test_an_empty_category_changes_the_digits_tables_share():
    """Two tables alike but for an empty category of their first dimension number their records
    with different radices: counted one after the other in one tabulation's numbering, each
    is its own query's count."""
    from sdclab.core.domain import Attribute, Schema
    from sdclab.core.tables.definition import Dimension, Part, TableDef
    from sdclab.core.tables.tabulate import Numbering

    a, b = Attribute("A", 0, 2, ("a", "b", "c")), Attribute("B", 0, 1, ("x", "y"))
    schema = Schema("two", (a, b))
    by_b = Dimension("B", b.labels, np.eye(2, dtype=np.int8))

    def table(rows):
        first = Dimension("A", tuple(f"k{i}" for i in range(len(rows))), np.array(rows, np.int8))
        return TableDef("t", "t", "persons", schema, (Part((first, by_b)),), "u", "u", ("u",))

    short, padded = table([[1, 1, 0], [0, 0, 1]]), table([[1, 1, 0], [0, 0, 1], [0, 0, 0]])
    assert short.coding[0].digits[0] != padded.coding[0].digits[0]
    rng = np.random.default_rng(1)
    columns = {"A": rng.integers(0, 3, 500), "B": rng.integers(0, 2, 500)}
    units = rng.integers(0, 4, 500)
    shared = ("units", Numbering())
    for t in (short, padded):
        got, want = coded_against_query(t, columns, units, 4, shared)
        assert np.array_equal(got, want)


def test_a_wide_part_with_codes_in_no_category_counts_in_64_bits():
    """A part of 1 × 46 × 1007 categories whose records may lie outside every one: the most
    negative number (−width · (46 · 1007 + 1007 + 1)) exceeds int32, so the part is numbered in
    int64 and its dropped records stay dropped."""
    from sdclab.core.domain import Attribute, Schema
    from sdclab.core.tables.definition import Dimension, Part, TableDef

    sizes = {"A": (2, 1), "B": (47, 46), "C": (1008, 1007)}
    attributes, dimensions = [], []
    for name, (codes, kept) in sizes.items():
        attributes.append(Attribute(name, 0, codes - 1, tuple(map(str, range(codes)))))
        membership = np.eye(kept, codes, dtype=np.int8)  # (the last codes in no category)
        dimensions.append(Dimension(name, tuple(map(str, range(kept))), membership))
    schema = Schema("wide", tuple(attributes))
    table = TableDef("w", "w", "persons", schema, (Part(tuple(dimensions)),), "u", "u", ("u",))
    assert table.coding[0].reach >= 2**31 > table.coding[0].width * (table.coding[0].width + 1)
    columns = {"A": np.array([1, 0, 0]), "B": np.array([46, 3, 46]), "C": np.array([1007, 5, 9])}
    got, want = coded_against_query(table, columns, np.zeros(3, np.int64), 1)
    assert np.array_equal(got, want) and got.sum() == 1


def test_a_dimension_of_no_category_counts_nobody():
    from sdclab.core.domain import Attribute, Schema
    from sdclab.core.tables.definition import Dimension, Part, TableDef

    a = Attribute("A", 1, 3, ("a", "b", "c"))
    schema = Schema("one", (a,))
    empty = Dimension("A", (), np.zeros((0, 3), np.int8))
    parts = (Part((empty,), label="none"), Part(label="total"))
    table = TableDef("e", "e", "persons", schema, parts, "u", "u", ("u",))
    assert table.coding is not None and table.coding[0].width == 0
    got, want = coded_against_query(table, {"A": np.array([1, 2, 3, 3])}, np.zeros(4, int), 1)
    assert got.shape == (1, 1) and np.array_equal(got, want) and got[0, 0] == 4


@pytest.mark.parametrize(
    ("table", "code_type"),
    [
        ([-1, 0, 3, 127, -128, 5], np.uint8),  # bytes.translate
        ([0, 1, 300], np.uint8),  # a value beyond a byte: np.take
        ([2, -1, 0], np.uint16),  # wider codes: np.take
        (list(range(256)), np.uint8),  # beyond int8: np.take
        ([v - 128 for v in range(256)], np.uint8),  # a whole byte's table, translated
    ],
)
def test_lookup_is_the_table_at_the_codes(table, code_type):
    from sdclab.core.tables.tabulate import lookup

    values = np.array(table, dtype=np.int16)
    codes = np.random.default_rng(5).integers(0, len(values), 10_000).astype(code_type)
    looked_up = lookup(values, codes)
    assert np.array_equal(looked_up, values[codes])
    assert looked_up.dtype.itemsize <= values.dtype.itemsize

"""Published cells and their linear relations: the numbering, the relations on exact and perturbed
tabulations, and the partitions read from the query matrices."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from conftest import random_population
from sdclab import protection
from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.catalog import CATALOG
from sdclab.censuses.us2010.geography import LEVELS
from sdclab.core.domain import Attribute as DomainAttribute
from sdclab.core.domain import Schema
from sdclab.core.tables.definition import Dimension, Part, TableDef
from sdclab.core.tables.relations import (
    PublishedCells,
    QueryRows,
    geounit_offsets,
    is_partition,
    joint_domain,
    partition,
    partitions,
    recode_partition,
    total_cells,
)
from sdclab.core.tables.tabulate import tabulate

PERSON_SCHEMA_TABLES = [t for t in CATALOG.values() if t.schema is schema.PERSON]


@pytest.fixture(scope="module")
def population():
    return random_population(5)


@pytest.fixture(scope="module")
def exact(population):
    """Every catalogue table of the population, exact."""
    return PublishedCells.from_tabulation(tabulate(population), population.geography)


def test_numbering_round_trip(population):
    names = ["P1", "P12", "PCT12", "H4", "P29"]
    counts = tabulate(population, names)
    cells = PublishedCells.from_tabulation(counts, population.geography)
    geography = population.geography
    assert len(cells) == sum(
        geography.n_units(lv) * CATALOG[n].n_cells for n in names for lv in CATALOG[n].levels
    )
    every = np.arange(len(cells))
    where = cells.locate(every)
    assert np.array_equal(cells.index(where.table, where.level, where.row, where.cell), every)
    table_names = np.array(names)[where.table]
    level_names = np.array(LEVELS)[where.level]
    assert np.array_equal(cells.index(table_names, level_names, where.row, where.cell), every)
    assert np.array_equal(where.table, cells.table)
    starts = geounit_offsets(geography)
    assert np.array_equal(cells.geounit, np.array([starts[lv] for lv in level_names]) + where.row)
    # the blocks follow the tables' order and, within a table, its levels from the nation down
    assert [(b.table.name, b.level) for b in cells.blocks] == [
        (n, lv) for n in names for lv in CATALOG[n].levels
    ]
    assert all(a.stop == b.start for a, b in zip(cells.blocks[:-1], cells.blocks[1:], strict=True))
    # every cell's value is its table's count; values_at reads the same from the sparse tables
    for n in names:
        for lv in CATALOG[n].levels:
            block = cells.block(n, lv)
            dense = counts[n].counts[lv][1].toarray()
            assert np.array_equal(cells.values[block.start : block.stop], dense.ravel())
    sample = np.random.default_rng(0).choice(len(cells), 500)
    assert np.array_equal(cells.values_at(sample), cells.values[sample])
    assert np.array_equal(
        cells.values_at(sample.reshape(50, 10)), cells.values[sample].reshape(50, 10)
    )
    assert not cells.suppressed.any()
    with pytest.raises(KeyError):
        cells.index(["PCT12"], ["block"], [0], [0])  # PCT12 stops at the tract
    with pytest.raises(IndexError):
        cells.index(["P1"], ["nation"], [0], [1])  # P1 has one cell


def test_relations_hold_exactly_on_an_exact_tabulation(exact, population):
    relations = exact.relations()
    assert len(relations) > 0
    a = relations.matrix
    assert not (a @ exact.values).any()
    assert not relations.residual(exact.values).any()
    # a release of the exact tables publishes cells that satisfy them too
    published = PublishedCells.from_release(protection.run("none", population, {}, None))
    assert not published.relations().residual(published.values).any()
    # every cell is in a geography relation (a parent once and a child once, or either)
    in_some = np.zeros(len(exact), dtype=bool)
    geo = exact.geography_relations()
    in_some[geo.whole] = True
    in_some[geo.parts.indices] = True
    assert in_some.all()


def test_relations_fail_on_a_perturbed_tabulation(exact):
    relations = exact.relations()
    a = relations.matrix.tocsc()
    for j in np.random.default_rng(1).choice(len(exact), 25, replace=False):
        x = exact.values.copy()
        x[j] += 1
        broken = np.flatnonzero(a @ x)
        touching = np.sort(a.indices[a.indptr[j] : a.indptr[j + 1]])
        assert len(broken) and np.array_equal(broken, touching), j


def test_partitions_found_equal_those_of_the_old_code():
    # ckm_risk's partitions before the shared module, every person table as target and as parts:
    # 103 (target, table) pairs, digest of each 0/1 matrix computed with the old code
    digest = hashlib.sha256()
    found = 0
    for target in PERSON_SCHEMA_TABLES:
        for name, inside in sorted(partitions(target, PERSON_SCHEMA_TABLES).items()):
            m = inside.tocsr()
            m.sort_indices()
            digest.update(
                f"{target.name}|{name}|{m.shape}|{m.indptr.tolist()}|{m.indices.tolist()}|"
                f"{m.data.tolist()};".encode()
            )
            found += 1
    assert (found, digest.hexdigest()[:16]) == (103, "b1b0d45682a781b3")


@pytest.mark.parametrize(
    "whole", ["P1", "P6", "P12", "P8", pytest.param("PCT12B", marks=pytest.mark.slow)]
)
def test_partitions_against_the_definition(whole):
    """Cell j of ``whole`` is partitioned by a table whose cells are disjoint when those meeting
    it lie inside it and cover it, read on dense 0/1 rows."""
    target = CATALOG[whole]
    q = target.query.toarray() > 0
    found = partitions(target, PERSON_SCHEMA_TABLES)
    for table in PERSON_SCHEMA_TABLES:
        r = table.query.toarray() > 0
        expected = np.zeros((table.n_cells, target.n_cells), dtype=bool)
        if r.sum(axis=0).max() <= 1:
            for j in range(target.n_cells):
                meets = (r & q[j]).any(axis=1)
                inside = meets & ~(r & ~q[j]).any(axis=1)
                if q[j].any() and (meets == inside).all() and (r[inside].sum(axis=0) == q[j]).all():
                    expected[:, j] = inside
        got = found[table.name].toarray() > 0 if table.name in found else np.zeros_like(expected)
        assert np.array_equal(got, expected), (whole, table.name)


def test_margins_across_schemas_and_the_totals():
    # P29 (persons by relationship × unit type) counts the same persons as P1
    assert is_partition(CATALOG["P29"]) and not is_partition(CATALOG["P42"])
    assert total_cells(CATALOG["P1"]).tolist() == [True]
    assert partition(CATALOG["P1"], CATALOG["P29"]).toarray().ravel().tolist() == [1] * 7
    assert not partition(CATALOG["H1"], CATALOG["P29"]).nnz  # units are other records
    assert partition(CATALOG["P1"], CATALOG["P6"]) is None  # race tallies overlap


def test_the_totals_relations_are_the_margins_of_the_partitioning_tables(exact):
    totals = exact.partition_relations("totals")
    where = exact.locate(totals.whole)
    # P1 is the only table counting every record (H1 counts housing units, not facilities)
    assert {exact.names[t] for t in np.unique(where.table)} == {"P1"}
    first_part = totals.parts.indices[totals.parts.indptr[:-1]]
    parts = {
        (exact.names[w], exact.names[p])
        for w, p in zip(where.table, exact.locate(first_part).table, strict=True)
    }
    assert {p for _, p in parts} == {"P8", "P9", "P12", "PCT12", "P29"}
    assert not totals.residual(exact.values).any()


def test_the_two_child_tuples_are_geography_relations(exact):
    every = exact.geography_relations()
    pairs = exact.geography_relations(children=2)
    two = every.select(every.n_parts == 2)
    assert len(pairs) and np.array_equal(pairs.whole, two.whole)
    assert (pairs.parts != two.parts).nnz == 0
    members = pairs.members()
    assert members.shape == (len(pairs), 3)
    values = exact.values[members]
    assert np.array_equal(values[:, 0] + values[:, 1], values[:, 2])
    where = exact.locate(members)
    assert (where.table[:, :2] == where.table[:, [2]]).all()  # one table, one cell
    assert (where.cell[:, :2] == where.cell[:, [2]]).all()
    assert (where.level[:, :2] == where.level[:, [2]] + 1).all()  # the next level down


def test_cells_of_a_release_carry_its_suppressed_cells(population):
    release = protection.run("suppress", population, {}, None)
    cells = PublishedCells.from_release(release)
    assert cells.suppressed.any()
    for block in cells.blocks:
        published = release.tables[block.table.name]
        mask = published.suppressed(block.level).toarray().ravel()
        assert np.array_equal(cells.suppressed[block.start : block.stop], mask)
        assert np.array_equal(
            cells.values[block.start : block.stop], published.matrix(block.level).toarray().ravel()
        )
    assert not cells.values[cells.suppressed].any()  # a suppressed cell's value is 0


def _cube(name: str, schema, dimensions) -> TableDef:
    """A one-part table of ``dimensions`` over ``schema`` at one level."""
    return TableDef(name, name, "persons", schema, (Part(tuple(dimensions)),), "a", "a", ("a",))


def _recode(attribute: str, groups: list[list[int]], size: int) -> Dimension:
    membership = np.zeros((len(groups), size), dtype=np.int8)
    for k, codes in enumerate(groups):
        membership[k, codes] = 1
    return Dimension(attribute, tuple(f"{attribute}{k}" for k in range(len(groups))), membership)


def test_recodes_relate_attribute_by_attribute_as_over_their_joint_domain() -> None:
    """Tables of recodes on different schemas: the partitions read per attribute are those read
    over the joint domain, where categories nest, straddle, or an attribute is crossed by one
    table only (the fast path must find neither more nor fewer)."""
    age, sex, geo = (
        DomainAttribute(n, 0, s - 1, tuple(map(str, range(s))))
        for n, s in (("age", 6), ("sex", 2), ("origin", 3))
    )
    one, two = Schema("age×sex", (age, sex)), Schema("age×sex×origin", (age, sex, geo))
    total = _cube("total", one, [])
    broad = _cube(
        "broad", one, [_recode("sex", [[0], [1]], 2), _recode("age", [[0, 1, 2], [3, 4, 5]], 6)]
    )
    fine = _cube(
        "fine",
        two,
        [
            _recode("age", [[0, 1], [2], [3, 4, 5]], 6),
            _recode("sex", [[0], [1]], 2),
            _recode("origin", [[0], [1, 2]], 3),
        ],
    )
    ages = _cube("ages", one, [_recode("age", [[0, 1], [2, 3], [4, 5]], 6)])
    odd = _cube(
        "odd",
        two,
        [_recode("age", [[0, 1], [2], [3, 4], [5]], 6), _recode("origin", [[0, 1, 2]], 3)],
    )
    by_origin = _cube("by_origin", two, [_recode("origin", [[0], [1], [2]], 3)])
    # an empty category (no code) is a cell that holds no record, on either side
    empty_sex = _cube("empty_sex", one, [_recode("sex", [[0, 1], []], 2)])
    empty_age = _cube("empty_age", two, [_recode("age", [[0, 1, 2], [], [3, 4, 5]], 6)])
    tables = [total, broad, ages, fine, odd, by_origin, empty_sex, empty_age]
    found = 0
    for whole in tables:
        for parts in tables:
            fast = recode_partition(whole, parts)
            assert fast is not None
            domain = joint_domain(whole, parts)
            rows = QueryRows.of(whole) if domain is None else QueryRows.of(whole, domain)
            general = partition(rows, parts if domain is None else QueryRows.of(parts, domain))
            assert general is not None and (fast != general).nnz == 0, (whole.name, parts.name)
            found += general.nnz
    assert found > 0
    # odd's 3-4 straddles two of the age groups: only the first (0-1) is partitioned, by one
    # cell; broad crosses sex, which odd does not: none of its cells; fine nests in broad
    assert np.array_equal(np.diff(recode_partition(ages, odd).tocsc().indptr), [1, 0, 0])
    assert recode_partition(broad, odd).nnz == 0
    assert np.array_equal(np.diff(recode_partition(broad, fine).tocsc().indptr), [4, 2, 4, 2])


@pytest.mark.parametrize("which", ["eu2021", "us2010"])
def test_facts_read_off_a_tables_categories_are_those_of_its_query(which):
    """For every built-in table whose query fits (its own schema small), the sizes, totals and
    partition read off its categories (:func:`coded_facts`) equal those of its query rows, and
    a table compared with itself gives what comparing the rows gives."""
    import scipy.sparse as sp

    from sdclab.censuses.eu2021 import census as eu_census
    from sdclab.censuses.us2010 import census as us_census
    from sdclab.core.tables.relations import coded_facts, query_rows

    declared = eu_census() if which == "eu2021" else us_census()
    tables = [t for t in declared.tables.values() if t.schema.size <= 2_000_000]
    checked = 0
    for table in tables:
        facts = coded_facts(table)
        if facts is None:
            continue
        query, counted, possible = query_rows(table, None)
        size = np.asarray(query.sum(axis=1)).ravel()
        assert np.array_equal(facts[0], size), table.name
        assert facts[1] == bool(counted.max(initial=0) <= 1), table.name
        assert np.array_equal(facts[2], size == possible.sum()), table.name
        assert facts[3] == (facts[1] and bool((counted[possible] == 1).all())), table.name
        rows = QueryRows.of(table)
        overlap = (query @ query.T).toarray()
        inside = (overlap == size[:, None]) & (size[:, None] > 0)
        want = sp.csr_matrix(inside & (size > 0)[None, :], dtype=np.int64)
        assert (partition(rows, rows) != want).nnz == 0, table.name
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize("which", ["eu2021", "us2010"])
def test_the_most_cells_a_record_counts_in_is_read_off_the_query(which):
    from sdclab.censuses.eu2021 import census as eu_census
    from sdclab.censuses.us2010 import census as us_census

    declared = eu_census() if which == "eu2021" else us_census()
    tables = [t for t in declared.tables.values() if t.schema.size <= 2_000_000]
    for table in tables:
        want = int(np.asarray(table.query.sum(axis=0)).max())
        assert table.most_cells_per_record == want, table.name
    assert {t.most_cells_per_record for t in tables} > {1}  # (the grid's parts, race tallies)


@pytest.mark.parametrize("which", ["eu2021", "us2010"])
def test_a_release_checks_tables_against_the_total_as_their_queries_say(which):
    """Whether a table's cells partition, or stay within, the census's total of persons, read
    off its categories where they tell it (one coded part), equals what the two queries say
    (US P9's two parts split P1 between them)."""
    from sdclab.censuses.eu2021 import census as eu_census
    from sdclab.censuses.us2010 import census as us_census
    from sdclab.protection.checks import _over_one_domain, bounded_by, partitions

    declared = eu_census() if which == "eu2021" else us_census()
    total = declared.table("population" if which == "eu2021" else "P1")
    checked = 0
    for table in declared.tables.values():
        if table.marginal.size > 2_000_000:
            continue
        queries = _over_one_domain(table, total)
        if queries is None:
            continue
        query, total_query = queries
        within = np.asarray(total_query.sum(axis=0)).ravel() > 0
        per_record = np.asarray(query.sum(axis=0)).ravel()
        want = bool((per_record[within] == 1).all() and (per_record[~within] == 0).all())
        assert partitions(table, total) == want, table.name
        counted = np.asarray(abs(query).sum(axis=0)).ravel() > 0
        assert bounded_by(table, total) == bool(query.max() <= 1 and within[counted].all())
        checked += 1
    assert checked >= 20


def test_no_record_counts_where_a_dimension_and_the_universe_share_no_code():
    a = DomainAttribute("A", 0, 2, ("a", "b", "c"))
    dimension = Dimension("A", ("a",), np.array([[1, 0, 0]], np.int8))
    part = Part((dimension,), {"A": np.array([False, True, True])})
    table = TableDef("d", "d", "persons", Schema("a", (a,)), (part,), "u", "u", ("u",))
    assert table.coding is not None
    assert table.most_cells_per_record == int(table.query.sum(axis=0).max()) == 0

"""Code lists, recodes, domains and geography."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.geography import (
    FipsGeography,
    geoid_strings,
    levels_from,
    parse_geoids,
    truncate,
)


def test_age_recodes_cover_every_age_once():
    for recode, n in ((schema.P12_AGES, 23), (schema.AGEBIN38, 38), (schema.PCT12_AGES, 103)):
        m = recode.membership()
        assert m.shape == (n, schema.AGE_MAX + 1)
        assert (m.sum(axis=0) == 1).all()
        assert len(recode.labels) == n


def test_age_recode_edges():
    assert schema.P12_AGES.labels[:8] == [
        "0-4",
        "5-9",
        "10-14",
        "15-17",
        "18-19",
        "20",
        "21",
        "22-24",
    ]
    assert schema.P12_AGES.labels[-1] == "85+"
    assert schema.P12_AGES.of([0, 4, 5, 17, 18, 20, 21, 22, 61, 62, 85, 115]).tolist() == [
        0,
        0,
        1,
        3,
        4,
        5,
        6,
        7,
        15,
        16,
        22,
        22,
    ]
    assert schema.agebin38([0, 19, 20, 21, 22, 24, 25, 84, 85, 115]).tolist() == [
        0,
        19,
        20,
        21,
        22,
        22,
        23,
        36,
        37,
        37,
    ]
    assert schema.PCT12_AGES.of([99, 100, 104, 105, 109, 110, 115]).tolist() == [
        99,
        100,
        100,
        101,
        101,
        102,
        102,
    ]


def test_race_codes():
    order = schema.race_codes_by_bit_count()
    assert sorted(order) == list(range(1, 64))
    assert order[:6] == [1, 2, 4, 8, 16, 32]
    assert order[6] == 3 and order[-1] == 63
    assert schema.race_bit_count([1, 3, 63, 32]).tolist() == [1, 2, 6, 1]
    assert schema.race_label(33) == "white+sor"


@given(
    st.lists(
        st.tuples(st.integers(1, 2), st.integers(0, 115), st.integers(1, 63), st.integers(0, 1)),
        min_size=1,
        max_size=50,
    )
)
def test_cell_index_round_trips(records):
    sex, age, race, hisp = (np.array(c) for c in zip(*records, strict=True))
    columns = {"sex": sex, "age": age, "race": race, "hispanic": hisp}
    index = schema.PERSON.cell_index(columns)
    assert ((index >= 0) & (index < schema.PERSON.size)).all()
    decoded = schema.PERSON.decode(index)
    for name, values in columns.items():
        assert np.array_equal(decoded[name], values)


def test_domain_sizes():
    assert schema.PERSON.size == 2 * 116 * 63 * 2
    assert schema.PERSON_HHGQ.size == 48
    assert schema.UNIT.size == 8 * 2 * 4 * 8


BLOCKS = np.array([10010001001001, 10010001001002, 10010001002001, 10010002001001, 20030004001001])


def test_geography_levels_and_aggregation():
    geo = FipsGeography.from_block_codes(BLOCKS[::-1])
    assert geo.blocks.tolist() == sorted(BLOCKS.tolist())
    assert geo.summary == {
        "nation": 1,
        "state": 2,
        "county": 2,
        "tract": 3,
        "block_group": 4,
        "block": 5,
    }
    assert truncate(BLOCKS[:1], "tract").tolist() == [1001000100]
    assert geoid_strings(geo.codes("tract"), "tract").to_list() == [
        "01001000100",
        "01001000200",
        "02003000400",
    ]
    agg = geo.aggregation("tract").toarray()
    assert agg.tolist() == [[1, 1, 1, 0, 0], [0, 0, 0, 1, 0], [0, 0, 0, 0, 1]]
    assert geoid_strings(geo.codes("nation"), "nation").to_list() == ["US"]
    strings = geoid_strings(geo.codes("block_group"), "block_group")
    assert np.array_equal(parse_geoids(strings, "block_group"), geo.codes("block_group"))


def test_levels_from():
    assert levels_from("nation", "tract") == ("nation", "state", "county", "tract")
    with pytest.raises(ValueError, match="unknown geography level"):
        levels_from("nation", "village")

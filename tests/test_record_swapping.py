"""Targeted record swapping over a declared census (sdcMicro's recordSwap in the census's
terms): risk at each level of the hierarchy, the k-anonymity rule, risky households first,
similarity profiles with fallback, carried-along place attributes, refusals and seeding."""

import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sdclab import protection
from sdclab.core.census.declare import load_census
from sdclab.core.census.records import CensusRecords, read_records
from sdclab.core.errors import InputError
from sdclab.pipeline import api
from sdclab.protection.record_swapping import household_levels, pair_records, record_candidates
from sdclab.protection.swapping import swap_population
from sdclab.protection.swapping_declared import declared_settings

TOYLAND = Path(__file__).parents[1] / "examples" / "toyland"

HOUSEHOLD_ATTRIBUTES = """
[attributes.tenure]
records = "households"
codes = ["own", "rent"]

[attributes.locality]
records = "households"
codes = ["small", "large"]
"""


def declare(folder: Path, persons: pl.DataFrame | None = None) -> CensusRecords:
    """Toyland with two household attributes (tenure: the household's; locality: its place's),
    over its own persons or the ``persons`` given."""
    shutil.copytree(TOYLAND, folder)
    text = (folder / "census.toml").read_text()
    head, tail = text.split("[geographies.admin]", 1)
    (folder / "census.toml").write_text(
        head + HOUSEHOLD_ATTRIBUTES + "\n[geographies.admin]" + tail
    )
    if persons is None:
        persons = pl.read_csv(folder / "persons.csv", infer_schema=False)
        number = persons["household_id"].str.slice(1).cast(pl.Int64)
        persons = persons.with_columns(
            tenure=pl.when(number % 2 == 0).then(pl.lit("own")).otherwise(pl.lit("rent")),
            locality=pl.when(pl.col("village") < "V150")
            .then(pl.lit("small"))
            .otherwise(pl.lit("large")),
        )
    persons.write_csv(folder / "persons.csv")
    return read_records(load_census(folder / "census.toml"), folder / "persons.csv")


@pytest.fixture
def toyland(tmp_path: Path) -> CensusRecords:
    return declare(tmp_path / "toyland")


def parse(records: CensusRecords, **settings: str):
    return protection.get("swap").parse(settings, records.census)


def partners(before: CensusRecords, after: CensusRecords) -> np.ndarray:
    """partner[h]: the household whose bottom unit h now has (itself when it did not move;
    partners exchange units, so within a pair this is exact)."""
    was, now = before.block_index("households"), after.block_index("households")
    moved = np.flatnonzero(was != now)
    partner = np.arange(before.n_households)
    for h in moved:  # a test oracle over a handful of households, not the method
        candidates = moved[(was[moved] == now[h]) & (now[moved] == was[h])]
        partner[h] = candidates[0]
    return partner


def toyland_counts(persons: pl.DataFrame, level: str) -> pl.DataFrame:
    """Each household's fewest persons sharing a member's sex and age in its unit of ``level``."""
    units = pl.read_csv(TOYLAND / "units.csv")
    district = units.filter(pl.col("level") == "village").select(village="code", district="parent")
    region = units.filter(pl.col("level") == "district").select(district="code", region="parent")
    frame = persons.join(district, on="village").join(region, on="district")
    counted = frame.with_columns(n=pl.len().over(level, "sex", "age"))
    return counted.group_by("household_id").agg(fewest=pl.col("n").min()).sort("household_id")


def test_a_household_unique_in_its_region_is_at_risk_there_and_swaps_across_regions(toyland):
    persons = pl.read_csv(TOYLAND / "persons.csv", infer_schema=False)
    region = toyland_counts(persons, "region")["fewest"].to_numpy()
    village = toyland_counts(persons, "village")["fewest"].to_numpy()
    # counts only grow with the area: unique in the region means unique in the village too,
    # but not the other way round; both kinds exist in toyland
    assert ((region == 1) <= (village == 1)).all()
    unique_region = np.flatnonzero(region == 1)
    unique_village_only = np.flatnonzero((village == 1) & (region > 1))
    assert unique_region.size and unique_village_only.size
    hierarchy = parse(toyland, risk_levels="region,district,village", k_anonymity="2")
    chosen = declared_settings(hierarchy).record_swap
    assert chosen is not None
    risk, high, depth, by_level = household_levels(toyland, chosen, ("sex", "age"), 1.0)
    np.testing.assert_array_equal(high, village < 2)
    np.testing.assert_array_equal(risk, 1.0 / village)  # the largest 1 / count: the village's
    # each level's own risk, which weights the donors drawn at that level
    np.testing.assert_array_equal(by_level["region"], 1.0 / region)
    np.testing.assert_array_equal(by_level["village"], 1.0 / village)
    assert (depth[unique_region] == 0).all()  # at risk at region level: swapped across regions
    assert (depth[unique_village_only] > 0).all()
    # without region among the levels, the same household is at risk at the village only
    village_only = declared_settings(parse(toyland, risk_levels="village", k_anonymity="2"))
    assert village_only.record_swap is not None
    _, high_v, depth_v, _ = household_levels(toyland, village_only.record_swap, ("sex", "age"), 1.0)
    assert high_v[unique_region].all() and (depth_v == 2).all()
    # the swap itself: every region-unique household that moved went to the other region
    after = swap_population(toyland, hierarchy, np.random.default_rng(4)).population
    regions = toyland.geography.block_codes_at("region")
    was = regions[toyland.block_index("households")]
    now = regions[after.block_index("households")]
    home = toyland.block_index("households") != after.block_index("households")
    assert home[unique_region].any() and (was != now)[unique_region[home[unique_region]]].all()


def test_every_household_at_risk_is_swapped_before_any_other(toyland):
    params = parse(
        toyland,
        rate="0.3",
        risk_variables="country_of_birth",
        risk_levels="district,village",
        k_anonymity="3",
        matching_level="region",  # donors from a whole region: never short of them
        similar="tenure,size",
    )
    chosen = declared_settings(params)
    assert chosen.record_swap is not None

    def candidates(seed: int):
        rng = np.random.default_rng(seed)
        return record_candidates(
            toyland, chosen.record_swap, chosen.risk_variables, "region", params, rng
        )

    found = candidates(0)
    n, high = toyland.n_households, found.high
    # donors are weighted by their risk at the level crossed: the village's at the bottom, a
    # smaller one (a count over a wider area) above it
    assert len(found.donor_risk) == len(found.units) > 1
    np.testing.assert_array_equal(found.donor_risk[-1], found.risk)
    assert (found.donor_risk[0] <= found.risk).all() and (found.donor_risk[0] < found.risk).any()
    target = round(0.3 * n / 2)
    assert 0 < high.sum() < target  # every risky household fits in the pairs asked
    for seed in range(5):
        found = candidates(seed)
        initiators, donors = pair_records(found, params, np.random.default_rng(seed))
        moved = np.zeros(n, dtype=bool)
        moved[np.concatenate([initiators, donors])] = True
        assert moved[high].all()


def test_every_household_at_risk_is_swapped_even_beyond_the_rate(toyland):
    """recordSwap swaps every risky household that finds a donor; the rate does not cap them
    (11 at risk here, against round(0.05 · 117 / 2) = 3 pairs asked)."""
    params = parse(
        toyland,
        rate="0.05",
        risk_variables="country_of_birth",
        risk_levels="district,village",
        k_anonymity="3",
        matching_level="region",
        similar="tenure,size",
    )
    target = round(0.05 * toyland.n_households / 2)
    for seed in range(5):
        found = swap_population(toyland, params, np.random.default_rng(seed)).diagnostics
        assert found["high_risk_households"] > 2 * target
        assert found["high_risk_swapped"] == found["high_risk_households"]
        assert found["high_risk_without_donor"] == 0
        assert found["pairs"] > target and found["achieved_swap_rate"] > 0.05


def hand_made(tmp_path: Path, with_exact_donor: bool) -> CensusRecords:
    """One risky household (H1: the only woman of Kettle, alone, owner, small place) and donors
    in Ashby: H2 alone but renting, H3 two owners; and, if asked, H4 alone and owning."""
    rows = [
        ("P1", "H1", "V100", "2", "40", "own", "small"),
        ("P2", "H2", "V107", "1", "40", "rent", "large"),
        ("P3", "H3", "V107", "1", "40", "own", "large"),
        ("P4", "H3", "V107", "1", "41", "own", "large"),
        ("P5", "H5", "V128", "1", "41", "rent", "small"),
        ("P6", "H5", "V128", "1", "42", "rent", "small"),
    ] + ([("P7", "H4", "V135", "1", "40", "own", "large")] if with_exact_donor else [])
    columns = ["person_id", "household_id", "village", "sex", "age", "tenure", "locality"]
    frame = pl.DataFrame(rows, schema=columns, orient="row").with_columns(
        country_of_birth=pl.lit("ASI")
    )
    return declare(tmp_path / f"hand{with_exact_donor}", frame)


@pytest.mark.parametrize("with_exact_donor", [True, False])
def test_partners_agree_on_the_whole_profile_when_they_can_and_fall_back_when_not(
    tmp_path, with_exact_donor
):
    records = hand_made(tmp_path, with_exact_donor)
    settings = {
        "rate": "0.5",
        "risk_variables": "sex",
        "risk_levels": "district",
        "k_anonymity": "2",
        "similar": "size,tenure",
        "carry_along": "locality",
    }
    ids = ["H1", "H2", "H3", "H5"] + (["H4"] if with_exact_donor else [])
    number = {h: i for i, h in enumerate(sorted(ids))}
    for seed in range(10):
        swapped = swap_population(records, parse(records, **settings), np.random.default_rng(seed))
        partner = partners(records, swapped.population)
        assert swapped.diagnostics["pairs"] == 1
        # H1 at risk in its district: a donor in another district, alone; owning too if any
        expected = "H4" if with_exact_donor else "H2"
        assert partner[number["H1"]] == number[expected]
        # carried along: H1 now has its partner's place attribute, tenure is its own
        after = swapped.population.household_attributes
        before = records.household_attributes
        np.testing.assert_array_equal(after["locality"], before["locality"][partner])
        np.testing.assert_array_equal(after["tenure"], before["tenure"])


def test_carried_attributes_stay_with_the_places(toyland):
    params = parse(toyland, rate="0.4", similar="size", carry_along="locality", k_anonymity="2")
    swapped = swap_population(toyland, params, np.random.default_rng(2))
    after = swapped.population

    def by_village(records: CensusRecords, attribute: str) -> list[tuple[int, int]]:
        village = records.block_index("households").tolist()
        return sorted(zip(village, records.household_attributes[attribute].tolist(), strict=True))

    assert swapped.diagnostics["moved"] > 0
    assert by_village(after, "locality") == by_village(toyland, "locality")  # with the places
    assert by_village(after, "tenure") != by_village(toyland, "tenure")  # with the households
    release = api.protect(
        toyland, "swap", seed=2, rate="0.4", similar="size", carry_along="locality", k_anonymity="2"
    )
    assert release.parameters["carry_along"] == ["locality"]
    assert (
        release.parameters["similar"] == ["size"]
        and "matching_attributes" not in release.parameters
    )
    assert any("carried along" in c and "locality" in c for c in release.card.caveats)
    assert "households by size and by locality (every village)" in [
        i.text() for i in release.card.guarantee.invariants
    ]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"risk_levels": "region,town"},
            r"risk_levels: expected some of region, district, village, got 'town'",
        ),
        (
            {"similar": "size,colour"},
            r"similar: expected size or household attributes .*got 'colour'",
        ),
        ({"carry_along": "sex"}, r"carry_along: expected household attributes .*got 'sex'"),
        ({"k_anonymity": "0"}, r"k_anonymity"),
        ({"risk_levels": "region", "risk_level": "village"}, r"risk_levels: give risk_level or"),
        ({"similar": "size", "matching_attributes": "tenure"}, r"similar: give matching_attrib"),
    ],
)
def test_a_bad_record_swapping_setting_is_one_line_naming_it(toyland, settings, message):
    with pytest.raises(InputError, match=message) as refused:
        api.protect(toyland, "swap", seed=1, **settings)
    assert "\n" not in str(refused.value)


def test_the_record_swapping_settings_are_refused_for_the_us_census():
    swap = protection.get("swap")
    for setting in ("risk_levels", "k_anonymity", "similar", "carry_along"):
        with pytest.raises(InputError, match=rf"{setting}: a setting for a declared census"):
            swap.parse({setting: "1"})
    assert not {"risk_levels", "k_anonymity", "similar", "carry_along"} & set(
        swap.parse({}).recorded()
    )


def test_seeded_runs_are_identical_and_recorded_settings_reproduce_them(toyland):
    settings = {
        "rate": "0.3",
        "risk_levels": "region,village",
        "k_anonymity": "2",
        "similar": "size,tenure",
        "carry_along": "locality",
        "noisy_size_key": "true",
    }
    first = api.protect(toyland, "swap", seed=9, **settings)
    again = api.protect(toyland, "swap", seed=9, **settings)
    replayed = api.protect(
        toyland,
        "swap",
        seed=9,
        **{
            k: v if isinstance(v, str) else ",".join(v) if isinstance(v, list) else str(v).lower()
            for k, v in first.parameters.items()
        },
    )
    for other in (again, replayed):
        assert other.parameters == first.parameters
        for name, table in first.tables.items():
            for level in table.levels:
                assert (first.table(name).matrix(level) != other.table(name).matrix(level)).nnz == 0
    one = swap_population(toyland, parse(toyland, **settings), np.random.default_rng(9))
    two = swap_population(toyland, parse(toyland, **settings), np.random.default_rng(9))
    np.testing.assert_array_equal(
        one.population.block_index("households"), two.population.block_index("households")
    )
    assert one.diagnostics == two.diagnostics


def test_without_the_new_settings_the_declared_swap_is_unchanged(toyland):
    """The record swapping settings absent: today's draws and records (none recorded)."""
    plain = api.protect(toyland, "swap", seed=3, rate="0.2")
    assert not {"risk_levels", "k_anonymity", "similar", "carry_along"} & set(plain.parameters)
    assert declared_settings(parse(toyland, rate="0.2")).record_swap is None


def test_the_card_says_the_share_may_exceed_the_rate_and_there_is_no_formal_guarantee(toyland):
    trs = api.protect(toyland, "swap", seed=2, rate="0.05", k_anonymity="2")
    plain = api.protect(toyland, "swap", seed=2, rate="0.05")
    said = " ".join(trs.card.caveats)
    assert "may exceed the rate" in said and "every household at risk" in said
    assert "no formal (differential privacy) guarantee" in said
    assert trs.card.guarantee.measure == "none"
    assert not any("may exceed" in c for c in plain.card.caveats)
    found = swap_population(
        toyland, parse(toyland, rate="0.05", k_anonymity="2"), np.random.default_rng(2)
    )
    assert {"high_risk_swapped", "high_risk_without_donor"} <= set(found.diagnostics)
    # 95 at risk, region-unique ones among them: some find no donor across their region
    hierarchy = parse(toyland, rate="0.05", risk_levels="region,district,village", k_anonymity="2")
    fared = swap_population(toyland, hierarchy, np.random.default_rng(4)).diagnostics
    at_risk = fared["high_risk_households"]
    assert fared["high_risk_without_donor"] > 0
    assert fared["high_risk_swapped"] + fared["high_risk_without_donor"] == at_risk
    assert fared["high_risk_swapped"] == round(fared["swap_rate_high_risk"] * at_risk)
    assert "high_risk_swapped" not in trs.notes

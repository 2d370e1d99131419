"""The European synthetic population: it reads as eu2021 microdata, is reproducible, has small,
heavy-tailed areas, households whose statuses hang together and unevenly spread foreign-born."""

from __future__ import annotations

import re

import polars as pl
import pytest

from sdclab.censuses.eu2021 import census, synth
from sdclab.censuses.eu2021.synth import COLUMNS, GENERATOR_VERSION, describe, synthesize
from sdclab.censuses.eu2021.synth_traits import CAPITAL_FOREIGN_SHARE, RURAL_FOREIGN_SHARE
from sdclab.core.census.records import encode_records

NATIONAL = 300_000
"""Persons in the national-scale population the properties are checked on."""


@pytest.fixture(scope="module")
def frame() -> pl.DataFrame:
    """300,000 persons, seed 1, with their ages as numbers (column ``age``)."""
    return with_age(synthesize(NATIONAL, 1))


def with_age(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame with AGE as whole years (Y_LT1 → 0, Y_GE100 → 100)."""
    years = pl.col("AGE").str.replace("Y_LT1", "Y0").str.replace("Y_GE100", "Y100")
    return frame.with_columns(age=years.str.slice(1).cast(pl.Int64))


def test_reads_through_the_census_reader_with_its_columns(frame: pl.DataFrame) -> None:
    population = frame.drop("age")
    assert population.columns == list(COLUMNS)
    assert all(dtype == pl.String for dtype in population.dtypes)
    records = encode_records(census(), population, "synthetic")
    assert records.households is not None
    assert int(records.households.max()) + 1 == population["household_id"].n_unique()


def test_tiny_populations_are_valid_too() -> None:
    for persons, laus in ((1, None), (40, 100), (2_000, 3)):
        small = synthesize(persons, 5, laus=laus)
        assert small.height == persons
        encode_records(census(), small, "synthetic")
    assert synthesize(2_000, 5, laus=3)["lau"].n_unique() == 3


def test_same_seed_same_frame_other_seed_other_frame() -> None:
    first = synthesize(3_000, 7)
    assert first.equals(synthesize(3_000, 7))
    assert not first.equals(synthesize(3_000, 8))


def test_regions_nest_at_national_scale(frame: pl.DataFrame) -> None:
    assert frame["country"].unique().to_list() == ["XX"]
    assert 3 <= frame["nuts1"].n_unique() <= 5
    assert 10 <= frame["nuts2"].n_unique() <= 15
    assert 40 <= frame["nuts3"].n_unique() <= 60
    assert frame["lau"].n_unique() == NATIONAL // 150
    for child, parent in (("lau", "nuts3"), ("nuts3", "nuts2"), ("nuts2", "nuts1")):
        parents = frame.group_by(child).agg(pl.col(parent).n_unique())[parent]
        assert (parents == 1).all(), f"a {child} lies in two {parent} units"


def test_every_household_lives_in_one_lau_and_one_cell(frame: pl.DataFrame) -> None:
    spread = frame.group_by("household_id").agg(pl.col("lau", "grid1km").n_unique())
    assert (spread["lau"] == 1).all() and (spread["grid1km"] == 1).all()


def test_grid_codes_are_inspire_and_cells_lie_in_their_10km_square(frame: pl.DataFrame) -> None:
    cells = frame.select("grid1km", "grid10km").unique()
    assert cells["grid1km"].n_unique() == cells.height  # one 10 km square per cell
    one = re.compile(r"CRS3035RES1000mN(\d+)000E(\d+)000")
    ten = re.compile(r"CRS3035RES10000mN(\d+)0000E(\d+)0000")
    for cell, square in cells.iter_rows():
        north, east = (int(v) for v in one.fullmatch(cell).groups())
        assert ten.fullmatch(square).groups() == (str(north // 10), str(east // 10))


def test_lau_sizes_are_heavy_tailed(frame: pl.DataFrame) -> None:
    sizes = frame.group_by("lau").len()["len"]
    assert (sizes < 500).mean() >= 0.25
    assert sizes.max() >= 20 * sizes.median()


def test_cities_are_dense_and_villages_sparse(frame: pl.DataFrame) -> None:
    per_lau = frame.group_by("lau").agg(pl.len(), pl.col("grid1km").n_unique().alias("cells"))
    density = per_lau.with_columns(per_cell=pl.col("len") / pl.col("cells"))
    largest = density.sort("len", descending=True).row(0, named=True)
    assert largest["cells"] > 1 and largest["per_cell"] > 10 * density["per_cell"].median()


LOC_BANDS = [(1_000_000, "GE1000000"), (500_000, "500000-999999"), (200_000, "200000-499999"),
    (100_000, "100000-199999"), (50_000, "50000-99999"), (20_000, "20000-49999"),
    (10_000, "10000-19999"), (5_000, "5000-9999"), (2_000, "2000-4999"), (1_000, "1000-1999"),
    (500, "500-999"), (200, "200-499"), (0, "LT200")]  # fmt: skip
"""The census's locality size bands by their lower bound, largest first."""


def test_locality_size_is_the_laus_population_band(frame: pl.DataFrame) -> None:
    per_lau = frame.group_by("lau").agg(pl.len(), pl.col("LOC").unique())
    assert (per_lau["LOC"].list.len() == 1).all()
    for persons, loc in per_lau.select("len", pl.col("LOC").list.first()).iter_rows():
        assert loc == next(band for low, band in LOC_BANDS if persons >= low), (persons, loc)
    assert per_lau["LOC"].list.first().n_unique() >= 3  # from LT200 to the capital's band


PARTNER_STATUS = {
    "MAR": ({"MAR", "MAR_SS"}, {"MAR", "MAR_SS"}),
    "REG": ({"REG", "REG_SS"}, {"REG", "REG_SS"}),
    "CU": ({"CU"}, {"NM", "DIV", "WID"}),
}
"""Household status of a partner → the family statuses and legal marital statuses it allows (a
same-sex couple's marriage or registered partnership is ``_SS``)."""


def test_partners_statuses_agree(frame: pl.DataFrame) -> None:
    for hst, (fst, lms) in PARTNER_STATUS.items():
        partners = frame.filter(pl.col("HST") == hst)
        assert partners.height > 0
        assert partners["FST"].is_in(list(fst)).all() and partners["LMS"].is_in(list(lms)).all()
        assert (partners["FST"] == partners["LMS"]).all() or hst == "CU"
        per_household = partners.group_by("household_id").len()["len"]
        assert (per_household == 2).all(), f"a {hst} couple without two partners"


def test_lone_parents_children_and_others_statuses_agree(frame: pl.DataFrame) -> None:
    lone = frame.filter(pl.col("HST").is_in(["LF", "LM"]))
    assert (lone["FST"] == "LONE").all() and lone["LMS"].is_in(["NM", "DIV", "WID"]).all()
    assert ((lone["HST"] == "LM") == (lone["SEX"] == "F")).all()
    assert (lone["HST"] == "LM").mean() > 0.7
    children = frame.filter(pl.col("FST").is_in(["CHILD", "CHILD_LP"]))
    assert children["HST"].is_in(["C_LT25", "C_GE25"]).all()
    of_lone = children.join(lone.select("household_id"), on="household_id", how="semi")
    assert (of_lone["FST"] == "CHILD_LP").all()
    assert (children["FST"] == "CHILD_LP").sum() == of_lone.height
    assert ((children["HST"] == "C_LT25") == (children["age"] < 25)).all()
    assert (children["LMS"] == "NM").mean() > 0.95
    outside = frame.filter(pl.col("HST").is_in(["ALONE", "REL", "NREL", "INST", "HOMELESS"]))
    assert (outside["FST"] == "NAP").all()
    assert not outside["LMS"].is_in(["MAR", "REG", "MAR_SS", "REG_SS"]).any()
    assert (frame.filter(pl.col("FST") == "NAP").height) == outside.height


def test_institutions_hold_mostly_the_old_and_the_homeless_live_alone(frame: pl.DataFrame) -> None:
    institutional = frame.filter(pl.col("HST") == "INST")
    assert 0.003 < institutional.height / frame.height < 0.02
    assert (institutional["age"] >= 80).mean() > 0.7
    homeless = frame.filter(pl.col("HST") == "HOMELESS")
    assert homeless.height > 0 and homeless["household_id"].n_unique() == homeless.height
    members = frame.filter(pl.col("household_id").is_in(institutional["household_id"].implode()))
    assert (members["HST"] == "INST").all()


def test_children_are_16_to_45_years_younger_than_their_parent(frame: pl.DataFrame) -> None:
    """The parent: the woman of a couple with children, or the lone parent."""
    mother = (pl.col("SEX") == "F") & pl.col("FST").is_in(["MAR", "REG", "CU"])
    parents = frame.filter(mother | (pl.col("FST") == "LONE")).select(
        "household_id", parent_age="age"
    )
    children = frame.filter(pl.col("FST").is_in(["CHILD", "CHILD_LP"]))
    children = children.join(parents, on="household_id", how="left")
    assert children["parent_age"].null_count() == 0  # every child has a parent at home
    gap = children["parent_age"] - children["age"]
    assert gap.min() >= 16 and gap.max() <= 45


def test_partners_ages_are_close(frame: pl.DataFrame) -> None:
    partners = frame.filter(pl.col("FST").is_in(["MAR", "REG", "CU"]))
    spread = partners.group_by("household_id").agg(gap=pl.col("age").max() - pl.col("age").min())
    assert spread["gap"].mean() < 6 and (spread["gap"] <= 20).mean() > 0.99


def test_activity_education_and_moves_follow_age(frame: pl.DataFrame) -> None:
    age = frame["age"]
    assert ((frame["CAS"] == "MIN") == (age < 15)).all()
    assert ((frame["EDU"] == "NAP") == (age < 15)).all()
    assert ((frame["ROY"] == "NAP") == (age < 1)).all()

    def share(column: str, code: str, low: int, high: int) -> float:
        group = frame.filter(pl.col("age").is_between(low, high))
        return float((group[column] == code).mean())

    assert share("CAS", "STU", 15, 24) > 0.4
    assert share("CAS", "EMP", 25, 64) > 0.6
    assert share("CAS", "PEN", 65, 100) > 0.8
    tertiary = ["ED5", "ED6", "ED7", "ED8"]
    young = frame.filter(pl.col("age").is_between(25, 34))["EDU"].is_in(tertiary).mean()
    old = frame.filter(pl.col("age") >= 65)["EDU"].is_in(tertiary).mean()
    assert young > 1.5 * old
    moved = frame.filter(pl.col("ROY") != "NAP")["ROY"]
    assert 0.07 < moved.is_in(["WITHIN", "WITHIN_OTHER"]).mean() < 0.15
    assert 0.5 < (moved == "WITHIN").sum() / moved.is_in(["WITHIN", "WITHIN_OTHER"]).sum() < 0.7
    assert 0.003 < (moved == "ABROAD").mean() < 0.03


FOREIGN_RATIO = 10.0
"""Derived from the design: the capital region's share of foreign-origin households is
CAPITAL_FOREIGN_SHARE (0.30), a rural region's RURAL_FOREIGN_SHARE (0.005), 60 times less (the
persons' foreign-born shares are both about four fifths of these). A rural NUTS 2 region of
~20,000 persons has ~8,700 households, ~44 of foreign origin (sd ~7): its share is 0.4% ± 0.1
point, and three sds up (0.7%) the capital's ~24% is still over 30 times it. 10 leaves room."""


def test_foreign_born_share_differs_strongly_across_nuts2(frame: pl.DataFrame) -> None:
    assert CAPITAL_FOREIGN_SHARE / RURAL_FOREIGN_SHARE >= 6 * FOREIGN_RATIO
    foreign = pl.col("POB") != "NAT"
    shares = frame.group_by("nuts2").agg(foreign.mean().alias("share"))["share"]
    assert shares.max() >= FOREIGN_RATIO * shares.min()
    capital = frame.filter(pl.col("lau") == frame["lau"].mode().item())["nuts2"][0]
    by_region = frame.group_by("nuts2").agg(foreign.mean().alias("share")).sort("share")
    assert by_region["nuts2"][-1] == capital
    under_500 = pl.col("LOC").is_in(["200-499", "LT200"])
    small = frame.filter(under_500).select(foreign.mean()).item()
    large = frame.filter(~under_500).select(foreign.mean()).item()
    assert large > small


def test_birthplace_and_citizenship_hang_together(frame: pl.DataFrame) -> None:
    couples = frame.filter(pl.col("FST").is_in(["MAR", "REG", "MAR_SS", "REG_SS", "CU"]))
    same = couples.group_by("household_id").agg(pl.col("POB").n_unique() == 1)["POB"]
    assert same.mean() > 0.95
    foreign_homes = frame.filter(pl.col("POB") != "NAT")["household_id"].implode()
    children = frame.filter(
        pl.col("FST").is_in(["CHILD", "CHILD_LP"]) & pl.col("household_id").is_in(foreign_homes)
    )
    assert 0.3 < (children["POB"] == "NAT").mean() < 0.9
    natives = frame.filter(pl.col("POB") == "NAT")
    assert (natives["COC"] == "NAT").mean() > 0.97
    foreign_born = frame.filter(pl.col("POB") != "NAT")
    kept = foreign_born.filter(~pl.col("COC").is_in(["NAT", "STL"]))
    listed = pl.col("POB").is_in(census().attribute("COC").codes)  # COC.H lists no territories
    assert kept.filter(listed).select(pl.col("COC") == pl.col("POB")).to_series().all()
    others = kept.filter(~listed)["COC"].unique().to_list()
    assert set(others) <= {"OEUR", "OAFR", "OAMS", "OAMN", "OASI", "OOCE"}


def test_countries_keep_the_continents_and_every_other_draw(monkeypatch) -> None:
    """The countries come from their own stream after the continents were drawn: mapped back to
    POB.M and COC.M, the persons are those drawn without countries, every other column alike."""
    with_countries = synthesize(5_000, 3)
    monkeypatch.setattr(synth, "countries", lambda rng, unit, pob, coc: (pob, coc))
    continents_only = synthesize(5_000, 3)
    for name in ("POB", "COC"):
        attribute = census().attribute(name)
        m = attribute.breakdown("M")
        of = {attribute.codes[j]: m.codes[k] for k, j in zip(*m.membership.nonzero(), strict=True)}
        assert with_countries[name].n_unique() > 20  # countries, not just continents
        assert with_countries[name].replace_strict(of).equals(continents_only[name])
    assert with_countries.drop("POB", "COC").equals(continents_only.drop("POB", "COC"))
    foreign = with_countries.filter(pl.col("POB") != "NAT")
    shared = foreign.group_by("household_id").agg(pl.col("POB").n_unique() == 1)["POB"]
    assert shared.mean() > 0.95  # a household's foreign-born share their country of birth


def test_describe_reports_the_frames_figures(frame: pl.DataFrame) -> None:
    population = frame.drop("age")
    summary = describe(population)
    sizes = population.group_by("lau").len()["len"]
    foreign = population.group_by("nuts2").agg((pl.col("POB") != "NAT").mean())["POB"]
    private = population.filter(~pl.col("HST").is_in(["INST", "HOMELESS"]))
    household_sizes = private.group_by("household_id").len()["len"]
    assert summary["generator_version"] == GENERATOR_VERSION
    assert summary["persons"] == NATIONAL
    assert summary["households"] == population["household_id"].n_unique()
    assert summary["laus"] == sizes.len() == NATIONAL // 150
    assert summary["share_of_laus_under_500"] == pytest.approx((sizes < 500).mean(), abs=1e-4)
    assert summary["largest_lau"]["persons"] == sizes.max()
    assert summary["grid1km_cells"] == population["grid1km"].n_unique()
    assert summary["foreign_born_share"] == pytest.approx(
        (population["POB"] != "NAT").mean(), abs=1e-4
    )
    assert summary["foreign_born_share_by_nuts2"]["min"] == pytest.approx(foreign.min(), abs=1e-4)
    assert summary["foreign_born_share_by_nuts2"]["max"] == pytest.approx(foreign.max(), abs=1e-4)
    reported = summary["private_household_sizes"]
    assert reported["1"] == (household_sizes == 1).sum()
    assert reported["6+"] == (household_sizes >= 6).sum()
    assert sum(reported.values()) == household_sizes.len()
    assert 2.1 < summary["mean_private_household_size"] < 2.5
    assert summary["homeless_persons"] == (population["HST"] == "HOMELESS").sum()

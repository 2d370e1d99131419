"""The built-in EU 2021 census: its declaration loads, its tables are the regulations' and it is
found by name like the US census."""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp

from sdclab import protection
from sdclab.censuses import census_named, is_built_in, is_us2010
from sdclab.censuses.eu2021 import census
from sdclab.censuses.eu2021.synth import synthesize
from sdclab.cli.experiments import release_lines
from sdclab.core.census.records import CensusRecords, encode_records
from sdclab.core.errors import InputError
from sdclab.core.tables.tabulate import tabulate
from sdclab.pipeline import api
from sdclab.pipeline.experiment.demo import DEMOS
from sdclab.pipeline.results import ExperimentResult
from sdclab.protection.geometric import allocation
from sdclab.release import read_release, write_release


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
    # AGE.M: 21 five-year groups; AGE.L: 6 broad groups; LMS.L: 5; FST.H: 8; the 2 sexes
    assert tables["3.1"].n_cells == 2 * 21
    assert tables["2.1"].n_cells == 2 * 6 * 5 * 8


REGULATION_IS_DETAILED = {"AGE": "H", "CAS": "H", "COC": "H", "POB": "H"}
"""Attributes whose own code list is the regulation's breakdown named here; HST, FST and LMS have
finer code lists and declare H, M and L apart; SEX, EDU, ROY and LOC have one breakdown."""
GEO_BOTTOM = {"N": "country", "L": "nuts2", "M": "nuts3", "H": "lau"}


def test_every_hypercube_crosses_the_breakdowns_its_title_names() -> None:
    from sdclab.core.census.model import DETAILED

    eu = census()
    hypercubes = [table for name, table in eu.tables.items() if name[0].isdigit()]
    assert len(hypercubes) == 49
    for table in hypercubes:
        geo, *references = table.title.split(" × ")
        assert (table.top, table.bottom) == ("country", GEO_BOTTOM[geo.removeprefix("GEO.")])
        (part,) = table.parts
        assert not part.universe, table.name  # groups 1 to 32 count the total population
        attributes = [reference.partition(".")[0] for reference in references]
        assert [dim.attribute for dim in part.dimensions] == attributes, table.name
        for dim, reference in zip(part.dimensions, references, strict=True):
            attribute, _, level = reference.partition(".")
            own = not level or REGULATION_IS_DETAILED.get(attribute) == level
            assert own or level in eu.attribute(attribute).breakdowns, (table.name, reference)
            expected = eu.attribute(attribute).breakdown(DETAILED if own else level)
            assert np.array_equal(dim.membership, expected.membership), (table.name, reference)


CONTINENTS = ("EU", "EUR", "AFR", "AMS", "AMN", "ASI", "OCE")


@pytest.mark.parametrize("attribute", ["COC", "POB"])
def test_every_country_lies_in_one_continent_and_the_continents_are_kept(attribute: str) -> None:
    declared = census().attribute(attribute)
    continents = declared.breakdown("M")
    assert continents.codes == ("NAT", *CONTINENTS, *declared.codes[-2:])
    assert continents.is_partition  # every detailed code counts in exactly one category
    regulation = dict(zip(declared.codes, _regulation_codes(attribute), strict=True))
    for k, continent in enumerate(continents.codes):
        row = continents.membership[k]
        members = [c for c, inside in zip(declared.codes, row, strict=True) if inside]
        if continent in CONTINENTS:  # the countries numbered under the continent's own code
            group = {"EU": "2.1."}.get(continent, f"2.2.{CONTINENTS.index(continent)}.")
            assert len(members) > 1 and all(regulation[c].startswith(group) for c in members)
        else:
            assert members == [continent]


def _regulation_codes(attribute: str) -> list[str]:
    codes = Path(__file__).parents[1] / "src/sdclab/censuses/eu2021/codes"
    return pl.read_csv(codes / f"{attribute.lower()}.csv")["regulation"].to_list()


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


# --- a release of the EU census: the grid beside the administrative units --------------------


@pytest.fixture(scope="module")
def records() -> CensusRecords:
    return encode_records(census(), synthesize(3_000, 7), "synthetic")


def test_a_release_carries_the_grid_and_reads_back(records: CensusRecords, tmp_path) -> None:
    release = api.protect(records, "none")
    grid_cells = pl.DataFrame(synthesize(3_000, 7))["grid1km"].n_unique()
    assert release.geography.n_units("grid1km") == grid_cells
    assert release.geography.n_units("lau") == records.geography.n_units("lau")
    write_release(release, tmp_path / "rel")
    assert (tmp_path / "rel" / "geography-grid.parquet").is_file()
    again = read_release(tmp_path / "rel", protection.MECHANISMS)
    exact = tabulate(records, ["grid"])["grid"]
    read = again.table("grid")
    assert (read.matrix("grid1km") != sp.csr_matrix(exact.at("grid1km")[1])).nnz == 0
    # each grid cell's 13 variables: total = males + females = the three age groups
    dense = read.dense("grid1km")
    assert (dense[:, 0] == dense[:, 1] + dense[:, 2]).all()
    assert (dense[:, 0] == dense[:, 3:6].sum(axis=1)).all()
    assert dense[:, 0].sum() == records.n_persons


def test_geometric_noise_splits_epsilon_over_the_levels_of_both_geographies() -> None:
    params = protection.get("geometric").parse({"epsilon": 6}, census())
    shares = allocation(params)  # type: ignore[arg-type]
    levels = {level for _, level in shares}
    assert levels == {"country", "nuts1", "nuts2", "nuts3", "lau", "grid1km"}
    for level in levels:  # every level gets ε / 6, whatever the number of its tables
        assert sum(e for (_, lv), e in shares.items() if lv == level) == 1


def test_suppression_refuses_a_table_off_the_total_tables_geography() -> None:
    with pytest.raises(InputError, match="table grid lies on geography grid"):
        protection.get("suppress").parse({}, census())


def test_a_topdown_workload_decides_its_histogram() -> None:
    from sdclab.protection.topdown import declared_product

    product = declared_product(census(), ("population", "3.1", "3.2", "3.3"))
    assert product.schema.names == ("SEX", "AGE", "HST", "LMS")
    assert product.schema.size == 2 * 101 * 13 * 8
    with pytest.raises(InputError, match="give it the tables to measure"):
        declared_product(census())


def test_targeted_record_swapping_then_the_cell_key_method_is_one_mechanism(
    records: CensusRecords,
) -> None:
    trs = "rate=0.05;k_anonymity=3;risk_levels=nuts3,lau;similar=size"
    chain = api.protect(records, "cellkey", seed=4, ptable="ess-d2", swap="swap", swap_settings=trs)
    alone = api.protect(records, "cellkey", seed=4, ptable="ess-d2")
    assert chain.notes["swap"]["settings"] == trs
    assert trs in chain.card.guarantee.text() or any(trs in c for c in chain.card.caveats)
    assert not chain.card.guarantee.is_formal and alone.card.guarantee.is_formal
    lau = ("3.1", "3.2", "3.3")
    differ = [n for n in lau if (chain.table(n).matrix("lau") != alone.table(n).matrix("lau")).nnz]
    assert differ  # the swap moved persons between LAUs before the noise
    with pytest.raises(InputError, match="swap_settings: mechanism swap, parameter k_anonymity"):
        api.protect(records, "cellkey", seed=4, swap="swap", swap_settings="k_anonymity=x")
    with pytest.raises(InputError, match="give the swap that runs first"):
        api.protect(records, "cellkey", seed=4, swap_settings="rate=0.05")


# --- a European office's own file, from the command line -------------------------------------

EXAMPLE = Path(__file__).parent.parent / "examples" / "europe"


def test_an_offices_own_file_goes_through_every_step_from_the_command_line(tmp_path) -> None:
    for name in ("experiment.toml", "persons.csv", "mapping.toml"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    done = subprocess.run(
        [sys.executable, "-m", "sdclab", "run", "experiment.toml", "--out", "out"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "out" / "results.json").read_text())
    assert written["census"]["name"] == "eu2021"
    assert written["population"]["persons"] == 1_500
    releases = written["mechanisms"]
    assert list(releases) == ["none", "trs", "cellkey-ess", "trs-cellkey"]
    for entry in releases.values():
        assert set(entry["accuracy"]) == set(census().tables)
        reid = entry["reidentification"]["census"]
        assert reid["reconstruction"]["all"]["attacker_records"] == 1_500
        grid = entry["target_reidentification"]["grid"]["census"]
        assert grid["baselines"] == "computed" and "random_draw" in grid
    report = (tmp_path / "out" / "report.html").read_text()
    assert "eu2021" in report and "confirmed: target" in report
    assert "further target grid" in report
    lines = release_lines(ExperimentResult.from_dict(written))
    assert "3.1 lau" in lines[0] and "beyond the best baseline (census)" in lines[0]
    points = releases["none"]["reidentification"]["census"]["headline"]["all"]["points"]
    assert lines[1].split()[-2:] == [f"{points:+.1f}", "pp"]


def test_the_demo_knows_the_european_study() -> None:
    eu = DEMOS["eu2021"]()
    assert eu.census is census() and eu.population.synthetic_census
    labels = [m.label or m.name for m in eu.mechanisms]
    assert {"trs", "cellkey-ess", "trs-cellkey", "geometric", "suppress"} <= set(labels)
    done = subprocess.run(
        [sys.executable, "-m", "sdclab", "demo", "--census", "fr1999", "--out", "x"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "--census: expected one of us2010, eu2021" in done.stderr


def test_a_bad_code_in_an_offices_file_is_one_line_naming_row_and_column(tmp_path) -> None:
    lines = (EXAMPLE / "persons.csv").read_text().splitlines()
    header = lines[0].split(";")
    row = lines[3].split(";")
    row[header.index("geschlecht")] = "9"
    lines[3] = ";".join(row)
    (tmp_path / "persons.csv").write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sdclab",
            "tabulate",
            "persons.csv",
            "--census",
            "eu2021",
            "--mapping",
            str(EXAMPLE / "mapping.toml"),
            "--out",
            "tables",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "row 4, column 'geschlecht' (SEX): unknown code '9'" in done.stderr
    assert done.stderr.count("\n") <= 1 and not (tmp_path / "tables").exists()


def test_a_risk_variable_may_be_a_breakdown_counted_in_its_categories(
    records: CensusRecords,
) -> None:
    from sdclab.core.randomness import make_rng
    from sdclab.protection import swapping

    def at_risk(variables: str) -> int:
        settings = {"rate": "0.05", "risk_levels": "nuts3,lau", "k_anonymity": "3"}
        params = protection.get("swap").parse({**settings, "risk_variables": variables}, census())
        swapped = swapping.swap_population(records, params, make_rng(1))
        return int(swapped.diagnostics["high_risk_households"])

    # five-year groups are seen more often than single years, broad groups still more
    assert at_risk("SEX,AGE") > at_risk("SEX,AGE.M") > at_risk("SEX,AGE.L") > 0
    with pytest.raises(InputError, match="AGE has no breakdown 'x' that is a recode"):
        protection.get("swap").parse({"risk_variables": "AGE.x", "k_anonymity": "3"}, census())
    with pytest.raises(InputError, match="no breakdown 'employed' that is a recode"):
        protection.get("swap").parse({"risk_variables": "CAS.employed"}, census())


def test_the_cell_key_method_is_evaluated_and_analysed_over_both_geographies(
    records: CensusRecords,
) -> None:
    with_threshold = api.protect(records, "cellkey", seed=1, ptable="ess-d2", threshold=2)
    evaluation = api.evaluate(with_threshold, records)
    assert "grid" in evaluation.accuracy and "grid1km" in evaluation.accuracy["grid"]
    trs = "rate=0.05;risk_variables=SEX,AGE.L,POB.L;risk_levels=nuts3,lau;k_anonymity=3"
    chain = api.protect(records, "cellkey", seed=1, ptable="ess-d2", swap="swap", swap_settings=trs)
    risk = protection.get("cellkey").risk_analysis(chain, records)  # type: ignore[misc]
    assert "grid" not in risk["scope"]["tuple_tables"]
    assert risk["repeated_queries"].startswith("n/a: a table builder would answer from the swapped")

"""Targeted household swapping over a declared census: its settings in the census's terms, the
invariants its card claims (checked on the swapped records), the share it swaps, its refusals,
the cell key method's swap chain, and its release from the command line to the evaluation."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sdclab import protection
from sdclab.core.census.declare import load_census
from sdclab.core.census.records import CensusRecords, read_records
from sdclab.core.errors import InputError
from sdclab.pipeline import api
from sdclab.protection.swapping import swap_population

TOYLAND = Path(__file__).parents[1] / "examples" / "toyland"


def toyland_records(folder: Path) -> CensusRecords:
    return read_records(load_census(folder / "census.toml"), folder / "persons.csv")


def same_cells(release, exact, name: str, level: str) -> bool:
    return (release.table(name).matrix(level) != exact.table(name).matrix(level)).nnz == 0


def households_by(records: CensusRecords, level: str, *attributes: str) -> list[tuple]:
    """Each household's (area at ``level``, size, attributes…), sorted: a multiset per area."""
    area = records.geography.block_codes_at(level)[records.block_index("households")]
    size = np.bincount(records.households)
    columns = [records.household_attributes[a] for a in attributes]
    return sorted(zip(area.tolist(), size.tolist(), *(c.tolist() for c in columns), strict=True))


def test_targeted_swapping_keeps_what_its_card_claims_over_a_declared_census(with_tenure):
    records = toyland_records(with_tenure)
    exact = api.tabulate(records)
    settings = {"rate": "0.2", "risk_variables": "sex"}
    release = api.protect(records, "swap", seed=3, **settings)
    # the settings are the census's: defaults recorded, no US constant among them
    recorded = release.parameters
    assert recorded["risk_variables"] == ["sex"] and recorded["risk_level"] == "village"
    assert recorded["matching_level"] == "district" and recorded["matching_attributes"] == [
        "tenure"
    ]
    assert not {"same_tract", "same_county", "same_state", "risk_keys"} & set(recorded)
    card = release.card
    assert card.guarantee.measure == "none" and "data-dependent" in card.guarantee.reason
    assert [i.text() for i in card.guarantee.invariants] == [
        "every statistic (households move within it) (each district and above)",
        "the number of households (every village)",
        "households by size and by tenure (every village)",
    ]
    assert "target swap rate 0.2" in card.caveats[0]
    # the release's tables: every statistic of each district and above exact, households by
    # tenure in every village exact, the villages' person tables not
    assert set(release.tables) == set(exact.tables)
    for name, table in release.tables.items():
        for level in set(table.levels) & {"region", "district"}:
            assert same_cells(release, exact, name, level), (name, level)
    assert same_cells(release, exact, "T5", "village")
    assert not same_cells(release, exact, "T3", "village")
    # the swapped records behind them (the same draws: the release's seed)
    params = protection.get("swap").parse(settings, records.census)
    swapped = swap_population(records, params, np.random.default_rng(3))
    assert same_cells(release, api.tabulate(swapped.population), "T3", "village")
    after = swapped.population
    np.testing.assert_array_equal(after.households, records.households)  # moved whole
    for name, values in records.attributes.items():
        np.testing.assert_array_equal(after.attributes[name], values)
    assert households_by(after, "village", "tenure") == households_by(records, "village", "tenure")
    before_village, after_village = (
        records.block_index("households"),
        after.block_index("households"),
    )
    moved = before_village != after_village
    district = records.geography.block_codes_at("district")
    np.testing.assert_array_equal(district[before_village], district[after_village])
    # the share asked: round(0.2 x 117 / 2) pairs, both partners counted; what moved is a
    # diagnostic of the swap (evaluation only), never in the release
    n = records.n_households
    assert int(moved.sum()) == 2 * round(0.2 * n / 2) == swapped.diagnostics["moved"]
    assert release.notes == {"households": n, "target_swap_rate": 0.2}
    # the risky households go first: every household with a member unique by sex in their
    # village (risk 1) moved
    persons = pl.read_csv(with_tenure / "persons.csv", infer_schema=False)
    alone = persons.with_columns(n=pl.len().over("village", "sex")).filter(pl.col("n") == 1)
    risky = np.unique(alone["household_id"].to_list())
    ids = np.unique(persons["household_id"].to_numpy())  # household numbers: the keys' order
    assert len(risky) > 0 and moved[np.searchsorted(ids, risky)].all()


def test_the_presets_and_a_noised_size_key_over_a_declared_census(with_tenure):
    records = toyland_records(with_tenure)
    exact = api.tabulate(records)
    low = api.protect(records, "swap-low", seed=1)
    assert (low.parameters["rate"], low.parameters["matching_level"]) == ("0.05", "district")
    high = api.protect(records, "swap-high", seed=1)
    assert high.parameters["rate"] == "0.5" and high.parameters["noisy_size_key"] is True
    assert high.parameters["matching_level"] == "region"  # the widest: the top level
    texts = [i.text() for i in high.card.guarantee.invariants]
    assert "every statistic (households move within it) (each region and above)" in texts
    assert "households by tenure (every village)" in texts  # not by size: the key is noised
    assert not any("size" in t for t in texts)
    for name in high.tables:
        assert same_cells(high, exact, name, "region"), name
    assert same_cells(high, exact, "T5", "village")  # tenure matched, households by village
    assert not same_cells(high, exact, "T2", "district")  # districts exchange households
    params = protection.get("swap-high").parse({}, records.census)
    swapped = swap_population(records, params, np.random.default_rng(1))
    assert swapped.diagnostics["achieved_swap_rate"] == 2 * round(0.5 * 117 / 2) / 117
    assert households_by(swapped.population, "village") != households_by(records, "village")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"risk_variables": "sex,colour"}, r"risk_variables: expected attributes of census "),
        ({"risk_level": "town"}, r"risk_level: expected one of region, district, village, got "),
        ({"matching_level": "village"}, r"matching_level: expected one of region, district \("),
        ({"matching_attributes": "sex"}, r"matching_attributes: expected household attributes "),
        ({"same_tract": "1"}, r"same_tract: a setting for the US 2010 census only"),
    ],
)
def test_a_bad_swap_setting_is_one_line_naming_it(with_tenure, settings, message):
    records = toyland_records(with_tenure)
    for name in ("swap", "swap-low", "swap-high"):
        with pytest.raises(InputError, match=message) as refused:
            api.protect(records, name, seed=1, **settings)
        assert "\n" not in str(refused.value)
    wrong = next(iter(settings.values())).split(",")[-1]
    if "same_tract" not in settings:
        assert f"got '{wrong}'" in str(refused.value)


def test_a_declared_setting_is_refused_for_the_us_census_and_never_recorded():
    swap = protection.get("swap")
    assert not {"risk_variables", "matching_level"} & set(swap.parse({}).recorded())
    with pytest.raises(InputError, match=r"matching_level: a setting for a declared census"):
        swap.parse({"matching_level": "tract"})


def test_a_census_without_households_has_none_to_swap(tmp_path):
    folder = tmp_path / "toyland"
    shutil.copytree(TOYLAND, folder)
    text = (folder / "census.toml").read_text()
    (folder / "census.toml").write_text(text.replace('household_key = "household_id"', ""))
    records = toyland_records(folder)
    with pytest.raises(InputError, match=r"census toyland names no household key, so no house"):
        api.protect(records, "swap", seed=1)


def test_the_cell_key_method_swaps_a_declared_census_first(with_tenure):
    from sdclab.core.randomness import make_rng
    from sdclab.protection.cellkey import assign_record_keys

    records = toyland_records(with_tenure)
    chained = api.protect(records, "cellkey", seed=5, swap="swap-low")
    assert chained.notes["swap"] == {"mechanism": "swap-low", "target_swap_rate": 0.05}
    assert chained.card.guarantee.measure == "none"
    entry = protection.get("cellkey")
    assert entry.check(chained, entry.parse(chained.parameters, records.census)) is None
    # the chain's draws: record keys first, then the swap (keys travel with their records);
    # its tables are the cell key method's over the swapped records with those keys
    rng = make_rng(5)
    keyed = assign_record_keys(records, 256, rng)
    params = protection.get("swap-low").parse({}, records.census)
    swapped = swap_population(keyed, params, rng).population
    assert swapped.record_key is keyed.record_key
    unswapped = api.protect(keyed, "cellkey", seed=1)  # stored keys: nothing drawn
    rekeyed = api.protect(swapped, "cellkey", seed=1)
    assert not same_cells(rekeyed, unswapped, "T3", "village")  # the swap shows there
    for name, table in chained.tables.items():
        for level in table.levels:
            assert same_cells(chained, rekeyed, name, level), (name, level)
            if level != "village":  # within districts: the same contributors, keys and noise
                assert same_cells(chained, unswapped, name, level), (name, level)


def test_a_declared_swap_goes_from_the_command_line_to_its_evaluation(tmp_path):
    def sdclab(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sdclab", *args], capture_output=True, text=True, cwd=tmp_path
        )

    persons, census = str(TOYLAND / "persons.csv"), str(TOYLAND / "census.toml")
    protect = ["protect", persons, "--census", census, "-m", "swap", "--seed", "3"]
    done = sdclab(*protect, "--set", "rate=0.2", "--set", "risk_variables=sex,age", "--out", "rel")
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "rel" / "release.json").read_text())
    assert written["mechanism"] == "swap" and written["parameters"]["matching_level"] == "district"
    release = api.read_release(tmp_path / "rel")
    exact = api.tabulate(toyland_records(TOYLAND))
    assert same_cells(release, exact, "T2", "district")
    assert not same_cells(release, exact, "T3", "village")
    steps = [
        ("reconstruct", "rel", "--out", "recon", "--node-limit", "2000", "--workers", "1"),
        ("reidentify", "recon", "--truth", persons, "--attacker", "census", "--out", "reid"),
        (
            "evaluate",
            "rel",
            "--truth",
            persons,
            "--recon",
            "recon",
            "--reid",
            "reid",
            "--out",
            "ev",
        ),
    ]
    for step in steps:
        done = sdclab(*step, *(("--out", "ev") if step[0] == "evaluate" else ()))
        assert done.returncode == 0, done.stderr
    metrics = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert set(metrics["accuracy"]) == {"T1", "T2", "T3", "T4"}
    assert metrics["reconstruction_agreement"]["all"]["persons"] == 297
    assert metrics["reidentification"]["census"]["reconstruction"]["all"]["attacker_records"] > 0
    # a level the census does not have: one line naming it, nothing written
    bad = sdclab(*protect, "--set", "matching_level=tract", "--out", "bad")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "matching_level: expected one of region, district" in bad.stderr
    assert "'tract'" in bad.stderr and not (tmp_path / "bad").exists()

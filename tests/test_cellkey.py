"""The cell key method: keys, SPSN, the p-table's noise on every table, the ONS function."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdclab import protection
from sdclab.censuses.us2010.population.io import read_population, write_population
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.core.diagnostics import HiddenCells
from sdclab.core.errors import InputError
from sdclab.core.tables.published import PublishedTable
from sdclab.core.tables.tabulate import tabulate
from sdclab.protection.cellkey import assign_record_keys, keyed_tables, perturb
from sdclab.protection.cellkey_ons import ons_perturbed_table
from sdclab.protection.households import swap_units
from sdclab.protection.ptable import create_ptable, ons_10_5_ptable, write_ptable


@pytest.fixture(scope="module")
def keyed():
    population = synthesize(3_000, seed=11)
    return assign_record_keys(population, 256, np.random.default_rng(3))


def published(release, name):
    return release.tables[name].frame(labels=False).sort("level", "geoid", "cell")


def joined_with_truth(population, release, name):
    exact = PublishedTable.from_counts(tabulate(population, [name])[name])
    truth = exact.frame(labels=False).rename({"count": "true"})
    return truth.join(
        release.tables[name].frame(labels=False),
        on=["level", "geoid", "cell"],
        how="full",
        coalesce=True,
    )


# ---------------------------------------------------------------------------------------------
# ONS: the cases of cell-key-perturbation 3.1.0's documentation and tests (docs/cellkey.md)
# ---------------------------------------------------------------------------------------------


def test_ons_keys_from_ons_id():
    data = pl.DataFrame({"ons_id": [5000, 4097, 12], "area": ["x", "x", "y"]})
    out = ons_perturbed_table(data, ons_10_5_ptable(), ["area"], [], None, threshold=0)
    assert out["ckey"].to_list() == [137, 12]  # 5000 mod 4096 = 904, 4097 → 1; 905 mod 256
    assert out["pre_sdc_count"].to_list() == [2, 1]


def test_ons_small_cells_zero_cells_and_threshold():
    data = pl.DataFrame(
        {
            "rk": list(range(200, 215)),
            "g": ["a"] * 12 + ["b"] * 3,
            "v": [1] * 12 + [2] * 3,
        }
    )
    out = ons_perturbed_table(data, ons_10_5_ptable(), ["g"], ["v"], "rk", threshold=10)
    rows = {(r["g"], r["v"]): r for r in out.iter_rows(named=True)}
    assert [k for k in rows] == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    assert (rows["a", 1]["pre_sdc_count"], rows["a", 1]["ckey"]) == (12, 2466 % 256)
    assert (rows["a", 1]["pvalue"], rows["a", 1]["count"]) == (-2, 10)
    assert (rows["b", 2]["pre_sdc_count"], rows["b", 2]["ckey"], rows["b", 2]["pvalue"]) == (
        3,
        127,
        -3,
    )
    assert rows["b", 2]["count"] is None
    for zero in (("a", 2), ("b", 1)):
        assert (rows[zero]["ckey"], rows[zero]["pvalue"], rows[zero]["count"]) == (0, 0, None)


def test_ons_function_refuses_unkeyed_data_and_incomplete_categories():
    data = pl.DataFrame({"rk": [1, None, None], "g": ["a", "b", "c"]})
    with pytest.raises(InputError, match="at least half"):
        ons_perturbed_table(data, ons_10_5_ptable(), ["g"], [], "rk")
    data = pl.DataFrame({"rk": [1, 2, 3], "g": ["a", None, "c"]})
    with pytest.raises(InputError, match="missing values in g"):
        ons_perturbed_table(data, ons_10_5_ptable(), ["g"], [], "rk")


def ons_reference(data: pl.DataFrame, geog, tab_vars, record_key, threshold=10):
    """The ONS package itself on the same data (pandas)."""
    from cell_key_perturbation.create_perturbed_table import create_perturbed_table
    from cell_key_perturbation.utils.generate_test_ptable import generate_ptable_10_5_rule

    out = create_perturbed_table(
        data.to_pandas(),
        generate_ptable_10_5_rule(),
        geog,
        tab_vars,
        record_key,
        threshold=threshold,
    )
    return pl.from_pandas(out)


def test_ons_fixture_vectors_and_package_agree(capsys):
    from cell_key_perturbation.utils.generate_test_data import generate_test_data

    data = pl.from_pandas(generate_test_data(1000, 255))
    ours = ons_perturbed_table(data, ons_10_5_ptable(), ["var1"], ["var5", "var8"], "record_key")
    assert ours.height == 200
    assert ours["pre_sdc_count"].sum() == 1000
    assert ours["count"].null_count() == 168
    assert (ours["ckey"].sum(), ours["pvalue"].sum(), ours["count"].sum()) == (23318, -590, 410)
    assert ours.head(5).select("pre_sdc_count", "ckey", "pvalue", "count").rows() == [
        (10, 173, 0, 10),
        (10, 88, 0, 10),
        (7, 180, -7, None),
        (14, 66, 1, 15),
        (11, 190, -1, 10),
    ]
    by_area = ons_perturbed_table(data, ons_10_5_ptable(), ["var1"], [], "record_key")
    assert by_area["pre_sdc_count"].to_list() == [227, 373, 189, 109, 102]
    assert by_area["ckey"].to_list() == [254, 212, 26, 40, 2]
    assert by_area["count"].to_list() == [225, 375, 190, 110, 100]
    by_sex = ons_perturbed_table(data, ons_10_5_ptable(), [], ["var2"], "record_key")
    assert by_sex.select("pre_sdc_count", "ckey", "count").rows() == [
        (480, 252, 480),
        (520, 26, 520),
    ]
    assert sum(by_sex["ckey"]) % 256 == data["record_key"].sum() % 256 == 22  # additivity
    reference = ons_reference(data, ["var1"], ["var5", "var8"], "record_key")
    columns = ["var1", "var5", "var8", "pre_sdc_count", "ckey", "pcv", "pvalue", "count"]
    assert ours.select(columns).rows() == reference.select(columns).rows()
    capsys.readouterr()


def test_ons_function_equals_the_package_on_large_counts(capsys):
    rng = np.random.default_rng(8)
    n = 40_000
    data = pl.DataFrame(
        {
            "record_key": rng.integers(0, 256, n),
            "area": rng.choice(["E1", "E2", "W1"], n, p=[0.6, 0.3, 0.1]),
            "age": rng.integers(0, 6, n),
        }
    )
    for threshold in (0, 10):
        ours = ons_perturbed_table(
            data, ons_10_5_ptable(), ["area"], ["age"], "record_key", threshold=threshold
        )
        theirs = ons_reference(data, ["area"], ["age"], "record_key", threshold)
        assert (ours["pre_sdc_count"] > 750).any()  # pcv wraps
        assert ours.rows() == theirs.select(ours.columns).rows()
    capsys.readouterr()


# ---------------------------------------------------------------------------------------------
# The mechanism on every table
# ---------------------------------------------------------------------------------------------


def test_identical_contributors_get_identical_noise_across_tables_and_levels(keyed):
    from sdclab.censuses.us2010.catalog import CATALOG

    release = protection.run("cellkey", keyed, {"ptable": "maxent", "bound": 3, "variance": 2}, 1)
    nation = published(release, "P8").filter(pl.col("level") == "nation")
    state = published(release, "P8").filter(pl.col("level") == "state")
    assert nation["count"].to_list() == state["count"].to_list()  # one state: same persons
    # P14 (sex × single age under 20) and PCT12 (sex × single age) share 40 cells down to tracts
    p14 = published(release, "P14")
    pct12 = published(release, "PCT12")
    labels = CATALOG["PCT12"].cell_labels
    mapping = {i: labels.index(label) for i, label in enumerate(CATALOG["P14"].cell_labels)}
    assert len(mapping) == 40
    joined = p14.with_columns(pl.col("cell").replace_strict(mapping).alias("cell")).join(
        pct12, on=["level", "geoid", "cell"], suffix="_pct12"
    )
    assert joined.height > 150  # 40 cells at 5 levels, a few empty
    assert (joined["count"] == joined["count_pct12"]).all()


def test_zeros_stay_zero_noise_is_bounded_and_never_lands_in_one_to_js(keyed):
    release = protection.run(
        "cellkey", keyed, {"ptable": "maxent", "bound": 5, "variance": 3, "js": 2}, 1
    )
    for name in ("P1", "P8", "P12", "PCT12", "H1", "P42"):
        frame = joined_with_truth(keyed, release, name)
        assert frame.filter(pl.col("true").is_null()).height == 0, "a true zero was published"
        frame = frame.with_columns(pl.col("count").fill_null(0))
        noise = frame["count"] - frame["true"]
        assert noise.abs().max() <= 5
        assert (frame["count"] >= 0).all()
        assert not frame["count"].is_between(1, 2).any()


def test_mean_noise_is_zero_and_variance_is_v_on_disjoint_cells():
    population = synthesize(60_000, seed=4)
    population = assign_record_keys(population, 2**20, np.random.default_rng(9))
    table = create_ptable(5, 3.0)
    cells = keyed_tables(population, ["P12"], 2**20)
    out = perturb(cells, table, 2**20, 0)
    # one partition table at one level: disjoint contributor sets, so independent cell keys
    true = cells.tables["P12"].counts["block"][1]
    published_ = out["P12"].counts["block"][1].tocsr()
    big = true.data >= table.i_max
    rows = np.repeat(np.arange(true.shape[0]), np.diff(true.indptr))
    noise = np.asarray(published_[rows[big], true.indices[big]]).ravel() - true.data[big]
    n = len(noise)
    assert n > 2_000
    v, p = table.row(table.i_max)
    variance = float((v**2 * p).sum())
    fourth = float((v**4 * p).sum())
    assert abs(variance - 3.0) < 1e-6
    assert abs(noise.mean()) < 4 * np.sqrt(variance / n)
    assert abs(noise.var() - variance) < 4 * np.sqrt((fourth - variance**2) / n)


def test_unit_tables_use_unit_keys_and_keys_travel_with_swapped_households(keyed):
    units = keyed.units
    housing = np.flatnonzero(units["unit_type"].to_numpy() == 0)[:4]
    moved = swap_units(keyed, housing, housing[[1, 2, 3, 0]])
    assert moved.persons["record_key"].to_list() == keyed.persons["record_key"].to_list()
    before = keyed.units["record_key"].to_numpy()
    after = moved.units["record_key"].to_numpy()
    assert after[housing[[1, 2, 3, 0]]].tolist() == before[housing].tolist()


def test_ons_release_agrees_with_the_ons_function_on_one_table(keyed):
    release = protection.run("cellkey", keyed, {"threshold": 10}, 1)
    persons = keyed.persons.with_columns(
        county=pl.col("block").str.slice(0, 5), sex_code=pl.col("sex")
    )
    ons = ons_perturbed_table(persons, ons_10_5_ptable(), ["county"], [], "record_key")
    p1 = release.tables["P1"].frame("county").sort("geoid")
    expected = ons.filter(pl.col("count").is_not_null()).sort("county")
    assert p1["count"].to_list() == expected["count"].to_list()
    assert p1["geoid"].to_list() == expected["county"].to_list()
    # non-empty cells below the threshold: counted at evaluation, not in the release's notes
    assert "suppressed_cells" not in release.notes
    diagnostics = protection.get("cellkey").diagnostics
    assert diagnostics is not None
    (hidden,) = diagnostics(keyed, release)
    assert isinstance(hidden, HiddenCells) and hidden.levels["block"] > 0


def test_stored_keys_are_used_and_survive_a_round_trip(keyed, tmp_path):
    write_population(keyed, tmp_path / "pop")
    again = read_population(tmp_path / "pop")
    assert again.persons["record_key"].to_list() == keyed.persons["record_key"].to_list()
    a = protection.run("cellkey", keyed, {}, 1)
    b = protection.run("cellkey", again, {}, 2)  # a different seed: the keys decide
    assert a.tables["P12"].equals(b.tables["P12"])
    assert a.notes["record_keys"] == "the population's record_key column"


def test_out_of_range_stored_keys_and_bad_parameters_are_input_errors(keyed, tmp_path):
    with pytest.raises(InputError, match="record_key goes up to"):
        protection.run(
            "cellkey", keyed, {"ptable": "maxent", "bound": 2, "variance": 1, "key_space": 16}, 1
        )
    with pytest.raises(InputError, match="needs bound and variance"):
        protection.get("cellkey").parse({"ptable": "maxent"})
    write_ptable(ons_10_5_ptable(), tmp_path / "ons.csv")
    with pytest.raises(InputError, match="key_space 100 differs"):
        protection.run("cellkey", keyed, {"ptable": str(tmp_path / "ons.csv"), "key_space": 100}, 1)
    with pytest.raises(InputError, match="not ons-10-5, maxent, ess-d2, d8-v3 or an existing file"):
        protection.run("cellkey", keyed, {"ptable": "nowhere.csv"}, 1)


def test_swap_then_cell_key(keyed):
    release = protection.run("cellkey", keyed, {"swap": "swap"}, 1)
    assert release.notes["swap"]["mechanism"] == "swap"
    assert set(release.tables) >= {"P1", "P12", "H1"}


def test_card_reports_delta_per_pair_and_the_floor():
    entry = protection.get("cellkey")
    card = entry.guarantee(entry.parse({"ptable": "maxent", "bound": 2, "variance": "0.9"}))
    assert card.guarantee.measure == "approximate" and card.guarantee.scope == "cell"
    rows = {r["epsilon"]: r for r in card.allocation}
    assert rows[1.0]["delta, symmetry pair"] == pytest.approx(0.155245, abs=1e-6)
    assert "per released cell" in " ".join(card.caveats)
    assert card.guarantee.loss.delta == pytest.approx(rows[1.0]["delta (max over pairs)"])


@pytest.mark.parametrize("path", ["complex weights", "two tabulations"])
def test_packed_path_agrees_with_the_slower_ones(keyed, monkeypatch, path):
    import sdclab.protection.cellkey_perturb as cellkey_perturb

    fast = keyed_tables(keyed, ["P1", "P6", "P12", "H1"], 256)
    records = keyed.n_records("persons") + keyed.n_records("households")
    largest = max(int(keyed.record_keys(kind).sum()) for kind in ("persons", "households"))
    # just enough for the complex weights' sums, far too little for the packed ones
    exact = largest + records + 1 if path == "complex weights" else 1
    monkeypatch.setattr(cellkey_perturb, "EXACT_FLOAT", exact)
    slow = keyed_tables(keyed, ["P1", "P6", "P12", "H1"], 256)
    assert np.array_equal(fast.counts, slow.counts) and np.array_equal(fast.keys, slow.keys)
    pairs = ((fast.tables, slow.tables), (fast.key_tables(), slow.key_tables()))
    for a, b in pairs:
        for name in a:
            for level, (_, matrix) in a[name].counts.items():
                other = b[name].counts[level][1]
                assert (matrix != other).nnz == 0
                assert matrix.dtype == other.dtype == np.int64


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(1, 300),
    seed=st.integers(0, 2**32 - 1),
    threshold=st.sampled_from([0, 10]),
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
)
def test_ons_function_equals_the_package_on_random_tables(n, seed, threshold, shape, capsys):
    rng = np.random.default_rng(seed)
    columns = {f"v{i}": rng.integers(0, size, n) for i, size in enumerate(shape)}
    data = pl.DataFrame({"record_key": rng.integers(0, 256, n), **columns})
    geog, tab_vars = list(columns)[:1], list(columns)[1:]
    ours = ons_perturbed_table(
        data, ons_10_5_ptable(), geog, tab_vars, "record_key", threshold=threshold
    )
    theirs = ons_reference(data, geog, tab_vars, "record_key", threshold)
    assert ours.rows() == theirs.select(ours.columns).rows()
    capsys.readouterr()


def test_record_keys_of_one_table_alone_are_refused_not_replaced():
    population = synthesize(600, seed=12)
    keyed = assign_record_keys(population, 256, np.random.default_rng(3))
    with pytest.raises(InputError, match="persons: has a record_key column but units has none"):
        type(population)(persons=keyed.persons, units=population.units)  # validated when made
    # the mechanism's own guard, for a population made without the contract's check
    only_persons = type(population)._trusted(persons=keyed.persons, units=population.units)
    with pytest.raises(InputError, match="persons have a record_key column but the units"):
        protection.run("cellkey", only_persons, {}, 1)
    drawn = protection.run("cellkey", only_persons, {"keys": "drawn"}, 1)  # keys not used
    assert drawn.notes["record_keys"].startswith("drawn uniformly")


def test_the_noise_grid_is_the_p_tables_lookup_for_every_count_and_key():
    from sdclab.protection.cellkey import CellKeyParameters
    from sdclab.protection.cellkey_perturb import cell_noise, noise_grid

    table = CellKeyParameters(ptable="ess-d2").table()
    rng = np.random.default_rng(8)
    counts = np.concatenate([np.arange(60), rng.integers(0, 10_000, 2_000)])
    keys = rng.integers(0, 256, len(counts))
    grid = noise_grid(table, 256)
    assert grid is not None
    looked_up = grid[np.minimum(counts, len(grid) - 1), keys]
    assert np.array_equal(looked_up, cell_noise(table, counts, keys, 256))
    assert noise_grid(ons_10_5_ptable(), 256) is None


@pytest.mark.parametrize(
    ("published", "what"),
    [
        ([3, 5, -1, 4], "a negative published count"),
        ([3, 5, 9, 4], "noise beyond the bound 2"),
        ([3, 5, 1, 4], "a published count in 1..1"),
    ],
)
def test_a_broken_invariant_names_its_table_and_level(published, what):
    from sdclab.protection.cellkey_perturb import check_published

    places = [("1.1", "country"), ("3.1", "lau")]
    true = np.array([3, 5, 1, 4])
    with pytest.raises(AssertionError, match=f"^3.1 at lau: {re.escape(what)}$"):
        check_published(places, [2, 2], true, np.array(published), bound=2, js=1)
    check_published(places, [2, 2], true, np.array([3, 5, 0, 4]), bound=2, js=1)

"""The vulnerable group is fixed for a population: the same persons for every release, defined
from the exact release's reconstruction, and scored with its own headline risk."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from conftest import frame
from sdclab.attacks.linkage import (
    ATTACKER_PRESETS,
    attacker_file,
    breakdowns,
    vulnerable_persons,
)
from sdclab.attacks.reconstruction_files import write_reconstruction
from sdclab.censuses.us2010.population import PERSONS, UNITS, Population
from sdclab.censuses.us2010.population.io import write_population
from sdclab.cli import app
from sdclab.core.errors import InputError
from sdclab.pipeline import api
from sdclab.release import write_release


def test_vulnerable_persons_by_hand():
    """Block A: four white persons and one Black woman of 30 (nonmodal, unique on her sex and
    agebin); block B the same, but its reconstruction is not proven unique; block C: a Black man
    of 40 among white men of his agebin (nonmodal, not unique)."""
    a, b, c = "010010001001001", "010010001001002", "010010001001003"
    people = [
        *[(a, 1, 50 + i, 1) for i in range(4)],
        (a, 2, 30, 2),
        *[(b, 1, 50 + i, 1) for i in range(4)],
        (b, 2, 30, 2),
        (c, 1, 40, 2),
        (c, 1, 41, 1),
        (c, 1, 42, 1),
    ]
    persons = [(i, i, blk, 0, sex, age, race, 0) for i, (blk, sex, age, race) in enumerate(people)]
    units = [(i, blk, 0, True, 1) for i, (blk, *_) in enumerate(people)]
    truth = Population(persons=frame(persons, PERSONS), units=frame(units, UNITS))
    solvar = pl.DataFrame(
        {
            "block": [a, b, c],
            "persons": [5, 5, 3],
            "solvar": [0.0, 0.0, 0.0],
            "status": ["Optimal", "Time limit reached", "Optimal"],
        }
    )
    assert vulnerable_persons(truth, solvar).tolist() == [4]


def test_the_group_holds_data_defined_persons_counted_among_everyone():
    """The paper's group is of data-defined persons, while a block's mode and a person's
    uniqueness count every person, as the tables do. Block A: a Black woman of 30 among white
    men, not data-defined (out). Block B: a Black woman of 30 beside a white woman of 31 who is
    not data-defined (same agebin: not unique, out). Block C: a white woman of 40 among three
    Asian persons who are not data-defined (the mode is Asian: she is nonmodal and unique, in)."""
    a, b, c = "010010001001001", "010010001001002", "010010001001003"
    people = [
        *[(a, 1, 50 + i, 1, True) for i in range(4)],
        (a, 2, 30, 2, False),
        *[(b, 1, 50 + i, 1, True) for i in range(3)],
        (b, 2, 30, 2, True),
        (b, 2, 31, 1, False),
        *[(c, 1, 60 + i, 8, False) for i in range(3)],
        (c, 2, 40, 1, True),
    ]
    persons = frame(
        [(i, i, blk, 0, sex, age, race, 0) for i, (blk, sex, age, race, _) in enumerate(people)],
        PERSONS,
    ).with_columns(data_defined=pl.Series([p[-1] for p in people]))
    units = [(i, blk, 0, True, 1) for i, (blk, *_) in enumerate(people)]
    truth = Population(persons=persons, units=frame(units, UNITS))
    solvar = pl.DataFrame(
        {"block": [a, b, c], "persons": [5, 5, 4], "solvar": [0.0] * 3, "status": ["Optimal"] * 3}
    )
    assert vulnerable_persons(truth, solvar).tolist() == [13]
    # the census's own file holds the data-defined persons only, and so do the groups
    attacker = attacker_file(truth, ATTACKER_PRESETS["census"], np.random.default_rng(0))
    assert sorted(attacker["id"].to_list()) == [i for i, p in enumerate(people) if p[-1]]
    masks = breakdowns(attacker, truth, solvar, np.array([13])).masks
    nonmodal = set(attacker["id"].to_numpy()[masks["nonmodal"]].tolist())
    assert nonmodal == {8, 13}  # block B's Black woman and block C's white woman
    assert attacker["id"].to_numpy()[masks["vulnerable"]].tolist() == [13]


@pytest.fixture(scope="module")
def attacked():
    truth = api.synthesize(1_500, seed=8)
    group = api.vulnerable_group(truth, workers=1)
    releases = {
        name: api.protect(truth, name, seed=3, **settings)
        for name, settings in {"geometric": {"epsilon": "4"}, "swap-high": {}}.items()
    }
    recons = {
        name: api.reconstruct(release, workers=1, variability=True, draws=0)
        for name, release in releases.items()
    }
    return truth, group, releases, recons


def test_two_releases_score_the_same_vulnerable_persons(attacked):
    truth, group, _, recons = attacked
    assert group.size > 0 and group.solvar0_blocks > 0
    attacker = attacker_file(truth, ATTACKER_PRESETS["census"], np.random.default_rng(1))
    masks = {
        name: breakdowns(attacker, truth, recon.solvar, group.persons).masks
        for name, recon in recons.items()
    }
    first, second = masks.values()
    assert first["vulnerable"].any()
    assert np.array_equal(first["vulnerable"], second["vulnerable"])
    chosen = set(attacker["id"].to_numpy()[first["vulnerable"]].tolist())
    assert chosen <= set(group.persons.tolist())
    # each release's own solvar-0 group differs from release to release: why it is secondary
    assert not np.array_equal(first["nonmodal_unique_solvar0"], second["nonmodal_unique_solvar0"])


def test_reidentify_gives_the_vulnerable_headline(attacked):
    truth, group, releases, recons = attacked
    reid = api.reidentify(
        recons["geometric"],
        releases["geometric"],
        truth,
        attacker="census",
        seed=2,
        vulnerable=group,
    )
    assert reid.headline_groups() == ("all", "nonmodal", "vulnerable")
    assert reid.to_dict()["headline"]["vulnerable"]["best_baseline"]
    without = api.reidentify(recons["geometric"], releases["geometric"], truth, seed=2)
    assert "vulnerable" not in without.headline_groups()


def test_only_the_exact_release_with_variability_defines_it(attacked):
    truth, _, _, recons = attacked
    with pytest.raises(InputError, match="not a geometric release"):
        api.vulnerable_group(truth, reconstruction=recons["geometric"])
    exact = api.reconstruct(api.tabulate(truth), workers=1, draws=0)
    with pytest.raises(InputError, match="no solution variability"):
        api.vulnerable_group(truth, reconstruction=exact)


def test_the_command_takes_the_exact_reconstruction(attacked, tmp_path):
    truth, group, releases, _ = attacked
    write_population(truth, tmp_path / "pop")
    write_release(releases["geometric"], tmp_path / "rel")
    write_release(api.tabulate(truth), tmp_path / "exact")
    runner = CliRunner()
    for release, out, extra in (("rel", "recon", []), ("exact", "exact-recon", ["--variability"])):
        done = runner.invoke(
            app,
            [
                "reconstruct",
                str(tmp_path / release),
                "--out",
                str(tmp_path / out),
                "--workers",
                "1",
                *extra,
            ],
        )
        assert done.exit_code == 0, done.output
    base = [
        "reidentify",
        str(tmp_path / "recon"),
        "--truth",
        str(tmp_path / "pop"),
        "--attacker",
        "census",
    ]
    done = runner.invoke(
        app, [*base, "--vulnerable", str(tmp_path / "exact-recon"), "--out", str(tmp_path / "r")]
    )
    assert done.exit_code == 0, done.output
    assert "attacker census:" in done.output
    assert f"vulnerable group: {group.size:,} persons" in done.output
    refused = runner.invoke(
        app, [*base, "--vulnerable", str(tmp_path / "recon"), "--out", str(tmp_path / "r2")]
    )
    assert refused.exit_code == 2 and "not a geometric release" in refused.output
    assert not (tmp_path / "r2").exists()


def test_another_population_s_group_is_refused(attacked):
    """The API refuses what the command line refuses: a group, or an exact reconstruction,
    of another population."""
    truth, group, releases, recons = attacked
    other = api.synthesize(1_500, seed=9)
    exact_other = api.reconstruct(api.tabulate(other), workers=1, variability=True, draws=0)
    with pytest.raises(InputError, match="other persons per block than the population"):
        api.vulnerable_group(truth, reconstruction=exact_other)
    foreign = api.vulnerable_group(other, reconstruction=exact_other)
    with pytest.raises(InputError, match="truth and the vulnerable group"):
        api.reidentify(
            recons["geometric"], releases["geometric"], truth, seed=2, vulnerable=foreign
        )


def test_an_exact_reconstruction_without_its_release_is_refused_in_words(attacked, tmp_path):
    """--vulnerable needs the exact release a reconstruction records; one that records none is
    refused with what is missing (not with --release, which names the attacked release)."""
    truth, _, releases, recons = attacked
    write_population(truth, tmp_path / "pop")
    write_release(releases["geometric"], tmp_path / "rel")
    write_reconstruction(tmp_path / "recon", recons["geometric"], recons["geometric"].to_dict())
    exact = api.reconstruct(api.tabulate(truth), workers=1, variability=True, draws=0)
    write_reconstruction(tmp_path / "exact-recon", exact, exact.to_dict(), exact.solvar)
    args = ["reidentify", str(tmp_path / "recon"), "--truth", str(tmp_path / "pop")]
    args += ["--release", str(tmp_path / "rel"), "--vulnerable", str(tmp_path / "exact-recon")]
    refused = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "r")])
    assert refused.exit_code == 2
    assert "exact-recon/metrics.json: records no release" in refused.output
    assert "--vulnerable takes the exact release's reconstruction" in refused.output
    assert "with --release" not in refused.output
    assert "Traceback" not in refused.output and not (tmp_path / "r").exists()

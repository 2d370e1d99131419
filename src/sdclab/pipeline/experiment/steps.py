"""What each step of an experiment makes in its directory: a population replicate, a release,
its risk analysis, a reconstruction, the vulnerable group and a reidentification."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from sdclab import protection
from sdclab.attacks.reconstruction import DRAWS
from sdclab.attacks.reconstruction_files import METRICS_FILE, write_reconstruction
from sdclab.censuses import generator_of
from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.population.bootstrap import bootstrap
from sdclab.censuses.us2010.population.io import read_population, write_population
from sdclab.censuses.us2010.population.synth import build_report, synthesize
from sdclab.core.fileio import read_json_object, write_json, write_parquet
from sdclab.pipeline import api
from sdclab.pipeline.experiment.replicates import population_seed
from sdclab.pipeline.experiment.spec import AttackSpec, Point, PopulationSpec
from sdclab.pipeline.results.reconstruction import ReconstructionResult
from sdclab.pipeline.results.reidentification import VulnerableGroup
from sdclab.release import Release, write_release


def _make_population(spec: PopulationSpec, replicate: int, tmp: Path) -> None:
    """Population replicate ``replicate``: the first as given, the others another synthetic seed
    or a bootstrap replicate of the population read."""
    seed = population_seed(spec.seed, replicate)
    if spec.path is not None:
        read = read_population(Path(spec.path))
        write_population(read if replicate == 1 else bootstrap(read, seed), tmp)
    else:
        population = synthesize(spec.persons or 0, seed, spec.geography(), spec.generator)
        report = build_report(population, seed, spec.geography(), spec.generator)
        write_population(population, tmp, {"synth.json": report})


CENSUS_PERSONS = "persons.parquet"
"""A built-in census's synthetic persons, in its population step."""


def _make_census_persons(spec: PopulationSpec, tmp: Path) -> None:
    """A built-in census's synthetic persons (not the US census's) and what they hold."""
    generator = generator_of(str(spec.census))
    assert generator is not None and spec.persons is not None, "checked on validation"
    frame = generator.synthesize(spec.persons, spec.seed)
    write_parquet(frame, tmp / CENSUS_PERSONS)
    write_json(generator.describe(frame), tmp / "synth.json")


def _make_release(truth: Population, m: Point, tmp: Path) -> None:
    write_release(api.protect(truth, m.name, seed=m.seed, **m.settings), tmp / "release")


def _make_risk(release: Release, truth: Population, tmp: Path) -> None:
    analysis = protection.get(release.mechanism).risk_analysis
    assert analysis is not None, "only a mechanism with a risk analysis has this step"
    write_json(analysis(release, truth), tmp / METRICS_FILE)


def _make_reconstruction(
    release: Release,
    attacks: AttackSpec,
    knowledge: str,
    tmp: Path,
    block_only: bool = False,
    target: str | None = None,
) -> None:
    """A reconstruction step: the attack of record (with variability and ranked records), the
    naive one beside it, the one from the block tables alone (``block_only``) or the one on a
    further ``target`` of the census (these two reidentified only, so neither measured for
    variability nor ranked)."""
    main = knowledge == "published" and not block_only and target is None
    result = api.reconstruct(
        release,
        **attacks.solving(),
        variability=attacks.variability and main,
        knowledge=knowledge,
        draws=DRAWS if main else 0,
        block_only=block_only,
        target=target,
    )
    census = release.census if target is None else release.aimed_at(target).census
    write_reconstruction(tmp / "recon", result, result.to_dict(), result.solvar, census=census)


VULNERABLE_FILE = "vulnerable.parquet"
"""The vulnerable persons' ids in their step (confidential, as every step is)."""


def _make_vulnerable_group(truth: Population, attacks: AttackSpec, tmp: Path) -> None:
    group = api.vulnerable_group(truth, **attacks.solving())
    write_parquet(pl.DataFrame({"person_id": group.persons}), tmp / VULNERABLE_FILE)
    write_json(group.to_dict(), tmp / METRICS_FILE)


def read_vulnerable_group(step: Path) -> VulnerableGroup:
    """The vulnerable group a step holds (a step this run or an earlier one made)."""
    figures = read_json_object(step / METRICS_FILE)
    persons = pl.read_parquet(step / VULNERABLE_FILE)["person_id"].to_numpy()
    return VulnerableGroup(
        persons=persons.astype(np.int64),
        solvar0_blocks=int(figures["solvar0_blocks"]),
        populated_blocks=int(figures["populated_blocks"]),
    )


def _make_reidentification(
    recon: ReconstructionResult,
    release: Release,
    truth: Population,
    preset: str,
    seed: int,
    vulnerable: VulnerableGroup | None,
    tmp: Path,
) -> None:
    result = api.reidentify(
        recon, release, truth, attacker=preset, seed=seed, vulnerable=vulnerable
    )
    assert result.links is not None
    write_parquet(result.links, tmp / "links.parquet")
    write_json(result.to_dict(), tmp / METRICS_FILE)

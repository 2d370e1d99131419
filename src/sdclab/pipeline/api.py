"""The public Python API: every step of a study as one function with keyword settings.

```python
import sdclab

truth = sdclab.synthesize(5_000, seed=1)
release = sdclab.protect(truth, "topdown", seed=2, rho=4)
records = sdclab.reconstruct(release)
links = sdclab.reidentify(records, release, truth, attacker="census", seed=3)
figures = sdclab.evaluate(release, truth, reconstruction=records, reidentification=links)
figures.by_level["block"].mean_mae, links.reconstruction.nonmodal.precision
```

The command line is a thin layer over these functions: it parses arguments, calls them and writes
the files. Bad input raises :class:`sdclab.InputError` with one line in the user's words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sdclab.core.errors import InputError
from sdclab.core.figures import NotMeasured, Value, measured
from sdclab.core.randomness import check_seed
from sdclab.pipeline.results.agreement import Agreement
from sdclab.pipeline.results.evaluation import (
    NO_MICRODATA,
    NO_RECONSTRUCTION,
    NOT_GIVEN_BLOCK_ONLY,
    Evaluation,
    no_risk_analysis,
)
from sdclab.pipeline.results.reconstruction import ReconstructionFigures, ReconstructionResult
from sdclab.pipeline.results.reidentification import Reidentification, VulnerableGroup

if TYPE_CHECKING:  # the modules behind them load on first use: the command line starts quickly
    import polars as pl

    from sdclab.attacks.audit import AuditResult
    from sdclab.censuses.us2010.population import Population
    from sdclab.core.census.records import CensusRecords
    from sdclab.core.execution import Executor
    from sdclab.protection import Mechanism
    from sdclab.release import Release


def synthesize(
    persons: int = 20_000,
    *,
    seed: int | None = None,
    tracts: int | None = None,
    counties: int | None = None,
    states: int | None = None,
    generator: str | None = None,
) -> Population:
    """A synthetic census population of exactly ``persons`` persons (seeded: reproducible), with
    ``tracts``, ``counties`` and ``states`` where given (else they follow its size: about 4,000,
    100,000 and 6,000,000 persons each); ``generator`` is a version of the generator (default
    the newest), so that a study of an earlier version reproduces."""
    from sdclab.censuses.us2010.population.synth import GENERATOR_VERSION, check_version
    from sdclab.censuses.us2010.population.synth import synthesize as generate
    from sdclab.censuses.us2010.population.synth_geography import GeographyCounts

    check_seed(seed, "seed")
    if isinstance(persons, bool) or not isinstance(persons, int) or persons < 1:
        raise InputError(f"persons {persons!r}: expected a whole number of at least 1")
    geography = GeographyCounts(tracts, counties, states)
    version = GENERATOR_VERSION if generator is None else generator
    try:
        geography.check(persons)
        check_version(version)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return generate(persons, seed, geography, version)


def read_population(
    path: str | Path, *, census: str | Path | None = None, mapping: str | Path | None = None
) -> Population:
    """The population in directory ``path`` (persons and units, Parquet or CSV), validated; for
    a census other than the US 2010 one (a built-in name or a census file, docs/census.md), the
    persons' file ``path`` (CSV separated by ',' or ';', or Parquet) checked against that census,
    its columns and codes named by the mapping file ``mapping`` if given."""
    from sdclab.censuses.us2010.population.io import read_population as read

    if census is None or str(census) == "us2010":
        if mapping is not None:
            raise InputError(NO_MAPPING)
        return read(Path(path))
    from sdclab.censuses import census_named
    from sdclab.core.census.records import read_records

    records = read_records(
        census_named(census), Path(path), None if mapping is None else Path(mapping)
    )
    return records  # type: ignore[return-value]


NO_MAPPING = (
    "mapping: a mapping file names the columns and codes of a declared census's persons' file "
    "(the US 2010 population has its own layout, docs/data.md)"
)


def write_population(population: Population, path: str | Path) -> None:
    """Write ``population`` as ``path/persons.parquet`` and ``units.parquet``, atomically (only
    an absent or empty directory or an earlier population is replaced, never the directory it
    was read from)."""
    from sdclab.censuses.us2010.population.io import write_population as write

    write(population, Path(path), option="path")


def tabulate(population: Population, *, tables: list[str] | None = None) -> Release:
    """The exact, unprotected tables of ``population`` (all catalogue tables, or ``tables``):
    mechanism ``none``, never fit for publication."""
    from sdclab.release import exact_release

    try:
        population.census.select(tables)
    except KeyError as exc:
        raise InputError(f"tables: {exc.args[0]}") from None
    return exact_release(population, tables)


def protect(
    population: Population, mechanism: str, *, seed: int | None = None, **parameters: Any
) -> Release:
    """Protect ``population`` with ``mechanism`` (see :func:`mechanisms`); parameters as keywords
    (numbers as numbers: ``rho=4``). Without a seed the noise comes from OS entropy and the
    release is fit for publication; a seeded release is reproducible and marked not fit."""
    from sdclab import protection

    return protection.run(mechanism, population, parameters, seed)


def read_release(path: str | Path) -> Release:
    """The release in directory ``path``, every file checked against its recorded digest."""
    from sdclab import protection
    from sdclab.release import read_release as read

    return read(Path(path), protection.MECHANISMS)


def write_release(release: Release, path: str | Path) -> None:
    """Write ``release`` as a directory, atomically (only an absent or empty directory or an
    earlier release is replaced, never the directory of the population it was made from)."""
    from sdclab.release import write_release as write

    write(release, Path(path), option="path")


def reconstruct(
    release: Release,
    *,
    workers: int | None = None,
    executor: str | None = None,
    seed: int = 0,
    time_limit: float = 300.0,
    variability: bool = False,
    checkpoint: str | Path | None = None,
    knowledge: str = "published",
    draws: int = 10,
    node_limit: int | None = None,
    block_only: bool = False,
    target: str | None = None,
) -> ReconstructionResult:
    """Rebuild block-level person records from the release alone (one integer program per
    tract), and with ``variability`` measure how many blocks have one solution only.

    ``target``: a further attack the census declares instead of its main one (eu2021's ``grid``:
    each 1 km cell from the grid's tables), which :func:`reidentify` and :func:`evaluate` follow.

    ``block_only``: from the release's block-level tables alone, leaving out its tract tables, as
    the attack paper's second reconstruction (rHDF_b, beside rHDF_b,t); ages above 21 are then
    known to their agebin only (``age`` is the bin's first year, ``age_min``–``age_max`` the bin),
    and :func:`reidentify` links such records on agebin.

    ``knowledge``: ``published`` (the attack of record) models the noise the release states —
    the cell key method's p-table, the geometric scales, the suppression rules, TopDown's noisy
    measurements —, never ruling out what the mechanism could have produced; ``tables`` the same
    without TopDown's measurements; ``naive`` takes every count as exact and every 0 as a true
    0, as an attack that ignores the noise would. ``draws``: further diverse reconstructions per
    tract (at most 100), whose share holding each record ranks it (``confidence``).

    ``time_limit``: seconds each tract's solves may take in all; ``node_limit``: branch-and-bound
    nodes each of its integer programs may explore. A node limit is work, not wall time: the same
    seed and node limit give the same reconstruction on any machine, as long as no tract reaches
    its time limit first (such tracts are counted in ``time_limited_tracts`` and flagged in their
    row, ``time_limited``).

    ``workers``: local processes (default all cores); ``executor``: ``local``,
    ``dask://HOST:PORT`` or ``dask-local[:N]``; ``checkpoint``: a directory keeping finished
    tracts, from which a re-run resumes (apart from the release's directory and its
    population's: :attr:`Release.sources <sdclab.release.Release.sources>`)."""
    from sdclab.attacks.variability import attack

    where = check_reconstruction(
        workers=workers,
        executor=executor,
        seed=seed,
        time_limit=time_limit,
        knowledge=knowledge,
        draws=draws,
        node_limit=node_limit,
        checkpoint=checkpoint,
        inputs=release.sources,
        block_only=block_only,
    )
    _check_variability(release, variability)
    if target is not None:
        release = _aimed_release(release, target)
    directory = Path(checkpoint) if checkpoint is not None else None
    records, metrics, solvar = attack(
        release,
        where,
        seed,
        time_limit,
        variability,
        directory,
        knowledge,
        draws,
        node_limit,
        block_only,
    )
    return ReconstructionResult(
        mechanism=release.mechanism,
        persons=records.persons,
        tracts=records.tracts,
        metrics={**metrics, **({"target": target} if target is not None else {})},
        solvar=solvar,
    )


def _aimed_release(release: Release, target: str) -> Release:
    """The release as the census's attack ``target`` sees it; an unknown target in one line."""
    try:
        return release.aimed_at(target)
    except KeyError as exc:
        raise InputError(str(exc.args[0])) from None


def aimed(
    reconstruction: ReconstructionResult, release: Release, truth: Population
) -> tuple[Release, Population]:
    """The release and the truth as the attack that made ``reconstruction`` saw them: as they
    are, or as its census's further attack target (``reconstruct(..., target=...)``) does."""
    target = reconstruction.metrics.get("target")
    if target is None:
        return release, truth
    from sdclab.core.census.records import CensusRecords

    if not isinstance(truth, CensusRecords):
        raise InputError(f"the reconstruction aims at {target!r}: a target of a declared census")
    return _aimed_release(release, target), truth.aimed_at(target)


def _check_variability(release: Release, variability: bool) -> None:
    """Refuse solution variability where it is not measured: on a census not the US one."""
    from sdclab.censuses import is_us2010

    if variability and not is_us2010(release.census):
        raise InputError(
            "variability: solution variability is measured on the US census's blocks so far, not "
            f"on census {release.census.name}'s geounits"
        )


def check_reconstruction(
    *,
    workers: int | None,
    executor: str | None,
    seed: int,
    time_limit: float,
    knowledge: str,
    draws: int,
    checkpoint: str | Path | None,
    inputs: tuple[Path, ...],
    named: Callable[[str], str] = str,
    node_limit: int | None = None,
    block_only: bool = False,
) -> Executor:
    """Where a reconstruction runs, once every setting :func:`reconstruct` takes is checked: the
    command line calls it before it reads the release, so that both refuse alike and before any
    work. ``inputs``: the directories the checkpoint must lie apart from; ``named``: how the
    caller spells a setting in its messages (``--time-limit`` on the command line)."""
    from sdclab.attacks.reconstruction import KNOWLEDGE, MAX_DRAWS
    from sdclab.core.execution import Executor
    from sdclab.core.fileio import check_checkpoint_directory

    check_seed(seed, named("seed"))
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)):
        raise InputError(f"{named('workers')} {workers!r}: expected a whole number of processes")
    if workers is not None and workers < 1:
        raise InputError(f"{named('workers')} {workers}: expected at least 1 process")
    number = isinstance(time_limit, int | float) and not isinstance(time_limit, bool)
    if not number or not time_limit > 0:
        raise InputError(f"{named('time_limit')} {time_limit!r}: expected seconds above 0")
    if knowledge not in KNOWLEDGE:
        raise InputError(
            f"{named('knowledge')} {knowledge!r}: expected one of {', '.join(KNOWLEDGE)}"
        )
    if isinstance(draws, bool) or not isinstance(draws, int) or not 0 <= draws <= MAX_DRAWS:
        raise InputError(
            f"{named('draws')} {draws!r}: expected a whole number of reconstructions from 0 to "
            f"{MAX_DRAWS} (a record's confidence is its share of the draws: {MAX_DRAWS} resolve "
            "it to 1%)"
        )
    whole = isinstance(node_limit, int) and not isinstance(node_limit, bool)
    if node_limit is not None and (not whole or node_limit < 1):
        raise InputError(
            f"{named('node_limit')} {node_limit!r}: expected a whole number of nodes, at least 1"
        )
    if not isinstance(block_only, bool):
        raise InputError(f"{named('block_only')} {block_only!r}: expected True or False")
    where = Executor.parse(executor, workers)
    if checkpoint is not None:
        check_checkpoint_directory(Path(checkpoint), inputs, named("checkpoint"))
    return where


def read_reconstruction(path: str | Path) -> ReconstructionResult:
    """A reconstruction directory written by ``sdclab reconstruct``, checked."""
    from sdclab.attacks.reconstruction_files import read_reconstruction as read
    from sdclab.attacks.reconstruction_files import read_reconstruction_metrics, read_solvar

    path = Path(path)
    records = read(path)
    metrics = read_reconstruction_metrics(path)
    return ReconstructionResult(
        mechanism=str(metrics.get("mechanism", "unknown")),
        persons=records.persons,
        tracts=records.tracts,
        metrics=metrics,
        solvar=read_solvar(path),
    )


def vulnerable_group(
    truth: Population,
    *,
    reconstruction: ReconstructionResult | None = None,
    workers: int | None = None,
    executor: str | None = None,
    seed: int = 0,
    time_limit: float = 300.0,
    node_limit: int | None = None,
) -> VulnerableGroup:
    """The population's most vulnerable persons, the one set every release is scored on:
    nonmodal data-defined persons unique on {block, sex, agebin} in blocks whose reconstruction
    of the exact release has solution variability 0 (evaluation only).

    ``reconstruction``: the exact release's reconstruction with variability (``sdclab tabulate``
    then ``sdclab reconstruct --variability``), when already made; otherwise it is made here
    with ``workers``, ``executor``, ``seed``, ``time_limit`` and ``node_limit`` (as
    :func:`reconstruct`)."""
    from sdclab.attacks.linkage import vulnerable_persons
    from sdclab.attacks.variability import proven_solvar_zero

    if reconstruction is None:
        reconstruction = reconstruct(
            tabulate(truth),
            workers=workers,
            executor=executor,
            seed=seed,
            time_limit=time_limit,
            variability=True,
            draws=0,
            node_limit=node_limit,
        )
    if reconstruction.mechanism != "none":
        raise InputError(
            f"the vulnerable group is defined from the exact release's reconstruction, not a "
            f"{reconstruction.mechanism} release's (sdclab tabulate, then reconstruct it)"
        )
    if reconstruction.solvar is None:
        raise InputError(
            "the exact release's reconstruction has no solution variability (reconstruct it with "
            "variability: --variability, variability=True)"
        )
    check_same_blocks(reconstruction, truth)
    return VulnerableGroup(
        persons=vulnerable_persons(truth, reconstruction.solvar),
        solvar0_blocks=proven_solvar_zero(reconstruction.solvar).len(),
        populated_blocks=reconstruction.solvar.height,
        input_digest=truth.digest,
    )


def check_same_blocks(reconstruction: ReconstructionResult, truth: Population) -> None:
    """The exact release's reconstruction holds each block's persons: refuse one whose blocks
    hold other numbers (the reconstruction of another population)."""
    import polars as pl

    def per_block(persons: pl.DataFrame) -> pl.DataFrame:
        return persons.group_by(pl.col("block").cast(pl.Int64)).len().sort("block")

    if not per_block(reconstruction.persons).equals(per_block(truth.persons)):
        raise InputError(
            "the exact release's reconstruction holds other persons per block than the "
            "population: it was made from another population's tables"
        )


def _same_census(reconstruction: ReconstructionResult, release: Release) -> None:
    """Refuse a reconstruction of another census than the release's (in one line)."""
    from sdclab.attacks.reconstruction_files import census_named_by

    recorded = reconstruction.metrics.get("census")
    expected = census_named_by(release.census)
    if recorded != expected:
        mine = "the US 2010 census" if recorded is None else f"census {recorded['name']}"
        theirs = "the US 2010 census" if expected is None else f"census {expected['name']}"
        raise InputError(
            f"the reconstruction is of {mine} ({recorded}), the release of {theirs} "
            f"({expected}): not a reconstruction of this release"
        )


def reidentify(
    reconstruction: ReconstructionResult,
    release: Release,
    truth: Population,
    *,
    attacker: str = "commercial",
    seed: int | None = None,
    vulnerable: VulnerableGroup | None = None,
    **attacker_parameters: float | str,
) -> Reidentification:
    """Link reconstructed records to a simulated attacker file (``census``: the census's own
    identities; ``commercial``: a commercial file's coverage and errors; keywords override
    ``coverage``, ``extra_records``, ``moved``, ``age_error``, ``sex_error``), and confirm the
    links against ``truth``; also scores the two baselines made from the published tables.
    ``vulnerable``: the population's fixed vulnerable group (:func:`vulnerable_group`), scored
    as its own group with its headline risk."""
    from sdclab.attacks.linkage import attacker_parameters as parameters
    from sdclab.attacks.linkage import reidentify as link
    from sdclab.core.digest import check_same_input
    from sdclab.core.randomness import make_rng

    check_seed(seed, "seed")
    check_same_input(release.input_digest, *truth.frames, what="truth and release")
    release, truth = aimed(reconstruction, release, truth)
    _same_census(reconstruction, release)
    if vulnerable is not None and vulnerable.input_digest:
        check_same_input(
            vulnerable.input_digest, *truth.frames, what="truth and the vulnerable group"
        )
    params = parameters(attacker, dict(attacker_parameters))
    from sdclab.core.census.records import CensusRecords

    if isinstance(truth, CensusRecords):  # a declared census: its own quasi-identifiers
        from sdclab.attacks import census_linkage

        if vulnerable is not None:
            raise InputError(
                f"census {truth.census.name}: the vulnerable group is defined on the US tables"
            )
        figures, links = census_linkage.reidentify(
            reconstruction.persons, release, truth, params, make_rng(seed)
        )
        result = Reidentification.from_dict({"attacker_preset": attacker, **figures})
        return replace(result, links=links)
    figures, links = link(
        reconstruction.persons,
        release,
        truth,
        params,
        make_rng(seed),
        reconstruction.solvar,
        None if vulnerable is None else vulnerable.persons,
    )
    result = Reidentification.from_dict({"attacker_preset": attacker, **figures})
    return replace(result, links=links)


def _declared_microdata_agreement(
    persons: pl.DataFrame, truth: CensusRecords
) -> Agreement | NotMeasured:
    """A declared census's released person records against its true ones, matched as a
    reconstruction's are (each geounit of the reconstruction's level, its attributes)."""
    from sdclab.pipeline import evaluation as ev

    census = truth.census
    level, bottom = census.reconstruction.level, census.geography.levels[-1]
    lacking = sorted(set(census.reconstruction.attributes) - set(persons.columns))
    if level != bottom or lacking:
        return NotMeasured(
            f"the release's person records carry no {', '.join(lacking)}"
            if lacking
            else f"the release's person records are by {bottom}, the reconstruction's by {level}"
        )
    return ev.census_agreement(persons, truth)


def evaluate(
    release: Release,
    truth: Population,
    *,
    reconstruction: ReconstructionResult | None = None,
    reidentification: Reidentification | Mapping[str, Reidentification | NotMeasured] | None = None,
    risk: bool = False,
    block_only: Reidentification | Mapping[str, Reidentification | NotMeasured] | None = None,
) -> Evaluation:
    """Accuracy of ``release`` against ``truth`` and the risk the attacks measured on it
    (evaluation only: these figures use the confidential data). ``risk`` also runs the
    mechanism's own risk analysis, when it has one (the cell key method's). ``block_only``: the
    reidentification of the release's reconstruction from its block tables alone
    (``reconstruct(..., block_only=True)``), reported apart."""
    from sdclab import protection
    from sdclab.core.digest import check_same_input

    check_same_input(release.input_digest, *truth.frames, what="truth and release")
    if reconstruction is not None:
        _same_census(reconstruction, aimed(reconstruction, release, truth)[0])
    if isinstance(reidentification, Reidentification):
        reidentification = {reidentification.attacker: reidentification}
    if isinstance(block_only, Reidentification):
        block_only = {block_only.attacker: block_only}
    mechanism = protection.get(release.mechanism)
    if mechanism.risk_analysis is None:
        analysis: Mapping[str, Any] | NotMeasured = no_risk_analysis(mechanism.name)
    elif risk:
        analysis = mechanism.risk_analysis(release, truth)
    else:
        analysis = NotMeasured("not asked for (risk=True runs it)")
    return evaluation(
        release,
        truth,
        reconstruction,
        reidentification or {},
        analysis,
        block_only=NotMeasured(NOT_GIVEN_BLOCK_ONLY) if block_only is None else block_only,
    )


def evaluation(
    release: Release,
    truth: Population,
    reconstruction: ReconstructionResult | None,
    reidentification: Mapping[str, Reidentification | NotMeasured],
    risk: Mapping[str, Any] | NotMeasured,
    naive: ReconstructionResult | None = None,
    block_only: Mapping[str, Reidentification | NotMeasured] | NotMeasured | None = None,
    targets: Mapping[str, Mapping[str, Reidentification | NotMeasured]] | None = None,
) -> Evaluation:
    """The figures of :func:`evaluate` from inputs already checked to belong together (``naive``:
    the naive reconstruction beside the noise-aware one, when they differ; ``block_only``: the
    reidentification of the reconstruction from the block tables alone, or why there is none;
    ``targets``: by further attack target of the census, the reidentification of the
    reconstruction aimed at it)."""
    from sdclab import protection
    from sdclab.pipeline import evaluation as ev

    accuracy = ev.accuracy(release, truth)
    mechanism = protection.get(release.mechanism)
    microdata = _microdata_agreement(release, truth)
    seen = (release, truth) if reconstruction is None else aimed(reconstruction, release, truth)
    recon_agreement, block_sex, curve = _reconstruction_agreement(*seen, reconstruction)
    return Evaluation(
        mechanism=release.mechanism,
        card=release.card,
        accuracy=accuracy,
        additivity=ev.additivity(release),
        by_level=ev.summarise_accuracy(accuracy),
        microdata_agreement=microdata,
        reconstruction=(
            NotMeasured(NO_RECONSTRUCTION)
            if reconstruction is None
            else ReconstructionFigures(reconstruction.metrics)
        ),
        reconstruction_agreement=recon_agreement,
        block_sex_agebin_agreement=block_sex,
        reidentification=dict(reidentification),
        diagnostics=mechanism.diagnostics(truth, release) if mechanism.diagnostics else (),
        risk=risk,
        rank_curve=curve,
        totals=ev.geounit_totals(release, truth),
        indicators=ev.tract_indicators(release, truth),
        naive_agreement=_naive_agreement(*seen, reconstruction, naive),
        block_only_reidentification=(
            NotMeasured(NOT_GIVEN_BLOCK_ONLY)
            if block_only is None
            else block_only
            if isinstance(block_only, NotMeasured)
            else dict(block_only)
        ),
        target_reidentification={t: dict(links) for t, links in (targets or {}).items()},
    )


def _microdata_agreement(release: Release, truth: Population) -> Agreement | NotMeasured:
    """The agreement of the release's person records with the truth, or why there is none (no
    person records, or records without the attributes the agreement matches on)."""
    from sdclab.censuses.us2010.population.person_records import (
        PERSON_ATTRIBUTES,
        has_person_attributes,
    )
    from sdclab.core.census.records import CensusRecords
    from sdclab.pipeline import evaluation as ev

    persons = release.person_microdata
    microdata: Agreement | NotMeasured = NotMeasured(NO_MICRODATA)
    if persons is not None and isinstance(truth, CensusRecords):
        microdata = _declared_microdata_agreement(persons, truth)
    elif persons is not None and has_person_attributes(persons):
        microdata = ev.agreement(persons, truth)
    elif persons is not None:
        lacking = sorted(set(PERSON_ATTRIBUTES) - set(persons.columns))
        microdata = NotMeasured(
            f"the release's person records carry no {', '.join(lacking)} (agreement with the "
            "truth matches on block, sex, age, race and Hispanic origin)"
        )
    return microdata


def _reconstruction_agreement(
    release: Release, truth: Population, reconstruction: ReconstructionResult | None
) -> tuple[Agreement | NotMeasured, Value, Mapping[str, Value] | NotMeasured]:
    """The reconstruction's agreement with the truth, its block sex × agebin agreement and its
    ranked precision, or why each is not measured (no reconstruction; a declared census has the
    agreement only)."""
    from sdclab.core.census.records import CensusRecords
    from sdclab.pipeline import evaluation as ev

    recon_agreement: Agreement | NotMeasured = NotMeasured(NO_RECONSTRUCTION)
    block_sex: Value = NotMeasured(NO_RECONSTRUCTION)
    curve: Mapping[str, Value] | NotMeasured = NotMeasured(NO_RECONSTRUCTION)
    if reconstruction is not None and isinstance(truth, CensusRecords):
        us_only = f"measured on the US census's attributes, not census {release.census.name}'s"
        curve = NotMeasured(us_only)
        block_sex = NotMeasured(us_only)
        recon_agreement = ev.census_agreement(reconstruction.persons, truth)
    elif reconstruction is not None:
        curve = ev.ranked_precision(reconstruction.persons, truth)
        recon_agreement = ev.agreement(reconstruction.persons, truth)
        block_sex = measured(
            ev.block_agebin_agreement(reconstruction.persons, truth),
            "the release's tables do not determine sex or age",
        )
    return recon_agreement, block_sex, curve


def audit(
    mechanism: str,
    *,
    trials: int = 10_000,
    seed: int = 0,
    alpha: float = 0.05,
    **parameters: Any,
) -> AuditResult:
    """Run ``mechanism`` ``trials`` times on each of two neighbouring datasets and bound its
    privacy loss from below with confidence 1 − ``alpha``, beside its guarantee's claim."""
    from sdclab.attacks.audit import audit as run_audit

    check_seed(seed, "seed")
    return run_audit(mechanism, parameters, trials, seed, alpha)


def _naive_agreement(
    release: Release,
    truth: Population,
    reconstruction: ReconstructionResult | None,
    naive: ReconstructionResult | None,
) -> Agreement | NotMeasured:
    """The naive reconstruction's agreement, or why there is none."""
    from sdclab import protection
    from sdclab.core.census.records import CensusRecords
    from sdclab.pipeline import evaluation as ev
    from sdclab.pipeline.results.agreement import NAIVE_IS_AWARE, NO_NAIVE

    if naive is not None and isinstance(truth, CensusRecords):
        return ev.census_agreement(naive.persons, truth)
    if naive is not None:
        return ev.agreement(naive.persons, truth)
    if reconstruction is None:
        return NotMeasured(NO_RECONSTRUCTION)
    exact = protection.get(release.mechanism).exact_tables
    return NotMeasured(NAIVE_IS_AWARE if exact else NO_NAIVE)


@dataclass(frozen=True)
class ParameterInfo:
    """One parameter of a mechanism: its name, default, kind, unit and meaning."""

    name: str
    default: Any
    kind: str
    unit: str | None
    meaning: str
    required: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __repr__(self) -> str:
        unit = f" [{self.unit}]" if self.unit else ""
        return f"{self.name}={self.default!r}{unit}: {self.meaning}"


@dataclass(frozen=True)
class MechanismInfo:
    """A mechanism as :func:`mechanisms` lists it."""

    name: str
    summary: str
    parameters: tuple[ParameterInfo, ...]
    protects: bool
    """Whether it protects data (``gaussian`` has a guarantee and an audit only)."""
    auditable: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "summary": self.summary,
            "protects": self.protects,
            "auditable": self.auditable,
            "parameters": [p.to_dict() for p in self.parameters],
        }

    def __repr__(self) -> str:
        names = ", ".join(p.name for p in self.parameters) or "no parameters"
        return f"<mechanism {self.name}: {self.summary} ({names})>"


def mechanisms() -> list[MechanismInfo]:
    """Every mechanism with its parameters, their defaults, units and one-line meanings."""
    from sdclab import protection

    return [describe(m) for m in protection.MECHANISMS.values()]


def describe(mechanism: Mechanism[Any]) -> MechanismInfo:
    """A mechanism's description from its parameter model."""
    from sdclab.protection.base import unit_of

    execution = mechanism.parameters.EXECUTION
    try:  # the defaults as the mechanism applies them (a preset's, validated)
        defaults: dict[str, Any] = mechanism.parse({}).model_dump(mode="json")
    except InputError:  # parameters that must be given (gaussian: sigma2 or rho)
        defaults = {}
    params = []
    for name, field in mechanism.parameters.model_fields.items():
        default = defaults.get(name, None if field.is_required() else field.get_default())
        # the meaning is an attribute docstring: its lines joined into one
        meaning = " ".join((field.description or "(no description)").split())
        if name in execution:
            meaning += " (where the run executes: not recorded in the release)"
        params.append(
            ParameterInfo(
                name=name,
                default=default,
                kind=_kind(field.annotation),
                unit=unit_of(field),
                meaning=meaning,
                required=field.is_required(),
            )
        )
    return MechanismInfo(
        name=mechanism.name,
        summary=mechanism.summary,
        parameters=tuple(params),
        protects=mechanism.protect is not None,
        auditable=mechanism.audit_plan is not None,
    )


def _kind(annotation: Any) -> str:
    """A parameter's type in words."""
    text = getattr(annotation, "__name__", None) or str(annotation)
    return text.replace("typing.", "").replace("NoneType", "None")

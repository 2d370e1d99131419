"""The commands of the pipeline, one step each: synth, tabulate, protect, reconstruct, reidentify,
evaluate, ckm-risk and audit, with the inputs they read and the outputs they write."""

from __future__ import annotations

import math
import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sdclab.cli.core import (
    CensusOption,
    MappingOption,
    MechanismOption,
    OutOption,
    PopulationArgument,
    SetOption,
    TruthOption,
    app,
    reports_input_errors,
)
from sdclab.core.errors import InputError
from sdclab.core.figures import NotMeasured
from sdclab.pipeline.results.figure import SCHEMA_VERSION, show_share
from sdclab.pipeline.results.reconstruction import ReconstructionResult

if TYPE_CHECKING:
    from sdclab.release import Release


def parse_table_list(text: str | None, census: str | Path | None = None) -> list[str] | None:
    """``"P1,P12"`` → ``["P1", "P12"]``, checked against the census's tables (default: the
    US 2010 census's)."""
    if text is None:
        return None
    from sdclab.censuses import census_named

    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise InputError("--tables: expected a comma-separated list of table names")
    try:
        census_named(census or "us2010").select(names)
    except KeyError as exc:
        raise InputError(f"--tables: {exc.args[0]}") from None
    return names


REIDENTIFICATION_KIND = "reidentification"
NO_EXACT_RELEASE = (
    "--vulnerable takes the exact release's reconstruction as sdclab reconstruct writes it, "
    "which records the release it was made from so that it can be checked to be this "
    "population's (sdclab tabulate POP --out EXACT, then sdclab reconstruct EXACT --variability "
    "--out EXACT_RECON)"
)
"""Why ``--vulnerable`` refuses a reconstruction that records no release, and what to give."""
EVALUATION_KIND = "evaluation"
CKM_RISK_KIND = "ckm-risk"
AUDIT_KIND = "audit"
"""The kinds of output the commands write besides populations, releases and reconstructions."""


def option(name: str) -> str:
    """How the command line spells a setting of the Python API: ``time_limit`` → ``--time-limit``
    (for the API's checks, whose messages name the setting)."""
    return "--" + name.replace("_", "-")


def read_truth(truth: Path, release: Any, release_path: Path, mapping: Path | None = None) -> Any:
    """The ``--truth`` population (of a declared census: read with the ``--mapping`` file, if
    given), refused unless it is the one ``release`` was made from."""
    from sdclab.censuses import us2010
    from sdclab.censuses.us2010.population.io import read_population
    from sdclab.core.digest import check_same_input
    from sdclab.pipeline.api import NO_MAPPING

    population: Any
    if release.census is us2010.census():
        if mapping is not None:
            raise InputError(f"--{NO_MAPPING}")
        population = read_population(truth)
    else:  # a declared census: its persons' file, read against the release's census
        from sdclab.core.census.records import read_records

        population = read_records(release.census, truth, mapping)
    what = f"--truth {truth} and release {release_path}"
    check_same_input(release.input_digest, *population.frames, what=what)
    return population


def given(*paths: Path | None) -> tuple[Path, ...]:
    """The input files and directories given (an output may replace none of them)."""
    return tuple(p for p in paths if p is not None)


def read_reidentification(file: Path) -> Any:
    """A reidentification's metrics.json as typed figures; a malformed file is an input error."""
    from sdclab.core.fileio import read_json_object
    from sdclab.pipeline.results.reidentification import Reidentification

    data = read_json_object(file)
    try:
        return Reidentification.from_dict(data)
    except (KeyError, TypeError, ValueError, AssertionError, AttributeError) as exc:
        raise InputError(
            f"{file}: not the figures of a reidentification (sdclab reidentify writes them; "
            f"{type(exc).__name__}: {exc})"
        ) from None


@app.command()
@reports_input_errors
def synth(
    out: OutOption,
    persons: Annotated[
        int, typer.Option("--persons", "-n", min=1, help="Number of persons.")
    ] = 20_000,
    seed: Annotated[int | None, typer.Option(help="Seed (omit for OS entropy).")] = None,
    tracts: Annotated[
        int | None, typer.Option(help="Number of tracts (default: about one per 4,000 persons).")
    ] = None,
    counties: Annotated[
        int | None,
        typer.Option(help="Number of counties (default: about one per 100,000 persons)."),
    ] = None,
    states: Annotated[
        int | None,
        typer.Option(help="Number of states (default: about one per 6,000,000 persons)."),
    ] = None,
    generator: Annotated[
        str | None,
        typer.Option(help="Generator version (default: the newest; 1.2 reproduces older studies)."),
    ] = None,
) -> None:
    """Generate a seeded synthetic census population (persons, units, blocks, synth.json)."""
    from sdclab.censuses.us2010.population.io import POPULATION_KIND, write_population
    from sdclab.censuses.us2010.population.synth import GENERATOR_VERSION, build_report
    from sdclab.censuses.us2010.population.synth_geography import GeographyCounts
    from sdclab.core.fileio import check_replaceable
    from sdclab.core.randomness import check_seed
    from sdclab.pipeline import api

    start = time.perf_counter()
    check_seed(seed)
    check_replaceable(out, POPULATION_KIND)
    population = api.synthesize(
        persons, seed=seed, tracts=tracts, counties=counties, states=states, generator=generator
    )
    geography = GeographyCounts(tracts, counties, states)
    report = build_report(population, seed, geography, generator or GENERATOR_VERSION)
    write_population(population, out, {"synth.json": report})
    typer.echo(
        f"wrote {population.n_persons:,} persons and {population.n_units:,} units to {out} "
        f"in {time.perf_counter() - start:.1f} s"
    )


@app.command()
@reports_input_errors
def tabulate(
    population: PopulationArgument,
    out: OutOption,
    tables: Annotated[
        str | None, typer.Option(help="Comma-separated table names (default: all).")
    ] = None,
    census: CensusOption = None,
    mapping: MappingOption = None,
) -> None:
    """Write the exact, unprotected tables of a population (mechanism 'none')."""
    from sdclab.core.fileio import check_replaceable
    from sdclab.pipeline import api
    from sdclab.release import RELEASE_KIND, write_release

    names = parse_table_list(tables, census)
    check_replaceable(out, RELEASE_KIND, given(population, mapping))
    pop = api.read_population(population, census=census, mapping=mapping)
    release = api.tabulate(pop, tables=names)
    write_release(release, out)  # apart from the population it was made from
    typer.echo(f"wrote {len(release.tables)} exact tables to {out} (not fit for publication)")


@app.command()
@reports_input_errors
def protect(
    population: PopulationArgument,
    out: OutOption,
    mechanism: MechanismOption,
    settings: SetOption = None,
    seed: Annotated[
        int | None, typer.Option(help="Seed (reproducible, not fit for publication).")
    ] = None,
    census: CensusOption = None,
    mapping: MappingOption = None,
) -> None:
    """Protect a population with a mechanism and write the release (tables, microdata, card)."""
    from sdclab import protection
    from sdclab.censuses import census_named
    from sdclab.core.fileio import check_replaceable
    from sdclab.pipeline import api
    from sdclab.release import RELEASE_KIND, write_release

    params = protection.parse_settings(settings or [])
    entry = protection.get(mechanism)
    parsed = entry.parse(params, census_named(census or "us2010"))  # before any reading
    protection.check_seed(seed)
    check_replaceable(out, RELEASE_KIND, given(population, mapping))
    entry.check_run(parsed, seed, (population, out))  # as api.protect checks it, and the output
    pop = api.read_population(population, census=census, mapping=mapping)
    start = time.perf_counter()
    release = api.protect(pop, mechanism, seed=seed, **params)
    write_release(release, out)  # apart from the population it was made from
    fit = "" if release.randomness.get("fit_for_publication") else " (not fit for publication)"
    if release.protection is not None and release.protection.reason is not None:
        fit = f" (not fit for publication: {release.protection.reason})"
    typer.echo(
        f"{mechanism}: wrote {len(release.tables)} tables"
        + (" and protected microdata" if release.person_microdata is not None else "")
        + f" to {out} in {time.perf_counter() - start:.1f} s{fit}"
    )
    typer.echo(f"budget: {release.card.guarantee.text()}")


class Knowledge(StrEnum):
    """What the reconstruction knows of the release's noise."""

    published = "published"
    tables = "tables"
    naive = "naive"


KnowledgeOption = Annotated[
    Knowledge,
    typer.Option(
        help="published: model the noise the release states (never rules out what the "
        "mechanism could have produced), with TopDown's noisy measurements; tables: the "
        "same without the measurements; naive: every count exact, every 0 a true 0."
    ),
]


TargetOption = Annotated[
    str | None,
    typer.Option(
        help="A further attack the census declares (eu2021: grid, each 1 km cell from the "
        "grid's tables alone) instead of its main one.",
    ),
]


@app.command()
@reports_input_errors
def reconstruct(
    release: Annotated[Path, typer.Argument(help="Release directory to attack.")],
    out: OutOption,
    workers: Annotated[int | None, typer.Option(help="Processes (default: all cores).")] = None,
    executor: Annotated[
        str | None,
        typer.Option(help="local (default), dask://HOST:PORT or dask-local[:N]."),
    ] = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option(help="Directory keeping finished tracts; a re-run resumes from it."),
    ] = None,
    variability: Annotated[
        bool, typer.Option("--variability", help="Also compute solution variability per block.")
    ] = False,
    block_only: Annotated[
        bool,
        typer.Option(
            "--block-only",
            help="From the block-level tables alone, leaving out the tract tables (the attack "
            "paper's rHDF_b): ages above 21 are known to their agebin only.",
        ),
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed of the solvers' tie-breaking.")] = 0,
    time_limit: Annotated[
        float, typer.Option(help="Seconds per tract program before the best is taken.")
    ] = 300.0,
    node_limit: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Branch-and-bound nodes per integer program before the best is taken: work, "
            "not wall time, so the same seed gives the same reconstruction on any machine "
            "(unless a tract reaches --time-limit first: the output counts those).",
        ),
    ] = None,
    knowledge: KnowledgeOption = Knowledge.published,
    target: TargetOption = None,
) -> None:
    """Reconstruct block-level person records from a release alone."""
    from sdclab.attacks.reconstruction import DRAWS
    from sdclab.attacks.reconstruction_files import RECONSTRUCTION_KIND
    from sdclab.core.fileio import check_replaceable
    from sdclab.pipeline import api

    check_replaceable(out, RECONSTRUCTION_KIND, (release,))
    api.check_reconstruction(  # as api.reconstruct checks them, before the release is read
        workers=workers,
        executor=executor,
        seed=seed,
        time_limit=time_limit,
        knowledge=knowledge.value,
        draws=DRAWS,
        checkpoint=checkpoint,
        inputs=(release, out),
        named=option,
        node_limit=node_limit,
        block_only=block_only,
    )
    rel = api.read_release(release)
    result = api.reconstruct(
        rel,
        workers=workers,
        executor=executor,
        seed=seed,
        time_limit=time_limit,
        variability=variability,
        checkpoint=checkpoint,
        knowledge=knowledge.value,
        node_limit=node_limit,
        block_only=block_only,
        target=target,
    )
    attacked = rel if target is None else rel.aimed_at(target)
    _write_reconstruction(out, release, attacked, result, workers)
    _echo_reconstruction(result, attacked.census.within, block_only, out)


def _write_reconstruction(
    out: Path, release: Path, rel: Release, result: ReconstructionResult, workers: int | None
) -> None:
    """Write the reconstruction of the release at ``release`` (read as ``rel``) to ``out``, its
    metrics naming the release and the workers asked for."""
    from sdclab.attacks.reconstruction_files import write_reconstruction

    metrics = {"release": str(release.resolve()), **result.to_dict(), "workers": workers}
    write_reconstruction(out, result, metrics, result.solvar, (release,), rel.census)


def _echo_reconstruction(
    result: ReconstructionResult, within: str, block_only: bool, out: Path
) -> None:
    """Say what a reconstruction found: persons, units, solver statuses, the tracts a time limit
    stopped, solution variability, and where it was written."""
    statuses = ", ".join(f"{k}: {v}" for k, v in result.statuses.items())
    seconds = result.seconds  # a fresh run always times itself
    took = "" if isinstance(seconds, NotMeasured) else f" in {seconds:.1f} s"
    tables = " from the block tables alone" if block_only else ""
    typer.echo(
        f"reconstructed {result.n_persons:,} persons in {result.tracts.height} "
        f"{within}s{tables}"
        f"{took} ({statuses})"
    )
    if result.time_limited_tracts:
        typer.echo(
            f"{result.time_limited_tracts} of them stopped at the time limit: a rerun may differ "
            "(--node-limit stops the solver at the same point on every run)"
        )
    summary = result.variability
    if not isinstance(summary, NotMeasured):
        typer.echo(
            f"solution variability: {show_share(summary.share_blocks_solvar_zero)} of blocks "
            f"({show_share(summary.share_persons_solvar_zero)} of persons) have a unique "
            "reconstruction"
        )
    typer.echo(f"written to {out}")


@app.command()
@reports_input_errors
def reidentify(
    recon: Annotated[Path, typer.Argument(help="Reconstruction directory (sdclab reconstruct).")],
    truth: TruthOption,
    out: OutOption,
    attacker: Annotated[str, typer.Option(help="Attacker file preset: commercial or census.")] = (
        "commercial"
    ),
    settings: SetOption = None,
    release: Annotated[
        Path | None, typer.Option(help="Release attacked (default: the one in RECON/metrics.json).")
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help="Seed of the attacker file and tie-breaks.")
    ] = None,
    vulnerable: Annotated[
        Path | None,
        typer.Option(
            help="Reconstruction of the exact release with variability (sdclab tabulate, then "
            "sdclab reconstruct --variability): scores the population's fixed vulnerable group."
        ),
    ] = None,
    mapping: MappingOption = None,
) -> None:
    """Link reconstructed records to an attacker's file; score them and the MDG/PRG baselines."""
    from sdclab.attacks.linkage import attacker_parameters
    from sdclab.attacks.reconstruction_files import METRICS_FILE, attacked_release
    from sdclab.core.fileio import check_replaceable, output_directory, write_json, write_parquet
    from sdclab.pipeline import api
    from sdclab.protection import check_seed, parse_settings

    overrides = parse_settings(settings or [])
    attacker_parameters(attacker, overrides)  # bad parameters fail before any reading
    check_seed(seed)
    inputs = given(recon, truth, vulnerable, mapping)
    check_replaceable(out, REIDENTIFICATION_KIND, inputs)
    reconstruction = api.read_reconstruction(recon)
    if release is None:
        release = attacked_release(recon)
    rel = api.read_release(release)
    population = read_truth(truth, rel, release, mapping)
    group = None
    if vulnerable is not None:
        exact = attacked_release(vulnerable, NO_EXACT_RELEASE)
        # the exact release of this population
        read_truth(truth, api.read_release(exact), exact, mapping)
        group = api.vulnerable_group(population, reconstruction=api.read_reconstruction(vulnerable))
    result = api.reidentify(
        reconstruction,
        rel,
        population,
        attacker=attacker,
        seed=seed,
        vulnerable=group,
        **overrides,
    )
    figures = {**result.to_dict(), "release": str(release), "seed": seed}
    if group is not None:
        figures["vulnerable"] = group.to_dict()
    assert result.links is not None
    with output_directory(out, REIDENTIFICATION_KIND, inputs) as tmp:
        write_parquet(result.links, tmp / "links.parquet")
        write_json(figures, tmp / METRICS_FILE)
    typer.echo(f"attacker {result.attacker}: {result.attacker_records:,} records")
    for name, method in result.methods().items():
        rates = method.all
        typer.echo(
            f"{name:>14}: putative {show_share(rates.putative_rate)}, confirmed "
            f"{show_share(rates.confirmed_rate)}, precision {show_share(rates.precision)}"
        )
    if group is not None and "vulnerable" in result.headline_groups():
        head = result.headline("vulnerable")
        typer.echo(
            f"vulnerable group: {group.size:,} persons; confirmed "
            f"{show_share(head.reconstruction.confirmed_rate)} against "
            f"{show_share(head.baseline.confirmed_rate)} for the best baseline "
            f"({head.best_baseline})"
        )
    typer.echo(f"written to {out}")


@app.command()
@reports_input_errors
def evaluate(
    release: Annotated[Path, typer.Argument(help="Release directory.")],
    truth: TruthOption,
    out: OutOption,
    recon: Annotated[Path | None, typer.Option(help="Reconstruction of this release.")] = None,
    reid: Annotated[Path | None, typer.Option(help="Reidentification results.")] = None,
    mapping: MappingOption = None,
) -> None:
    """Accuracy of a release against the truth, and the risk measured by the attacks on it."""
    from sdclab.attacks.reconstruction_files import METRICS_FILE
    from sdclab.core.fileio import check_replaceable, output_directory, write_json
    from sdclab.pipeline import api
    from sdclab.pipeline.results.truth import marked

    inputs = given(release, truth, recon, reid, mapping)
    check_replaceable(out, EVALUATION_KIND, inputs)
    rel = api.read_release(release)
    population = read_truth(truth, rel, release, mapping)
    # every input is read and checked before anything is computed
    reconstruction = api.read_reconstruction(recon) if recon is not None else None
    links = read_reidentification(reid / METRICS_FILE) if reid is not None else None
    result = api.evaluate(rel, population, reconstruction=reconstruction, reidentification=links)
    metrics = marked({"release": str(release), **result.to_dict()})
    with output_directory(out, EVALUATION_KIND, inputs) as tmp:
        write_json(metrics, tmp / METRICS_FILE)
    for level, values in result.by_level.items():
        typer.echo(
            f"{level:>12}: mean absolute error {values.mean_mae:.3f} ({values.tables} tables)"
        )
    typer.echo(f"written to {out}")


@app.command("ckm-risk")
@reports_input_errors
def ckm_risk(
    release: Annotated[Path, typer.Argument(help="A cellkey release directory.")],
    out: OutOption,
    truth: Annotated[
        Path | None,
        typer.Option("--truth", help="The confidential population (evaluation only)."),
    ] = None,
    mapping: MappingOption = None,
) -> None:
    """The cell key method's risk analyses: noise-bound disclosure from additive tuples, tuples
    whose truth is pinned, redundant representations and the averaging attack."""
    from sdclab import protection
    from sdclab.attacks.reconstruction_files import METRICS_FILE
    from sdclab.core.fileio import check_replaceable, output_directory, write_json
    from sdclab.pipeline import api

    if truth is None and mapping is not None:
        raise InputError("--mapping names the columns and codes of the --truth file: give --truth")
    inputs = given(release, truth, mapping)
    check_replaceable(out, CKM_RISK_KIND, inputs)
    rel = api.read_release(release)
    analyse = protection.get(rel.mechanism).risk_analysis
    if analyse is None:
        raise InputError(
            f"{release}: a {rel.mechanism} release; ckm-risk needs a release of a mechanism with "
            "a risk analysis of its own (cellkey)"
        )
    truth_read = read_truth(truth, rel, release, mapping) if truth is not None else None
    figures = analyse(rel, truth_read)
    with output_directory(out, CKM_RISK_KIND, inputs) as tmp:
        write_json(
            {"schema_version": SCHEMA_VERSION, "release": str(release), **figures},
            tmp / METRICS_FILE,
        )
    a, b, c = figures["bound_disclosure"], figures["pinned"], figures["averaging"]
    scope = figures.get("scope")
    kind = "3-tuples" if scope is None else "tuples"
    typer.echo(
        f"noise bound of large counts {a['large_count_bound']}: estimated "
        f"{a['bound_estimated']} from "
        f"{a['tuples_present']} {kind} (p1 {_figure(a['p1_independent'], '.3g')} independent, "
        f"{_figure(a['p1_exact_keys'], '.3g')} exact keys; risk "
        f"{_figure(a['risk_independent'], '.3f')})"
    )
    if scope is not None:
        by = ", ".join(f"{n} of {c_} children" for c_, n in _tuple_counts(a).items())
        typer.echo(f"tuples by parent's children: {by or 'none'}")
    typer.echo(f"pinned {kind}: {b['pinned']} of {b['tuples']}")
    if scope is not None and c["most_exposed"]:
        e = c["most_exposed"][0]
        typer.echo(
            f"most exposed statistic: {e['table']} at {e['level']} ({e['cell']}): "
            f"t = {e['t']} representations, k/t² = {e['k_over_t2']:.3g}"
        )
    if "attack" in c:
        typer.echo(
            f"averaging attack: {c['attack']['averaged_exact_share']:.1%} of non-empty cells exact "
            f"(published values: {c['attack']['published_exact_share']:.1%})"
        )
    typer.echo(f"written to {out}")


def _figure(value: Any, spec: str) -> str:
    """A figure in ``spec``, or its n/a reason."""
    return value if isinstance(value, str) else format(value, spec)


def _tuple_counts(bound: dict[str, Any]) -> dict[str, int]:
    """Tuples present by the number of children of their parent."""
    return {c: int(v["tuples"]) for c, v in bound.get("tuples_by_children", {}).items()}


@app.command()
@reports_input_errors
def audit(
    mechanism: Annotated[str, typer.Option("--mechanism", "-m", help="Mechanism to audit.")],
    settings: SetOption = None,
    trials: Annotated[
        int,
        typer.Option(
            "--trials", help="Independent copies of each neighbouring dataset (one run of each)."
        ),
    ] = 10_000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the audit's runs.")] = 0,
    alpha: Annotated[
        float, typer.Option("--alpha", help="1 − the confidence of the lower bound.")
    ] = 0.05,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Also write the result as JSON here.")
    ] = None,
) -> None:
    """Privacy audit: run the mechanism many times on neighbouring datasets and bound its privacy
    loss from below (Clopper–Pearson), beside the card's claim. Exit 3 if the bound exceeds it."""
    from sdclab.core.fileio import check_output_file, write_output_file
    from sdclab.pipeline import api
    from sdclab.protection import check_seed, parse_settings

    check_seed(seed)
    if out is not None:
        check_output_file(out, AUDIT_KIND)
    result = api.audit(
        mechanism, trials=trials, seed=seed, alpha=alpha, **parse_settings(settings or [])
    )
    if out is not None:
        write_output_file({"schema_version": SCHEMA_VERSION, **result.to_dict()}, out, AUDIT_KIND)
    claim = result.claim
    claimed = f"{claim.value:.4g}" if math.isfinite(claim.value) else "nothing"
    typer.echo(
        f"{mechanism}: {result.unit} ≥ {result.lower_bound:.4g} with {(1 - alpha) * 100:g}% "
        f"confidence (claimed {claimed}; {claim.observed}; neighbours: "
        f"{claim.neighbours}; {result.trials:,} trials of each dataset)"
    )
    typer.echo(
        f"event: {result.event}: P[E | D] = {result.p_d:.4f}, P[E | D′] = {result.p_d_prime:.4f}"
    )
    if result.violated:
        typer.echo(
            f"VIOLATION: the measured {result.unit} exceeds the card's claim (a sound mechanism "
            f"does this with probability at most {alpha:g})",
            err=True,
        )
        raise typer.Exit(3)

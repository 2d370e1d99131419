"""The ``sdclab`` command line.

Exit codes: 0 success, 2 bad input or usage (one line on stderr, nothing written), 1 internal error,
3 a privacy audit measured more privacy loss than the mechanism's card claims.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from typer.core import TyperGroup

from sdclab.errors import DISK_FULL, InputError, escape_control
from sdclab.results import SCHEMA_VERSION, NotMeasured, ReconstructionResult, show_share

if TYPE_CHECKING:
    from sdclab.release import Release


class OneLineErrors(TyperGroup):
    """The command group, with usage errors as one line (exit 2) instead of a framed box, and a
    reader that closed the pipe early taken as the end of the output, not as an error."""

    def main(  # type: ignore[override]
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        call = {"args": args, "prog_name": prog_name, "complete_var": complete_var, **extra}
        if not standalone_mode:
            return super().main(**call, standalone_mode=False)
        try:
            code = super().main(**call, standalone_mode=False)
        except typer.Abort:
            typer.echo("aborted", err=True)
            sys.exit(130)
        except Exception as exc:
            exit_code = getattr(exc, "exit_code", None)
            if not (isinstance(exit_code, int) and hasattr(exc, "format_message")):
                raise  # not a command-line error: a bug
            if type(exc).__name__ == "NoArgsIsHelpError":  # `sdclab` alone: the help
                typer.echo(exc.format_message())
                sys.exit(0)
            context = getattr(exc, "ctx", None)
            where = context.command_path if context is not None else "sdclab"
            text = escape_control(exc.format_message())
            typer.echo(f"error: {where}: {text} (see {where} --help)", err=True)
            sys.exit(exit_code)
        sys.exit(code if isinstance(code, int) else 0)


def quiet_closed_pipe() -> None:
    """Send what is still to be printed nowhere: the reader of our output has gone."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, stream.fileno())


def progress(text: str) -> None:
    """A progress line on stderr; a reader that has gone away stops the lines, not the work
    (a closed pipe ends a command with exit 0 only once its output is written)."""
    try:
        typer.echo(text, err=True)
    except BrokenPipeError:
        quiet_closed_pipe()


app = typer.Typer(
    cls=OneLineErrors,
    name="sdclab",
    help="Statistical disclosure control of census tables: protect, attack, evaluate.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

F = TypeVar("F", bound=Callable[..., Any])


def reports_input_errors(fn: F) -> F:
    """Turn an :class:`InputError` (or an unreadable/unwritable path) into one line, exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            typer.echo(f"error: {exc.one_line()}", err=True)
            raise typer.Exit(2) from None
        except BrokenPipeError:  # only the last lines print after the work: it is done
            quiet_closed_pipe()
            raise typer.Exit(0) from None
        except OSError as exc:  # a path the user named cannot be read or written
            text = f"{exc.strerror or exc}: {exc.filename}" if exc.filename else exc.strerror
            if exc.errno in DISK_FULL:  # no room for an output (nothing of it is left)
                text = f"{DISK_FULL[exc.errno]} writing {exc.filename or 'the output'}"
            typer.echo(f"error: {escape_control(str(text or exc))}", err=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


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


def read_truth(truth: Path, release: Any, release_path: Path) -> Any:
    """The ``--truth`` population, refused unless it is the one ``release`` was made from."""
    from sdclab.censuses import us2010
    from sdclab.digest import check_same_input
    from sdclab.population.io import read_population

    population: Any
    if release.census is us2010.census():
        population = read_population(truth)
    else:  # a declared census: its persons' file, read against the release's census
        from sdclab.census.records import read_records

        population = read_records(release.census, truth)
    what = f"--truth {truth} and release {release_path}"
    check_same_input(release.input_digest, *population.frames, what=what)
    return population


def read_reidentification(file: Path) -> Any:
    """A reidentification's metrics.json as typed figures; a malformed file is an input error."""
    from sdclab.fileio import read_json_object
    from sdclab.results import Reidentification

    data = read_json_object(file)
    try:
        return Reidentification.from_dict(data)
    except (KeyError, TypeError, ValueError, AssertionError, AttributeError) as exc:
        raise InputError(
            f"{file}: not the figures of a reidentification (sdclab reidentify writes them; "
            f"{type(exc).__name__}: {exc})"
        ) from None


MECHANISM_NAMES = (
    "none, psa, swap, swap-low, swap-high, gaussian, topdown, cellkey, geometric, safetab_h, "
    "suppress"
)
"""The registered mechanisms, for the help text (kept equal to the registry by a test, so that
``sdclab --help`` need not import them)."""
MechanismOption = Annotated[
    str,
    typer.Option(
        "--mechanism",
        "-m",
        help=f"Mechanism: {MECHANISM_NAMES} (their parameters: sdclab mechanisms).",
    ),
]

TruthOption = Annotated[
    Path,
    typer.Option(
        "--truth",
        help="The confidential population (of a declared census: its persons' file).",
    ),
]
SetOption = Annotated[
    list[str] | None, typer.Option("--set", help="Parameter as key=value (repeatable).")
]
OutOption = Annotated[
    Path, typer.Option("--out", "-o", help="Output directory (replaced atomically).")
]


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
    from sdclab import api
    from sdclab.fileio import check_replaceable
    from sdclab.population.io import POPULATION_KIND, write_population
    from sdclab.population.synth import GENERATOR_VERSION, build_report
    from sdclab.population.synth_geography import GeographyCounts
    from sdclab.randomness import check_seed

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


PopulationArgument = Annotated[
    Path,
    typer.Argument(
        help="Population directory (persons + units); with --census, the persons' file."
    ),
]
CensusOption = Annotated[
    str | None,
    typer.Option(help="The census: us2010 (default) or a census file (docs/census.md)."),
]


@app.command()
@reports_input_errors
def tabulate(
    population: PopulationArgument,
    out: OutOption,
    tables: Annotated[
        str | None, typer.Option(help="Comma-separated table names (default: all).")
    ] = None,
    census: CensusOption = None,
) -> None:
    """Write the exact, unprotected tables of a population (mechanism 'none')."""
    from sdclab import api
    from sdclab.fileio import check_replaceable
    from sdclab.release import RELEASE_KIND, write_release

    names = parse_table_list(tables, census)
    check_replaceable(out, RELEASE_KIND, (population,))
    release = api.tabulate(api.read_population(population, census=census), tables=names)
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
) -> None:
    """Protect a population with a mechanism and write the release (tables, microdata, card)."""
    from sdclab import api, protection
    from sdclab.censuses import census_named
    from sdclab.fileio import check_replaceable
    from sdclab.release import RELEASE_KIND, write_release

    params = protection.parse_settings(settings or [])
    entry = protection.get(mechanism)
    parsed = entry.parse(params, census_named(census or "us2010"))  # before any reading
    protection.check_seed(seed)
    check_replaceable(out, RELEASE_KIND, (population,))
    entry.check_run(parsed, seed, (population, out))  # as api.protect checks it, and the output
    pop = api.read_population(population, census=census)
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
    knowledge: Annotated[
        Knowledge,
        typer.Option(
            help="published: model the noise the release states (never rules out what the "
            "mechanism could have produced), with TopDown's noisy measurements; tables: the "
            "same without the measurements; naive: every count exact, every 0 a true 0."
        ),
    ] = Knowledge.published,
) -> None:
    """Reconstruct block-level person records from a release alone."""
    from sdclab import api
    from sdclab.attacks.reconstruction import DRAWS
    from sdclab.attacks.reconstruction_files import RECONSTRUCTION_KIND
    from sdclab.fileio import check_replaceable

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
    )
    _write_reconstruction(out, release, rel, result, workers)
    _echo_reconstruction(result, rel.census.within, block_only, out)


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
) -> None:
    """Link reconstructed records to an attacker's file; score them and the MDG/PRG baselines."""
    from sdclab import api
    from sdclab.attacks.linkage import attacker_parameters
    from sdclab.attacks.reconstruction_files import METRICS_FILE, attacked_release
    from sdclab.fileio import check_replaceable, output_directory, write_json, write_parquet
    from sdclab.protection import check_seed, parse_settings

    overrides = parse_settings(settings or [])
    attacker_parameters(attacker, overrides)  # bad parameters fail before any reading
    check_seed(seed)
    inputs = (recon, truth) if vulnerable is None else (recon, truth, vulnerable)
    check_replaceable(out, REIDENTIFICATION_KIND, inputs)
    reconstruction = api.read_reconstruction(recon)
    if release is None:
        release = attacked_release(recon)
    rel = api.read_release(release)
    population = read_truth(truth, rel, release)
    group = None
    if vulnerable is not None:
        exact = attacked_release(vulnerable, NO_EXACT_RELEASE)
        read_truth(truth, api.read_release(exact), exact)  # the exact release of this population
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
) -> None:
    """Accuracy of a release against the truth, and the risk measured by the attacks on it."""
    from sdclab import api
    from sdclab.attacks.reconstruction_files import METRICS_FILE
    from sdclab.fileio import check_replaceable, output_directory, write_json
    from sdclab.results import marked

    inputs = tuple(p for p in (release, truth, recon, reid) if p is not None)
    check_replaceable(out, EVALUATION_KIND, inputs)
    rel = api.read_release(release)
    population = read_truth(truth, rel, release)
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
) -> None:
    """The cell key method's risk analyses: noise-bound disclosure from additive tuples, tuples
    whose truth is pinned, redundant representations and the averaging attack."""
    from sdclab import api, protection
    from sdclab.attacks.reconstruction_files import METRICS_FILE
    from sdclab.fileio import check_replaceable, output_directory, write_json

    inputs = tuple(p for p in (release, truth) if p is not None)
    check_replaceable(out, CKM_RISK_KIND, inputs)
    rel = api.read_release(release)
    analyse = protection.get(rel.mechanism).risk_analysis
    if analyse is None:
        raise InputError(
            f"{release}: a {rel.mechanism} release; ckm-risk needs a release of a mechanism with "
            "a risk analysis of its own (cellkey)"
        )
    figures = analyse(rel, read_truth(truth, rel, release) if truth is not None else None)
    with output_directory(out, CKM_RISK_KIND, inputs) as tmp:
        write_json(
            {"schema_version": SCHEMA_VERSION, "release": str(release), **figures},
            tmp / METRICS_FILE,
        )
    a, b, c = figures["bound_disclosure"], figures["pinned"], figures["averaging"]
    typer.echo(
        f"noise bound of large counts {a['large_count_bound']}: estimated "
        f"{a['bound_estimated']} from "
        f"{a['tuples_present']} 3-tuples (p1 {a['p1_independent']:.3g} independent, "
        f"{a['p1_exact_keys']:.3g} exact keys; risk {a['risk_independent']:.3f})"
    )
    typer.echo(f"pinned 3-tuples: {b['pinned']} of {b['tuples']}")
    if "attack" in c:
        typer.echo(
            f"averaging attack: {c['attack']['averaged_exact_share']:.1%} of non-empty cells exact "
            f"(published values: {c['attack']['published_exact_share']:.1%})"
        )
    typer.echo(f"written to {out}")


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
    from sdclab import api
    from sdclab.fileio import check_output_file, write_output_file
    from sdclab.protection import check_seed, parse_settings

    check_seed(seed)
    if out is not None:
        check_output_file(out, AUDIT_KIND)
    result = api.audit(
        mechanism, trials=trials, seed=seed, alpha=alpha, **parse_settings(settings or [])
    )
    if out is not None:
        write_output_file(result.to_dict(), out, AUDIT_KIND)
    claim = result.claim
    typer.echo(
        f"{mechanism}: {result.unit} ≥ {result.lower_bound:.4g} with {(1 - alpha) * 100:g}% "
        f"confidence (claimed {claim.value:.4g}; {claim.observed}; neighbours: "
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


@app.command()
@reports_input_errors
def spec(
    mechanism: MechanismOption,
    settings: SetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the card as JSON.")] = False,
) -> None:
    """Print a mechanism's DP specification card (all five building blocks)."""
    import json

    from sdclab.protection import get, parse_settings

    entry = get(mechanism)
    card = entry.card(entry.parse(parse_settings(settings or [])))
    if as_json:
        typer.echo(json.dumps(card.to_dict(), indent=2))
    else:
        typer.echo(card.render())


@app.command()
@reports_input_errors
def budget(
    mechanism: Annotated[
        str, typer.Argument(help="topdown, safetab_h or geometric; cellkey: its cell noise.")
    ],
    level: Annotated[
        str | None,
        typer.Option(
            help="Geography level (SafeTab-H: regional, detailed-national or detailed-local)."
        ),
    ] = None,
    query: Annotated[
        str | None,
        typer.Option(
            help="TopDown: a query (default total) or a published table (P12); geometric: the "
            "table."
        ),
    ] = None,
    at: Annotated[
        float | None,
        typer.Option("--budget", help="The error at this budget (rho; geometric: epsilon)."),
    ] = None,
    moe: Annotated[
        int | None, typer.Option(help="The budget for a 95% margin of error of at most this.")
    ] = None,
    rmse: Annotated[
        float | None, typer.Option(help="The budget for an RMSE of at most this.")
    ] = None,
    count: Annotated[
        int | None,
        typer.Option(help="cellkey: the noise of a cell of this true count (default: large)."),
    ] = None,
    settings: SetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")] = False,
    census: CensusOption = None,
) -> None:
    """The error a budget gives one query or table at one level, or the budget a target error
    needs; for the cell key method, which has no budget, the noise of one cell."""
    import json

    from sdclab import budget as budgets
    from sdclab.censuses import census_named
    from sdclab.protection import parse_settings

    chosen = None if census is None else census_named(census)
    asked = {"budget": at, "moe": moe, "rmse": rmse}
    given = [(k, v) for k, v in asked.items() if v is not None]
    budgets.check_question(mechanism, [k for k, _ in given], level, count)
    if budgets.has_cell_noise(mechanism):
        found = budgets.cell_key_noise(
            parse_settings(settings or []), count, level, query, chosen, mechanism
        )
        typer.echo(json.dumps(found, indent=2) if as_json else cell_key_text(found))
        return
    assert level is not None
    target, value = given[0]
    noise = budgets.noise_of(mechanism, query, level, parse_settings(settings or []), chosen)
    result = budgets.answer(noise, target, float(value))  # type: ignore[arg-type]
    typer.echo(
        json.dumps(result, indent=2)
        if as_json
        else _budget_text(mechanism, level, noise, target, value, result)
    )


def _budget_text(
    mechanism: str, level: str, noise: Any, target: str, value: float, result: dict[str, Any]
) -> str:
    """The answer of ``sdclab budget`` in words: the error at the budget, or the budget found,
    and for a published table the measured queries its cells are sums of."""
    spread = (
        f"σ² = {result['sigma2']:.4g}" if "sigma2" in result else f"scale {result['scale']:.4g}"
    )
    error = "a 95% margin of error" if target == "moe" else "an RMSE"
    lead = (
        f"at {noise.unit} {value:g}"
        if target == "budget"
        else f"the smallest {noise.unit} for {error} of at most {value:g}: {result['budget']:.6g}"
    )
    if "table" in result:
        spread = f"{_made_of(result)}, each of {spread}: for "
        spread += "it" if result["measured_cells_summed"] == 1 else "the largest"
    text = (
        f"{mechanism}, {result.get('table', noise.query)} at {level}: {lead} → {spread}, 95% "
        f"margin of error ±{result['moe_95']}, RMSE {result['rmse']:.4g} — {noise.caveat}"
    )
    if "table" in result:
        text += f"\n  answered at {level} from: " + "; ".join(map(_cells, result["answered_from"]))
    return text


def _made_of(result: dict[str, Any]) -> str:
    """How a table's cell is made of the chosen query's measured cells, in words."""
    (fewest, most) = next(
        a["cells_summed"] for a in result["answered_from"] if a["query"] == result["query"]
    )
    query = result["query"]
    if most == 1:
        return f"a cell is one measured cell of {query}"
    summed = str(most) if fewest == most else f"{fewest} to {most}"
    return f"a cell is the sum of {summed} measured cells of {query}"


def _cells(answering: dict[str, Any]) -> str:
    """``sex*age (1 to 5 cells)``: a query and how many of its cells a table's cell sums."""
    fewest, most = answering["cells_summed"]
    cells = (
        f"{most} cell{'s' if most > 1 else ''}" if fewest == most else f"{fewest} to {most} cells"
    )
    return f"{answering['query']} ({cells})"


def cell_key_text(found: dict[str, Any]) -> str:
    """The cell key answer in lines: the distribution, its figures and why there is no budget."""
    noise = ", ".join(f"{v:+d}: {p:.6g}" for v, p in found["noise"].items())
    mean = "" if abs(found["mean"]) < 1e-9 else f"mean {found['mean']:.4g}, "
    stated = found["stated_variance"]
    variance = f"variance {found['variance']:.6g}" + (
        f" (the p-table's V = {stated:g})" if stated is not None else ""
    )
    return "\n".join(
        (
            f"cellkey, ptable {found['ptable']}: noise of one cell, {found['row']}:",
            f"  {noise}",
            f"  {mean}{variance}, largest |noise| {found['max_abs']} (the p-table's bound D = "
            f"{found['bound']}), 95% margin of error ±{found['moe_95']}",
            f"  budget: {found['budget']}",
            f"  {found['what']}",
        )
    )


census_app = typer.Typer(
    cls=OneLineErrors,
    help="Censuses: the built-in ones and those declared in files.",
    no_args_is_help=True,
)
app.add_typer(census_app, name="census")


@census_app.command("show")
@reports_input_errors
def show_census(
    census: Annotated[str, typer.Argument(help="A built-in census (us2010) or a census file.")],
) -> None:
    """Print a census: its attributes and breakdowns, geographies, tables and attack settings."""
    from sdclab.census.show import describe
    from sdclab.censuses import census_named

    for line in describe(census_named(census)):
        typer.echo(line)


@app.command("mechanisms")
@reports_input_errors
def list_mechanisms(
    name: Annotated[str | None, typer.Argument(help="One mechanism (default: all).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print them as JSON.")] = False,
) -> None:
    """List every mechanism with its parameters: defaults, units and what each means."""
    import json

    from sdclab import api, protection

    found = [api.describe(protection.get(name))] if name is not None else api.mechanisms()
    if as_json:
        typer.echo(json.dumps([info.to_dict() for info in found], indent=2, default=str))
        return
    for info in found:
        can = [] if info.protects else ["a guarantee and an audit only: it protects no data"]
        typer.echo(f"{info.name}: {info.summary}" + "".join(f" ({c})" for c in can))
        for p in info.parameters:
            unit = f" [{p.unit}]" if p.unit else ""
            default = "required" if p.default is None and p.required else f"default {p.default}"
            typer.echo(f"    {p.name}{unit} ({default}): {p.meaning}")
        if not info.parameters:
            typer.echo("    (no parameters)")


@app.command()
@reports_input_errors
def run(
    experiment: Annotated[Path, typer.Argument(help="Experiment file (TOML).")],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Output directory (finished steps are reused).")
    ],
) -> None:
    """Run an experiment: protect, attack, evaluate; write results.json and report.html."""
    from sdclab.experiment import load_experiment, run_spec

    spec = load_experiment(experiment)
    start = time.perf_counter()
    run_spec(spec, out, progress, (experiment,), str(experiment.resolve()))
    typer.echo(
        f"done in {time.perf_counter() - start:.0f} s; report: {(out / 'report.html').resolve()}"
    )


@app.command()
@reports_input_errors
def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")] = Path("demo-out"),
) -> None:
    """The built-in study: every mechanism on 4,000 synthetic persons, swept and replicated,
    attacked (5 to 11 minutes on 2 cores)."""
    from sdclab.experiment import DEMO, run_spec

    start = time.perf_counter()
    results = run_spec(DEMO, out, progress, source="the built-in demo (sdclab demo)")
    for line in release_lines(results):
        typer.echo(line)
    typer.echo(f"done in {time.perf_counter() - start:.0f} s")
    typer.echo(f"report: {(out / 'report.html').resolve()}")


def release_lines(results: Any) -> list[str]:
    """One line per release of an experiment: its guarantee, common-axis ε, tract MAE of P12
    over non-empty cells (withheld ones counted), and the census attacker's headline risk; an ε
    with a qualifier ("within the PSA's invariants (…)") is marked * and the qualifier given
    after the lines."""
    from sdclab.results import Reidentification

    width = max(13, *(len(t) for t in results.releases))
    lines = [
        f"{'release':>{width}}  {'guarantee':<24} {'ε (1e-10)':>9} {'P12 tract':>9}  "
        "beyond the best baseline (census)"
    ]
    qualified: dict[str, list[str]] = {}
    for title, release in results.releases.items():
        evaluation = release.evaluation
        census = evaluation.reidentification.get("census")
        beyond = "n/a"
        if isinstance(census, Reidentification) and census.baselines():
            points = census.headline("all").points
            beyond = "n/a" if isinstance(points, NotMeasured) else f"{points:+.1f} pp"
        guarantee = evaluation.card.guarantee
        common = evaluation.card.common
        axis = "n/a" if isinstance(common, NotMeasured) else f"{common.epsilon:.2f}"
        if not isinstance(common, NotMeasured) and common.qualifier:
            axis += "*"
            qualified.setdefault(common.qualifier, []).append(title)
        compared = evaluation.compared("tract", "P12")
        value = NotMeasured("") if isinstance(compared, NotMeasured) else compared.mae_nonempty
        mae = "n/a" if isinstance(value, NotMeasured) else f"{value:.3f}"
        budget = guarantee.text() if guarantee.is_formal else "none"
        lines.append(f"{title:>{width}}  {budget:<24} {axis:>9} {mae:>9}  {beyond}")
    for qualifier, titles in qualified.items():
        lines.append(f"* {', '.join(titles)}: ε {qualifier}")
    return lines


def main() -> None:
    """Console entry point: internal errors exit 1 with one line (set SDCLAB_DEBUG for a trace)."""
    try:
        app()
    except Exception as exc:  # a bug, not bad input: say so briefly
        if os.environ.get("SDCLAB_DEBUG"):
            raise
        typer.echo(f"internal error: {escape_control(f'{type(exc).__name__}: {exc}')}", err=True)
        sys.exit(1)

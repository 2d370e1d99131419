"""The ``dinur-nissim`` command: the Dinur–Nissim reconstruction of a random binary database from
noisy subset sums, swept over the noise beside Bach's Eq. 8 (docs/dinur_nissim.md)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sdclab.cli.core import app, progress, reports_input_errors

if TYPE_CHECKING:
    from sdclab.attacks.dinur_nissim_sweep import Sweep

DINUR_NISSIM_KIND = "dinur-nissim"


@app.command("dinur-nissim")
@reports_input_errors
def dinur_nissim(
    records: Annotated[
        list[int] | None,
        typer.Option("--records", "-n", help="Database size (repeatable; default 1000 and 10000)."),
    ] = None,
    noise: Annotated[
        list[str] | None,
        typer.Option(
            "--noise", help="uniform (bounded, E) or laplace (ε) (repeatable; default both)."
        ),
    ] = None,
    level: Annotated[
        list[float] | None,
        typer.Option(
            "--level", help="Share recovered defining success (repeatable; default 0.99, 0.9)."
        ),
    ] = None,
    queries: Annotated[
        str, typer.Option("--queries", help="hadamard (structured, fast) or random (small n).")
    ] = "hadamard",
    per_record: Annotated[
        float | None,
        typer.Option("--queries-per-record", help="t = this × n (default: t ≥ n·ln²n)."),
    ] = None,
    magnitude: Annotated[
        str | None,
        typer.Option(
            "--magnitude", help="One attack at this E or ε (one --noise) instead of a sweep."
        ),
    ] = None,
    alpha: Annotated[float, typer.Option("--alpha", help="Eq. 8's confidence.")] = 0.99,
    seed: Annotated[int, typer.Option("--seed", help="Seed of database, queries, noise.")] = 0,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Also write the result as JSON here.")
    ] = None,
) -> None:
    """Reconstruct a random binary database from noisy subset-sum queries (Dinur–Nissim) and find
    the noise at which it fails, beside Bach's Eq. 8 for the same n and t."""
    from sdclab.attacks.dinur_nissim_sweep import sweep
    from sdclab.core.errors import InputError
    from sdclab.core.fileio import check_output_file, write_output_file
    from sdclab.core.randomness import check_seed

    check_seed(seed)
    if queries not in ("hadamard", "random"):
        raise InputError(f"--queries: expected hadamard or random, not {queries!r}")
    sizes, kinds = records or [1000, 10000], noise or ["uniform", "laplace"]
    if out is not None:
        check_output_file(out, DINUR_NISSIM_KIND)
    if magnitude is not None:
        data = _single(sizes, kinds, magnitude, queries, per_record, seed)
    else:
        result = sweep(
            sizes,
            kinds=kinds,  # type: ignore[arg-type]  # checked by sweep
            levels=level or [0.99, 0.9],
            design=queries,  # type: ignore[arg-type]
            queries_per_record=per_record,
            seed=seed,
            alpha=alpha,
            progress=progress,
        )
        _print_sweep(result)
        data = result.to_dict()
    if out is not None:
        write_output_file(data, out, DINUR_NISSIM_KIND)
        typer.echo(f"written to {out}")


def _single(
    sizes: list[int],
    kinds: list[str],
    magnitude: str,
    design: str,
    per_record: float | None,
    seed: int,
) -> dict[str, Any]:
    """One attack per size at the given noise; prints one line each."""
    import math

    from sdclab.attacks.dinur_nissim import Experiment, Noise, QueryDesign
    from sdclab.core.errors import InputError

    if len(kinds) != 1 or kinds[0] not in ("uniform", "laplace"):
        raise InputError("--magnitude: give exactly one --noise (uniform or laplace)")
    try:
        value = Fraction(magnitude)
    except (ValueError, ZeroDivisionError):
        raise InputError(
            f"--magnitude {magnitude!r}: expected a number such as 40 or 0.05"
        ) from None
    noise = Noise(kinds[0], value)  # type: ignore[arg-type]
    designs = [
        QueryDesign.make(n, design, None if per_record is None else math.ceil(per_record * n))  # type: ignore[arg-type]
        for n in sizes
    ]
    trials = []
    for query_design in designs:
        trial = Experiment(query_design, seed).attack(noise, seed)
        typer.echo(f"n = {query_design.records:,}: {query_design.describe()}")
        typer.echo(
            f"  {noise.label()}: {trial.recovered:.2%} of the records recovered "
            f"({trial.wrong:,} wrong); largest noise term {trial.largest_noise:,} "
            f"(√n = {math.sqrt(query_design.records):.1f})"
        )
        trials.append(
            {
                "records": query_design.records,
                "queries": query_design.queries,
                "design": query_design.describe(),
                "noise": noise.kind,
                "magnitude": float(noise.magnitude),
                "recovered": trial.recovered,
                "wrong": trial.wrong,
                "largest_noise": trial.largest_noise,
            }
        )
    return {"attacks": trials}


def _print_sweep(result: Sweep) -> None:
    """The sweep as a small table, then the scaling and the extrapolation to n = 10⁶."""
    for size in result.sizes:
        typer.echo(f"n = {size.design.records:,}: {size.design.describe()}")
    names = [
        f"{'E' if t.kind == 'uniform' else 'ε'} {t.level:.0%}" for t in result.sizes[0].thresholds
    ]
    head = ["n", "t", "√n", *names, "Eq.8 ε", "at Eq.8 ε", "s"]
    rows = [head]
    for size in result.sizes:
        cells = [f"{float(t.passing.magnitude):.4g}" for t in size.thresholds]
        rows.append(
            [
                f"{size.design.records:,}",
                f"{size.design.queries:,}",
                f"{size.design.records**0.5:.1f}",
                *cells,
                f"{size.eq8:.4g}",
                f"{size.at_eq8.recovered:.2%} (max |noise| {size.at_eq8.largest_noise})",
                f"{size.seconds:.1f}",
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for row in rows:
        typer.echo("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    typer.echo(
        "threshold: the most noise (largest E, least ε) at which at least the level's share of "
        "the records was recovered; σ* its noise's standard deviation"
    )
    for fit in result.extrapolation:
        ratios = ", ".join(f"{r:.3f}" for r in fit["sigma_over_sqrt_t"])
        at = (
            f"E ≈ {fit['bound']:.0f} ({fit['bound_over_sqrt_n']:.2f}·√n)"
            if fit["noise"] == "uniform"
            else f"ε ≈ {fit['epsilon']:.2g}, Eq. 8: {fit['eq8_epsilon']:.4f} "
            f"({fit['eq8_over_threshold']:.0f}× larger)"
        )
        typer.echo(
            f"{fit['noise']} {fit['level']:.0%}: σ*/√t = {ratios} (normal approximation "
            f"{fit['predicted_c']:.3f}); at n = 10⁶, t = {fit['queries']:,}: {at}"
        )

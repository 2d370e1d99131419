"""The commands that run experiments: run (an experiment file) and demo (the built-in study), and
the demo's one line per release."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from sdclab.cli.core import app, progress, reports_input_errors
from sdclab.core.figures import NotMeasured


@app.command()
@reports_input_errors
def run(
    experiment: Annotated[Path, typer.Argument(help="Experiment file (TOML).")],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Output directory (finished steps are reused).")
    ],
) -> None:
    """Run an experiment: protect, attack, evaluate; write results.json and report.html."""
    from sdclab.pipeline.experiment import load_experiment, run_spec

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
    census: Annotated[
        str, typer.Option("--census", help="The census whose study runs: us2010 or eu2021.")
    ] = "us2010",
) -> None:
    """The built-in study: every mechanism on synthetic persons, attacked; for us2010 (default)
    4,000 persons swept and replicated, for eu2021 30,000 persons (5 to 15 minutes on 2 cores)."""
    from sdclab.core.errors import InputError
    from sdclab.pipeline.experiment import run_spec
    from sdclab.pipeline.experiment.demo import DEMOS

    if census not in DEMOS:
        raise InputError(f"--census: expected one of {', '.join(DEMOS)}, not {census!r}")
    start = time.perf_counter()
    source = "the built-in demo (sdclab demo" + (
        "" if census == "us2010" else f" --census {census}"
    )
    results = run_spec(DEMOS[census](), out, progress, source=source + ")")
    for line in release_lines(results):
        typer.echo(line)
    typer.echo(f"done in {time.perf_counter() - start:.0f} s")
    typer.echo(f"report: {(out / 'report.html').resolve()}")


def release_lines(results: Any) -> list[str]:
    """One line per release of an experiment: its guarantee, common-axis ε, the MAE of the
    compared table (US: P12 by tract; another census: its compared table at its reconstruction's
    level) over non-empty cells (withheld ones counted), and the census attacker's headline risk
    (points beyond the best baseline); an ε with a qualifier ("within the PSA's invariants (…)")
    is marked * and the qualifier given after the lines."""
    view = results.census
    table, level = ("P12", "tract") if view is None else (view.compared, view.unit)
    risk = "beyond the best baseline (census)"
    width = max(13, *(len(t) for t in results.releases))
    accuracy = f"{table} {level}"
    lines = [f"{'release':>{width}}  {'guarantee':<24} {'ε (1e-10)':>9} {accuracy:>9}  {risk}"]
    qualified: dict[str, list[str]] = {}
    for title, release in results.releases.items():
        evaluation = release.evaluation
        guarantee = evaluation.card.guarantee
        common = evaluation.card.common
        axis = "n/a" if isinstance(common, NotMeasured) else f"{common.epsilon:.2f}"
        if not isinstance(common, NotMeasured) and common.qualifier:
            axis += "*"
            qualified.setdefault(common.qualifier, []).append(title)
        compared = evaluation.accuracy.get(table, {}).get(level)
        mae = "n/a" if compared is None else _or_na(compared.mae_nonempty, ".3f")
        budget = guarantee.text() if guarantee.is_formal else "none"
        lines.append(
            f"{title:>{width}}  {budget:<24} {axis:>9} {mae:>{len(accuracy)}}  "
            f"{_headline(evaluation)}"
        )
    for qualifier, titles in qualified.items():
        lines.append(f"* {', '.join(titles)}: ε {qualifier}")
    return lines


def _or_na(value: Any, form: str) -> str:
    """A measured figure in ``form``, or n/a."""
    return "n/a" if isinstance(value, NotMeasured) else format(value, form)


def _headline(evaluation: Any) -> str:
    """The census attacker's risk: points beyond the best baseline."""
    from sdclab.pipeline.results.reidentification import Reidentification

    census = evaluation.reidentification.get("census")
    if not isinstance(census, Reidentification) or not census.baselines():
        return "n/a"
    points = census.headline("all").points
    return "n/a" if isinstance(points, NotMeasured) else f"{points:+.1f} pp"

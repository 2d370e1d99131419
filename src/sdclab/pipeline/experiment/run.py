"""Running an experiment into its directory: the steps, then results.json, the tidy
results.parquet and results.csv and report.html, with the provenance; sdclab.run_experiment."""

from __future__ import annotations

import shutil
import stat
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sdclab.censuses.us2010.population.io import source_modes
from sdclab.core.errors import InputError
from sdclab.core.fileio import (
    OUTPUT_MARKER,
    Modes,
    atomic_file,
    check_replaceable,
    remove_path,
    restrict_tree,
    write_json,
    write_marker,
    write_parquet,
)
from sdclab.core.version import __version__
from sdclab.pipeline.experiment.reading import load_experiment, parse_experiment
from sdclab.pipeline.experiment.runner import Runner
from sdclab.pipeline.experiment.spec import Experiment, PopulationSpec
from sdclab.pipeline.report import render_report
from sdclab.pipeline.results.experiment import ExperimentResult
from sdclab.protection import MECHANISMS

RESULTS_FILE = "results.json"
REPORT_FILE = "report.html"
EXPERIMENT_KIND = "experiment"
TIDY_FILES = ("results.parquet", "results.csv")
EXPERIMENT_ENTRIES = ["steps", RESULTS_FILE, *TIDY_FILES, REPORT_FILE]
"""What an experiment's directory may hold besides its marker."""


def run_spec(
    experiment: Experiment,
    out: Path,
    say: Callable[[str], None],
    protect: tuple[Path, ...] = (),
    source: str = "an experiment given in Python",
) -> ExperimentResult:
    """Run (or finish) an experiment in ``out``; write results.json and report.html.

    ``out`` must be absent, empty or an earlier experiment's directory, apart from the inputs
    (``protect`` and the population directory). A run refused for bad input leaves no step it
    wrote, and a directory it created (or found empty) as it was. ``source`` names the
    experiment in the results' provenance.

    Everything in ``out`` holds or comes from the confidential population: with a population
    directory, nothing there (``out`` itself and what earlier runs left included) allows more
    than its directory and files do (:func:`~sdclab.censuses.us2010.population.io.source_modes`)."""
    out = Path(out)
    path = experiment.population.path
    inputs = (*protect, *([Path(path)] if path else []))
    check_replaceable(out, EXPERIMENT_KIND, inputs)
    for point in experiment.points():
        mechanism = MECHANISMS[point.name]
        params = mechanism.parse(point.settings, experiment.census)
        mechanism.check_run(params, point.seed, (*inputs, out))
    modes = _source_modes(experiment.population)
    created = not out.exists()
    was_empty = not created and not any(out.iterdir())
    given = stat.S_IMODE(out.stat().st_mode) if was_empty else 0
    out.mkdir(parents=True, exist_ok=True)
    (out / "steps").mkdir(exist_ok=True)
    if modes is not None:  # before anything is written in it, and what earlier runs wrote
        restrict_tree(out, modes)
    write_marker(out, EXPERIMENT_KIND, EXPERIMENT_ENTRIES, modes)
    runner = Runner(experiment, out, say, modes)
    try:
        results = runner.run()
        results = replace(results, provenance=provenance(experiment, source))
        write_json(results.to_dict(), out / RESULTS_FILE, modes)
        tidy = results.tidy()
        write_parquet(tidy, out / TIDY_FILES[0], modes)
        with atomic_file(out / TIDY_FILES[1], modes) as tmp:
            tidy.write_csv(tmp)
        with atomic_file(out / REPORT_FILE, modes) as tmp:
            axes = experiment.report.axes(experiment.census)
            tmp.write_text(render_report(results, axes), encoding="utf-8")
    except (InputError, OSError):  # what the command line reports in one line, exit 2
        for step in runner.steps.made:
            shutil.rmtree(step, ignore_errors=True)
        if created:
            shutil.rmtree(out, ignore_errors=True)
        elif was_empty:  # the user's empty directory: left as it was
            for entry in (*EXPERIMENT_ENTRIES, OUTPUT_MARKER):
                remove_path(out / entry)
            out.chmod(given)
        raise
    return results


def _source_modes(spec: PopulationSpec) -> Modes | None:
    """The most the experiment's outputs may allow: what the population directory grants, or
    the directory and file of a declared census's persons (None: a synthetic population)."""
    if spec.path is None:
        return None
    if spec.declared:
        return Modes.of(Path(spec.path).parent, [Path(spec.path)])
    return source_modes(Path(spec.path))


def provenance(experiment: Experiment, source: str) -> dict[str, Any]:
    """What made an experiment's results, for the top of its report (mechanism seeds are left
    out: each reproduces its release's noise)."""
    attacks = experiment.attacks
    return {
        "sdclab": __version__,
        "experiment": source,
        "run_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "population": experiment.population.source(),
        "attacks": {
            "seed": attacks.seed,
            "time_limit": attacks.time_limit,
            "node_limit": attacks.node_limit,
            "attackers": list(attacks.attackers),
            "block_only": attacks.block_only,
            "knowledge": "published (noise-aware)" + (", naive beside" if attacks.naive else ""),
        },
        "mechanism_seeds": "in the experiment (not repeated: a seed reproduces its noise)",
        **(
            {}
            if experiment.match is None
            else {
                "match": {
                    "axis": experiment.match.axis,
                    "values": experiment.match.targets(),
                    "not_matched": experiment.unmatched(),
                }
            }
        ),
    }


def run_experiment(
    experiment: str | Path | Mapping[str, Any],
    out: str | Path,
    *,
    progress: Callable[[str], None] | None = None,
) -> ExperimentResult:
    """Run (or finish) an experiment — a TOML file or the same content as a mapping — into
    directory ``out``; returns its results (also written as ``out/results.json`` beside
    ``out/report.html``). Finished steps found in ``out`` are reused."""
    inputs: tuple[Path, ...] = ()
    source = "a mapping given to sdclab.run_experiment"
    if isinstance(experiment, Mapping):
        spec = parse_experiment(dict(experiment), "experiment", Path.cwd())
    else:
        spec = load_experiment(Path(experiment))
        inputs = (Path(experiment),)
        source = str(Path(experiment).resolve())
    return run_spec(spec, Path(out), progress or (lambda _: None), inputs, source)

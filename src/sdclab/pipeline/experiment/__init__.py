"""Experiments: one TOML file names a population, mechanisms and attacks; one command runs them all.

```toml
[population]
persons = 50000          # a synthetic population ...
seed = 2010
# path = "pop/"          # ... or a population directory

[[mechanisms]]
name = "none"

[[mechanisms]]
name = "psa"
settings = { rate = "0.05" }

[attacks]
reconstruct = true
variability = true
attackers = ["census", "commercial"]

[match]                  # optional: every mechanism with a common-axis ε at these values
values = [1, 4, 16]

[report]                 # optional: what the frontier plots
accuracy = "compared.mae_nonempty"
level = "tract"
```

Every step writes into ``DIR/steps/<step>-<digest>/``, where the digest covers the step's own
settings and the digests of its inputs; a step whose directory exists is reused, so re-running an
experiment (or extending it by one mechanism) redoes only what changed. ``DIR/results.json`` and
``DIR/report.html`` gather the figures.

The package's modules: :mod:`~sdclab.pipeline.experiment.spec` (the file's models and their problems
in words), :mod:`~sdclab.pipeline.experiment.reading` (reading a file),
:mod:`~sdclab.pipeline.experiment.replicates` (seeds of replicates),
:mod:`~sdclab.pipeline.experiment.cache` (step digests and the step cache),
:mod:`~sdclab.pipeline.experiment.steps` (what each step makes),
:mod:`~sdclab.pipeline.experiment.runner` (the steps of every release),
:mod:`~sdclab.pipeline.experiment.run` (``run_spec``, ``run_experiment``) and
:mod:`~sdclab.pipeline.experiment.demo` (the demo's experiment). The names below are re-exported
here.
"""

from __future__ import annotations

from sdclab.pipeline.experiment.cache import MAX_STEP_NAME, STEP_FORMAT, Step, StepCache
from sdclab.pipeline.experiment.demo import DEMO
from sdclab.pipeline.experiment.reading import first_non_finite, load_experiment, parse_experiment
from sdclab.pipeline.experiment.replicates import population_seed, replicate_seed
from sdclab.pipeline.experiment.run import (
    EXPERIMENT_ENTRIES,
    EXPERIMENT_KIND,
    REPORT_FILE,
    RESULTS_FILE,
    TIDY_FILES,
    provenance,
    run_experiment,
    run_spec,
)
from sdclab.pipeline.experiment.runner import (
    NO_BLOCK_ONLY,
    NOTHING_TO_RECONSTRUCT,
    Runner,
    progress,
    replicate_of,
)
from sdclab.pipeline.experiment.spec import (
    GEOGRAPHY,
    MATCHED,
    MAX_POINTS,
    MAX_POPULATION_REPLICATES,
    MAX_RELEASES,
    MAX_REPLICATES,
    AttackSpec,
    Experiment,
    MatchSpec,
    MechanismSpec,
    Point,
    PopulationSpec,
    Range,
    ReportSpec,
    Scalar,
    experiment_problem,
    on_population,
    us_only_settings,
)
from sdclab.pipeline.experiment.steps import VULNERABLE_FILE, read_vulnerable_group

__all__ = [
    "AttackSpec",
    "DEMO",
    "EXPERIMENT_ENTRIES",
    "EXPERIMENT_KIND",
    "Experiment",
    "GEOGRAPHY",
    "MATCHED",
    "MAX_POINTS",
    "MAX_POPULATION_REPLICATES",
    "MAX_RELEASES",
    "MAX_REPLICATES",
    "MAX_STEP_NAME",
    "MatchSpec",
    "MechanismSpec",
    "NOTHING_TO_RECONSTRUCT",
    "NO_BLOCK_ONLY",
    "Point",
    "PopulationSpec",
    "REPORT_FILE",
    "RESULTS_FILE",
    "Range",
    "ReportSpec",
    "Runner",
    "STEP_FORMAT",
    "Scalar",
    "Step",
    "StepCache",
    "TIDY_FILES",
    "VULNERABLE_FILE",
    "experiment_problem",
    "first_non_finite",
    "load_experiment",
    "on_population",
    "parse_experiment",
    "population_seed",
    "progress",
    "provenance",
    "read_vulnerable_group",
    "replicate_of",
    "replicate_seed",
    "run_experiment",
    "run_spec",
    "us_only_settings",
]

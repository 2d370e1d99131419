"""The ``sdclab`` command line.

Exit codes: 0 success, 2 bad input or usage (one line on stderr, nothing written), 1 internal error,
3 a privacy audit measured more privacy loss than the mechanism's card claims.

The package's modules: :mod:`~sdclab.cli.core` (the app, its one-line errors, the shared options
and the entry point ``main``), :mod:`~sdclab.cli.pipeline` (synth, tabulate, protect,
reconstruct, reidentify, evaluate, ckm-risk, audit), :mod:`~sdclab.cli.inspection` (spec,
budget, census show, mechanisms), :mod:`~sdclab.cli.experiments` (run, demo) and
:mod:`~sdclab.cli.dinur_nissim` (dinur-nissim). Importing the
package registers every command on ``app``, in the order ``sdclab --help`` lists them.
"""

from __future__ import annotations

# isort: off
# the order of these imports is the order of the commands in ``sdclab --help``
from sdclab.cli.core import (
    MECHANISM_NAMES,
    OneLineErrors,
    app,
    main,
    progress,
    reports_input_errors,
)
from sdclab.cli import pipeline, inspection, experiments, dinur_nissim
from sdclab.cli.experiments import release_lines
# isort: on

__all__ = [
    "MECHANISM_NAMES",
    "OneLineErrors",
    "app",
    "dinur_nissim",
    "experiments",
    "inspection",
    "main",
    "pipeline",
    "progress",
    "release_lines",
    "reports_input_errors",
]

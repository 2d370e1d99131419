"""sdclab: a laboratory for statistical disclosure control of census tables.

Protect one population with the mechanisms statistical offices use (the TopDown Algorithm,
SafeTab-H, the cell key method, swapping, suppression, noise), attack each release as the Census
Bureau attacked its 2010 tables, and compare what each costs in accuracy and leaves exposed.
The functions here are the whole public API; see ``docs/python.md``.
"""

from typing import TYPE_CHECKING, Any

from sdclab.core.version import __version__

if TYPE_CHECKING:
    from sdclab.attacks.audit import AuditResult
    from sdclab.censuses.us2010.population import Population
    from sdclab.core.errors import InputError
    from sdclab.pipeline.api import (
        MechanismInfo,
        ParameterInfo,
        audit,
        evaluate,
        mechanisms,
        protect,
        read_population,
        read_reconstruction,
        read_release,
        reconstruct,
        reidentify,
        synthesize,
        tabulate,
        vulnerable_group,
        write_population,
        write_release,
    )
    from sdclab.pipeline.experiment import run_experiment
    from sdclab.pipeline.results import (
        Evaluation,
        ExperimentResult,
        Figure,
        FrontierAxes,
        NotMeasured,
        ReconstructionResult,
        Reidentification,
        VulnerableGroup,
    )
    from sdclab.pipeline.results.decision import frontier
    from sdclab.release import Release

__all__ = [
    "AuditResult",
    "Evaluation",
    "ExperimentResult",
    "Figure",
    "FrontierAxes",
    "InputError",
    "MechanismInfo",
    "NotMeasured",
    "ParameterInfo",
    "Population",
    "ReconstructionResult",
    "Reidentification",
    "Release",
    "VulnerableGroup",
    "__version__",
    "audit",
    "evaluate",
    "frontier",
    "mechanisms",
    "protect",
    "read_population",
    "read_reconstruction",
    "read_release",
    "reconstruct",
    "reidentify",
    "run_experiment",
    "synthesize",
    "tabulate",
    "vulnerable_group",
    "write_population",
    "write_release",
]

_HOMES = {
    "AuditResult": "sdclab.attacks.audit",
    "InputError": "sdclab.core.errors",
    "Population": "sdclab.censuses.us2010.population",
    "Release": "sdclab.release",
    "run_experiment": "sdclab.pipeline.experiment",
    "frontier": "sdclab.pipeline.results.decision",
    **dict.fromkeys(
        (
            "Evaluation",
            "ExperimentResult",
            "Figure",
            "FrontierAxes",
            "NotMeasured",
            "ReconstructionResult",
            "Reidentification",
            "VulnerableGroup",
        ),
        "sdclab.pipeline.results",
    ),
}
"""Where each exported name is defined (the functions: :mod:`sdclab.pipeline.api`, but
:func:`~sdclab.pipeline.experiment.run_experiment`)."""


def __getattr__(name: str) -> Any:
    """The public names, imported on first use so that ``import sdclab`` stays quick (the
    command line and spawned workers import only what they run)."""
    if name not in __all__ or name == "__version__":
        raise AttributeError(f"module 'sdclab' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_HOMES.get(name, "sdclab.pipeline.api")), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

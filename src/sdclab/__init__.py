"""sdclab: a laboratory for statistical disclosure control of census tables.

Protect one population with the mechanisms statistical offices use (the TopDown Algorithm,
SafeTab-H, the cell key method, swapping, suppression, noise), attack each release as the Census
Bureau attacked its 2010 tables, and compare what each costs in accuracy and leaves exposed.
The functions here are the whole public API; see ``docs/python.md``.
"""

from typing import TYPE_CHECKING, Any

from sdclab.version import __version__

if TYPE_CHECKING:
    from sdclab.api import (
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
    from sdclab.attacks.audit import AuditResult
    from sdclab.errors import InputError
    from sdclab.experiment import run_experiment
    from sdclab.population import Population
    from sdclab.release import Release
    from sdclab.results import (
        Evaluation,
        ExperimentResult,
        Figure,
        FrontierAxes,
        NotMeasured,
        ReconstructionResult,
        Reidentification,
        VulnerableGroup,
    )

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
    "InputError": "sdclab.errors",
    "Population": "sdclab.population",
    "Release": "sdclab.release",
    "run_experiment": "sdclab.experiment",
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
        "sdclab.results",
    ),
}
"""Where each exported name is defined (the functions: :mod:`sdclab.api`, but
:func:`~sdclab.experiment.run_experiment`)."""


def __getattr__(name: str) -> Any:
    """The public names, imported on first use so that ``import sdclab`` stays quick (the
    command line and spawned workers import only what they run)."""
    if name not in __all__ or name == "__version__":
        raise AttributeError(f"module 'sdclab' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_HOMES.get(name, "sdclab.api")), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

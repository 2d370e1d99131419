"""Typed results: what the attacks and an evaluation measure, as values with attributes.

The command line, experiments and the report read the same objects; ``metrics.json`` and
``results.json`` are written from them (``to_dict``, with :data:`SCHEMA_VERSION`) and read back
by ``from_dict``. A figure that was not measured or does not apply is a :class:`NotMeasured`
carrying its reason, never 0 and never a bare null. :class:`Figure` is one figure in long form
with the dimensions a comparison needs: setting, replicate, level, block-size class, table and
an interval.

The modules: :mod:`~sdclab.results.figure` (Figure, reading figures back, the schema version),
:mod:`~sdclab.results.reidentification`, :mod:`~sdclab.results.reconstruction`,
:mod:`~sdclab.results.accuracy` (tables, totals, indicators), :mod:`~sdclab.results.agreement`,
:mod:`~sdclab.results.evaluation` (one release's Evaluation), :mod:`~sdclab.results.truth`
(which figures are evaluation only), :mod:`~sdclab.results.experiment` (an experiment's
results) and :mod:`~sdclab.results.decision` (the accuracy–risk frontier and the choose table,
which read the result types; none of those imports it at module level). This package
re-exports their public names.
"""

from sdclab.figures import (
    NotMeasured,
    Value,
)
from sdclab.results.accuracy import (
    COMPARED_TABLES,
    LevelAccuracy,
    TableAccuracy,
)
from sdclab.results.agreement import (
    Agreement,
    AgreementRates,
)
from sdclab.results.decision import (
    Choice,
    FrontierAxes,
    FrontierPoint,
    ReplicateMean,
    accuracy_targets,
    candidates,
    choose,
    declared_axes,
    with_axes,
)
from sdclab.results.evaluation import (
    Evaluation,
)
from sdclab.results.experiment import (
    POPULATION_TRUTH_FIELDS,
    CensusView,
    ExperimentResult,
    PopulationSummary,
    ReleaseResult,
    Sweep,
)
from sdclab.results.figure import (
    SCHEMA_VERSION,
    Figure,
    from_json,
    number,
)
from sdclab.results.reconstruction import (
    ReconstructionFigures,
    ReconstructionResult,
    Variability,
)
from sdclab.results.reidentification import (
    ConfirmationPasses,
    HeadlineRisk,
    Linkage,
    LinkRates,
    Reidentification,
    VulnerableGroup,
)
from sdclab.results.truth import (
    EVALUATION_ONLY,
    TRUTH_BASED_FIELDS,
    evaluation_only,
)

__all__ = [
    "Agreement",
    "AgreementRates",
    "COMPARED_TABLES",
    "CensusView",
    "Choice",
    "ConfirmationPasses",
    "EVALUATION_ONLY",
    "Evaluation",
    "ExperimentResult",
    "Figure",
    "FrontierAxes",
    "FrontierPoint",
    "HeadlineRisk",
    "LevelAccuracy",
    "LinkRates",
    "Linkage",
    "NotMeasured",
    "POPULATION_TRUTH_FIELDS",
    "PopulationSummary",
    "ReconstructionFigures",
    "ReconstructionResult",
    "Reidentification",
    "ReleaseResult",
    "ReplicateMean",
    "SCHEMA_VERSION",
    "Sweep",
    "TRUTH_BASED_FIELDS",
    "TableAccuracy",
    "Value",
    "Variability",
    "VulnerableGroup",
    "accuracy_targets",
    "candidates",
    "choose",
    "declared_axes",
    "evaluation_only",
    "from_json",
    "number",
    "with_axes",
]

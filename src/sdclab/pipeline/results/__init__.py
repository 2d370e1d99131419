"""Typed results: what the attacks and an evaluation measure, as values with attributes.

The command line, experiments and the report read the same objects; ``metrics.json`` and
``results.json`` are written from them (``to_dict``, with :data:`SCHEMA_VERSION`) and read back
by ``from_dict``. A figure that was not measured or does not apply is a :class:`NotMeasured`
carrying its reason, never 0 and never a bare null. :class:`Figure` is one figure in long form
with the dimensions a comparison needs: setting, replicate, level, block-size class, table and
an interval.

The modules: :mod:`~sdclab.pipeline.results.figure` (Figure, reading figures back, the schema
version),
:mod:`~sdclab.pipeline.results.reidentification`, :mod:`~sdclab.pipeline.results.reconstruction`,
:mod:`~sdclab.pipeline.results.accuracy` (tables, totals, indicators),
:mod:`~sdclab.pipeline.results.agreement`,
:mod:`~sdclab.pipeline.results.evaluation` (one release's Evaluation),
:mod:`~sdclab.pipeline.results.truth` (which figures are evaluation only),
:mod:`~sdclab.pipeline.results.experiment` (an experiment's results) and
:mod:`~sdclab.pipeline.results.decision` (the accuracy–risk frontier and the choose table, which
read the result types; none of those imports it at module level). This package re-exports their
public names.
"""

from sdclab.core.figures import (
    NotMeasured,
    Value,
)
from sdclab.pipeline.results.accuracy import (
    COMPARED_TABLES,
    LevelAccuracy,
    TableAccuracy,
)
from sdclab.pipeline.results.agreement import (
    Agreement,
    AgreementRates,
)
from sdclab.pipeline.results.decision import (
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
from sdclab.pipeline.results.evaluation import (
    Evaluation,
)
from sdclab.pipeline.results.experiment import (
    POPULATION_TRUTH_FIELDS,
    CensusView,
    ExperimentResult,
    PopulationSummary,
    ReleaseResult,
    Sweep,
)
from sdclab.pipeline.results.figure import (
    SCHEMA_VERSION,
    Figure,
    from_json,
    number,
)
from sdclab.pipeline.results.reconstruction import (
    ReconstructionFigures,
    ReconstructionResult,
    Variability,
)
from sdclab.pipeline.results.reidentification import (
    ConfirmationPasses,
    HeadlineRisk,
    Linkage,
    LinkRates,
    Reidentification,
    VulnerableGroup,
)
from sdclab.pipeline.results.truth import (
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

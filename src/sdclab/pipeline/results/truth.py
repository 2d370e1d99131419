"""Which figures of a mechanism's results were computed with the truth: evaluation only,
never to be published."""

from __future__ import annotations

from typing import Any

from sdclab.pipeline.results.evaluation import BLOCK_ONLY_FIELD

EVALUATION_ONLY = "evaluation_only"
"""Key under which figures list, as dotted paths, those computed with the truth (as
:func:`sdclab.protection.cellkey_risk.ckm_risk` already does): evaluation only, never to be
published."""

TRUTH_BASED_FIELDS = (
    "protection",
    "accuracy",
    "accuracy_by_level",
    "geounit_totals",
    "tract_indicators",
    "microdata_agreement",
    "reconstruction_agreement",
    "naive_reconstruction_agreement",
    "ranked_precision",
    "reconstruction_block_sex_agebin",
    "reidentification",
    BLOCK_ONLY_FIELD,
    "diagnostics",
)
"""Fields of a mechanism's results (an experiment's entry, the metrics of ``sdclab evaluate``)
computed with the truth. Reidentification is among them as a whole: confirmation needs the truth,
its breakdowns use true block sizes, and even its putative links are made against an attacker
file simulated from the confidential records. ``reconstruction`` (the attack's own figures,
solution variability included), ``specification``, ``budget`` and the release's notes (which hold
no figure of the confidential data: ``tests/test_no_leaks.py`` allows each key) are not."""


def evaluation_only(figures: dict[str, Any]) -> list[str]:
    """Dotted paths of the figures of one mechanism's results that were computed with the truth:
    the :data:`TRUTH_BASED_FIELDS` present and what ckm-risk lists under :data:`EVALUATION_ONLY`;
    only paths present in ``figures``."""
    paths = [name for name in TRUTH_BASED_FIELDS if name in figures]
    risk = figures.get("risk")
    if isinstance(risk, dict):
        paths += [f"risk.{path}" for path in risk.get(EVALUATION_ONLY, [])]
    return [path for path in paths if has_path(figures, path)]


TIDY_FIELDS = {
    "compared": "accuracy",
    "indicators": "tract_indicators",
    "totals": "geounit_totals",
    "naive_agreement": "naive_reconstruction_agreement",
}
"""The field of a mechanism's results a tidy figure comes from, where the first part of its
metric is not that field's name (``compared.*`` is the ``accuracy`` of P1 and of P12, with a
reason where a release lacks one)."""


def metric_field(metric: str) -> str:
    """The field of a mechanism's results (:meth:`Evaluation.to_dict`) a tidy metric is from."""
    head = metric.partition(".")[0]
    return TIDY_FIELDS.get(head, head)


def metric_is_evaluation_only(metric: str) -> bool:
    """Whether a tidy figure was computed with the truth: its field is one of the
    :data:`TRUTH_BASED_FIELDS` that :data:`EVALUATION_ONLY` lists."""
    return metric_field(metric) in TRUTH_BASED_FIELDS


def marked(figures: dict[str, Any]) -> dict[str, Any]:
    """``figures`` with the list of its evaluation-only paths under :data:`EVALUATION_ONLY`."""
    return {**figures, EVALUATION_ONLY: evaluation_only(figures)}


def has_path(figures: dict[str, Any], path: str) -> bool:
    """Whether the dotted ``path`` of nested keys is present in ``figures``."""
    node: Any = figures
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True

"""Agreement of released or reconstructed person records with the truth, overall and by
block-size class, and the precision of ranked reconstructed records (evaluation only)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sdclab.core.figures import NotMeasured, Value, fields_json
from sdclab.pipeline.results.figure import from_json

NO_NAIVE = "no naive reconstruction was run beside the noise-aware one"
NAIVE_IS_AWARE = (
    "no naive reconstruction apart: the release's counts are exact, so the naive attack is the "
    "noise-aware one"
)


NO_TRUE_PERSON = "no true person in this group"


@dataclass(frozen=True)
class AgreementRates:
    """Share of true persons matched one-to-one by released or reconstructed records."""

    blocks: int
    persons: int
    agree_exact_age: Value
    agree_agebin: Value

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgreementRates:
        return cls(
            blocks=int(data["blocks"]),
            persons=int(data["persons"]),
            agree_exact_age=from_json(data["agree_exact_age"], NO_TRUE_PERSON),
            agree_agebin=from_json(data["agree_agebin"], NO_TRUE_PERSON),
        )

    def to_dict(self) -> dict[str, Any]:
        return fields_json(self)


@dataclass(frozen=True)
class Agreement:
    """Agreement of records with the truth, overall and by block-size class."""

    all: AgreementRates
    by_block_size: Mapping[str, AgreementRates]
    records: int
    """Records compared (released or reconstructed)."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Agreement | NotMeasured:
        for key in ("not_applicable", "not_measured"):
            if key in data:
                return NotMeasured(str(data[key]))
        return cls(
            all=AgreementRates.from_dict(data["all"]),
            by_block_size={
                k: AgreementRates.from_dict(v) for k, v in data["by_block_size"].items()
            },
            records=int(data["reconstructed_persons"]),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "all": self.all.to_dict(),
            "reconstructed_persons": self.records,
            "by_block_size": {k: v.to_dict() for k, v in self.by_block_size.items()},
        }


def rank_curve_from(data: Mapping[str, Any]) -> Mapping[str, Value] | NotMeasured:
    for key in ("not_applicable", "not_measured"):
        if key in data:
            return NotMeasured(str(data[key]))
    return {top: from_json(value, "no record ranked") for top, value in data.items()}

"""The reconstruction's own figures (none uses the truth): solution variability, solver
statuses and times, and the reconstructed records themselves."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sdclab.core.figures import NotMeasured, Value
from sdclab.pipeline.results.figure import SCHEMA_VERSION, from_json, show_share

if TYPE_CHECKING:
    import polars as pl

NO_TIME = "the run recorded no time"


def _seconds(value: Value) -> str:
    return "time n/a" if isinstance(value, NotMeasured) else f"{value:.1f} s"


@dataclass(frozen=True)
class Variability:
    """Solution variability: how many blocks have one reconstruction only (solvar = 0)."""

    blocks: int
    share_blocks_solvar_zero: Value
    share_persons_solvar_zero: Value
    cumulative_share_of_blocks: Mapping[str, Value]
    """Share of blocks with solvar at most each key."""
    seconds: Value

    def __repr__(self) -> str:
        return (
            f"<Variability: {show_share(self.share_blocks_solvar_zero)} of {self.blocks:,} "
            f"blocks ({show_share(self.share_persons_solvar_zero)} of persons) have one "
            "reconstruction only>"
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Variability:
        none = "no block was measured"
        return cls(
            blocks=int(data["blocks"]),
            share_blocks_solvar_zero=from_json(data["share_blocks_solvar_zero"], none),
            share_persons_solvar_zero=from_json(data["share_persons_solvar_zero"], none),
            cumulative_share_of_blocks={
                k: from_json(v, "no block with a finite solvar")
                for k, v in data.get("cumulative_share_of_blocks", {}).items()
            },
            seconds=from_json(data.get("seconds"), NO_TIME),
        )


@dataclass(frozen=True)
class ReconstructionFigures:
    """The attack's own figures about a reconstruction (none of them uses the truth)."""

    metrics: Mapping[str, Any] = field(repr=False)
    """The figures as ``metrics.json`` records them."""

    @property
    def seconds(self) -> Value:
        return from_json(self.metrics.get("seconds"), NO_TIME)

    @property
    def records(self) -> Value:
        """How many person records the reconstruction holds (against the population's size:
        a reconstruction of noisy counts may hold many more, or fewer)."""
        return from_json(self.metrics.get("persons"), "not recorded")

    @property
    def statuses(self) -> dict[str, int]:
        """Tracts by solver status (optimal, time limit, ...)."""
        return dict(self.metrics.get("statuses", {}))

    @property
    def time_limited_tracts(self) -> int:
        """Tracts one of whose solves wall time stopped (their reconstruction may differ between
        runs); read from the statuses for a reconstruction that does not record it."""
        if "time_limited_tracts" in self.metrics:
            return int(self.metrics["time_limited_tracts"])
        return sum(n for status, n in self.statuses.items() if "time limit" in status.lower())

    @property
    def unknown_attributes(self) -> list[str]:
        """Person attributes the release's tables determine for no record."""
        return list(self.metrics.get("unknown_attributes", []))

    @property
    def variability(self) -> Variability | NotMeasured:
        data = self.metrics.get("variability")
        if data is None:
            return NotMeasured("solution variability was not asked for")
        if "not_measured" in data:
            return NotMeasured(str(data["not_measured"]))
        return Variability.from_dict(data)

    def __repr__(self) -> str:
        return f"<ReconstructionFigures: {_seconds(self.seconds)}>"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.metrics)


@dataclass(frozen=True, kw_only=True)
class ReconstructionResult(ReconstructionFigures):
    """Person records rebuilt from a release's tables, with the attack's own figures."""

    mechanism: str
    """The mechanism of the attacked release."""
    persons: pl.DataFrame = field(repr=False)
    """Reconstructed persons: block, sex, age, age_min, age_max, race, hispanic (null where the
    tables do not determine an attribute)."""
    tracts: pl.DataFrame = field(repr=False)
    """One row per tract: status, mode, deviation, seconds, program size."""
    solvar: pl.DataFrame | None = field(default=None, repr=False)
    """Solution variability per block, when measured."""

    @property
    def n_persons(self) -> int:
        return self.persons.height

    def __repr__(self) -> str:
        return (
            f"<ReconstructionResult of a {self.mechanism} release: {self.n_persons:,} persons in "
            f"{self.tracts.height:,} tracts, {_seconds(self.seconds)}>"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, **self.metrics}

"""Reidentification: links of reconstructed records (and of the baselines) to an attacker's
file, by linkage method and group of attacker records, the headline risk beyond the best
baseline and the population's fixed vulnerable group."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sdclab.core.figures import NotMeasured, Value, as_json
from sdclab.pipeline.results.figure import SCHEMA_VERSION, Figure, lookup, show_share

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import polars as pl

NO_RECORDS = "no attacker record falls in this group"
NO_LINKS = "no putative link in this group"
NO_METHOD = "the method was not scored"


def _points(ours: Value, theirs: Value) -> Value:
    """``ours − theirs`` in percentage points, or why one is missing."""
    if isinstance(ours, NotMeasured):
        return ours
    if isinstance(theirs, NotMeasured):
        return theirs
    return 100 * (ours - theirs)


def _share(part: int, whole: int, reason: str) -> Value:
    """``part / whole``, or not measured for ``reason`` when ``whole`` is 0."""
    return part / whole if whole else NotMeasured(reason)


@dataclass(frozen=True)
class LinkRates:
    """Putative and confirmed links of one linkage method over one group of attacker records."""

    attacker_records: int
    putative: int
    confirmed: int

    @property
    def putative_rate(self) -> Value:
        return _share(self.putative, self.attacker_records, NO_RECORDS)

    @property
    def confirmed_rate(self) -> Value:
        return _share(self.confirmed, self.attacker_records, NO_RECORDS)

    @property
    def precision(self) -> Value:
        """Confirmed among putative links: how far an attacker can trust a link."""
        return _share(self.confirmed, self.putative, NO_LINKS)

    def to_dict(self) -> dict[str, Any]:
        return {
            "attacker_records": self.attacker_records,
            "putative": self.putative,
            "confirmed": self.confirmed,
            "putative_rate": as_json(self.putative_rate),
            "confirmed_rate": as_json(self.confirmed_rate),
            "precision": as_json(self.precision),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LinkRates:
        return cls(int(data["attacker_records"]), int(data["putative"]), int(data["confirmed"]))


@dataclass(frozen=True)
class Linkage:
    """One linkage method's rates by group of attacker records (``all``, ``modal``, ``nonmodal``,
    ``unique``, ``nonmodal_unique``, by block size, ...)."""

    method: str
    groups: Mapping[str, LinkRates]

    @property
    def all(self) -> LinkRates:
        return self.groups["all"]

    @property
    def nonmodal(self) -> LinkRates:
        """Census records whose race and ethnicity are not their block's most common."""
        return self.groups["nonmodal"]

    @property
    def modal(self) -> LinkRates:
        return self.groups["modal"]

    def group(self, name: str) -> LinkRates:
        return lookup(self.groups, name, "group")

    def __repr__(self) -> str:
        return (
            f"<Linkage {self.method}: precision {show_share(self.all.precision)}, nonmodal "
            f"{show_share(self.nonmodal.precision)}>"
        )

    def to_dict(self) -> dict[str, Any]:
        return {name: rates.to_dict() for name, rates in self.groups.items()}

    @classmethod
    def from_dict(cls, method: str, data: Mapping[str, Any]) -> Linkage:
        return cls(method, {k: LinkRates.from_dict(v) for k, v in data.items()})


FIXED_BASELINE_METHODS = ("mdg_exact", "prg_exact", "random_draw")
UPPER_BOUND_METHODS = ("confidential", "swapped")
HEADLINE_GROUPS = ("all", "nonmodal", "vulnerable")
"""The groups of attacker records whose headline risk is given, where measured: ``vulnerable``
(the population's fixed vulnerable persons, :class:`VulnerableGroup`) only when the
reidentification was given the group."""
VULNERABLE_DEFINITION = (
    "nonmodal data-defined persons unique on {block, sex, agebin} in blocks whose reconstruction "
    "of the exact release has solution variability 0 (proven)"
)


@dataclass(frozen=True)
class VulnerableGroup:
    """The population's most vulnerable persons: one fixed set on which every release is scored,
    whatever its mechanism (evaluation only: it is defined from the confidential records).

    The attack paper defines its headline group from the published 2010 tables; here it comes
    from the exact release, the tables every mechanism protects, so that no mechanism's own
    reconstruction chooses the persons it is scored on (docs/reidentification.md)."""

    persons: npt.NDArray[np.int64] = field(repr=False)
    """Their person ids, sorted."""
    solvar0_blocks: int
    """Populated blocks whose exact reconstruction is proven the only one."""
    populated_blocks: int
    """Populated blocks measured."""
    input_digest: str = field(default="", repr=False, compare=False)
    """The keyed digest of the population it was found in (a group is scored on that population
    only)."""

    @property
    def size(self) -> int:
        """The number of persons in the group."""
        return int(self.persons.size)

    def to_dict(self) -> dict[str, Any]:
        """The group's figures (never its persons' ids)."""
        return {
            "definition": VULNERABLE_DEFINITION,
            "persons": self.size,
            "solvar0_blocks": self.solvar0_blocks,
            "populated_blocks": self.populated_blocks,
        }


@dataclass(frozen=True)
class HeadlineRisk:
    """Confirmed reidentifications of the reconstruction beyond the best baseline (the one with
    the most confirmed links in the group; the upper bounds are not baselines)."""

    group: str
    reconstruction: LinkRates
    best_baseline: str
    baseline: LinkRates

    @property
    def persons(self) -> int:
        """Confirmed persons beyond the best baseline (negative: the baseline does better)."""
        return self.reconstruction.confirmed - self.baseline.confirmed

    @property
    def points(self) -> Value:
        """The difference of confirmed rates, in percentage points."""
        return _points(self.reconstruction.confirmed_rate, self.baseline.confirmed_rate)

    def to_dict(self) -> dict[str, Any]:
        return {
            "best_baseline": self.best_baseline,
            "reconstruction_confirmed_rate": as_json(self.reconstruction.confirmed_rate),
            "baseline_confirmed_rate": as_json(self.baseline.confirmed_rate),
            "points": as_json(self.points),
            "persons": self.persons,
        }


@dataclass(frozen=True)
class ConfirmationPasses:
    """How one linkage method's putative links were confirmed: in the first pass of the
    confirmation (on the exact age) or in the second (on agebin, over the links the first left).
    The attack paper prints only their sum, its confirmed reidentifications."""

    putative: int
    first_pass: int
    second_pass: int

    @property
    def first_pass_share(self) -> Value:
        """Share of the putative links confirmed on the exact age."""
        return _share(self.first_pass, self.putative, NO_LINKS)

    @property
    def second_pass_share(self) -> Value:
        """Share of the putative links confirmed on agebin only."""
        return _share(self.second_pass, self.putative, NO_LINKS)

    def to_dict(self) -> dict[str, Any]:
        return {
            "putative": self.putative,
            "first_pass": self.first_pass,
            "second_pass": self.second_pass,
            "first_pass_share": as_json(self.first_pass_share),
            "second_pass_share": as_json(self.second_pass_share),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConfirmationPasses:
        return cls(int(data["putative"]), int(data["first_pass"]), int(data["second_pass"]))


NONMODAL_PRG = ("prg", "prg_exact")
"""The proportional guessers whose nonmodal precision stands beside the reconstruction's: the
release's own (from its tables) and the one on the exact tables (the same for every release)."""


@dataclass(frozen=True)
class Reidentification:
    """Links of reconstructed records (and of the two baselines) to an attacker's file."""

    attacker: str
    """The attacker file's preset (census, commercial) or "custom"."""
    attacker_parameters: Mapping[str, Any]
    attacker_records: int
    attacker_match_share: float
    """Share of attacker records that match a census record on identity, block, sex and age."""
    reconstruction: Linkage
    mdg: Linkage | NotMeasured
    """Baseline: records drawn from the published block tables (the 2010 study's MDG)."""
    prg: Linkage | NotMeasured
    """Baseline: a draw from the published block distribution of race and ethnicity (PRG)."""
    links: pl.DataFrame | None = field(default=None, repr=False, compare=False)
    """The reconstruction's links (attacker id, block, confirmed)."""
    fixed: Mapping[str, Linkage] = field(default_factory=dict, repr=False)
    """The baselines fixed across releases (``mdg_exact``, ``prg_exact``, ``random_draw``) and
    the upper bounds (``confidential``, ``swapped``), by name."""
    passes: Mapping[str, ConfirmationPasses] = field(default_factory=dict, repr=False)
    """By method: how its putative links were confirmed (empty for figures written before)."""

    def nonmodal_precision(self) -> dict[str, Value]:
        """The reconstruction's precision on nonmodal persons beside the proportional guessers'
        (:data:`NONMODAL_PRG`; the paper's PRG: 16.0–16.7%), and by how many percentage points
        it exceeds each."""
        ours = self.reconstruction.nonmodal.precision
        out: dict[str, Value] = {"reconstruction": ours}
        methods = self.methods()
        for name in NONMODAL_PRG:
            method = methods.get(name)
            theirs = (
                method.nonmodal.precision
                if method is not None
                else (self.prg if isinstance(self.prg, NotMeasured) else NotMeasured(NO_METHOD))
            )
            out[name] = theirs
            out[f"points_beyond_{name}"] = _points(ours, theirs)
        return out

    def methods(self) -> dict[str, Linkage]:
        """The methods measured, by name."""
        chosen = (self.reconstruction, self.mdg, self.prg, *self.fixed.values())
        return {m.method: m for m in chosen if isinstance(m, Linkage)}

    def baselines(self) -> dict[str, Linkage]:
        """The baselines measured (upper bounds excluded): the release's own and the fixed."""
        return {
            name: m
            for name, m in self.methods().items()
            if name not in ("reconstruction", *UPPER_BOUND_METHODS)
        }

    def headline_groups(self) -> tuple[str, ...]:
        """The :data:`HEADLINE_GROUPS` measured (``vulnerable`` when the group was given)."""
        return tuple(g for g in HEADLINE_GROUPS if g in self.reconstruction.groups)

    def headline(self, group: str) -> HeadlineRisk:
        """Confirmed reidentifications beyond the best baseline in ``group`` (all, nonmodal)."""
        ours = self.reconstruction.group(group)
        best_name, best = max(
            ((n, m.group(group)) for n, m in self.baselines().items()),
            key=lambda item: item[1].confirmed,
        )
        return HeadlineRisk(group, ours, best_name, best)

    def no_headline(self) -> NotMeasured:
        """Why there is no headline risk: no baseline was measured (the reason the baselines
        give)."""
        reason = self.mdg.reason if isinstance(self.mdg, NotMeasured) else "no baseline measured"
        return NotMeasured(f"no baseline to be beyond ({reason.removeprefix('not measured: ')})")

    def __repr__(self) -> str:
        return (
            f"<Reidentification by the {self.attacker} attacker: "
            f"{self.attacker_records:,} records, reconstruction precision "
            f"{show_share(self.reconstruction.all.precision)} (nonmodal "
            f"{show_share(self.reconstruction.nonmodal.precision)})>"
        )

    def figures(self, field: str = "reidentification", **dims: Any) -> Iterator[Figure]:
        """Every rate in long form; a group by block size (``nonmodal_block_size_10-49``) is its
        persons (``nonmodal``) with the block-size class as ``size_class``. ``field``: the
        evaluation's field they come from (the first part of every metric)."""
        for method in self.methods().values():
            for group, rates in method.groups.items():
                persons, _, size = group.partition("block_size_")
                persons = persons.removesuffix("_") or "all"
                for metric in ("putative_rate", "confirmed_rate", "precision"):
                    yield Figure(
                        f"{field}.{self.attacker}.{method.method}.{persons}.{metric}",
                        getattr(rates, metric),
                        size_class=size or None,
                        **dims,
                    )
        if self.baselines():
            for group in self.headline_groups():
                head = self.headline(group)
                prefix = f"{field}.{self.attacker}.headline.{group}"
                yield Figure(f"{prefix}.points", head.points, **dims)
                yield Figure(f"{prefix}.persons", head.persons, **dims)
        else:  # no baseline to be beyond: n/a, never 0
            for group in self.headline_groups():
                prefix = f"{field}.{self.attacker}.headline.{group}"
                yield Figure(f"{prefix}.points", self.no_headline(), **dims)
        for name, value in self.nonmodal_precision().items():
            if name.startswith("points_beyond_"):
                yield Figure(f"{field}.{self.attacker}.nonmodal_precision.{name}", value, **dims)
        for name, passes in self.passes.items():
            for which in ("first", "second"):
                yield Figure(
                    f"{field}.{self.attacker}.{name}.all.confirmed_{which}_pass_share",
                    getattr(passes, f"{which}_pass_share"),
                    **dims,
                )

    def to_dict(self) -> dict[str, Any]:
        baselines = self.mdg.reason if isinstance(self.mdg, NotMeasured) else "computed"
        return {
            "schema_version": SCHEMA_VERSION,
            "attacker_preset": self.attacker,
            "attacker": dict(self.attacker_parameters),
            "attacker_records": self.attacker_records,
            "attacker_match_share": self.attacker_match_share,
            "baselines": baselines,
            **{name: m.to_dict() for name, m in self.methods().items()},
            "headline": (
                {g: self.headline(g).to_dict() for g in self.headline_groups()}
                if self.baselines()
                else as_json(self.no_headline())
            ),
            "nonmodal_precision": as_json(self.nonmodal_precision()),
            **(
                {"confirmation_passes": {m: p.to_dict() for m, p in self.passes.items()}}
                if self.passes
                else {}
            ),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reidentification:
        def method(name: str) -> Linkage | NotMeasured:
            if name in data:
                return Linkage.from_dict(name, data[name])
            return NotMeasured(str(data.get("baselines", "not computed")))

        reconstruction = method("reconstruction")
        assert isinstance(reconstruction, Linkage), "a reidentification links reconstructed records"
        return cls(
            attacker=str(data.get("attacker_preset", "custom")),
            attacker_parameters=dict(data.get("attacker", {})),
            attacker_records=int(data["attacker_records"]),
            attacker_match_share=float(data["attacker_match_share"]),
            reconstruction=reconstruction,
            mdg=method("mdg"),
            prg=method("prg"),
            fixed={
                name: Linkage.from_dict(name, data[name])
                for name in (*FIXED_BASELINE_METHODS, *UPPER_BOUND_METHODS)
                if name in data
            },
            passes={
                name: ConfirmationPasses.from_dict(counts)
                for name, counts in data.get("confirmation_passes", {}).items()
            },
        )

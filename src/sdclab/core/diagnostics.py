"""A mechanism's diagnostics: its own figures about a release that need the confidential data
(evaluation only, never in the release), as typed values.

Each kind knows its JSON form (the value under its key in an evaluation's ``diagnostics``, as
``metrics.json`` and ``results.json`` hold it) and renders its own section of the report, so
that neither the results nor the report need to know which mechanism writes which kind:
:data:`KINDS` reads a kind back by its key. Below the results, the mechanisms and the report
(it imports only :mod:`sdclab.core.figures` and :mod:`sdclab.core.markup`), so all three can read
it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from sdclab.core.figures import Value, as_json, fields_json, from_json
from sdclab.core.markup import CARD, EVALUATION, decimal, esc, pct, section


class Diagnostics(ABC):
    """One kind of a mechanism's diagnostics of a release."""

    key: ClassVar[str]
    """Its key in an evaluation's ``diagnostics``."""

    @abstractmethod
    def to_dict(self) -> Any:
        """Its JSON form: the value under :attr:`key`."""

    @classmethod
    @abstractmethod
    def from_dict(cls, data: Any) -> Self:
        """The value read back from :meth:`to_dict`'s form."""

    @abstractmethod
    def render(self, title: str, *, us_census: bool = True) -> str:
        """Its section of the report for the release called ``title`` ("" for none);
        ``us_census``: whether the report is of the US 2010 census (a declared census's report
        leaves out what only the US census has)."""


# ---------------------------------------------------------------------------------------------
# The tails of per-cell noise (the geometric mechanism)
# ---------------------------------------------------------------------------------------------

TAIL_EVENTS = ("T_error_0.5", "broadband_0.5", "T_error_1", "broadband_1", "depopulated")
"""What the tails count, in their JSON order: areas whose total T is off by at least 50% / 100%
of the truth; whose F, M and T are all off by as much in the same direction (broadband); whose
true T > 0 is published ≤ 0 (depopulated)."""


@dataclass(frozen=True)
class TailCount:
    """The areas of one class where one tail event happens: expected and sampled."""

    expected: float
    """Analytic, at the true counts."""
    sampled: int
    """In this release."""


@dataclass(frozen=True)
class TailClass:
    """The tails of the areas of one level whose true total is in one size class."""

    size_class: str
    areas: int
    events: Mapping[str, TailCount]
    """By event (:data:`TAIL_EVENTS`)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"class": self.size_class, "areas": self.areas}
        for event, tail in self.events.items():
            out[f"{event}_expected"] = tail.expected
            out[f"{event}_sampled"] = tail.sampled
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TailClass:
        events = [k.removesuffix("_expected") for k in data if k.endswith("_expected")]
        return cls(
            str(data["class"]),
            data["areas"],
            {e: TailCount(data[f"{e}_expected"], data[f"{e}_sampled"]) for e in events},
        )


@dataclass(frozen=True)
class LevelTails:
    """The tails at one geography level."""

    scale_total: float
    """The noise scale of a total (P1) at the level."""
    tail_probability: float
    """The probability that a total's noise exceeds ±``tail_bound``."""
    tail_bound: int
    classes: tuple[TailClass, ...]

    def to_dict(self) -> dict[str, Any]:
        return fields_json(self, exclude=("classes",)) | {
            "classes": [c.to_dict() for c in self.classes]
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LevelTails:
        return cls(
            data["scale_total"],
            data["tail_probability"],
            data["tail_bound"],
            tuple(TailClass.from_dict(c) for c in data["classes"]),
        )


TAILS_HEAD = (
    "<tr><th>level</th><th>true total</th><th>areas</th><th>|error| ≥ 50% of T</th>"
    "<th>|error| ≥ 100% of T</th><th>depopulated (T > 0 published ≤ 0)</th>"
    "<th>F, M, T all off ≥ 50%, same way</th><th>… ≥ 100%</th></tr>"
)
TAILS_COLUMNS = ("T_error_0.5", "T_error_1", "depopulated", "broadband_0.5", "broadband_1")
"""The events in the order of the section's columns."""


@dataclass(frozen=True)
class NoiseTails(Diagnostics):
    """Per-cell noise in small areas (unbounded, or truncated at a bound): the tails expected
    beside those sampled, by level and class of the areas' true totals."""

    key: ClassVar[str] = "tails"
    levels: Mapping[str, LevelTails]

    def to_dict(self) -> dict[str, Any]:
        return {level: tails.to_dict() for level, tails in self.levels.items()}

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        return cls({level: LevelTails.from_dict(tails) for level, tails in data.items()})

    def render(self, title: str, *, us_census: bool = True) -> str:
        rows = []
        for level, tails in self.levels.items():
            for row in tails.classes:
                pairs = "".join(
                    f"<td>{row.events[e].expected:.1f} / {row.events[e].sampled}</td>"
                    for e in TAILS_COLUMNS
                )
                rows.append(
                    f"<tr><td>{esc(level)}</td><td>{esc(row.size_class)}</td>"
                    f"<td>{row.areas}</td>{pairs}</tr>"
                )
        block = self.levels.get("block")
        parts = []
        if block is not None:
            parts.append(
                (
                    CARD,
                    f"<p>A block total's noise exceeds ±{block.tail_bound} with probability "
                    f"{pct(block.tail_probability)} (from the noise scale alone).</p>",
                )
            )
        parts.append(
            (
                EVALUATION,
                "<p>Areas classed by their true total. Each figure: expected (analytic, at the "
                "true counts) / sampled in this release. F and M are summed from P12's cells.</p>"
                f"<table>{TAILS_HEAD}{''.join(rows)}</table>",
            )
        )
        return section(f"Tails of per-cell noise: {title}", parts)


# ---------------------------------------------------------------------------------------------
# The population-group tables' accuracy (SafeTab-H)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupLevelAccuracy:
    """The error of the population-group cells at one geography and iteration level."""

    level: str
    iteration_level: int
    groups: int
    measured_cells: int
    mae_measured: Value
    mae_derived: Value
    moe: int
    """The 95% margin of error of a measured cell (from the specification card)."""
    within_moe: Value
    """The share of measured cells within it."""

    def to_dict(self) -> dict[str, Any]:
        return fields_json(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GroupLevelAccuracy:
        return cls(
            str(data["level"]),
            data["iteration_level"],
            data["groups"],
            data["measured_cells"],
            from_json(data["mae_measured"]),
            from_json(data["mae_derived"]),
            data["moe"],
            from_json(data["within_moe"]),
        )


GROUPS_HEAD = (
    "<tr><th>geography</th><th>iteration level</th><th>groups</th><th>measured cells</th>"
    "<th>MAE measured</th><th>MAE derived</th><th>95% MOE</th><th>within MOE</th></tr>"
)


@dataclass(frozen=True)
class GroupAccuracy(Diagnostics):
    """The error of SafeTab-H's population-group tables against their margins of error, by
    geography and iteration level."""

    key: ClassVar[str] = "group_accuracy"
    rows: tuple[GroupLevelAccuracy, ...]

    def to_dict(self) -> list[dict[str, Any]]:
        return [row.to_dict() for row in self.rows]

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        return cls(tuple(GroupLevelAccuracy.from_dict(row) for row in data))

    def render(self, title: str, *, us_census: bool = True) -> str:
        body = "".join(
            f"<tr><td>{esc(r.level)}</td><td>{r.iteration_level}</td><td>{r.groups}</td>"
            f"<td>{r.measured_cells}</td><td>{decimal(r.mae_measured)}</td>"
            f"<td>{decimal(r.mae_derived)}</td><td>{r.moe}</td><td>{pct(r.within_moe)}</td>"
            "</tr>"
            for r in self.rows
        )
        return section(
            f"Population-group tables: {title}",
            [
                (
                    EVALUATION,
                    "<p>Household type (T03) and tenure (T04) by detailed race and ethnicity; "
                    "each group's detail chosen by its size. Errors are measured against the true "
                    "counts (the 95% MOE itself is from the specification card).</p>"
                    f"<table>{GROUPS_HEAD}{body}</table>",
                )
            ],
        )


# ---------------------------------------------------------------------------------------------
# What suppression withheld (1980-style suppression)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellShares:
    """The non-empty true cells of a group of tables at one level: how many the small-cell rule
    caught, how many were published as 0 and how many as null, with their shares."""

    nonempty: int
    small: int
    small_share: Value
    zeroed: int
    zeroed_share: Value
    null: int
    null_share: Value

    def to_dict(self) -> dict[str, Any]:
        return fields_json(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CellShares:
        return cls(
            data["nonempty"],
            data["small"],
            from_json(data["small_share"]),
            data["zeroed"],
            from_json(data["zeroed_share"]),
            data["null"],
            from_json(data["null_share"]),
        )


@dataclass(frozen=True)
class PairShare:
    """The (table, populated geounit) pairs of a group of tables the rules suppressed."""

    pairs: int
    suppressed: int
    share: Value

    def to_dict(self) -> dict[str, Any]:
        return fields_json(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PairShare:
        return cls(data["pairs"], data["suppressed"], from_json(data["share"]))


@dataclass(frozen=True)
class LevelSuppression:
    """What suppression withheld at one level, counted on the confidential tables."""

    populated_geounits: int
    person_cells: CellShares
    redistricting_cells: CellShares
    """Of the US census's redistricting tables (P1, P8–P11)."""
    unit_cells: CellShares
    tables_suppressed_redistricting: PairShare
    tables_suppressed_others: PairShare
    complement_cells: int | None = None
    """The cells complementary suppression added (None: it was not asked for)."""

    def to_dict(self) -> dict[str, Any]:
        out = fields_json(self, exclude=("complement_cells",))
        if self.complement_cells is not None:
            out["complement_cells"] = self.complement_cells
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LevelSuppression:
        return cls(
            data["populated_geounits"],
            CellShares.from_dict(data["person_cells"]),
            CellShares.from_dict(data["redistricting_cells"]),
            CellShares.from_dict(data["unit_cells"]),
            PairShare.from_dict(data["tables_suppressed_redistricting"]),
            PairShare.from_dict(data["tables_suppressed_others"]),
            data.get("complement_cells"),
        )


@dataclass(frozen=True)
class SuppressionByLevel(Diagnostics):
    """How much of each populated level suppression's rules withhold or zero."""

    key: ClassVar[str] = "by_level"
    levels: Mapping[str, LevelSuppression]

    def to_dict(self) -> dict[str, Any]:
        return {level: figures.to_dict() for level, figures in self.levels.items()}

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        return cls({level: LevelSuppression.from_dict(f) for level, f in data.items()})

    def render(self, title: str, *, us_census: bool = True) -> str:
        # the US census's redistricting tables apart from the others (a declared census has no
        # such tables, nor the column)
        head = "<tr><th>level</th><th>person cells zeroed (1–2)</th><th>person cells null</th>" + (
            "<th>redistricting tables suppressed</th><th>other tables suppressed</th></tr>"
            if us_census
            else "<th>tables suppressed</th></tr>"
        )
        rows = []
        for level, f in self.levels.items():
            person = f.person_cells
            red, other = f.tables_suppressed_redistricting, f.tables_suppressed_others
            rows.append(
                f"<tr><td>{esc(level)}</td><td>{pct(person.zeroed_share)}</td>"
                f"<td>{pct(person.null_share)}</td>"
                + (
                    f"<td>{pct(red.share)} ({red.suppressed} of {red.pairs})</td>"
                    if us_census
                    else ""
                )
                + f"<td>{pct(other.share)} ({other.suppressed} of {other.pairs})</td></tr>"
            )
        return section(
            f"Suppression: {title}",
            [
                (
                    EVALUATION,
                    "<p>Shares of the non-empty true person cells and of the (table, geounit) "
                    "pairs of each populated level, counted on the confidential tables.</p>"
                    f"<table>{head}{''.join(rows)}</table>",
                )
            ],
        )


# ---------------------------------------------------------------------------------------------
# The cells a threshold hid (the cell key method)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HiddenCells(Diagnostics):
    """The non-empty true cells a cell key release with a threshold does not show, by level
    (published below the threshold, or emptied by a swap first): a reader cannot tell them from
    empty cells, so the release does not say how many there are."""

    key: ClassVar[str] = "suppressed_cells"
    levels: Mapping[str, int]

    def to_dict(self) -> dict[str, int]:
        return dict(self.levels)

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        return cls(dict(data))

    def render(self, title: str, *, us_census: bool = True) -> str:
        """No section of its own: the counts are in the results only."""
        return ""


# ---------------------------------------------------------------------------------------------
# Every kind: reading, writing and rendering a release's diagnostics
# ---------------------------------------------------------------------------------------------

KINDS: Mapping[str, type[Diagnostics]] = {
    kind.key: kind for kind in (NoiseTails, GroupAccuracy, SuppressionByLevel, HiddenCells)
}
"""Every kind by its key, in the order the report shows their sections."""


def diagnostics_json(values: Sequence[Diagnostics]) -> dict[str, Any]:
    """A release's diagnostics in JSON form: each kind's :meth:`~Diagnostics.to_dict` under its
    key."""
    out = {value.key: as_json(value) for value in values}
    if len(out) < len(values):
        raise ValueError(f"diagnostics: one kind given twice ({', '.join(v.key for v in values)})")
    return out


def read_diagnostics(data: Mapping[str, Any]) -> tuple[Diagnostics, ...]:
    """A release's diagnostics read back from :func:`diagnostics_json`'s form."""
    unknown = [key for key in data if key not in KINDS]
    if unknown:
        raise ValueError(
            f"diagnostics: unknown kind {', '.join(map(repr, unknown))} (known: {', '.join(KINDS)})"
        )
    return tuple(KINDS[key].from_dict(value) for key, value in data.items())


def sections(titled: Iterable[tuple[str, Diagnostics]], *, us_census: bool = True) -> str:
    """The report's sections of the releases' diagnostics (``titled``: each with its release's
    title, releases in order): kind by kind (:data:`KINDS`), so that one kind's sections of
    every release stand together."""
    order = {key: position for position, key in enumerate(KINDS)}
    shown = sorted(titled, key=lambda item: order[item[1].key])
    return "".join(value.render(title, us_census=us_census) for title, value in shown)

"""A census declared in files: one TOML document and the CSV code lists it names.

docs/census.md describes the format. Every mistake is an :class:`~sdclab.core.errors.InputError` of
one line naming the file, the TOML key (or the CSV row and column) and what was expected.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from sdclab.core.census.model import (
    DETAILED,
    RECORD_KINDS,
    AttackTarget,
    Attribute,
    Breakdown,
    Census,
    Hierarchy,
    Reconstruction,
)
from sdclab.core.csv_files import read_csv
from sdclab.core.domain import Schema
from sdclab.core.errors import InputError
from sdclab.core.fileio import read_toml
from sdclab.core.tables.definition import Dimension, Part, TableDef

NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
"""What a census, attribute, level or table name may hold (they become column names)."""


class Declaration:
    """One census file being read: where each value came from, for error messages."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.document = read_toml(self.path, "census file")

    def fail(self, key: str, expected: str) -> InputError:
        return InputError(f"{self.path.name}: {key}: {expected}")

    def table(self, data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        value = data.get(key.rsplit(".", 1)[-1])
        if not isinstance(value, dict):
            raise self.fail(key, "expected a table of settings")
        return value

    def text(self, data: Mapping[str, Any], key: str, default: str | None = None) -> str:
        value = data.get(key.rsplit(".", 1)[-1], default)
        if not isinstance(value, str) or not value:
            raise self.fail(key, "expected a non-empty text")
        return value

    def texts(self, data: Mapping[str, Any], key: str, field: str = "") -> tuple[str, ...]:
        """The list of texts at ``field`` of ``data`` (by default the last part of ``key``)."""
        value = data.get(field or key.rsplit(".", 1)[-1])
        if not isinstance(value, list) or not value:
            raise self.fail(key, "expected a non-empty list of texts")
        if not all(isinstance(v, str) and v for v in value):
            raise self.fail(key, "expected a list of non-empty texts")
        if len(set(value)) != len(value):
            duplicate = next(v for v in value if value.count(v) > 1)
            raise self.fail(key, f"{duplicate!r} is listed twice")
        return tuple(value)

    def name(self, value: str, key: str) -> str:
        if not set(value) <= NAME_CHARACTERS or value.startswith((".", "-")):
            raise self.fail(key, f"{value!r} is not a name (letters, digits, '_', '-', '.')")
        return value

    def csv(
        self, relative: str, key: str, columns: Sequence[str], optional: Sequence[str] = ()
    ) -> pl.DataFrame:
        """A code-list file named relative to the census file, with at least ``columns`` (all
        filled in) and ``optional`` columns (that may be empty)."""
        file = self.path.parent / relative
        if not file.is_file():
            raise self.fail(key, f"{relative}: no such file (relative to {self.path.name})")
        frame = read_csv(file)
        missing = [c for c in (*columns, *optional) if c not in frame.columns]
        if missing:
            raise InputError(f"{file.name}: no column {missing[0]!r} (needed by {key})")
        blank = frame.select(pl.any_horizontal(pl.col(c).str.strip_chars() == "" for c in columns))
        if frame.height and blank.to_series().any():
            row = int(blank.to_series().arg_true()[0]) + 2
            raise InputError(f"{file.name}: row {row}: an empty value (needed by {key})")
        return frame


def load_census(path: Path, reserved: Collection[str] = ()) -> Census:
    """The census declared by the TOML file ``path`` (docs/census.md); ``reserved``: names it may
    not take (the built-in censuses')."""
    d = Declaration(path)
    doc = d.document
    name = d.name(d.text(doc, "name"), "name")
    if name in reserved:
        raise d.fail("name", f"{name!r} is a built-in census's name; give the census another")
    attributes = {n: _attribute(d, n, spec) for n, spec in d.table(doc, "attributes").items()}
    for key in attributes:
        _column_name(d, d.name(key, f"attributes.{key}"), f"attributes.{key}")
    geographies = {
        n: _hierarchy(d, d.name(n, f"geographies.{n}"), spec, attributes)
        for n, spec in d.table(doc, "geographies").items()
    }
    if not attributes or not geographies:
        raise d.fail("attributes" if not attributes else "geographies", "expected at least one")
    seen: dict[str, str] = {}
    for hierarchy in geographies.values():
        for level in hierarchy.levels:
            if level in seen:
                raise d.fail(
                    f"geographies.{hierarchy.name}.levels",
                    f"level {level!r} is also a level of geography {seen[level]!r} (each level "
                    "is a column of the microdata: give it another name)",
                )
            seen[level] = hierarchy.name
    tables: dict[str, TableDef] = {}
    table_geography: dict[str, str] = {}
    for table_name, spec in d.table(doc, "tables").items():
        d.name(table_name, f"tables.{table_name}")
        table, published_on = _table(d, table_name, spec, attributes, geographies)
        tables[table_name] = table
        table_geography[table_name] = published_on
    if not tables:
        raise d.fail("tables", "expected at least one table")
    main = next(iter(geographies.values()))
    reconstruction = _reconstruction(d, d.table(doc, "reconstruction"), attributes, main)
    attack = d.table(doc, "attack")
    quasi = _quasi_identifiers(d, attack, "attack", attributes, reconstruction)
    targets = {
        target: _target(d, d.name(target, f"targets.{target}"), spec, attributes, geographies)
        for target, spec in (d.table(doc, "targets") if "targets" in doc else {}).items()
    }
    household = doc.get("household_key")
    if household is not None and not isinstance(household, str):
        raise d.fail("household_key", "expected the name of the persons' household column")
    of_households = [n for n, a in attributes.items() if a.records == "households"]
    if of_households and household is None:
        raise d.fail(
            f"attributes.{of_households[0]}.records",
            "a household attribute needs the census's household_key (the persons' column "
            "naming each person's household)",
        )
    return Census(
        name=name,
        title=d.text(doc, "title", name),
        attributes=attributes,
        geographies=geographies,
        tables=tables,
        quasi_identifiers=quasi,
        reconstruction=reconstruction,
        household_key=household,
        table_geography=table_geography,
        description=str(doc.get("description", "")),
        targets=targets,
    )


def _quasi_identifiers(
    d: Declaration,
    spec: Mapping[str, Any],
    key: str,
    attributes: Mapping[str, Attribute],
    reconstruction: Reconstruction,
) -> tuple[str, ...]:
    """The attributes an attacker links on: among those the reconstruction solves for."""
    quasi = d.texts(spec, f"{key}.quasi_identifiers")
    _known(d, quasi, attributes, f"{key}.quasi_identifiers", "attribute")
    unsolved = [n for n in quasi if n not in reconstruction.attributes]
    if unsolved:
        raise d.fail(
            f"{key}.quasi_identifiers",
            f"{unsolved[0]!r} is not among the attributes the reconstruction solves for",
        )
    return quasi


def _target(
    d: Declaration,
    name: str,
    spec: Any,
    attributes: Mapping[str, Attribute],
    geographies: Mapping[str, Hierarchy],
) -> AttackTarget:
    """A further attack, on the tables of one geography (``[targets.<name>]``): its geography,
    reconstruction settings and quasi-identifiers."""
    key = f"targets.{name}"
    if not isinstance(spec, dict):
        raise d.fail(key, "expected a table of geography, attributes, level, quasi_identifiers")
    geography = d.text(spec, f"{key}.geography", next(iter(geographies)))
    if geography not in geographies:
        raise d.fail(f"{key}.geography", f"unknown geography {geography!r}")
    reconstruction = _reconstruction(d, spec, attributes, geographies[geography], key)
    quasi = _quasi_identifiers(d, spec, key, attributes, reconstruction)
    return AttackTarget(geography, reconstruction, quasi)


RESERVED = frozenset({"block", "tract", "id", "confidence", "link_pass", "confirmed"})
"""Column names of the records sdclab writes and links (a geounit is ``block`` in them)."""


def _column_name(d: Declaration, name: str, key: str) -> None:
    """An attribute's name may not be one the reconstruction's and linkage's records use."""
    derived = name.startswith(("_", "true_")) or name.endswith(("_min", "_max", "_category"))
    if name in RESERVED or derived:
        raise d.fail(key, f"{name!r} is a name sdclab's records use; give the attribute another")


def _known(
    d: Declaration, names: Sequence[str], known: Mapping[str, Any], key: str, what: str
) -> None:
    for n in names:
        if n not in known:
            raise d.fail(key, f"unknown {what} {n!r}; known: {', '.join(known)}")


def _attribute(d: Declaration, name: str, spec: Any) -> Attribute:
    key = f"attributes.{name}"
    if not isinstance(spec, dict):
        raise d.fail(key, "expected a table of settings")
    records = spec.get("records", "persons")
    if records not in RECORD_KINDS:
        raise d.fail(f"{key}.records", f"expected one of {', '.join(RECORD_KINDS)}")
    codes, labels = _code_list(d, key, spec)
    position = {c: i for i, c in enumerate(codes)}
    breakdowns = {}
    for b_name, b_spec in spec.get("breakdowns", {}).items():
        b_key = f"{key}.breakdowns.{d.name(b_name, f'{key}.breakdowns.{b_name}')}"
        if b_name == DETAILED:
            raise d.fail(b_key, f"{DETAILED!r} is every attribute's own breakdown")
        breakdowns[b_name] = _breakdown(d, b_key, b_name, b_spec, position)
    return Attribute(name, records, codes, labels, breakdowns)


def _code_list(d: Declaration, key: str, spec: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    source = spec.get("codes")
    if isinstance(source, str):
        frame = d.csv(source, f"{key}.codes", ["code"])
        codes = tuple(frame.get_column("code").str.strip_chars().to_list())
        labels = tuple(frame.get_column("label").to_list()) if "label" in frame.columns else codes
        if not codes:
            raise d.fail(f"{key}.codes", f"{source} lists no code")
    else:
        codes = d.texts(spec, f"{key}.codes")
        labels = tuple(spec["labels"]) if "labels" in spec else codes
        if len(labels) != len(codes) or not all(isinstance(v, str) for v in labels):
            raise d.fail(f"{key}.labels", f"expected {len(codes)} texts, one per code")
    if len(set(codes)) != len(codes):
        duplicate = next(c for c in codes if codes.count(c) > 1)
        raise d.fail(f"{key}.codes", f"code {duplicate!r} is listed twice")
    return codes, labels


def _breakdown(
    d: Declaration, key: str, name: str, spec: Any, position: Mapping[str, int]
) -> Breakdown:
    """A breakdown from ``{category = [codes]}`` or ``{file = "x.csv"}`` (columns code,
    category and an optional label)."""
    pairs: list[tuple[str, str]] = []
    category_labels: dict[str, str] = {}
    if isinstance(spec, dict) and isinstance(spec.get("file"), str):
        frame = d.csv(spec["file"], key, ["code", "category"])
        for code, category in frame.select("code", "category").iter_rows():
            pairs.append((code.strip(), category.strip()))
        if "label" in frame.columns:
            for category, label in frame.select("category", "label").iter_rows():
                category_labels.setdefault(category.strip(), label)
    elif isinstance(spec, dict) and spec:
        for category in spec:
            pairs += [(c, category) for c in d.texts(spec, f"{key}.{category}", category)]
    else:
        raise d.fail(key, 'expected {category = [codes]} or {file = "codes.csv"}')
    categories = tuple(dict.fromkeys(c for _, c in pairs))
    if not categories:
        raise d.fail(key, "the breakdown has no category")
    index = {c: k for k, c in enumerate(categories)}
    membership = np.zeros((len(categories), len(position)), dtype=np.int8)
    for code, category in pairs:
        if code not in position:
            raise d.fail(key, f"category {category!r} names unknown code {code!r}")
        membership[index[category], position[code]] = 1
    labels = tuple(category_labels.get(c, c) for c in categories)
    return Breakdown(name, categories, labels, membership)


def _hierarchy(
    d: Declaration, name: str, spec: Any, attributes: Mapping[str, Attribute]
) -> Hierarchy:
    key = f"geographies.{name}"
    if not isinstance(spec, dict):
        raise d.fail(key, "expected a table of settings")
    levels = d.texts(spec, f"{key}.levels")
    for level in levels:
        d.name(level, f"{key}.levels")
        if level in attributes:
            raise d.fail(
                f"{key}.levels",
                f"level {level!r} has an attribute's name (both are columns of the microdata)",
            )
    if "units" not in spec:
        return Hierarchy(name, levels)
    frame = d.csv(d.text(spec, f"{key}.units"), f"{key}.units", ["level", "code"], ["parent"])
    units: dict[str, tuple[str, ...]] = {}
    parents: dict[str, np.ndarray] = {}
    labels: dict[str, tuple[str, ...]] = {}
    file = spec["units"]
    for depth, level in enumerate(levels):
        rows = frame.filter(pl.col("level") == level)
        codes = tuple(rows.get_column("code").str.strip_chars().to_list())
        if not codes:
            raise d.fail(f"{key}.units", f"{file} lists no unit of level {level!r}")
        if len(set(codes)) != len(codes):
            duplicate = next(c for c in codes if codes.count(c) > 1)
            raise d.fail(f"{key}.units", f"{file}: {level} {duplicate!r} is listed twice")
        units[level] = codes
        labels[level] = (
            tuple(rows.get_column("label").to_list()) if "label" in rows.columns else codes
        )
        if depth:
            above = {c: i for i, c in enumerate(units[levels[depth - 1]])}
            parent_codes = rows.get_column("parent").str.strip_chars().to_list()
            orphan = next((i for i, p in enumerate(parent_codes) if p not in above), None)
            if orphan is not None:
                raise d.fail(
                    f"{key}.units",
                    f"{file}: {level} {codes[orphan]!r} has parent {parent_codes[orphan]!r}, "
                    f"which is no {levels[depth - 1]}",
                )
            parents[level] = np.array([above[p] for p in parent_codes], dtype=np.int64)
    stray = set(frame.get_column("level").unique().to_list()) - set(levels)
    if stray:
        raise d.fail(f"{key}.units", f"{file} names level {sorted(stray)[0]!r}, not in levels")
    return Hierarchy(name, levels, units, parents, labels)


def _table(
    d: Declaration,
    name: str,
    spec: Any,
    attributes: Mapping[str, Attribute],
    geographies: Mapping[str, Hierarchy],
) -> tuple[TableDef, str]:
    key = f"tables.{name}"
    if not isinstance(spec, dict):
        raise d.fail(key, "expected a table of settings")
    geography_name = spec.get("geography", next(iter(geographies)))
    if geography_name not in geographies:
        raise d.fail(f"{key}.geography", f"unknown geography {geography_name!r}")
    geography = geographies[geography_name]
    records = spec.get("records", "persons")
    if records not in RECORD_KINDS:
        raise d.fail(f"{key}.records", f"expected one of {', '.join(RECORD_KINDS)}")
    part_specs = spec.get("parts", [spec])
    if not isinstance(part_specs, list) or not all(isinstance(p, dict) for p in part_specs):
        raise d.fail(f"{key}.parts", "expected a list of tables of settings")
    parts = [
        _part(d, f"{key}.parts[{i}]" if "parts" in spec else key, p, attributes, records)
        for i, p in enumerate(part_specs)
    ]
    used = [a for a in attributes if any(a in _attributes_of(p) for p in parts)]
    top = spec.get("top", geography.levels[0])
    bottom = spec.get("bottom", geography.bottom)
    for end, value in (("top", top), ("bottom", bottom)):
        if value not in geography.levels:
            raise d.fail(f"{key}.{end}", f"unknown level {value!r} of geography {geography.name!r}")
    if geography.levels.index(top) > geography.levels.index(bottom):
        raise d.fail(key, f"level {top!r} is below {bottom!r}")
    domain_attributes = tuple(attributes[a].domain_attribute() for a in used)
    table = TableDef(
        name=name,
        title=d.text(spec, f"{key}.title", name),
        universe=str(spec.get("universe_title", f"all {records}")),
        schema=Schema(f"{records}:{'×'.join(used) or 'total'}", domain_attributes),
        parts=tuple(parts),
        top=top,
        bottom=bottom,
        hierarchy=geography.levels,
        records=records,
    )
    return table, geography.name


def _attributes_of(part: Part) -> set[str]:
    return {dim.attribute for dim in part.dimensions} | set(part.universe)


def _counts_in(attribute: Attribute, records: str) -> bool:
    """Whether a table of ``records`` can use ``attribute``: its own records' attributes, and a
    person table its household's (every person carries them)."""
    return attribute.records == records or records == "persons"


def _split(
    d: Declaration, key: str, reference: str, attributes: Mapping[str, Attribute]
) -> Breakdown:
    """The breakdown that ``attribute`` or ``attribute.breakdown`` names."""
    attribute_name, _, breakdown = reference.partition(".")
    if attribute_name not in attributes:
        raise d.fail(key, f"unknown attribute {attribute_name!r}; known: {', '.join(attributes)}")
    try:
        return attributes[attribute_name].breakdown(breakdown or DETAILED)
    except KeyError as exc:
        raise d.fail(key, str(exc.args[0])) from None


def _part(
    d: Declaration,
    key: str,
    spec: Mapping[str, Any],
    attributes: Mapping[str, Attribute],
    records: str,
) -> Part:
    cells = spec.get("cells", [])
    if not isinstance(cells, list) or not all(isinstance(c, str) for c in cells):
        raise d.fail(f"{key}.cells", "expected a list of attributes (or attribute.breakdown)")
    dimensions: list[Dimension] = []
    for reference in cells:
        breakdown = _split(d, f"{key}.cells", reference, attributes)
        attribute = reference.partition(".")[0]
        if not _counts_in(attributes[attribute], records):
            raise d.fail(f"{key}.cells", f"{attribute!r} is an attribute of persons")
        if any(dim.attribute == attribute for dim in dimensions):
            raise d.fail(f"{key}.cells", f"attribute {attribute!r} is crossed twice")
        dimensions.append(attributes[attribute].dimension(breakdown.name))
    universe_spec = spec.get("universe", {})
    if not isinstance(universe_spec, dict):
        raise d.fail(f"{key}.universe", "expected {attribute.breakdown = [categories]}")
    universe: dict[str, np.ndarray] = {}
    for reference in universe_spec:
        breakdown = _split(d, f"{key}.universe", reference, attributes)
        if not _counts_in(attributes[reference.partition(".")[0]], records):
            raise d.fail(f"{key}.universe", f"{reference!r} is an attribute of persons")
        categories = d.texts(universe_spec, f"{key}.universe.{reference}", reference)
        unknown = [c for c in categories if c not in breakdown.codes]
        if unknown:
            raise d.fail(f"{key}.universe.{reference}", f"unknown category {unknown[0]!r}")
        rows = [breakdown.codes.index(c) for c in categories]
        mask = np.asarray(breakdown.membership[rows].any(axis=0), dtype=bool)
        attribute = reference.partition(".")[0]
        universe[attribute] = universe[attribute] & mask if attribute in universe else mask
    label = spec.get("label", "")
    return Part(tuple(_within(dim, universe) for dim in dimensions), universe, str(label))


def _within(dimension: Dimension, universe: Mapping[str, np.ndarray]) -> Dimension:
    """The dimension without the categories its universe leaves empty (always-zero cells)."""
    if dimension.attribute not in universe:
        return dimension
    keep = (dimension.membership * universe[dimension.attribute][None, :]).any(axis=1)
    labels = tuple(label for label, kept in zip(dimension.labels, keep, strict=True) if kept)
    return Dimension(dimension.attribute, labels, dimension.membership[keep])


def _reconstruction(
    d: Declaration,
    spec: Mapping[str, Any],
    attributes: Mapping[str, Attribute],
    main: Hierarchy,
    key: str = "reconstruction",
) -> Reconstruction:
    names = d.texts(spec, f"{key}.attributes")
    _known(d, names, attributes, f"{key}.attributes", "attribute")
    level = d.text(spec, f"{key}.level", main.bottom)
    if level not in main.levels:
        raise d.fail(f"{key}.level", f"unknown level {level!r} of {main.name!r}")
    depth = main.levels.index(level)
    within = d.text(spec, f"{key}.within", main.levels[max(depth - 1, 0)])
    if within not in main.levels[: max(depth, 1)]:  # a top level is its own programs' level
        raise d.fail(
            f"{key}.within",
            f"expected a level above {level!r}: {', '.join(main.levels[:depth]) or 'none'}",
        )
    resolved = spec.get("resolved", {})
    if not isinstance(resolved, dict):
        raise d.fail(f"{key}.resolved", 'expected {attribute = "breakdown"}')
    for attribute, breakdown in resolved.items():
        _known(d, [attribute], {n: None for n in names}, f"{key}.resolved", "attribute")
        chosen = _split(d, f"{key}.resolved", f"{attribute}.{breakdown}", attributes)
        category = np.argmax(chosen.membership, axis=0)
        if not chosen.is_partition or np.any(np.diff(category) < 0):
            raise d.fail(
                f"{key}.resolved.{attribute}",
                f"breakdown {breakdown!r} must put every code in one category, each a run of "
                "consecutive codes (so that a range of codes has a first and a last category)",
            )
    return Reconstruction(names, level, within, dict(resolved))

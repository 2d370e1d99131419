"""A census as a JSON document, and its digest.

A release of a declared census carries the census this way, so that whoever reads the release
(an attacker included) knows its tables without the files it was declared in; the digest names a
census in a release's metadata and tells two censuses apart.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from sdclab.census.model import Attribute, Breakdown, Census, Hierarchy, Reconstruction
from sdclab.schema import Schema
from sdclab.tables.catalog import Dimension, Part, TableDef

FORMAT = "sdclab-census-1"
"""The version of the document's layout."""


def _members(membership: np.ndarray) -> list[list[int]]:
    """A 0/1 categories × codes matrix as the code positions of each category."""
    return [np.flatnonzero(row).tolist() for row in membership]


def _matrix(members: list[list[int]], size: int) -> np.ndarray:
    out = np.zeros((len(members), size), dtype=np.int8)
    for k, codes in enumerate(members):
        out[k, codes] = 1
    return out


def to_document(census: Census) -> dict[str, Any]:
    """The census as plain JSON values (lists, not arrays), in declaration order."""
    return {
        "format": FORMAT,
        "name": census.name,
        "title": census.title,
        "description": census.description,
        "household_key": census.household_key,
        "attributes": [
            {
                "name": a.name,
                "records": a.records,
                "codes": list(a.codes),
                "labels": list(a.labels),
                "breakdowns": [
                    {
                        "name": b.name,
                        "codes": list(b.codes),
                        "labels": list(b.labels),
                        "members": _members(b.membership),
                    }
                    for b in a.breakdowns.values()
                ],
            }
            for a in census.attributes.values()
        ],
        "geographies": [
            {
                "name": g.name,
                "levels": list(g.levels),
                "units": {level: list(codes) for level, codes in g.units.items()},
                "parents": {level: p.tolist() for level, p in g.parents.items()},
                "labels": {level: list(labels) for level, labels in g.labels.items()},
            }
            for g in census.geographies.values()
        ],
        "tables": [_table(t, census.table_geography.get(t.name)) for t in census.tables.values()],
        "quasi_identifiers": list(census.quasi_identifiers),
        "reconstruction": {
            "attributes": list(census.reconstruction.attributes),
            "level": census.reconstruction.level,
            "within": census.within,
            "resolved": dict(census.reconstruction.resolved),
        },
    }


def _table(table: TableDef, geography: str | None) -> dict[str, Any]:
    return {
        "name": table.name,
        "title": table.title,
        "universe": table.universe,
        "records": table.records,
        "geography": geography,
        "hierarchy": list(table.hierarchy),
        "top": table.top,
        "bottom": table.bottom,
        "domain": [a.name for a in table.schema.attributes],
        "parts": [
            {
                "label": part.label,
                "dimensions": [
                    {
                        "attribute": d.attribute,
                        "labels": list(d.labels),
                        "members": _members(d.membership),
                    }
                    for d in part.dimensions
                ],
                "universe": {
                    name: np.flatnonzero(mask).tolist() for name, mask in part.universe.items()
                },
            }
            for part in table.parts
        ],
    }


def from_document(document: dict[str, Any]) -> Census:
    """The census a document holds (the inverse of :func:`to_document`)."""
    if document.get("format") != FORMAT:
        raise ValueError(f"not a census document of format {FORMAT}")
    attributes = {}
    for a in document["attributes"]:
        size = len(a["codes"])
        breakdowns = {
            b["name"]: Breakdown(
                b["name"], tuple(b["codes"]), tuple(b["labels"]), _matrix(b["members"], size)
            )
            for b in a["breakdowns"]
        }
        attributes[a["name"]] = Attribute(
            a["name"], a["records"], tuple(a["codes"]), tuple(a["labels"]), breakdowns
        )
    geographies = {
        g["name"]: Hierarchy(
            g["name"],
            tuple(g["levels"]),
            {level: tuple(codes) for level, codes in g["units"].items()},
            {level: np.asarray(p, dtype=np.int64) for level, p in g["parents"].items()},
            {level: tuple(labels) for level, labels in g["labels"].items()},
        )
        for g in document["geographies"]
    }
    tables, table_geography = {}, {}
    for t in document["tables"]:
        domain = Schema(
            f"{t['records']}:{'×'.join(t['domain']) or 'total'}",
            tuple(attributes[n].domain_attribute() for n in t["domain"]),
        )
        parts = tuple(
            Part(
                tuple(
                    Dimension(
                        d["attribute"],
                        tuple(d["labels"]),
                        _matrix(d["members"], attributes[d["attribute"]].size),
                    )
                    for d in p["dimensions"]
                ),
                {
                    name: np.isin(np.arange(attributes[name].size), kept)
                    for name, kept in p["universe"].items()
                },
                p["label"],
            )
            for p in t["parts"]
        )
        tables[t["name"]] = TableDef(
            t["name"],
            t["title"],
            t["universe"],
            domain,
            parts,
            t["top"],
            t["bottom"],
            tuple(t["hierarchy"]),
            t["records"],
        )
        if t["geography"] is not None:
            table_geography[t["name"]] = t["geography"]
    reconstruction = document["reconstruction"]
    return Census(
        name=document["name"],
        title=document["title"],
        attributes=attributes,
        geographies=geographies,
        tables=tables,
        quasi_identifiers=tuple(document["quasi_identifiers"]),
        reconstruction=Reconstruction(
            tuple(reconstruction["attributes"]),
            reconstruction["level"],
            reconstruction["within"],
            reconstruction["resolved"],
        ),
        household_key=document["household_key"],
        table_geography=table_geography,
        description=document["description"],
    )


def census_digest(census: Census) -> str:
    """SHA-256 of the census's canonical JSON document, as ``sha256:<hex>``."""
    text = json.dumps(to_document(census), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()

"""A census as a JSON document, and its digest.

A release of a declared census carries the census this way, so that whoever reads the release
(an attacker included) knows its tables without the files it was declared in; the digest names a
census in a release's metadata and tells two censuses apart.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdclab.core.census.model import (
    FORMAT,
    AttackTarget,
    Attribute,
    Breakdown,
    Census,
    Hierarchy,
    Reconstruction,
    census_digest,
    to_document,
)
from sdclab.core.domain import Schema
from sdclab.core.tables.definition import Dimension, Part, TableDef


def _matrix(members: list[list[int]], size: int) -> np.ndarray:
    out = np.zeros((len(members), size), dtype=np.int8)
    for k, codes in enumerate(members):
        out[k, codes] = 1
    return out


def from_document(document: dict[str, Any]) -> Census:
    """The census a document holds (the inverse of :func:`to_document`)."""
    if document.get("format") != FORMAT:
        raise ValueError(f"not a census document of format {FORMAT}")
    attributes = {a["name"]: _attribute(a) for a in document["attributes"]}
    geographies = {g["name"]: _hierarchy(g) for g in document["geographies"]}
    tables, table_geography = {}, {}
    for t in document["tables"]:
        tables[t["name"]] = _table(t, attributes)
        if t["geography"] is not None:
            table_geography[t["name"]] = t["geography"]
    reconstruction = document["reconstruction"]
    targets = {
        name: AttackTarget(
            t["geography"],
            Reconstruction(tuple(t["attributes"]), t["level"], t["within"], t["resolved"]),
            tuple(t["quasi_identifiers"]),
        )
        for name, t in document.get("targets", {}).items()
    }
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
        targets=targets,
    )


def _attribute(a: dict[str, Any]) -> Attribute:
    """An attribute of a document: its codes, labels and breakdowns."""
    size = len(a["codes"])
    breakdowns = {
        b["name"]: Breakdown(
            b["name"], tuple(b["codes"]), tuple(b["labels"]), _matrix(b["members"], size)
        )
        for b in a["breakdowns"]
    }
    return Attribute(a["name"], a["records"], tuple(a["codes"]), tuple(a["labels"]), breakdowns)


def _hierarchy(g: dict[str, Any]) -> Hierarchy:
    """A geography of a document: its levels, and per level the units, parents and labels."""
    return Hierarchy(
        g["name"],
        tuple(g["levels"]),
        {level: tuple(codes) for level, codes in g["units"].items()},
        {level: np.asarray(p, dtype=np.int64) for level, p in g["parents"].items()},
        {level: tuple(labels) for level, labels in g["labels"].items()},
    )


def _table(t: dict[str, Any], attributes: dict[str, Attribute]) -> TableDef:
    """A table of a document, over the marginal domain of the ``attributes`` it crosses."""
    domain = Schema(
        f"{t['records']}:{'×'.join(t['domain']) or 'total'}",
        tuple(attributes[n].domain_attribute() for n in t["domain"]),
    )
    parts = tuple(_part(p, attributes) for p in t["parts"])
    return TableDef(
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


def _part(p: dict[str, Any], attributes: dict[str, Attribute]) -> Part:
    """A part of a table of a document: its dimensions and the universe it counts."""
    return Part(
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


__all__ = ["census_digest", "from_document", "to_document"]

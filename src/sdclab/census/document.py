"""A census as a JSON document, and its digest.

A release of a declared census carries the census this way, so that whoever reads the release
(an attacker included) knows its tables without the files it was declared in; the digest names a
census in a release's metadata and tells two censuses apart.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdclab.census.model import (
    FORMAT,
    Attribute,
    Breakdown,
    Census,
    Hierarchy,
    Reconstruction,
    census_digest,
    to_document,
)
from sdclab.schema import Schema
from sdclab.tables.catalog import Dimension, Part, TableDef


def _matrix(members: list[list[int]], size: int) -> np.ndarray:
    out = np.zeros((len(members), size), dtype=np.int8)
    for k, codes in enumerate(members):
        out[k, codes] = 1
    return out


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


__all__ = ["census_digest", "from_document", "to_document"]

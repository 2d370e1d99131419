"""The EU 2021 output's redundancy: representations of its statistics and the averaging risk.

F. Bach, *Differential privacy and noisy confidentiality concepts for European population
statistics* (§3.3, Annex B) counts, for every statistic of the 2021 EU census output, its
independent redundant representations (IRRs) t and the noise terms k they sum, with and without
the same noise for the same contributors (SPSN): the population total has t = 2,775 with SPSN and
6,378 without, so a DP release of the whole output needs noise Lap(t/ε_global) per IRR; and the
most exposed statistic (smallest k/t²) bounds the variance V — hence the ε = √(2/V) of Laplace
noise of that variance — that keeps the Gaussian averaging success below 68% per count ("ε ≲ 0.3
without SPSN, … with SPSN ε ≲ 0.8").

This script does the same count (``sdclab.core.cellkey_analysis.irr_counts``) on the hypercubes
sdclab declares for the EU 2021 census, each at every level it is published at: a table below
the national level sums over its geounits there (a variable GEO@level whose categories are the
synthetic country's geounits at that level: ``GEOUNITS``), statistics are the national ones (no
geography), and a breakdown (AGE.M, AGE.H, …) is its own variable, as in the paper. Prints one
JSON line.

    python benchmarks/eu_averaging.py
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping

import numpy as np

from sdclab.censuses import census_named
from sdclab.core.cellkey_analysis import RISK_CONSTRAINT, irr_counts, variance_for_success
from sdclab.core.census.model import Census

GEOUNITS = {"country": 1, "nuts1": 4, "nuts2": 12, "nuts3": 50, "lau": 2000}
"""Geounits per level of the synthetic country of the European benchmarks (300,000 persons)."""
PAPER = {"t_spsn": 2775, "t_independent": 6378, "epsilon_spsn": 0.8, "epsilon_independent": 0.3}


def representations(census: Census) -> tuple[list[frozenset[str]], dict[str, int]]:
    """Every hypercube at every level as its set of variables, and each variable's categories."""
    tables, categories = [], {}
    known: dict[str, bytes] = {}
    for table in census.tables.values():
        if table.coding is None or len(table.coding) != 1 or "×" not in table.title:
            continue  # (the total and the grid's variables are not hypercubes)
        names = []
        for attribute, category, size in table.coding[0].steps:
            if size < 2 or bool((category < 0).any()):
                raise ValueError(f"{table.name}: a universe step (not counted by this script)")
            name = f"{attribute}:{size}"
            if known.setdefault(name, category.tobytes()) != category.tobytes():
                raise ValueError(f"{name}: two breakdowns of {size} categories")
            names.append(name)
            categories[name] = size
        for level in table.levels:
            variables = set(names)
            if level != census.geography.levels[0]:
                variables.add(f"GEO@{level}")
                categories[f"GEO@{level}"] = GEOUNITS[level]
            tables.append(frozenset(variables))
    return tables, categories


def most_exposed(tables: list[frozenset[str]], categories: Mapping[str, int]) -> dict[str, dict]:
    """The national statistic with the smallest k/t², with and without SPSN."""
    statistics = {
        frozenset(s)
        for table in tables
        for plain in [sorted(v for v in table if not v.startswith("GEO@"))]
        for r in range(len(plain) + 1)
        for s in itertools.combinations(plain, r)
    }
    out: dict[str, dict] = {}
    for statistic in sorted(statistics, key=sorted):
        counts = irr_counts(tables, categories, statistic)
        for mode in ("spsn", "independent"):
            t, k = counts[f"t_{mode}"], counts[f"k_{mode}"]
            if mode not in out or k / t**2 < out[mode]["k_over_t2"]:
                out[mode] = {"statistic": sorted(statistic), "t": t, "k": k, "k_over_t2": k / t**2}
    for figures in out.values():
        v = variance_for_success(figures["k"], figures["t"])
        figures["variance_for_68pct"] = round(v, 4)
        figures["epsilon_laplace"] = round(math.sqrt(2 / v), 4)
        figures["k_over_t2"] = round(figures["k_over_t2"], 5)
    return out


def main() -> None:
    census = census_named("eu2021")
    tables, categories = representations(census)
    total = irr_counts(tables, categories, frozenset())
    exposed = most_exposed(tables, categories)
    print(
        json.dumps(
            {
                "benchmark": "eu_averaging",
                "census": "eu2021",
                "table_levels": len(tables),
                "geounits": GEOUNITS,
                "total_t_spsn": total["t_spsn"],
                "total_t_independent": total["t_independent"],
                "laplace_sd_at_epsilon_global_1": {
                    "spsn": round(math.sqrt(2) * total["t_spsn"], 1),
                    "independent": round(math.sqrt(2) * total["t_independent"], 1),
                },
                "most_exposed": exposed,
                "success_constraint": RISK_CONSTRAINT,
                "paper": PAPER,
                "paper_k_over_t2_0.0867_epsilon": round(
                    math.sqrt(2 / variance_for_success(0.0867, 1.0)), 4
                ),
                "numpy": np.__version__,
            }
        )
    )


if __name__ == "__main__":
    main()

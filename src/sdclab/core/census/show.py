"""A census in words: what `sdclab census show` prints."""

from __future__ import annotations

from sdclab.core.census.model import DETAILED, Census


def _levels(levels: tuple[str, ...]) -> str:
    return " > ".join(levels)


def describe(census: Census) -> list[str]:
    """Lines describing ``census``: attributes, geographies, tables and the attack settings."""
    lines = [f"{census.name}: {census.title}"]
    if census.description:
        lines.append(f"  {census.description}")
    lines.append("attributes:")
    for a in census.attributes.values():
        breakdowns = "".join(
            f"; {b.name} ({b.size}{'' if b.is_partition else ', overlapping'})"
            for b in a.breakdowns.values()
            if b.name != DETAILED
        )
        lines.append(f"  {a.name} [{a.records}]: {a.size} codes{breakdowns}")
    for records in ("persons", "households"):
        if any(a.records == records for a in census.attributes.values()):
            size = census.full_domain_size(records)
            lines.append(f"  every {records} attribute crossed: {size:,} cells (never built)")
    lines.append("geographies:")
    for g in census.geographies.values():
        listed = (
            ", ".join(f"{len(g.units[level]):,} {level}" for level in g.levels)
            if g.units
            else "units read from the microdata"
        )
        lines.append(f"  {g.name}: {_levels(g.levels)} ({listed})")
    lines.append(f"tables ({len(census.tables)}):")
    several = len(census.geographies) > 1
    for t in census.tables.values():
        crossed = " × ".join(t.crossed) or "no attribute"
        where = f"{census.geography_of(t.name).name}: " if several else ""
        lines.append(
            f"  {t.name}: {t.title} — {t.n_cells:,} cells over {crossed} "
            f"({t.marginal.size:,}); {where}{t.top} to {t.bottom}"
        )
    r = census.reconstruction
    resolved = "".join(f"; {a} needed to its {b} only" for a, b in r.resolved.items())
    lines.append(
        f"reconstruction: {' × '.join(r.attributes)} in each {r.level}, one program per "
        f"{census.within}{resolved}"
    )
    lines.append(f"attacker links on: {r.level}, {', '.join(census.quasi_identifiers)}")
    if census.household_key:
        lines.append(f"household key: {census.household_key}")
    return lines

"""Choosing a budget: the error a budget gives one query or table at one level, and the budget a
target error needs (docs/privacy.md, *Choosing a budget*).

Both directions use the exact noise distributions the specification cards use: the discrete
Gaussian N_Z(0, σ²) of TopDown and SafeTab-H and the discrete Laplace of the geometric
mechanism. The 95% margin of error is the smallest integer E with P(|X| ≤ E) ≥ 95%; the RMSE is
the square root of the exact variance. For TopDown the figure is the error of the *noisy
measurements*, before post-processing: of one measured query, or of a published table's cell as
the sum of the measured cells it is made of; the published tables' error differs (the
optimisation combines every measurement and levels, and rounds).

The cell key method has no budget: :func:`cell_key_noise` gives the noise of one cell under its
p-table instead. Each mechanism states its own noise (its ``query_noise`` and ``cell_noise``
roles, built from :mod:`sdclab.core.query_noise`); this module asks them and solves for the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, cast

from sdclab.core.errors import InputError
from sdclab.core.query_noise import GaussianNoise, Noise, Target

if TYPE_CHECKING:
    from sdclab.core.census.model import Census
    from sdclab.protection.base import Mechanism


def _parsed(
    mechanism: str, settings: dict[str, Any], census: Census | None = None
) -> tuple[Mechanism[Any], Any]:
    """The mechanism and its parameters from ``settings`` for ``census`` (default: the US 2010
    census), through its own parser (a problem is one InputError in words)."""
    from sdclab import protection
    from sdclab.censuses import is_us2010

    entry = protection.get(mechanism)
    if census is not None and not entry.any_census and not is_us2010(census):
        raise InputError(
            f"mechanism {mechanism}: its budget is for the US 2010 census's tables, not census "
            f"{census.name}'s"
        )
    if entry.rescale is not None:  # the budget is the question's: its settings at 1, as a unit
        unit = entry.rescale(entry.parse({}, census), Fraction(1))
        settings = {**settings, **dict.fromkeys(unit, "1")}
    return entry, entry.parse(settings, census)


CELL_KEY_ANSWER = (
    "sdclab budget cellkey [--set ptable=...] [--count N] gives the noise distribution of one "
    "cell under its p-table"
)


def noise_of(
    mechanism: str,
    query: str | None,
    level: str,
    settings: dict[str, Any],
    census: Census | None = None,
) -> Noise:
    """The noise of ``query`` at ``level`` under ``mechanism`` with ``settings``, for ``census``
    (default: the US 2010 census): the mechanism's own ``query_noise``."""
    entry, p = _parsed(mechanism, settings, census)
    if entry.query_noise is None:
        raise _no_budget(mechanism)
    return cast(Noise, entry.query_noise(p, query, level))


def _no_budget(mechanism: str) -> InputError:
    """The refusal of a mechanism without a budget to choose, saying what is answered."""
    from sdclab import protection

    chosen = [n for n, m in protection.MECHANISMS.items() if m.query_noise is not None]
    return InputError(
        f"mechanism {mechanism!r}: budgets are chosen for {', '.join(chosen)}; {CELL_KEY_ANSWER}"
    )


def has_cell_noise(mechanism: str) -> bool:
    """Whether ``mechanism`` answers with one cell's noise (it has no budget to choose)."""
    from sdclab import protection

    return protection.get(mechanism).cell_noise is not None


def check_question(
    mechanism: str, targets: Sequence[str], level: str | None, count: int | None
) -> None:
    """Refuse, before any work, a question the mechanism cannot answer: a budget or target
    error of the cell key method (it has no budget), a count for the others (their noise does
    not depend on it), no level or not exactly one of budget and target for the others."""
    from sdclab import protection

    entry = protection.get(mechanism)
    if entry.cell_noise is not None:
        if targets:
            asked = "/".join(f"--{t}" for t in targets)
            raise InputError(
                f"{mechanism} has no budget, so {asked} has nothing to find; {CELL_KEY_ANSWER}"
            )
        return
    if entry.query_noise is None:
        raise _no_budget(mechanism)
    if count is not None:
        raise InputError(
            f"--count applies to cellkey only: {mechanism}'s noise does not depend on the count"
        )
    if level is None:
        raise InputError(f"{mechanism}: give the level (--level block)")
    if len(targets) != 1:
        raise InputError("give exactly one of --budget, --moe and --rmse")


def cell_key_noise(
    settings: dict[str, Any],
    count: int | None = None,
    level: str | None = None,
    table: str | None = None,
    census: Census | None = None,
    mechanism: str = "cellkey",
) -> dict[str, Any]:
    """The noise of one published cell under a mechanism without a budget (the cell key
    method; ``settings`` as ``protect`` takes them), through its ``cell_noise`` role: of a large
    count or of ``count``; ``level`` and ``table`` are only checked."""
    entry, p = _parsed(mechanism, settings, census)
    if entry.cell_noise is None:
        raise _no_budget(mechanism)
    levels, tables = p.census.geography.levels, p.census.tables
    if level is not None and level not in levels:
        raise InputError(f"level {level!r}: expected one of {', '.join(levels)}")
    if table is not None and table.upper() not in tables and table not in tables:
        raise InputError(f"table {table!r}: expected one of {', '.join(tables)}")
    if count is not None and count < 0:
        raise InputError(f"count {count}: expected a count of 0 or more")
    return entry.cell_noise(p, count)


def answer(noise: Noise, target: Target, value: float) -> dict[str, Any]:
    """The budget and its error for one query: at budget ``value``, or the smallest budget whose
    margin of error or RMSE is at most ``value``."""
    if not value > 0 and not (target == "moe" and value == 0):
        raise InputError(f"{target} {value:g}: expected a number above 0")
    if target == "moe" and value != int(value):
        raise InputError(f"moe {value:g}: a margin of error is a whole number of persons")
    if target == "budget":
        noise.check(value, f"budget {value:g}")
    budget = value if target == "budget" else noise.budget_for(target, value)
    spread, margin, rmse = noise.error(budget)
    out = {
        "mechanism": noise.mechanism,
        "query": noise.query,
        "level": noise.level,
        "asked": {target: value},
        "budget": budget,
        "unit": noise.unit,
        "sigma2" if isinstance(noise, GaussianNoise) else "scale": spread,
        "moe_95": margin,
        "rmse": rmse,
        "what": noise.caveat,
    }
    if isinstance(noise, GaussianNoise) and noise.table is not None:
        out |= {
            "table": noise.table,
            "measured_cells_summed": noise.terms,
            "answered_from": [a.to_dict() for a in noise.answering],
        }
    return out

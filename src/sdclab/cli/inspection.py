"""The commands that answer questions without protecting anything: spec (a mechanism's card),
budget (the error of a budget or the budget of an error), census show and mechanisms."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from sdclab.cli.core import (
    CensusOption,
    MechanismOption,
    OneLineErrors,
    SetOption,
    app,
    reports_input_errors,
)


@app.command()
@reports_input_errors
def spec(
    mechanism: MechanismOption,
    settings: SetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the card as JSON.")] = False,
) -> None:
    """Print a mechanism's DP specification card (all five building blocks)."""
    import json

    from sdclab.protection import get, parse_settings

    entry = get(mechanism)
    card = entry.card(entry.parse(parse_settings(settings or [])))
    if as_json:
        typer.echo(json.dumps(card.to_dict(), indent=2))
    else:
        typer.echo(card.render())


@app.command()
@reports_input_errors
def budget(
    mechanism: Annotated[
        str, typer.Argument(help="topdown, safetab_h or geometric; cellkey: its cell noise.")
    ],
    level: Annotated[
        str | None,
        typer.Option(
            help="Geography level (SafeTab-H: regional, detailed-national or detailed-local)."
        ),
    ] = None,
    query: Annotated[
        str | None,
        typer.Option(
            help="TopDown: a query (default total) or a published table (P12); geometric: the "
            "table."
        ),
    ] = None,
    at: Annotated[
        float | None,
        typer.Option("--budget", help="The error at this budget (rho; geometric: epsilon)."),
    ] = None,
    moe: Annotated[
        int | None, typer.Option(help="The budget for a 95% margin of error of at most this.")
    ] = None,
    rmse: Annotated[
        float | None, typer.Option(help="The budget for an RMSE of at most this.")
    ] = None,
    count: Annotated[
        int | None,
        typer.Option(help="cellkey: the noise of a cell of this true count (default: large)."),
    ] = None,
    settings: SetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")] = False,
    census: CensusOption = None,
) -> None:
    """The error a budget gives one query or table at one level, or the budget a target error
    needs; for the cell key method, which has no budget, the noise of one cell."""
    import json

    from sdclab.censuses import census_named
    from sdclab.pipeline import budget as budgets
    from sdclab.protection import parse_settings

    chosen = None if census is None else census_named(census)
    asked = {"budget": at, "moe": moe, "rmse": rmse}
    given = [(k, v) for k, v in asked.items() if v is not None]
    budgets.check_question(mechanism, [k for k, _ in given], level, count)
    if budgets.has_cell_noise(mechanism):
        found = budgets.cell_key_noise(
            parse_settings(settings or []), count, level, query, chosen, mechanism
        )
        typer.echo(json.dumps(found, indent=2) if as_json else cell_key_text(found))
        return
    assert level is not None
    target, value = given[0]
    noise = budgets.noise_of(mechanism, query, level, parse_settings(settings or []), chosen)
    result = budgets.answer(noise, target, float(value))  # type: ignore[arg-type]
    typer.echo(
        json.dumps(result, indent=2)
        if as_json
        else _budget_text(mechanism, level, noise, target, value, result)
    )


def _budget_text(
    mechanism: str, level: str, noise: Any, target: str, value: float, result: dict[str, Any]
) -> str:
    """The answer of ``sdclab budget`` in words: the error at the budget, or the budget found,
    and for a published table the measured queries its cells are sums of."""
    spread = (
        f"σ² = {result['sigma2']:.4g}" if "sigma2" in result else f"scale {result['scale']:.4g}"
    )
    error = "a 95% margin of error" if target == "moe" else "an RMSE"
    lead = (
        f"at {noise.unit} {value:g}"
        if target == "budget"
        else f"the smallest {noise.unit} for {error} of at most {value:g}: {result['budget']:.6g}"
    )
    if "table" in result:
        spread = f"{_made_of(result)}, each of {spread}: for "
        spread += "it" if result["measured_cells_summed"] == 1 else "the largest"
    text = (
        f"{mechanism}, {result.get('table', noise.query)} at {level}: {lead} → {spread}, 95% "
        f"margin of error ±{result['moe_95']}, RMSE {result['rmse']:.4g} — {noise.caveat}"
    )
    if "table" in result:
        text += f"\n  answered at {level} from: " + "; ".join(map(_cells, result["answered_from"]))
    return text


def _made_of(result: dict[str, Any]) -> str:
    """How a table's cell is made of the chosen query's measured cells, in words."""
    (fewest, most) = next(
        a["cells_summed"] for a in result["answered_from"] if a["query"] == result["query"]
    )
    query = result["query"]
    if most == 1:
        return f"a cell is one measured cell of {query}"
    summed = str(most) if fewest == most else f"{fewest} to {most}"
    return f"a cell is the sum of {summed} measured cells of {query}"


def _cells(answering: dict[str, Any]) -> str:
    """``sex*age (1 to 5 cells)``: a query and how many of its cells a table's cell sums."""
    fewest, most = answering["cells_summed"]
    cells = (
        f"{most} cell{'s' if most > 1 else ''}" if fewest == most else f"{fewest} to {most} cells"
    )
    return f"{answering['query']} ({cells})"


def cell_key_text(found: dict[str, Any]) -> str:
    """The cell key answer in lines: the distribution, its figures and why there is no budget."""
    noise = ", ".join(f"{v:+d}: {p:.6g}" for v, p in found["noise"].items())
    mean = "" if abs(found["mean"]) < 1e-9 else f"mean {found['mean']:.4g}, "
    stated = found["stated_variance"]
    variance = f"variance {found['variance']:.6g}" + (
        f" (the p-table's V = {stated:g})" if stated is not None else ""
    )
    return "\n".join(
        (
            f"cellkey, ptable {found['ptable']}: noise of one cell, {found['row']}:",
            f"  {noise}",
            f"  {mean}{variance}, largest |noise| {found['max_abs']} (the p-table's bound D = "
            f"{found['bound']}), 95% margin of error ±{found['moe_95']}",
            f"  budget: {found['budget']}",
            f"  {found['what']}",
        )
    )


census_app = typer.Typer(
    cls=OneLineErrors,
    help="Censuses: the built-in ones and those declared in files.",
    no_args_is_help=True,
)
app.add_typer(census_app, name="census")


@census_app.command("show")
@reports_input_errors
def show_census(
    census: Annotated[
        str,
        typer.Argument(
            help="A built-in census (us2010, eu2021) or a census file.",
        ),
    ],
) -> None:
    """Print a census: its attributes and breakdowns, geographies, tables and attack settings."""
    from sdclab.censuses import census_named
    from sdclab.core.census.show import describe

    for line in describe(census_named(census)):
        typer.echo(line)


@app.command("mechanisms")
@reports_input_errors
def list_mechanisms(
    name: Annotated[str | None, typer.Argument(help="One mechanism (default: all).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print them as JSON.")] = False,
) -> None:
    """List every mechanism with its parameters: defaults, units and what each means."""
    import json

    from sdclab import protection
    from sdclab.pipeline import api

    found = [api.describe(protection.get(name))] if name is not None else api.mechanisms()
    if as_json:
        typer.echo(json.dumps([info.to_dict() for info in found], indent=2, default=str))
        return
    for info in found:
        can = [] if info.protects else ["a guarantee and an audit only: it protects no data"]
        typer.echo(f"{info.name}: {info.summary}" + "".join(f" ({c})" for c in can))
        for p in info.parameters:
            unit = f" [{p.unit}]" if p.unit else ""
            default = "required" if p.default is None and p.required else f"default {p.default}"
            typer.echo(f"    {p.name}{unit} ({default}): {p.meaning}")
        if not info.parameters:
            typer.echo("    (no parameters)")

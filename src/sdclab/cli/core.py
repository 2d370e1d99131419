"""The command line's app: usage errors and bad input as one line (exit 2), the progress lines,
the options several commands share and the console entry point. Commands register on ``app``
from the modules beside this one."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from typer.core import TyperGroup

from sdclab.core.errors import DISK_FULL, InputError, escape_control


class OneLineErrors(TyperGroup):
    """The command group, with usage errors as one line (exit 2) instead of a framed box, and a
    reader that closed the pipe early taken as the end of the output, not as an error."""

    def main(  # type: ignore[override]
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        call = {"args": args, "prog_name": prog_name, "complete_var": complete_var, **extra}
        if not standalone_mode:
            return super().main(**call, standalone_mode=False)
        try:
            code = super().main(**call, standalone_mode=False)
        except typer.Abort:
            typer.echo("aborted", err=True)
            sys.exit(130)
        except Exception as exc:
            exit_code = getattr(exc, "exit_code", None)
            if not (isinstance(exit_code, int) and hasattr(exc, "format_message")):
                raise  # not a command-line error: a bug
            if type(exc).__name__ == "NoArgsIsHelpError":  # `sdclab` alone: the help
                typer.echo(exc.format_message())
                sys.exit(0)
            context = getattr(exc, "ctx", None)
            where = context.command_path if context is not None else "sdclab"
            text = escape_control(exc.format_message())
            typer.echo(f"error: {where}: {text} (see {where} --help)", err=True)
            sys.exit(exit_code)
        sys.exit(code if isinstance(code, int) else 0)


def quiet_closed_pipe() -> None:
    """Send what is still to be printed nowhere: the reader of our output has gone."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, stream.fileno())


def progress(text: str) -> None:
    """A progress line on stderr; a reader that has gone away stops the lines, not the work
    (a closed pipe ends a command with exit 0 only once its output is written)."""
    try:
        typer.echo(text, err=True)
    except BrokenPipeError:
        quiet_closed_pipe()


app = typer.Typer(
    cls=OneLineErrors,
    name="sdclab",
    help="Statistical disclosure control of census tables: protect, attack, evaluate.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


F = TypeVar("F", bound=Callable[..., Any])


def reports_input_errors(fn: F) -> F:
    """Turn an :class:`InputError` (or an unreadable/unwritable path) into one line, exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            typer.echo(f"error: {exc.one_line()}", err=True)
            raise typer.Exit(2) from None
        except BrokenPipeError:  # only the last lines print after the work: it is done
            quiet_closed_pipe()
            raise typer.Exit(0) from None
        except OSError as exc:  # a path the user named cannot be read or written
            text = f"{exc.strerror or exc}: {exc.filename}" if exc.filename else exc.strerror
            if exc.errno in DISK_FULL:  # no room for an output (nothing of it is left)
                text = f"{DISK_FULL[exc.errno]} writing {exc.filename or 'the output'}"
            typer.echo(f"error: {escape_control(str(text or exc))}", err=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


MECHANISM_NAMES = (
    "none, psa, swap, swap-low, swap-high, gaussian, topdown, cellkey, geometric, truncated, "
    "safetab_h, suppress"
)
"""The registered mechanisms, for the help text (kept equal to the registry by a test, so that
``sdclab --help`` need not import them)."""
MechanismOption = Annotated[
    str,
    typer.Option(
        "--mechanism",
        "-m",
        help=f"Mechanism: {MECHANISM_NAMES} (their parameters: sdclab mechanisms).",
    ),
]


TruthOption = Annotated[
    Path,
    typer.Option(
        "--truth",
        help="The confidential population (of a declared census: its persons' file).",
    ),
]
SetOption = Annotated[
    list[str] | None, typer.Option("--set", help="Parameter as key=value (repeatable).")
]
OutOption = Annotated[
    Path, typer.Option("--out", "-o", help="Output directory (replaced atomically).")
]


PopulationArgument = Annotated[
    Path,
    typer.Argument(
        help="Population directory (persons + units); with --census, the persons' file."
    ),
]
MappingOption = Annotated[
    Path | None,
    typer.Option(
        help="With --census (or --truth of a declared census's release): a mapping file naming "
        "the persons' file's columns and codes (docs/census.md)."
    ),
]
CensusOption = Annotated[
    str | None,
    typer.Option(help="The census: us2010 (default), eu2021 or a census file (docs/census.md)."),
]


def main() -> None:
    """Console entry point: internal errors exit 1 with one line (set SDCLAB_DEBUG for a trace)."""
    try:
        app()
    except Exception as exc:  # a bug, not bad input: say so briefly
        if os.environ.get("SDCLAB_DEBUG"):
            raise
        typer.echo(f"internal error: {escape_control(f'{type(exc).__name__}: {exc}')}", err=True)
        sys.exit(1)

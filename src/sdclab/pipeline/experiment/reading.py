"""Reading an experiment: a TOML file or its content, its paths taken from where it lies, the
census it names read, and any problem one InputError."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sdclab.censuses import BUILT_IN, census_named
from sdclab.censuses.us2010 import NAME as US2010
from sdclab.censuses.us2010.population.io import TABLES, table_file
from sdclab.core.census.mapping import read_mapping
from sdclab.core.census.model import Census
from sdclab.core.errors import InputError
from sdclab.core.fileio import read_toml
from sdclab.pipeline.experiment.spec import Experiment, experiment_problem


def load_experiment(path: Path) -> Experiment:
    """Read and validate an experiment file; any problem is one clear InputError."""
    data = read_toml(Path(path), "experiment file")
    return parse_experiment(data, str(path), Path(path).parent)


def parse_experiment(data: Any, source: str, base: Path) -> Experiment:
    """Validate an experiment's content (``source`` names it in messages; a relative
    ``population.path`` is taken from ``base``)."""
    infinite = first_non_finite(data)
    if infinite is not None:
        loc, value = infinite
        error = {"loc": loc, "type": "finite_number", "input": value}
        raise InputError(f"{source}: {experiment_problem(error)}")
    population = data.get("population") if isinstance(data, dict) else None
    census = None
    if isinstance(population, dict) and isinstance(population.get("census"), str):
        population = data["population"] = dict(population)
        census = _declared_census(population, source, base)
    if census is None and isinstance(population, dict) and isinstance(population.get("path"), str):
        population = data["population"] = dict(population)
        shown = repr(population["path"])
        try:
            population["path"] = shown = str((base / population["path"]).resolve())
            is_dir = Path(population["path"]).is_dir()
        except (OSError, ValueError):  # a NUL character, a name too long for the system
            is_dir = False
        if not is_dir:
            raise InputError(f"{source}: population.path: {shown} is not a directory")
        try:  # a directory without the tables (/proc/self) is refused before anything is read
            for table in TABLES:
                table_file(Path(shown), table)
        except InputError as exc:
            raise InputError(f"{source}: population.path: {exc}") from None
    try:
        return Experiment.model_validate(data, context={"census": census})
    except ValidationError as exc:
        # a misspelt key first: the likeliest cause of a missing one
        first = min(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        raise InputError(f"{source}: {experiment_problem(first)}") from None
    except InputError as exc:
        raise InputError(f"{source}: {exc}") from None


def _declared_census(population: dict[str, Any], source: str, base: Path) -> Census | None:
    """The census ``population.census`` names (a file taken from ``base``), with its persons'
    file ``population.path`` resolved and checked to be a file (None: the US 2010 census)."""
    name = population["census"]
    if name == US2010:
        return None
    if name not in BUILT_IN:
        population["census"] = str((base / name).resolve())
    try:
        census = census_named(population["census"])
    except InputError as exc:
        raise InputError(f"{source}: population.census: {exc}") from None
    path = population.get("path")
    if isinstance(path, str):
        try:
            population["path"] = str((base / path).resolve())
            is_file = Path(population["path"]).is_file()
        except (OSError, ValueError):  # a NUL character, a name too long for the system
            is_file = False
        if not is_file:
            raise InputError(
                f"{source}: population.path: {population['path']} is not a file (census "
                f"{census.name}'s persons, CSV or Parquet)"
            )
    mapping = population.get("mapping")
    if isinstance(mapping, str):
        population["mapping"] = str((base / mapping).resolve())
        try:
            read_mapping(census, Path(population["mapping"]))
        except InputError as exc:
            raise InputError(f"{source}: population.mapping: {exc}") from None
    return census


def first_non_finite(data: Any) -> tuple[tuple[str | int, ...], float] | None:
    """Where the first number that is not finite (TOML writes ``inf`` and ``nan``) lies in an
    experiment's content, and the number: no setting of an experiment is infinite."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    while stack:
        loc, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return loc, value
        if isinstance(value, dict):
            items: list[tuple[str | int, Any]] = list(value.items())
        elif isinstance(value, list):
            items = list(enumerate(value))
        else:
            continue
        stack.extend(((*loc, key), item) for key, item in reversed(items))
    return None

"""``release.json`` read and checked: its keys and their types, its tables against the census's,
its specification card, the mechanism it names (one of those the reader is given), its parameters
and its noise record, and the census the release is of."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sdclab.core.accounting import SpecCard
from sdclab.core.census.document import from_document
from sdclab.core.errors import InputError
from sdclab.core.fileio import json_safe, read_json_object
from sdclab.release.model import (
    CENSUS_FILE,
    FORMAT_VERSION,
    RELEASE_FILE,
    Mechanisms,
    ReleaseMechanism,
    table_metadata,
    us2010_census,
)

if TYPE_CHECKING:
    from sdclab.core.census.model import Census


_REQUIRED_KEYS = {
    "format_version": int,
    "mechanism": str,
    "parameters": dict,
    "specification": dict,
    "randomness": dict,
    "input_digest": str,
    "tables": dict,
    "microdata": bool,
}


def load_metadata(path: Path) -> dict[str, Any]:
    """release.json as a JSON object (not yet checked)."""
    file = path / RELEASE_FILE
    if not path.is_dir():
        raise InputError(f"{path}: not a release directory")
    if not file.is_file():
        raise InputError(f"{file}: missing; {path} is not a release directory")
    return read_json_object(file)


def check_metadata(
    file: Path, meta: dict[str, Any], census: Census, mechanisms: Mechanisms
) -> tuple[ReleaseMechanism, Any]:
    """The keys of release.json and their types, its tables, its specification card and its
    noise record; the mechanism (one of ``mechanisms``) and its parameters, parsed."""
    missing = [k for k in _REQUIRED_KEYS if k not in meta]
    if missing:
        raise InputError(f"{file}: missing key(s) {', '.join(missing)}")
    for key, kind in _REQUIRED_KEYS.items():
        if not isinstance(meta[key], kind) or (kind is int and isinstance(meta[key], bool)):
            raise InputError(
                f"{file}: {key} must be a JSON {kind.__name__.replace('dict', 'object')}"
            )
    if meta["format_version"] != FORMAT_VERSION:
        raise InputError(
            f"{file}: format_version {meta['format_version']!r} is not supported "
            f"(expected {FORMAT_VERSION})"
        )
    if not isinstance(meta.get("noise", {}), dict):
        raise InputError(f"{file}: noise must be a JSON object")
    unknown = [name for name in meta["tables"] if name not in census.tables]
    if unknown:
        raise InputError(f"{file}: unknown table(s) {', '.join(unknown)} of census {census.name}")
    for name, info in meta["tables"].items():
        expected = table_metadata(census.table(name))
        if not isinstance(info, dict):
            raise InputError(f"{file}: the entry of table {name} must be a JSON object")
        differs = [k for k, v in expected.items() if info.get(k) != v]
        if differs:
            raise InputError(
                f"{file}: table {name} has {', '.join(differs)} that differ from the catalogue"
            )
    try:
        SpecCard.from_dict(meta["specification"])
    except (TypeError, KeyError, AttributeError, ValueError) as exc:
        raise InputError(f"{file}: malformed specification card ({exc})") from None
    mechanism = _mechanism(file, meta, mechanisms)
    parameters = _check_parameters(file, mechanism, meta["parameters"], census)
    _check_noise(file, meta["mechanism"], mechanism, parameters, meta.get("noise", {}))
    return mechanism, parameters


def _mechanism(file: Path, meta: dict[str, Any], mechanisms: Mechanisms) -> ReleaseMechanism:
    """The mechanism release.json names, one of ``mechanisms``."""
    name = meta.get("mechanism")
    if not isinstance(name, str) or name not in mechanisms:
        raise InputError(f"{file}: unknown mechanism {name!r} (known: {', '.join(mechanisms)})")
    return mechanisms[name]


def _check_parameters(
    file: Path, mechanism: ReleaseMechanism, parameters: dict[str, Any], census: Census
) -> Any:
    """The parameters are valid for the mechanism: parsed."""
    try:
        mechanism.parameters.check_recorded(parameters)
        return mechanism.parse(parameters, census)
    except InputError as exc:  # "mechanism NAME, parameter KEY: expected …, got …"
        raise InputError(f"{file}: parameters: {exc}") from None


def _check_noise(
    file: Path, name: str, entry: ReleaseMechanism, parameters: Any, noise: dict[str, Any]
) -> None:
    """The noise record is the one the mechanism states for the recorded parameters (an attack
    reads its figures: a geometric scale), or empty (a release that states none)."""
    if not noise:
        return
    if entry.noise is None:
        raise InputError(f"{file}: noise is recorded, but mechanism {name} states none")
    expected = json.loads(json.dumps(json_safe(entry.noise(parameters).to_dict())))
    where = _first_difference(noise, expected, "noise")
    if where is not None:
        raise InputError(
            f"{file}: {where} is not what mechanism {name} states for the recorded parameters "
            "(the noise record follows from them)"
        )


def _first_difference(given: Any, expected: Any, where: str) -> str | None:
    """The first key path at which ``given`` differs from ``expected`` (JSON values), or None."""
    if isinstance(given, dict) and isinstance(expected, dict):
        for key in sorted(set(given) | set(expected), key=str):
            if key not in given or key not in expected:
                return f"{where}.{key}"
            found = _first_difference(given[key], expected[key], f"{where}.{key}")
            if found is not None:
                return found
        return None
    same = given == expected and type(given) is type(expected)
    return None if same or (_number(given) and _number(expected) and given == expected) else where


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def read_census(path: Path, meta: dict[str, Any]) -> Census:
    """The census a release is of: a built-in one it names, or the document it carries; its
    digest must be the one release.json records (a release written before releases named their
    census is of the US 2010 census)."""
    from sdclab.censuses import BUILT_IN

    file = path / RELEASE_FILE
    named = meta.get("census", {"name": "us2010", "digest": us2010_census().digest})
    if not (isinstance(named, dict) and set(named) == {"name", "digest"}) or not all(
        isinstance(v, str) for v in named.values()
    ):
        raise InputError(f'{file}: census must be {{"name": TEXT, "digest": TEXT}}')
    if (path / CENSUS_FILE).is_file():
        try:
            census = from_document(read_json_object(path / CENSUS_FILE))
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise InputError(f"{path / CENSUS_FILE}: not a census document ({exc})") from None
    elif named["name"] in BUILT_IN:
        census = BUILT_IN[named["name"]]()
    else:
        raise InputError(
            f"{file}: census {named['name']!r} is not built in and {CENSUS_FILE} is missing"
        )
    if census.digest != named["digest"] or census.name != named["name"]:
        raise InputError(
            f"{file}: the release is of census {named['name']!r} with digest {named['digest']}, "
            f"not the {census.name!r} it holds or names ({census.digest})"
        )
    return census

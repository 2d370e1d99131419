"""Fuzzing the input boundaries: every malformed input is one clear InputError, nothing else.

Three loaders face files a user (or a broken disk) hands over: the population reader (CSV and
Parquet), the experiment file parser and the release reader. Hypothesis mutates small valid inputs
(random bytes, truncation, random column values and types, dropped and renamed columns, random
TOML documents built from the real keys, edited release files) and each loader must either return
a valid object or raise :class:`InputError` whose message is one line — never another exception.

The runs are deterministic (``derandomize``, no example database) and short. For a long hunt,
``SDCLAB_FUZZ_EXAMPLES=5000 SDCLAB_FUZZ_RANDOM=1 pytest tests/test_fuzz_inputs.py`` runs more
examples with fresh randomness each time.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from sdclab.censuses.us2010.population import PERSONS, UNITS, Population
from sdclab.censuses.us2010.population.columns import with_optional
from sdclab.censuses.us2010.population.io import read_population
from sdclab.core.errors import InputError
from sdclab.pipeline.api import read_release
from sdclab.pipeline.experiment import Experiment, load_experiment
from sdclab.protection import MECHANISMS
from sdclab.release import Release, exact_release, write_release

DATA = Path(__file__).parent / "data"
BASE_CSV = DATA / "good" / "population" / "base_csv"
BASE_PARQUET = DATA / "good" / "population" / "base_parquet"

FUZZ = settings(
    max_examples=int(os.environ.get("SDCLAB_FUZZ_EXAMPLES", "200")),
    deadline=None,
    derandomize="SDCLAB_FUZZ_RANDOM" not in os.environ,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def assert_one_line(error: InputError) -> None:
    line = error.one_line()
    assert line.strip(), "an empty error message"
    assert "\n" not in line and "\r" not in line, line


# ---------------------------------------------------------------------------------------------
# Shared strategies: raw byte damage and random column values
# ---------------------------------------------------------------------------------------------


@st.composite
def damaged_bytes(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` truncated, with bytes flipped, inserted or replaced, or random bytes instead."""
    kind = draw(st.sampled_from(["truncate", "flip", "insert", "random", "splice"]))
    if kind == "truncate":
        return data[: draw(st.integers(0, max(len(data) - 1, 0)))]
    if kind == "random":
        return draw(st.binary(min_size=1, max_size=200))
    position = draw(st.integers(0, max(len(data) - 1, 0)))
    if kind == "flip":
        flipped = data[position] ^ draw(st.integers(1, 255))
        return data[:position] + bytes([flipped]) + data[position + 1 :]
    chunk = draw(st.binary(min_size=1, max_size=16))
    if kind == "insert":
        return data[:position] + chunk + data[position:]
    return data[:position] + chunk + data[position + len(chunk) :]


TEXT_VALUES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        ["", " ", "-1", "1.5", "NaN", "nan", "inf", "1e3", "true", "x", "010010201001001", "0"]
    ),
    st.integers(-(2**70), 2**70).map(str),
)


def column_values(n: int) -> st.SearchStrategy[pa.Array]:
    """An Arrow column of ``n`` random values of a random type (Parquet can hold any of them)."""
    size = {"min_size": n, "max_size": n}
    return st.one_of(
        st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), **size).map(
            lambda v: pa.array(v, pa.int64())
        ),
        st.lists(st.integers(0, 2**64 - 1), **size).map(lambda v: pa.array(v, pa.uint64())),
        st.lists(st.none() | st.integers(-128, 127), **size).map(lambda v: pa.array(v, pa.int8())),
        st.lists(st.none() | st.floats(allow_nan=True, allow_infinity=True), **size).map(
            lambda v: pa.array(v, pa.float64())
        ),
        st.lists(st.none() | TEXT_VALUES, **size).map(lambda v: pa.array(v, pa.string())),
        st.lists(st.binary(max_size=6), **size).map(lambda v: pa.array(v, pa.binary())),
        # text that is not UTF-8, stored as a Parquet string column
        st.lists(st.binary(max_size=6), **size).map(
            lambda v: pa.array(v, pa.binary()).view(pa.string())
        ),
        st.lists(st.none() | st.booleans(), **size).map(lambda v: pa.array(v, pa.bool_())),
        st.just(pa.nulls(n)),
        st.lists(st.integers(-(10**6), 10**6), **size).map(
            lambda v: pa.array(v, pa.int32()).cast(pa.date32())
        ),
        st.lists(st.decimals(allow_nan=False, places=2, min_value=-999, max_value=999), **size).map(
            lambda v: pa.array(v, pa.decimal128(9, 2))
        ),
        st.lists(st.lists(st.integers(0, 9), max_size=2), **size).map(
            lambda v: pa.array(v, pa.list_(pa.int64()))
        ),
        st.lists(st.sampled_from(["1", "2", "x"]), **size).map(
            lambda v: pa.array(v, pa.string()).dictionary_encode()
        ),
    )


COLUMN_NAMES = st.one_of(
    st.text(max_size=10),
    st.sampled_from(
        ["", " age", "AGE", "race_code1", "record_key", "hispanic_origin", "person_id", "block"]
        + ["*", "^.*$", "^age$", "tenure ", "__sdclab_row__", "a\nb"]  # patterns to pl.col
    ),
)


@st.composite
def mutated_table(draw: st.DrawFn, table: pa.Table) -> pa.Table:
    """A table with a column dropped, renamed, replaced by random values, or one cell emptied."""
    kind = draw(st.sampled_from(["drop", "rename", "values", "null_cell", "rows", "add"]))
    names = table.column_names
    index = draw(st.integers(0, len(names) - 1))
    if kind == "drop":
        return table.remove_column(index)
    if kind == "rename":
        new = draw(COLUMN_NAMES)
        return table.rename_columns([new if i == index else c for i, c in enumerate(names)])
    if kind == "values":
        return table.set_column(index, names[index], draw(column_values(table.num_rows)))
    if kind == "add":
        return table.append_column(draw(COLUMN_NAMES), draw(column_values(table.num_rows)))
    if kind == "rows":
        keep = draw(st.lists(st.integers(0, table.num_rows - 1), max_size=table.num_rows + 2))
        return table.take(pa.array(keep, pa.int64()))
    row = draw(st.integers(0, table.num_rows - 1))
    values = table.column(index).to_pylist()
    values[row] = None
    return table.set_column(index, names[index], pa.array(values, table.column(index).type))


def write_table(table: pa.Table, file: Path) -> None:
    pq.write_table(table, file)


# ---------------------------------------------------------------------------------------------
# (a) Population loaders
# ---------------------------------------------------------------------------------------------


def assert_valid_population(population: Population) -> None:
    """The frames hold the contract columns (plus the optional ones present) in contract dtypes."""
    assert isinstance(population, Population)
    for frame, specs in ((population.persons, PERSONS), (population.units, UNITS)):
        expected = with_optional(specs, frame.columns)
        assert frame.columns == [s.name for s in expected]
        assert frame.dtypes == [s.dtype for s in expected]


def load_population(files: dict[str, bytes]) -> None:
    """Write the files into a fresh directory and load it: a Population or a one-line error."""
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        for name, data in files.items():
            (root / name).write_bytes(data)
        try:
            population = read_population(root)
        except InputError as error:
            event("InputError")
            assert_one_line(error)
        else:
            event("loaded")
            assert_valid_population(population)


CSV_FILES = {name: (BASE_CSV / name).read_bytes() for name in ("persons.csv", "units.csv")}
PARQUET_FILES = {
    name: (BASE_PARQUET / name).read_bytes() for name in ("persons.parquet", "units.parquet")
}
PARQUET_TABLES = {name: pq.read_table(BASE_PARQUET / name) for name in PARQUET_FILES}


@st.composite
def damaged_csv_files(draw: st.DrawFn) -> dict[str, bytes]:
    """The base CSV population with one file damaged byte-wise or column-wise."""
    files = dict(CSV_FILES)
    name = draw(st.sampled_from(sorted(files)))
    data = files[name]
    kind = draw(st.sampled_from(["bytes", "drop", "rename", "cell"]))
    if kind == "bytes":
        files[name] = draw(damaged_bytes(data))
        return files
    lines = data.split(b"\n")
    width = len(lines[0].split(b","))
    column = draw(st.integers(0, width - 1))
    if kind == "drop":
        rows = [line.split(b",") for line in lines]
        files[name] = b"\n".join(
            b",".join(f for i, f in enumerate(r) if i != column) if len(r) == width else b","
            for r in rows
        )
        return files
    if kind == "rename":
        header = lines[0].split(b",")
        header[column] = draw(
            st.binary(max_size=8)
            | st.text(max_size=8).map(str.encode)
            | COLUMN_NAMES.map(str.encode)
        )
        lines[0] = b",".join(header)
    else:
        row = draw(st.integers(1, max(len(lines) - 2, 1)))
        fields = lines[row].split(b",")
        fields[column % len(fields)] = draw(
            st.binary(max_size=8)
            | TEXT_VALUES.map(str.encode)
            | st.sampled_from([b"\xff\xfe", b"\xc3", b'"', b"\r", b"99999999999999999999999"])
        )
        lines[row] = b",".join(fields)
    files[name] = b"\n".join(lines)
    return files


@FUZZ
@given(files=damaged_csv_files())
def test_fuzzed_csv_population_loads_or_is_one_input_error(files: dict[str, bytes]) -> None:
    load_population(files)


@st.composite
def damaged_parquet_files(draw: st.DrawFn) -> dict[str, bytes]:
    """The base Parquet population with one file's bytes damaged or one column mutated."""
    files = dict(PARQUET_FILES)
    name = draw(st.sampled_from(sorted(files)))
    if draw(st.booleans()):
        files[name] = draw(damaged_bytes(files[name]))
        return files
    table = draw(mutated_table(PARQUET_TABLES[name]))
    with tempfile.TemporaryDirectory() as directory:
        file = Path(directory) / name
        write_table(table, file)
        files[name] = file.read_bytes()
    return files


@FUZZ
@given(files=damaged_parquet_files())
def test_fuzzed_parquet_population_loads_or_is_one_input_error(files: dict[str, bytes]) -> None:
    load_population(files)


# ---------------------------------------------------------------------------------------------
# (b) The experiment file
# ---------------------------------------------------------------------------------------------


def toml_key(key: str) -> str:
    if key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key):
        return key
    return toml_string(key)


def toml_string(text: str) -> str:
    # JSON string escapes are TOML basic-string escapes (\", \\, \n, \uXXXX); DEL and other
    # characters TOML forbids raw make a document tomllib rejects, which is a fine input too.
    return json.dumps(text, ensure_ascii=False)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)


def toml_document(data: dict[str, Any]) -> str:
    """A TOML document: top-level tables as [sections], everything else inline."""
    plain = {k: v for k, v in data.items() if not isinstance(v, dict)}
    lines = [f"{toml_key(k)} = {toml_value(v)}" for k, v in plain.items()]
    for key, value in data.items():
        if isinstance(value, dict):
            lines.append(f"[{toml_key(key)}]")
            lines += [f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()]
    return "\n".join(lines) + "\n"


SCALARS = st.one_of(
    st.none(),  # left out of the document
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT_VALUES,
    st.sampled_from(["none", "maxent", "ons-10-5", "dask-local:²", "dask://h:1", ".", "/"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


def drop_none(value: Any) -> Any:
    """TOML has no null: None drops a key (and is left out of arrays)."""
    if isinstance(value, dict):
        return {k: drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_none(v) for v in value if v is not None]
    return value


ATTACK_KEYS = (
    "reconstruct",
    "variability",
    "attackers",
    "workers",
    "executor",
    "seed",
    "time_limit",
)
PLAUSIBLE = st.one_of(
    VALUES,
    st.sampled_from(
        [0, 1, 2, 3, 5, 100, 1000, 50_000, True, False, 0.5, "0.05", "0.5", "1", "2", "8", "true"]
        + ["pl94", "dhc", "even", "maxent", "ons-10-5", "drawn", "census", "local", "x-1"]
        + ["dask-local:2", "dask://host:8786", ["census"], ["commercial", "census"]]
    ),
)
VALID_DOCUMENT: dict[str, Any] = {
    "population": {"persons": 1000, "seed": 3},
    "mechanisms": [
        {"name": "none"},
        {"name": "cellkey", "settings": {"ptable": "maxent", "bound": 3, "variance": 2}},
        {"name": "psa", "settings": {"rate": "0.1"}, "seed": 2, "label": "psa-10"},
    ],
    "attacks": {"workers": 1, "executor": "local", "attackers": ["census"]},
}


def table_in(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """``parent[key]`` as a table (replaced by an empty one if an edit made it something else)."""
    if not isinstance(parent.get(key), dict):
        parent[key] = {}
    return parent[key]


@st.composite
def edited_document(draw: st.DrawFn, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with one real key set to a random value, a key removed or an unknown key."""
    kind = draw(
        st.sampled_from(["population", "attacks", "mechanism", "settings", "delete", "unknown"])
    )
    if kind == "population":
        key = draw(st.sampled_from(["persons", "seed", "path"]))
        table_in(document, "population")[key] = draw(PLAUSIBLE | st.sampled_from([".", "nope"]))
        return document
    if kind == "attacks":
        table_in(document, "attacks")[draw(st.sampled_from(ATTACK_KEYS))] = draw(PLAUSIBLE)
        return document
    if kind == "unknown":
        section = draw(st.sampled_from(["population", "attacks", None]))
        target = document if section is None else table_in(document, section)
        target[draw(st.text(min_size=1, max_size=6))] = draw(PLAUSIBLE)
        return document
    if kind == "delete" and document:
        section = draw(st.sampled_from(sorted(document)))
        inner = document[section]
        if isinstance(inner, dict) and inner and draw(st.booleans()):
            del inner[draw(st.sampled_from(sorted(inner)))]
        else:
            del document[section]
        return document
    mechanisms = document.get("mechanisms")
    if not isinstance(mechanisms, list) or not all(isinstance(m, dict) for m in mechanisms):
        mechanisms = document["mechanisms"] = [{"name": "none"}]
    if not mechanisms or draw(st.integers(0, 4)) == 0:
        mechanisms.append({"name": draw(st.sampled_from(sorted(MECHANISMS)))})
    entry = mechanisms[draw(st.integers(0, len(mechanisms) - 1))]
    if kind == "mechanism":
        key = draw(st.sampled_from(["name", "seed", "label", "settings"]))
        names = st.sampled_from(sorted(MECHANISMS)) | st.text(max_size=6)
        entry[key] = draw(names if key == "name" and draw(st.booleans()) else PLAUSIBLE)
        return document
    name = entry.get("name")
    known = isinstance(name, str) and name in MECHANISMS
    fields = list(MECHANISMS[name].parameters.model_fields) if known else []
    table_in(entry, "settings")[draw(st.sampled_from(fields or ["x"]))] = draw(PLAUSIBLE)
    return document


@st.composite
def experiment_documents(draw: st.DrawFn) -> str:
    """A valid experiment (as a TOML document) after zero to four random edits."""
    document = json.loads(json.dumps(VALID_DOCUMENT))
    for _ in range(draw(st.integers(0, 4))):
        document = draw(edited_document(document))
    return toml_document(drop_none(document))


VALID_EXPERIMENT = b"""[population]
persons = 1000
seed = 3

[[mechanisms]]
name = "cellkey"
settings = { ptable = "maxent", bound = 3, variance = 2 }

[attacks]
workers = 1
executor = "local"
"""


def check_experiment(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        file = Path(directory) / "exp.toml"
        file.write_bytes(data)
        try:
            experiment = load_experiment(file)
        except InputError as error:
            event("InputError")
            assert_one_line(error)
        else:
            event("loaded")
            assert isinstance(experiment, Experiment)


@FUZZ
@given(text=experiment_documents())
def test_fuzzed_experiment_documents_load_or_are_one_input_error(text: str) -> None:
    check_experiment(text.encode("utf-8"))


@FUZZ
@given(data=damaged_bytes(VALID_EXPERIMENT))
def test_damaged_experiment_files_load_or_are_one_input_error(data: bytes) -> None:
    check_experiment(data)


@pytest.mark.parametrize(
    "text",
    [
        "[population]\npersons = " + "1" * 5000 + "\n",  # int() refuses > 4300 digits
        '[population]\npath = "a\\u0000b"\n[[mechanisms]]\nname = "none"\n',
        '[population]\npath = "' + "a" * 5000 + '"\n[[mechanisms]]\nname = "none"\n',
        '[population]\npersons = 1000\n[[mechanisms]]\nname = "none"\n'
        '[attacks]\nexecutor = "dask-local:\u00b2"\n',
        '[population]\npersons = 1000\n"a\\nb" = 1\n[[mechanisms]]\nname = "none"\n',
        "a = " + "[" * 100_000 + "]" * 100_000,
    ],
    ids=[
        "huge_integer",
        "nul_in_path",
        "path_too_long",
        "superscript_workers",
        "newline_in_key",
        "deeply_nested",
    ],
)
def test_inputs_fuzzing_found_are_one_input_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        file = Path(directory) / "exp.toml"
        file.write_text(text, encoding="utf-8")
        with pytest.raises(InputError) as info:
            load_experiment(file)
        assert_one_line(info.value)


# ---------------------------------------------------------------------------------------------
# (c) Release directories
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small release with tables and microdata, written once."""
    population = read_population(BASE_CSV)
    release = replace(exact_release(population, ["P1", "P12", "H1"]), microdata=population)
    path = tmp_path_factory.mktemp("fuzz") / "rel"
    write_release(release, path)
    return path


RELEASE_PARQUET = [
    "geography.parquet",
    "tables/P1.parquet",
    "tables/P12.parquet",
    "tables/H1.parquet",
    "microdata/persons.parquet",
    "microdata/units.parquet",
]

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.sampled_from(["P1", "none", "cellkey", "nation", "US", "0" * 64]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=5,
)


@st.composite
def json_edit(draw: st.DrawFn, meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with one value (at any depth) replaced or removed, or a key added."""
    meta = json.loads(json.dumps(meta))
    node: Any = meta
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = draw(st.sampled_from(keys))
        child = node[key]
        if isinstance(child, (dict, list)) and child and draw(st.booleans()):
            node = child
            continue
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "remove":
            del node[key]
        elif action == "add" and isinstance(node, dict):
            node[draw(st.text(max_size=8))] = draw(JSON_VALUES)
        else:
            node[key] = draw(JSON_VALUES)
        break
    return meta


@st.composite
def release_damage(draw: st.DrawFn) -> tuple[str, str, Any]:
    """(kind, file, payload): what to do to which file of the release."""
    kind = draw(st.sampled_from(["bytes", "table", "json", "delete", "json_bytes"]))
    if kind in ("json", "json_bytes"):
        return kind, "release.json", None
    return kind, draw(st.sampled_from(RELEASE_PARQUET)), None


def damage_release(data: st.DataObject, path: Path, kind: str, name: str) -> bool:
    """Apply the damage; return whether a file's bytes (other than release.json) changed."""
    file = path / name
    before = file.read_bytes()
    if kind == "delete":
        file.unlink()
        return True
    if kind == "bytes" or kind == "json_bytes":
        file.write_bytes(data.draw(damaged_bytes(before)))
    elif kind == "table":
        write_table(data.draw(mutated_table(pq.read_table(file))), file)
    else:
        meta = json.loads(before)
        file.write_text(json.dumps(data.draw(json_edit(meta))), encoding="utf-8")
    return name != "release.json" and file.read_bytes() != before


@FUZZ
@given(damage=release_damage(), keep_digests=st.booleans(), data=st.data())
def test_fuzzed_release_loads_or_is_one_input_error(
    base_release: Path, damage: tuple[str, str, Any], keep_digests: bool, data: st.DataObject
) -> None:
    kind, name, _ = damage
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "rel"
        shutil.copytree(base_release, path)
        if not keep_digests:  # a forged release.json without digests: never read
            meta = json.loads((path / "release.json").read_text())
            meta.pop("digests")
            (path / "release.json").write_text(json.dumps(meta))
        changed = damage_release(data, path, kind, name)
        try:
            release = read_release(path)
        except InputError as error:
            event("InputError")
            assert_one_line(error)
        else:
            event("loaded")
            assert isinstance(release, Release)
            assert keep_digests, "a release without digests was read"
            assert not changed, "a release edited after writing was read"


@pytest.mark.parametrize(
    "text",
    ['{"format_version": ' + "1" * 5000 + "}", "[" * 100_000 + "]" * 100_000],
    ids=["huge_integer", "deeply_nested"],
)
def test_release_json_fuzzing_found_is_one_input_error(base_release: Path, text: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "rel"
        shutil.copytree(base_release, path)
        (path / "release.json").write_text(text, encoding="utf-8")
        with pytest.raises(InputError, match="not valid JSON") as info:
            read_release(path)
        assert_one_line(info.value)


def test_undamaged_release_reads(base_release: Path) -> None:
    release = read_release(base_release)
    assert sorted(release.tables) == ["H1", "P1", "P12"]
    assert release.microdata is not None

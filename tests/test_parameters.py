"""Mechanism parameters in the user's words: numbers as numbers, messages in plain words, and no
parameter silently clamped or ignored."""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from sdclab import protection
from sdclab.censuses.us2010.safetab_groups import (
    PRODUCTION_THRESHOLDS,
    default_groups,
    groups_data,
    thresholds_data,
)
from sdclab.core.errors import InputError
from sdclab.protection import MECHANISMS
from sdclab.protection.base import Mechanism, Parameters
from sdclab.protection.topdown_strategy import PRODUCTS, strategy_data

# ---------------------------------------------------------------------------------------------
# Numbers as numbers: the same value as a Python value or as its text validates alike
# ---------------------------------------------------------------------------------------------

SWAP_NUMBERS = {
    "rate": 0.2,
    "same_tract": 0.3,  # 0.3 + 0.4 + 0.3 is 1 in decimals, not in binary floats
    "same_county": 0.4,
    "same_state": 0.3,
    "noisy_size_key": True,
    "risk_threshold": 0.5,
    "risk_keys": ["sex", "race"],
    "max_rounds": 10,
}
SWAP_TEXT = {
    "rate": "0.2",
    "same_tract": "0.3",
    "same_county": "0.4",
    "same_state": "0.3",
    "noisy_size_key": "true",
    "risk_threshold": "0.5",
    "risk_keys": "sex,race",
    "max_rounds": "10",
}

FORMS: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "none": ({}, {}),
    "psa": (
        {"rate": 0.05, "matching_level": "county", "match_adults": True, "largest_group": 100},
        {
            "rate": "0.05",
            "matching_level": "county",
            "match_adults": "true",
            "largest_group": "100",
        },
    ),
    "swap": (SWAP_NUMBERS, SWAP_TEXT),
    "swap-low": ({"rate": 0.1, "max_rounds": 20}, {"rate": "0.1", "max_rounds": "20"}),
    "swap-high": ({"noisy_size_key": False}, {"noisy_size_key": "false"}),
    "gaussian": (
        {"rho": 0.03, "queries": 3, "neighbours": "unbounded", "delta": 1e-8},
        {"rho": "0.03", "queries": "3", "neighbours": "unbounded", "delta": "1e-8"},
    ),
    "topdown": (
        {"product": "pl94", "rho": 4, "measurements": False, "workers": 2, "delta": 1e-9},
        {"product": "pl94", "rho": "4", "measurements": "false", "workers": "2", "delta": "1e-9"},
    ),
    "cellkey": (
        {
            "ptable": "maxent",
            "bound": 3,
            "variance": 2,
            "js": 1,
            "pstay": 0.5,
            "threshold": 5,
            "key_space": 128,
            "epsilon": 2,
            "spsn": False,
        },
        {
            "ptable": "maxent",
            "bound": "3",
            "variance": "2",
            "js": "1",
            "pstay": "0.5",
            "threshold": "5",
            "key_space": "128",
            "epsilon": "2",
            "spsn": "false",
        },
    ),
    "geometric": (
        {"epsilon": 0.5, "split": "even", "neighbours": "bounded", "nonnegative": True},
        {"epsilon": "0.5", "split": "even", "neighbours": "bounded", "nonnegative": "true"},
    ),
    "truncated": (
        {"epsilon": 1.5, "bound": 12, "nonnegative": True, "tables": ["P1", "P12"]},
        {"epsilon": "1.5", "bound": "12", "nonnegative": "true", "tables": "P1,P12"},
    ),
    "safetab_h": (
        {
            "rho_regional": 0.01,
            "rho_detailed_national": 2,
            "rho_detailed_local": Decimal("0.15"),
            "stability": 9,
            "t01001": "noisy",
            "t01001_rho": Fraction(5, 2),
            "clamp": True,
        },
        {
            "rho_regional": "0.01",
            "rho_detailed_national": "2",
            "rho_detailed_local": "0.15",
            "stability": "9",
            "t01001": "noisy",
            "t01001_rho": "2.5",
            "clamp": "true",
        },
    ),
    "suppress": (
        {"small_cells": 3, "min_persons": 10, "group_min": 5, "complementary": True},
        {"small_cells": "3", "min_persons": "10", "group_min": "5", "complementary": "true"},
    ),
}


def test_every_mechanism_has_both_forms() -> None:
    assert set(FORMS) == set(MECHANISMS)


@pytest.mark.parametrize("name", sorted(FORMS))
def test_numbers_and_their_text_give_the_same_parameters(name: str) -> None:
    numbers, text = FORMS[name]
    entry = protection.get(name)
    from_numbers, from_text = entry.parse(numbers), entry.parse(text)
    assert from_numbers == from_text
    assert from_numbers.recorded() == from_text.recorded()
    assert entry.parse(from_numbers.recorded()).recorded() == from_text.recorded()  # read back


def test_a_float_is_the_decimal_it_prints_as() -> None:
    params = protection.get("psa").parse({"rate": 0.05})
    assert params.rate == Decimal("0.05")
    assert params.recorded()["rate"] == "0.05"
    gaussian = protection.get("gaussian").parse({"rho": 0.03, "queries": 3})
    assert gaussian.noise_variance() == Fraction(100)  # exactly 2·3 / (2·0.03)
    assert protection.get("geometric").parse({"epsilon": 0.1}).recorded()["epsilon"] == "0.1"


@pytest.mark.parametrize("value", [0.25, "0.25", Decimal("0.25"), Fraction(1, 4)])
def test_a_budget_as_float_text_decimal_or_fraction(value: Any) -> None:
    params = protection.get("topdown").parse({"product": "pl94", "rho": value})
    assert params.rho == Decimal("0.25")
    assert params.recorded()["rho"] == "0.25"


def test_a_fraction_without_a_decimal_form_is_refused_in_words() -> None:
    with pytest.raises(InputError) as info:
        protection.get("topdown").parse({"rho": Fraction(1, 3)})
    assert str(info.value) == (
        "mechanism topdown, parameter rho: expected a decimal number (a fraction such as 1/3 "
        "has no exact decimal form), got 1/3"
    )


def _toml(value: Any) -> str:
    return json.dumps(value)  # a JSON string or list of numbers is a TOML value too


def test_topdown_strategy_as_a_table_of_numbers_or_a_file(tmp_path: Path) -> None:
    data = strategy_data(PRODUCTS["pl94"].default)
    lines = [f"rho = {_toml(data['rho'])}", "[level_shares]"]
    lines += [f"{level} = {_toml(share)}" for level, share in data["level_shares"].items()]
    for level, shares in data["query_shares"].items():
        lines += [f"[query_shares.{level}]"] + [f'"{q}" = {_toml(s)}' for q, s in shares.items()]
    path = tmp_path / "strategy.toml"
    path.write_text("\n".join(lines) + "\n")
    as_numbers = {
        "rho": Fraction(data["rho"]),
        "level_shares": {lv: Fraction(s) for lv, s in data["level_shares"].items()},
        "query_shares": {
            lv: {q: Fraction(s) for q, s in shares.items()}
            for lv, shares in data["query_shares"].items()
        },
    }
    entry = protection.get("topdown")
    from_file = entry.parse({"product": "pl94", "strategy": str(path)})
    from_path = entry.parse({"product": "pl94", "strategy": path})
    from_numbers = entry.parse({"product": "pl94", "strategy": as_numbers})
    assert from_file.recorded() == from_path.recorded() == from_numbers.recorded()
    decimal_rho = {**as_numbers, "rho": Decimal("2.5")}
    float_rho = {**as_numbers, "rho": 2.5}
    assert (
        entry.parse({"product": "pl94", "strategy": decimal_rho}).recorded()
        == entry.parse({"product": "pl94", "strategy": float_rho}).recorded()
        == entry.parse({"product": "pl94", "strategy": {**as_numbers, "rho": "2.5"}}).recorded()
    )


def test_safetab_iterations_and_thresholds_as_lists_or_files(tmp_path: Path) -> None:
    groups = groups_data(default_groups())
    iterations = tmp_path / "iterations.toml"
    iterations.write_text(
        "".join(
            "[[group]]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in group.items())
            for group in groups
        )
    )
    cuts = thresholds_data(PRODUCTION_THRESHOLDS)
    thresholds = tmp_path / "thresholds.toml"
    thresholds.write_text(
        "".join(
            "[[threshold]]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in entry.items())
            for entry in cuts
        )
    )
    entry = protection.get("safetab_h")
    from_files = entry.parse({"iterations": str(iterations), "thresholds": thresholds})
    as_text = [
        {**g, "level": str(g["level"]), "codes": [str(c) for c in g["codes"]]} for g in groups
    ]
    as_floats = [
        {**c, "level": float(c["level"]), "T03": [float(v) for v in c["T03"]]} for c in cuts
    ]
    from_lists = entry.parse({"iterations": tuple(as_text), "thresholds": as_floats})
    assert from_files.recorded() == from_lists.recorded()
    assert from_files.groups() == default_groups()


# ---------------------------------------------------------------------------------------------
# Messages in the project's words
# ---------------------------------------------------------------------------------------------

MESSAGES = [
    # extra_forbidden, with and without a near miss
    (
        "topdown",
        {"rh": 4},
        "mechanism topdown: unknown parameter 'rh'; did you mean 'rho'? (parameters: tables, "
        "product, rho, strategy, measurements, workers, executor, checkpoint, delta)",
    ),
    ("topdown", {"Rho": 4}, "unknown parameter 'Rho'; did you mean 'rho'?"),
    ("none", {"x": "1"}, "mechanism none: unknown parameter 'x' (parameters: tables)"),
    ("suppress", {"threshold": "3"}, "mechanism suppress: unknown parameter 'threshold' (param"),
    # greater_than, greater_than_equal, less_than, less_than_equal
    (
        "geometric",
        {"epsilon": -1},
        "mechanism geometric, parameter epsilon: expected a number above 0 and at most 1000, "
        "got -1",
    ),
    ("gaussian", {"sigma2": "-1"}, "mechanism gaussian, parameter sigma2: expected a number "),
    ("gaussian", {"sigma2": "0"}, "parameter sigma2: expected a number above 0, got 0"),
    ("topdown", {"workers": 0}, "parameter workers: expected a whole number of at least 1, got 0"),
    ("psa", {"rate": 1.5}, "parameter rate: expected a number above 0 and below 1, got 1.5"),
    ("suppress", {"small_cells": 1001}, "expected a whole number from 0 to 1000, got 1001"),
    ("safetab_h", {"rho_regional": "-1"}, "expected a number of at least 0, got -1"),
    # literal_error, with a near miss; in a list
    (
        "geometric",
        {"split": "evn"},
        "mechanism geometric, parameter split: expected one of census2020, even, got 'evn'; "
        "did you mean 'even'?",
    ),
    ("cellkey", {"keys": "random"}, "parameter keys: expected one of stored, drawn, ids, got 'ra"),
    (
        "swap",
        {"risk_keys": "sex,rac"},
        "parameter risk_keys, item 2: expected one of sex, agebin, race, hispanic, got 'rac'; "
        "did you mean 'race'?",
    ),
    # bool_parsing, int_parsing, int_from_float, float_parsing, decimal_parsing, finite_number
    ("geometric", {"nonnegative": "maybe"}, "nonnegative: expected true or false, got 'maybe'"),
    ("psa", {"largest_group": "ten"}, "largest_group: expected a whole number, got 'ten'"),
    ("suppress", {"small_cells": 2.5}, "small_cells: expected a whole number, got 2.5"),
    ("suppress", {"small_cells": "2.5"}, "small_cells: expected a whole number, got 2.5"),
    ("gaussian", {"rho": 1, "delta": "x"}, "parameter delta: expected a number, got 'x'"),
    ("topdown", {"rho": "abc"}, "parameter rho: expected a number, got 'abc'"),
    ("topdown", {"rho": float("inf")}, "parameter rho: expected a finite number, got inf"),
    ("safetab_h", {"rho_regional": "nan"}, "rho_regional: expected a finite number, got nan"),
    ("gaussian", {"rho": 1, "delta": float("nan")}, "delta: expected a finite number, got nan"),
    # a boolean is not a number
    ("topdown", {"rho": True}, "mechanism topdown, parameter rho: expected a number, got True"),
    ("suppress", {"small_cells": True}, "small_cells: expected a whole number, got True"),
    # string_type, union-typed fields (no branch names), list_type
    ("cellkey", {"ptable": 5}, "mechanism cellkey, parameter ptable: expected text, got 5"),
    ("topdown", {"strategy": 5}, "parameter strategy: expected a file path or a table, got 5"),
    ("safetab_h", {"iterations": 5}, "iterations: expected text or a list of tables, got 5"),
    ("safetab_h", {"thresholds": [5]}, "thresholds: expected text or a list of tables, got [5]"),
    ("topdown", {"checkpoint": 5}, "parameter checkpoint: expected a file path, got 5"),
    # a check of the parameters together (value_error without a location)
    ("gaussian", {"sigma2": 1, "rho": 1}, "mechanism gaussian: give exactly one of sigma2 and rho"),
    ("cellkey", {"ptable": "maxent"}, "mechanism cellkey: ptable=maxent needs bound and variance"),
]


@pytest.mark.parametrize(("name", "settings", "expected"), MESSAGES)
def test_problems_are_stated_in_plain_words(name: str, settings: dict, expected: str) -> None:
    with pytest.raises(InputError) as info:
        protection.get(name).parse(settings)
    message = info.value.one_line()
    assert expected in message
    assert "\n" not in message
    for pydantic_words in ("Input should", "Extra inputs", "valid string", ".str", "dict[", "lax-"):
        assert pydantic_words not in message


def test_every_problem_is_listed_the_unknown_name_first() -> None:
    with pytest.raises(InputError) as info:
        protection.get("topdown").parse({"rho": -1, "product": "dhcc", "rh": 1})
    assert str(info.value).startswith("mechanism topdown: unknown parameter 'rh'")
    assert info.value.details == [
        "mechanism topdown, parameter product: expected one of dhc, pl94, got 'dhcc'; did you "
        "mean 'dhc'?",
        "mechanism topdown, parameter rho: expected a number above 0, got -1",
    ]


class _Demo(Parameters):
    level: int = Field(ge=1)
    code: str = Field("ab", max_length=3)


DEMO = Mechanism(name="demo", summary="a test model", parameters=_Demo, guarantee=lambda _: None)


def test_a_missing_required_parameter_and_a_fallback_in_words() -> None:
    with pytest.raises(InputError, match=r"^mechanism demo: missing required parameter level$"):
        DEMO.parse({})
    with pytest.raises(InputError) as info:
        DEMO.parse({"level": 1, "code": "abcd"})
    assert str(info.value) == (
        "mechanism demo, parameter code: string should have at most 3 characters, got 'abcd'"
    )


# ---------------------------------------------------------------------------------------------
# No silent clamping: what a mechanism cannot honour is an error or is stated in the release
# ---------------------------------------------------------------------------------------------


def test_a_maxent_variance_beyond_the_uniform_noise_is_refused() -> None:
    entry = protection.get("cellkey")
    with pytest.raises(InputError) as info:
        entry.parse({"ptable": "maxent", "bound": 5, "variance": 30})
    assert str(info.value) == (
        "mechanism cellkey: ptable=maxent cannot reach variance=30 with bound=5: the largest "
        "variance of a max-entropy p-table with bound=5 is 10, D(D+1)/3, the uniform noise on "
        "-5..5; lower variance to at most 10 or raise bound to 9 or more"
    )
    table = entry.parse({"ptable": "maxent", "bound": 5, "variance": 10}).table()  # the limit
    v, p = table.row(table.i_max)
    assert float(p @ v**2) == pytest.approx(10, abs=1e-6)
    with pytest.raises(InputError, match="lower variance to at most 0.6666 or raise bound to 2"):
        entry.parse({"ptable": "maxent", "bound": 1, "variance": 0.7})


@pytest.mark.parametrize("settings", [{"js": 2}, {"pstay": 0.5}, {"ptable": "x.csv", "js": 1}])
def test_maxent_settings_are_refused_with_another_ptable(settings: dict) -> None:
    with pytest.raises(InputError, match="js and pstay apply only with ptable=maxent"):
        protection.get("cellkey").parse(settings)


def test_a_relaxed_pstay_and_rows_below_v_are_stated_in_the_release(tiny_population) -> None:
    settings = {"ptable": "maxent", "bound": 2, "variance": 1, "pstay": 0.9}
    notes = protection.run("cellkey", tiny_population, settings, 1).notes["ptable"]
    assert notes["pstay_relaxed"].startswith("p(i→i) is below pstay = 0.9 in rows i = 1-2")
    assert notes["rows_below_V"].startswith("row i = 1 has a variance below V = 1")
    plain = protection.run("cellkey", tiny_population, {**settings, "pstay": 0.2}, 1)
    assert "pstay_relaxed" not in plain.notes["ptable"]


def test_t01001_rho_is_refused_when_t01001_is_exact() -> None:
    entry = protection.get("safetab_h")
    with pytest.raises(InputError, match="t01001_rho=2 applies only with t01001=noisy"):
        entry.parse({"t01001_rho": 2})
    assert entry.parse({"t01001": "noisy", "t01001_rho": 2}).t01001_rho == 2
    entry.parse(entry.parse({}).recorded())  # a release records the default: it reads back


def test_fractional_levels_codes_and_thresholds_are_refused_not_truncated() -> None:
    entry = protection.get("safetab_h")
    groups = groups_data(default_groups())
    half_level = [{**groups[0], "level": 1.5}, *groups[1:]]
    with pytest.raises(InputError, match=r"group 1: expected code, .*1\.5 is not a whole number"):
        entry.parse({"iterations": half_level})
    half_code = [{**groups[0], "codes": [groups[0]["codes"][0] + 0.5]}, *groups[1:]]
    with pytest.raises(InputError, match="is not a whole number"):
        entry.parse({"iterations": half_code})
    cuts = thresholds_data(PRODUCTION_THRESHOLDS)
    half_cut = [{**cuts[0], "T04": [cuts[0]["T04"][0] + 0.5]}, *cuts[1:]]
    with pytest.raises(InputError, match="threshold 1: expected region, .* is not a whole number"):
        entry.parse({"thresholds": half_cut})
    with pytest.raises(InputError, match="True is not a whole number"):
        entry.parse({"thresholds": [{**cuts[0], "level": True}, *cuts[1:]]})


def test_numpy_scalars_are_numbers():
    # a notebook's loop over np.linspace or an array of budgets passes NumPy scalars
    import numpy as np

    topdown = protection.get("topdown")
    assert topdown.parse({"rho": np.float64(0.5)}) == topdown.parse({"rho": "0.5"})
    assert topdown.parse({"rho": np.int64(4)}) == topdown.parse({"rho": 4})
    suppress = protection.get("suppress")
    assert suppress.parse({"small_cells": np.int64(3)}).small_cells == 3

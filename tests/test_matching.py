"""Matching mechanisms on the common axis: each matchable mechanism runs at the same ε at
δ = 10⁻¹⁰ (one person's record changed); the others are listed with the reason."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sdclab.core import accounting
from sdclab.core.errors import InputError
from sdclab.pipeline.experiment import parse_experiment
from sdclab.pipeline.matching import common_epsilon, match, rho_for_epsilon, unmatchable


@pytest.mark.parametrize(
    ("name", "settings"),
    [
        ("geometric", {}),
        ("geometric", {"neighbours": "bounded"}),
        ("topdown", {}),
        ("topdown", {"product": "pl94"}),
        ("safetab_h", {}),
        ("safetab_h", {"t01001": "noisy"}),
    ],
)
@pytest.mark.parametrize("target", [0.5, 4.0, 16.0])
def test_the_card_at_the_matched_settings_is_on_target(name, settings, target) -> None:
    found = match(name, settings, target)
    assert found.epsilon == pytest.approx(target, rel=1e-4)
    assert common_epsilon(name, {**settings, **found.settings}) == found.epsilon


def test_geometric_is_matched_exactly_and_topdown_through_the_tight_conversion() -> None:
    # unbounded geometric: one person's record changed is two additions or removals, 2ε
    assert match("geometric", {}, 4.0).settings == {"epsilon": "2"}
    rho = float(match("topdown", {}, 4.0).settings["rho"])
    assert accounting.epsilon_for_delta(rho, 1e-10) == pytest.approx(4.0, rel=1e-5)
    assert rho < (math.sqrt(4 + math.log(1e10)) - math.sqrt(math.log(1e10))) ** 2 * 1.5
    assert rho_for_epsilon(4.0) == pytest.approx(rho, rel=1e-5)


@pytest.mark.parametrize(
    ("name", "settings", "reason"),
    [
        ("cellkey", {}, "no randomness"),
        ("cellkey", {"ptable": "maxent", "bound": 3, "variance": 2}, "do not compose"),
        ("none", {}, ""),
        ("psa", {"rate": "0.05"}, "its invariants fix, read from the data"),
        ("suppress", {}, ""),
    ],
)
def test_mechanisms_without_a_common_axis_say_why(name, settings, reason) -> None:
    why = unmatchable(name, settings)
    assert why is not None and reason in why.reason
    with pytest.raises(ValueError, match="cannot be matched"):
        match(name, settings, 4.0)


def experiment(match: dict, mechanisms: list[dict]) -> dict:
    return {
        "population": {"persons": 200, "seed": 7},
        "mechanisms": mechanisms,
        "attacks": {"reconstruct": False},
        "match": match,
    }


def test_a_match_runs_every_matchable_entry_at_every_value() -> None:
    spec = parse_experiment(
        experiment(
            {"values": [1, 8]},
            [
                {"name": "geometric", "replicates": 2},
                {"name": "topdown", "settings": {"product": ["pl94", "dhc"]}},
                {"name": "cellkey"},
            ],
        ),
        "exp.toml",
        Path("."),
    )
    titles = [p.title for p in spec.points()]
    assert titles == [
        "geometric@ε=1#1",
        "geometric@ε=1#2",
        "geometric@ε=8#1",
        "geometric@ε=8#2",
        "topdown@ε=1,product=pl94",
        "topdown@ε=1,product=dhc",
        "topdown@ε=8,product=pl94",
        "topdown@ε=8,product=dhc",
        "cellkey",
    ]
    assert spec.points()[0].settings["epsilon"] == "0.5"
    assert set(spec.unmatched()) == {"cellkey"}


def test_a_matched_entry_may_not_sweep_its_own_budget() -> None:
    with pytest.raises(InputError, match="geometric sweeps epsilon and the experiment matches"):
        parse_experiment(
            experiment({"values": [1]}, [{"name": "geometric", "settings": {"epsilon": [1, 2]}}]),
            "exp.toml",
            Path("."),
        )
    with pytest.raises(InputError, match="above 0"):
        parse_experiment(experiment({"values": [0]}, [{"name": "geometric"}]), "e", Path("."))
    with pytest.raises(InputError, match="match.axis: expected one of epsilon@1e-10"):
        parse_experiment(
            experiment({"axis": "rho", "values": [1]}, [{"name": "geometric"}]), "e", Path(".")
        )


def test_a_matched_entry_may_not_set_its_own_budget() -> None:
    """A budget given and then silently replaced by the match would run another setting than
    the file says: refused in one line."""
    topdown = {"name": "topdown", "settings": {"rho": 4}}
    with pytest.raises(InputError, match="topdown sets rho and the experiment matches it") as err:
        parse_experiment(experiment({"values": [1]}, [topdown]), "exp.toml", Path("."))
    assert "remove rho" in str(err.value) and "\n" not in str(err.value)


def test_a_match_may_be_a_log_range() -> None:
    spec = parse_experiment(
        experiment(
            {"values": {"from": 1, "to": 16, "steps": 3, "scale": "log"}}, [{"name": "geometric"}]
        ),
        "exp.toml",
        Path("."),
    )
    assert [p.title for p in spec.points()] == ["geometric@ε=1", "geometric@ε=4", "geometric@ε=16"]


def test_a_budget_swept_under_settings_that_spend_it_is_refused_and_values_stay_distinct() -> None:
    noisy = {
        "name": "safetab_h",
        "settings": {"t01001": "noisy", "t01001_rho": ["0.5", "1"]},
    }
    with pytest.raises(InputError, match="safetab_h sweeps t01001_rho"):
        parse_experiment(experiment({"values": [4]}, [noisy]), "e", Path("."))
    with pytest.raises(InputError, match="every value of ε once"):
        parse_experiment(
            experiment({"values": [1.0000001, 1.0000002]}, [{"name": "geometric"}]), "e", Path(".")
        )


def test_an_epsilon_beyond_the_conversion_s_range_is_refused_in_words() -> None:
    for epsilon in (1e-10, 5e6):
        with pytest.raises(ValueError, match="a zCDP budget is matched for ε from 5.3e-09 to"):
            rho_for_epsilon(epsilon)
    spec = {
        "population": {"persons": 500},
        "mechanisms": [{"name": "topdown"}],
        "match": {"values": [5e6]},
    }
    with pytest.raises(InputError, match="ε = 5e[+]06: a zCDP budget is matched for ε from"):
        parse_experiment(spec, "exp.toml", Path("."))

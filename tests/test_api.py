"""The public API: what `sdclab` exports, how it is called and what it returns."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys

import pytest

import sdclab
from sdclab import protection
from sdclab.pipeline.results import NotMeasured

FUNCTIONS = [
    "synthesize",
    "read_population",
    "write_population",
    "tabulate",
    "protect",
    "read_release",
    "write_release",
    "reconstruct",
    "read_reconstruction",
    "reidentify",
    "evaluate",
    "audit",
    "run_experiment",
    "mechanisms",
]


def test_every_exported_name_resolves_and_the_functions_are_exported():
    assert set(FUNCTIONS) <= set(sdclab.__all__)
    for name in sdclab.__all__:
        assert getattr(sdclab, name) is not None
    assert set(FUNCTIONS) <= set(dir(sdclab))
    with pytest.raises(AttributeError):
        sdclab.no_such_name  # noqa: B018


def test_no_submodule_replaces_a_function_when_imported():
    # importing a submodule binds it as an attribute of the package: a module called like a
    # function (sdclab.evaluate, sdclab.mechanisms before the renames) would replace it
    for module in pkgutil.walk_packages(sdclab.__path__, "sdclab."):
        if module.name != "sdclab.__main__":  # runs the command line
            importlib.import_module(module.name)
    for name in FUNCTIONS:
        assert inspect.isfunction(getattr(sdclab, name)), name


def test_settings_are_keyword_only():
    positional = {
        "synthesize": ["persons"],
        "read_population": ["path"],
        "write_population": ["population", "path"],
        "tabulate": ["population"],
        "protect": ["population", "mechanism"],
        "read_release": ["path"],
        "write_release": ["release", "path"],
        "reconstruct": ["release"],
        "read_reconstruction": ["path"],
        "reidentify": ["reconstruction", "release", "truth"],
        "evaluate": ["release", "truth"],
        "audit": ["mechanism"],
        "run_experiment": ["experiment", "out"],
        "mechanisms": [],
    }
    for name, expected in positional.items():
        parameters = inspect.signature(getattr(sdclab, name)).parameters.values()
        given = [p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
        assert given == expected, name
        assert all(p.annotation is not p.empty for p in parameters), name


def test_mechanisms_lists_every_mechanism_with_what_each_parameter_means():
    listed = sdclab.mechanisms()
    assert [m.name for m in listed] == list(protection.MECHANISMS)
    for info in listed:
        assert info.summary
        for parameter in info.parameters:
            assert parameter.meaning and "no description" not in parameter.meaning, (
                f"{info.name}.{parameter.name} has no meaning"
            )
    topdown = next(m for m in listed if m.name == "topdown")
    assert {"product", "rho", "strategy"} <= {p.name for p in topdown.parameters}
    assert topdown.protects and topdown.auditable


def test_a_parameter_means_its_docstring_in_one_line_and_has_its_declared_unit():
    swap = {p.name: p for p in next(m for m in sdclab.mechanisms() if m.name == "swap").parameters}
    assert swap["rate"].unit == "share 0–1"
    assert swap["rate"].meaning == (
        "target share of households that move (both partners count): "
        "round(rate x households / 2) pairs, 0 < rate < 1"
    )
    assert swap["noisy_size_key"].unit is None


def test_the_help_names_every_mechanism():
    from sdclab.cli import MECHANISM_NAMES

    assert MECHANISM_NAMES.split(", ") == list(protection.MECHANISMS)


def test_the_mechanisms_command_prints_parameters():
    from typer.testing import CliRunner

    from sdclab.cli import app

    result = CliRunner().invoke(app, ["mechanisms", "geometric"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("geometric: ")
    assert "epsilon" in result.output and "default 1" in result.output
    unknown = CliRunner().invoke(app, ["mechanisms", "topdwn"])
    assert unknown.exit_code == 2


@pytest.fixture(scope="module")
def small():
    return sdclab.synthesize(800, seed=5)


def test_objects_print_short_reprs(small):
    release = sdclab.protect(small, "geometric", seed=1, epsilon=8)
    for value in (small, release, protection.get("topdown"), sdclab.mechanisms()[0]):
        text = repr(value)
        assert len(text) < 300, text[:400]
        assert "\n" not in text


def test_protect_takes_numbers_as_numbers(small):
    as_number = sdclab.protect(small, "geometric", seed=1, epsilon=8, nonnegative=True)
    as_text = sdclab.protect(small, "geometric", seed=1, epsilon="8", nonnegative="true")
    assert as_number.parameters == as_text.parameters
    for name in as_number.tables:
        assert as_number.table(name).frame().equals(as_text.table(name).frame())


def test_what_was_not_measured_says_why_and_is_not_zero(small):
    release = sdclab.protect(small, "geometric", seed=1, epsilon=8)
    evaluation = sdclab.evaluate(release, small)
    for figure in (
        evaluation.microdata_agreement,
        evaluation.reconstruction_agreement,
        evaluation.block_sex_agebin_agreement,
    ):
        assert isinstance(figure, NotMeasured) and figure.reason
        assert figure != 0
    assert evaluation.to_dict()["microdata_agreement"] == {
        "not_measured": evaluation.microdata_agreement.reason
    }
    # the mechanism's own evaluation-only figures
    assert [d.key for d in evaluation.diagnostics] == ["tails"]


def test_tabulate_is_the_exact_release_of_the_tables_asked_for(small):
    release = sdclab.tabulate(small, tables=["P1", "H1"])
    assert release.mechanism == "none" and set(release.tables) == {"P1", "H1"}
    assert release.table("P1").matrix("nation").sum() == small.n_persons
    with pytest.raises(sdclab.InputError, match="tables"):
        sdclab.tabulate(small, tables=["P999"])


def test_evaluate_refuses_a_truth_the_release_was_not_made_from(small):
    release = sdclab.protect(small, "none")
    other = sdclab.synthesize(800, seed=6)
    with pytest.raises(sdclab.InputError, match="truth and release"):
        sdclab.evaluate(release, other)


SCRIPT = """
import sdclab

truth = sdclab.synthesize(5_000, seed=1)
release = sdclab.protect(truth, "topdown", seed=2, rho=4)
records = sdclab.reconstruct(release)
links = sdclab.reidentify(records, release, truth, attacker="census", seed=3)
figures = sdclab.evaluate(release, truth, reconstruction=records, reidentification=links)
print(figures.by_level["block"].mean_mae)
print(links.reconstruction.nonmodal.precision)
print(figures.reconstruction_agreement.all.agree_agebin)
"""


@pytest.mark.slow
def test_a_plain_script_runs_the_whole_study_through_the_exports(tmp_path):
    # the script: only names exported by sdclab, TopDown at rho=4 given as a number,
    # no main guard, the figures read as attributes
    script = tmp_path / "study.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    mae, precision, agreement = (float(line) for line in done.stdout.split())
    assert 0 < mae < 5 and 0 <= precision <= 1 and 0 < agreement <= 1

"""The Dinur–Nissim experiment: queries, decoder, noise, Eq. 8, the sweep and the command.

Statistical checks use fixed seeds and bounds derived here: a share recovered of n records with
probability p has standard deviation √(p(1 − p)/n), and the least-squares error of one record
has standard deviation 2σ/√t (Hadamard design, exact up to n/(n+1)).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.linalg
from scipy import stats
from typer.testing import CliRunner

from sdclab.attacks.dinur_nissim import (
    Experiment,
    Noise,
    QueryDesign,
    dinur_nissim_queries,
    eq8_epsilon,
    eq8_epsilon_discrete,
    fwht,
    hadamard_answers,
    predicted_share,
    predicted_sigma,
)
from sdclab.attacks.dinur_nissim_sweep import find_thresholds, laplace_epsilon_of_sigma, run_size
from sdclab.cli import app
from sdclab.core.errors import InputError
from sdclab.core.noise import discrete_laplace


def test_fwht_is_the_sylvester_hadamard_product():
    values = np.random.default_rng(1).integers(-5, 6, size=(3, 64))
    assert np.array_equal(fwht(values), values @ scipy.linalg.hadamard(64))


def test_hadamard_answers_are_subset_counts():
    """Query r of a block counts the records of value 1 whose slot has +1 in row r."""
    rng = np.random.default_rng(2)
    values = rng.integers(0, 2, size=20)
    slots = np.stack([rng.permutation(31)[:20] + 1 for _ in range(3)])
    matrix = scipy.linalg.hadamard(32)
    for block in range(3):
        subsets = matrix[:, slots[block]] == 1  # query r × record j
        expected = subsets.astype(np.int64) @ values
        assert np.array_equal(hadamard_answers(values, slots[block : block + 1], 32)[0], expected)
    assert subsets[0].all()  # row 0 is the total, a subset like any other


def test_design_reaches_n_ln2_n_with_whole_blocks():
    design = QueryDesign.make(1000)
    assert design.slots == 1024 and design.queries == design.blocks * 1024
    assert dinur_nissim_queries(1000) <= design.queries < dinur_nissim_queries(1000) + 1024
    assert QueryDesign.make(1024).slots == 2048  # slot 0 stays empty: n + 1 slots needed
    assert "not independent uniform" in design.describe()


@pytest.mark.parametrize("kind", ["hadamard", "random"])
def test_no_noise_reconstructs_exactly(kind):
    n = 1000 if kind == "hadamard" else 200
    experiment = Experiment(QueryDesign.make(n, kind), seed=3)
    estimate, largest = experiment.estimate(Noise("none"))
    assert largest == 0
    assert np.allclose(estimate, experiment.values, atol=1e-6)
    assert experiment.attack(Noise("none")).recovered == 1.0


@pytest.mark.parametrize(
    "noise", [Noise("uniform", Fraction(3162)), Noise("laplace", Fraction(1, 2000))]
)
def test_noise_far_above_sqrt_n_defeats_the_attack(noise):
    """E = 100·√n (σ ≈ 1,826) or ε = 1/2000 (σ ≈ 2,828) against t ≈ 48,000 queries: the
    normal approximation predicts about 51% recovered, chance; allow 5 standard deviations."""
    design = QueryDesign.make(1000)
    p = predicted_share(design, noise)
    assert p < 0.53
    trial = Experiment(design, seed=4).attack(noise)
    assert abs(trial.recovered - p) <= 5 * math.sqrt(p * (1 - p) / 1000)
    assert trial.largest_noise > math.sqrt(1000) * 10


def test_eq8_gives_the_papers_threshold_at_a_million_records():
    """Bach, §3.1: "ε₉₉ > 0.024 … n = 10⁶" (natural log: 0.0237; log₂: 0.0244)."""
    n = 10**6
    assert eq8_epsilon(n) == pytest.approx(0.0237, abs=5e-5)
    t2 = math.ceil(n * math.log2(n) ** 2)
    assert eq8_epsilon(n, t2) == pytest.approx(0.0244, abs=5e-5)
    t = dinur_nissim_queries(n)
    assert eq8_epsilon(n) == pytest.approx(math.log(t / 0.01) / 1000, rel=1e-3)  # its approximation
    assert eq8_epsilon_discrete(n) == pytest.approx(eq8_epsilon(n), rel=0.01)


def test_eq8_discrete_bound_holds_for_the_sampler():
    """t = 50 discrete Laplace draws all within ⌊√n⌋ = 10 with probability α = 0.9 at Eq. 8's
    exact ε: 4,000 trials, within 5 standard deviations of 0.9."""
    epsilon = eq8_epsilon_discrete(100, 50, 0.9)
    scale = Fraction(1) / Fraction(epsilon)
    draws = discrete_laplace(scale, (4000, 50), np.random.default_rng(5))
    inside = np.mean(np.abs(draws).max(axis=1) <= 10)
    assert abs(inside - 0.9) <= 5 * math.sqrt(0.09 / 4000)


def test_structured_and_random_queries_agree_at_a_thousand_records():
    """Same n, t and noise: both decoders' errors have the standard deviation 2σ/√t (the random
    design's larger by at most the Wishart factor √(t/(t − n))), up to 5 sampling deviations of
    a standard deviation from n records, and their shares recovered agree within 5 deviations."""
    n, t = 1000, 16 * 1024
    noise = Noise("uniform", Fraction(25))
    sigma = math.sqrt(noise.variance())
    expected = 2 * sigma / math.sqrt(t)
    shares = []
    for kind in ("hadamard", "random"):
        experiment = Experiment(QueryDesign.make(n, kind, t), seed=6)
        estimate, _ = experiment.estimate(noise)
        spread = float(np.std(estimate - experiment.values))
        wishart = math.sqrt(t / (t - n)) if kind == "random" else 1.0
        assert abs(spread / (expected * wishart) - 1) <= 5 / math.sqrt(2 * n)
        shares.append(experiment.attack(noise).recovered)
    p = predicted_share(QueryDesign.make(n, "hadamard", t), noise)
    assert 0.9 < p < 0.99  # a noise level where the two can differ
    assert abs(shares[0] - shares[1]) <= 5 * math.sqrt(2 * p * (1 - p) / n)


def _predicted_bound(design: QueryDesign, level: float) -> float:
    sigma = predicted_sigma(design, level)
    return math.sqrt(3 * sigma**2 + 0.25) - 0.5  # E(E + 1)/3 = σ²


def test_sweep_threshold_moves_with_sqrt_n_at_fixed_queries_per_record():
    """32 Hadamard blocks per size (t = 32·(n + 1)): quadrupling n doubles the threshold. The
    measured threshold's relative error is the share's deviation √(p(1 − p)/n) over the share's
    slope in ln E, z·φ(z); allow 4 of them (plus 3% for the normal approximation) per size."""
    level = 0.99
    z = float(stats.norm.ppf(level))
    slope = z * float(stats.norm.pdf(z))
    found, scaled = {}, {}
    for n in (4095, 16383):
        design = QueryDesign.make(n, "hadamard", 32 * (n + 1))
        assert design.blocks == 32
        (threshold,), _ = find_thresholds(Experiment(design, seed=7), "uniform", (level,))
        found[n] = float(threshold.passing.magnitude)
        tolerance = 4 * math.sqrt(level * (1 - level) / n) / slope + 0.03
        assert abs(found[n] / _predicted_bound(design, level) - 1) <= tolerance
        scaled[n] = tolerance
        (lap,), _ = find_thresholds(Experiment(design, seed=7), "laplace", (level,))
        found[-n] = float(lap.passing.magnitude)
    ratio_tolerance = math.hypot(scaled[4095], scaled[16383])  # (r = 2(1 + δ₂ − δ₁))
    assert abs(found[16383] / found[4095] - 2) <= 2 * ratio_tolerance
    assert abs(found[-4095] / found[-16383] - 2) <= 2 * ratio_tolerance  # ε halves


def test_run_size_sets_eq8_beside_the_measured_threshold():
    result = run_size(1000, levels=(0.99,), seed=8)
    lap = result.threshold("laplace", 0.99)
    assert lap is not None and lap.passing_share >= 0.99 > lap.failing_share
    assert float(lap.passing.magnitude) < result.eq8  # Eq. 8 is sufficient, not necessary
    assert result.at_eq8.recovered == 1.0
    assert result.at_eq8.largest_noise <= math.sqrt(1000)  # Eq. 8's promise, at 99%
    assert laplace_epsilon_of_sigma(lap.sigma) == pytest.approx(float(lap.passing.magnitude))


def test_bad_settings_are_refused():
    with pytest.raises(InputError, match="at least 4"):
        QueryDesign.make(2)
    with pytest.raises(InputError, match="hadamard design"):
        QueryDesign.make(100_000, "random")
    with pytest.raises(InputError, match="whole number"):
        Noise("uniform", Fraction(1, 2))
    assert Noise("uniform", 3.0).magnitude == Fraction(3)  # a float at its exact value
    with pytest.raises(InputError, match="finite"):
        Noise("laplace", float("nan"))
    with pytest.raises(InputError, match="epsilon"):
        Noise("laplace", Fraction(1000))


def test_command_prints_the_table_and_writes_json(tmp_path):
    out = tmp_path / "dn.json"
    runner = CliRunner()
    result = runner.invoke(
        app, ["dinur-nissim", "-n", "256", "--noise", "uniform", "--level", "0.9", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "Sylvester–Hadamard" in result.output and "E 90%" in result.output
    data = json.loads(out.read_text())
    assert data["sizes"][0]["records"] == 256
    assert data["sizes"][0]["thresholds"][0]["passing_share"] >= 0.9
    # the seed reproduces the database and its noise: never written
    seeded = runner.invoke(
        app, ["dinur-nissim", "-n", "256", "--magnitude", "3", "--noise", "uniform",
              "--seed", "918273", "-o", str(tmp_path / "one.json")],
    )  # fmt: skip
    assert seeded.exit_code == 0, seeded.output
    for written in (out, tmp_path / "one.json"):
        assert "seed" not in written.read_text() and "918273" not in written.read_text()


@pytest.mark.parametrize(
    "args",
    [
        ["--queries", "dense"],
        ["-n", "3"],
        ["--level", "99"],
        ["--noise", "gauss"],
        ["--noise", "laplace", "--noise", "uniform", "--magnitude", "2"],
        ["--noise", "uniform", "--magnitude", "two"],
        ["--seed", "-1"],
    ],
)
def test_command_refuses_bad_options_in_one_line(args, tmp_path):
    out = tmp_path / "x.json"
    result = CliRunner().invoke(app, ["dinur-nissim", "-n", "64", *args, "-o", str(out)])
    assert result.exit_code == 2
    assert result.output.startswith("error:") and result.output.count("\n") == 1
    assert not out.exists()


def test_command_will_not_overwrite_another_file(tmp_path):
    out = tmp_path / "notes.json"
    out.write_text('{"mine": 1}')
    result = CliRunner().invoke(app, ["dinur-nissim", "-n", "64", "-o", str(out)])
    assert result.exit_code == 2 and "not an sdclab output" in result.output
    assert out.read_text() == '{"mine": 1}'

"""Privacy audits: the statistics are right, sound mechanisms stay under their claims, and a
deliberately broken mechanism is caught."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from sdclab.attacks.audit import (
    Claim,
    audit,
    clopper_pearson,
    epsilon_bound,
    measure,
    rho_bound,
)
from sdclab.censuses.us2010.safetab_groups import PRODUCTION_THRESHOLDS, thresholds_data
from sdclab.cli import app
from sdclab.core import noise
from sdclab.protection import gaussian


def half_noise(counts, p, rng):  # type: ignore[no-untyped-def]
    """The Gaussian mechanism with a bug: noise at half the scale (σ/2) its card is computed for."""
    return np.asarray(counts) + noise.discrete_gaussian(p.noise_variance() / 4, counts.shape, rng)


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------


def test_clopper_pearson_known_values() -> None:
    # textbook values: 5 of 10 at 95%: (0.1871, 0.8129); 0 of 10: upper 1 − 0.025^(1/10)
    low, high = clopper_pearson([5, 0, 10], 10, 0.05)
    assert low[0] == pytest.approx(0.18709, abs=1e-5)
    assert high[0] == pytest.approx(0.81291, abs=1e-5)
    assert low[1] == 0.0 and high[1] == pytest.approx(1 - 0.025 ** (1 / 10))
    assert high[2] == 1.0 and low[2] == pytest.approx(0.025 ** (1 / 10))


def test_clopper_pearson_covers_at_the_stated_rate() -> None:
    rng = np.random.default_rng(11)
    p, n, reps = 0.03, 400, 4000
    low, high = clopper_pearson(rng.binomial(n, p, reps), n, 0.05)
    missed = int(((p < low) | (p > high)).sum())
    # exact intervals are conservative: misses ≤ 5% (binomial upper 99.9% quantile for margin)
    assert missed <= stats.binom.ppf(0.999, reps, 0.05)


def test_epsilon_bound_is_the_log_ratio_and_never_negative() -> None:
    assert epsilon_bound(0.5, 0.05)[()] == pytest.approx(math.log(10))
    assert epsilon_bound(0.05, 0.5)[()] == 0.0
    assert epsilon_bound(0.0, 0.0)[()] == 0.0


def test_rho_bound_never_exceeds_the_gaussian_rho() -> None:
    # N(1, 1) against N(0, 1) is exactly 0.5-zCDP; no event may imply more, the tail events
    # come close to it
    t = np.linspace(-3, 8, 300)
    p, q = stats.norm.sf(t - 1), stats.norm.sf(t)
    bounds = rho_bound(p, q)
    assert bounds.max() <= 0.5
    assert bounds.max() > 0.35


def test_rho_bound_of_equal_or_reversed_probabilities_is_zero() -> None:
    assert rho_bound(0.3, 0.3)[()] == 0.0
    assert rho_bound(0.1, 0.3)[()] == 0.0
    assert rho_bound(0.4, 0.0)[()] == math.inf


def test_identical_distributions_give_no_loss() -> None:
    rng = np.random.default_rng(3)
    d, d_prime = rng.normal(size=(4000, 3)), rng.normal(size=(4000, 3))
    result = measure("same", Claim("zcdp", 0.01, "three cells", "none"), d, d_prime)
    # the bound holds with 95% confidence; with no difference it is (almost always) zero
    assert result.lower_bound <= 0.01 and not result.violated


# ---------------------------------------------------------------------------------------------
# Mechanisms: each under its claim, with some power
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mechanism", "settings", "trials", "least"),
    [
        ("gaussian", {"rho": "0.5"}, 4000, 0.1),
        ("psa", {"rate": "0.5"}, 2000, 1.0),
        ("psa", {"rate": "0.05"}, 2000, 4.0),
        ("safetab_h", {"rho_detailed_local": "2"}, 2000, 0.1),
        ("topdown", {"product": "pl94"}, 300, 0.0),
        ("geometric", {"epsilon": "40"}, 1000, 0.1),
    ],
)
def test_sound_mechanisms_stay_under_their_claims(
    mechanism: str, settings: dict[str, str], trials: int, least: float
) -> None:
    result = audit(mechanism, settings, trials=trials, seed=5)
    assert not result.violated, result.to_dict()
    assert result.lower_bound >= least, result.to_dict()


def test_psa_bound_is_below_its_exact_loss() -> None:
    # two one-person households in one matching group, p = 1/2: the exact loss of the event
    # "the households are where they were" is ln((1 − p²/2) / (p²/2)) = ln 7
    result = audit("psa", {"rate": "0.5"}, trials=4000, seed=2)
    assert result.lower_bound <= math.log(7)
    assert result.claim.value == pytest.approx(2 * math.log(3))


def test_claims_come_from_each_mechanisms_own_allocation() -> None:
    assert audit("gaussian", {"rho": "0.25"}, trials=200).claim.value == pytest.approx(0.25)
    topdown = audit("topdown", {"product": "pl94", "rho": "1"}, trials=100)
    assert 0 < topdown.claim.value < 1


def test_a_mechanism_with_half_the_noise_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gaussian, "noisy_histogram", half_noise)
    result = audit("gaussian", {"rho": "0.5"}, trials=4000, seed=5)
    assert result.violated, result.to_dict()  # true ρ is 2.0, the card says 0.5
    assert result.lower_bound > 0.5


def test_reported_probabilities_belong_to_their_datasets_in_both_orientations() -> None:
    rng = np.random.default_rng(8)
    claim = Claim("zcdp", 100.0, "one output", "none")
    low, high = rng.normal(size=(4000, 1)), rng.normal(size=(4000, 1)) + 3
    for d, d_prime in ((high, low), (low, high)):
        result = measure("shifted", claim, d, d_prime)
        # the event is likelier under the dataset the text names, by its reported probabilities
        assert ("likelier under D′" in result.event) == (result.p_d_prime > result.p_d)
        assert max(result.p_d, result.p_d_prime) > 0.5 > min(result.p_d, result.p_d_prime)


def test_settings_that_would_invalidate_an_audit_are_refused() -> None:
    from sdclab.core.errors import InputError

    with pytest.raises(InputError, match="no audit for mechanism 'cellkey'"):
        audit("cellkey")
    with pytest.raises(InputError, match="between 100 and"):
        audit("gaussian", trials=10)
    with pytest.raises(InputError, match="between 100 and"):
        audit("gaussian", trials=10**8)
    with pytest.raises(InputError, match="matching_level must be tract"):
        audit("psa", {"matching_level": "county"}, trials=100)
    with pytest.raises(InputError, match="only the production thresholds"):
        audit("safetab_h", {"thresholds": thresholds_data(PRODUCTION_THRESHOLDS)}, trials=100)


def test_safetab_h_audit_takes_a_noisy_t01001_and_a_threshold_crossing() -> None:
    # the householder's race change takes a group from θ3 to one below: the noisy T01001 may
    # then choose other variants; the claim composes T01001's part with the tables' (replace)
    result = audit("safetab_h", {"t01001": "noisy", "rho_detailed_local": "2"}, trials=2000, seed=3)
    assert not result.violated, result.to_dict()
    assert "crossing" in result.claim.neighbours and "T01001" in result.claim.observed
    tables = 2 * 2 * (Fraction("0.006915") + Fraction(2))
    assert result.claim.value == pytest.approx(float(tables + 4 * Fraction(1, 8)))
    assert result.lower_bound > 0.05  # the pair is told apart: the audit has power here


def test_gaussian_audit_takes_sigma2_instead_of_rho() -> None:
    result = audit("gaussian", {"sigma2": "4"}, trials=200)
    assert result.claim.value == pytest.approx(1 / 4)  # bounded: ρ = Δ₂²/(2σ²) = 2/8


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def test_cli_audit_reports_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "audit.json"
    result = CliRunner().invoke(app, ["audit", "-m", "psa", "--trials", "500", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "epsilon ≥" in result.output and "claimed 2.197" in result.output
    written = json.loads(out.read_text())
    assert written["violated"] is False and written["trials"] == 500


def test_cli_audit_exits_3_on_a_violation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gaussian, "noisy_histogram", half_noise)
    result = CliRunner().invoke(app, ["audit", "-m", "gaussian", "--trials", "4000"])
    assert result.exit_code == 3, result.output
    assert "VIOLATION" in result.output


# ---------------------------------------------------------------------------------------------
# Long audits
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mechanism", "settings", "trials"),
    [
        ("gaussian", {"rho": "0.5"}, 50_000),
        ("psa", {"rate": "0.05"}, 20_000),
        ("safetab_h", {}, 20_000),
        ("topdown", {"product": "pl94"}, 5000),
        ("geometric", {"epsilon": "8"}, 5000),
    ],
)
def test_long_audits_stay_under_their_claims(
    mechanism: str, settings: dict[str, str], trials: int
) -> None:
    result = audit(mechanism, settings, trials=trials, seed=17)
    assert not result.violated, result.to_dict()

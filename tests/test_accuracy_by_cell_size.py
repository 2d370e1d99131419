"""Accuracy over all cells, over non-empty cells and by the class of the true count."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.pipeline import api
from sdclab.pipeline.evaluation import table_accuracy


def test_errors_by_hand() -> None:
    truth = sp.csr_matrix(np.array([[0, 2, 15], [0, 0, 120]]))
    published = sp.csr_matrix(np.array([[1, 3, 15], [0, 2, 100]]))
    nothing = sp.csr_matrix((2, 3), dtype=np.int8)
    e = table_accuracy("T", "block", published, nothing, truth)
    assert e.mae == pytest.approx(24 / 6) and e.bias == pytest.approx(-16 / 6)
    assert e.nonempty_cells == 3
    assert e.mae_nonempty == pytest.approx(21 / 3)
    assert e.bias_nonempty == pytest.approx(-19 / 3)
    assert e.rmse_nonempty == pytest.approx(np.sqrt(401 / 3))
    assert list(e.mae_by_true_count.items()) == [("0", 1), ("1-9", 1), ("10-99", 0), ("100+", 20)]


def test_a_withheld_cell_counts_at_its_true_count() -> None:
    truth = sp.csr_matrix(np.array([[0, 2, 15, 0]]))
    published = sp.csr_matrix(np.array([[1, 7, 15, 0]]))  # 7: whatever a withheld cell holds
    suppressed = sp.csr_matrix(np.array([[0, 1, 0, 1]], dtype=np.int8))  # a withheld 2 and 0
    e = table_accuracy("T", "block", published, suppressed, truth)
    assert e.nonempty_cells == 2 and e.nonempty_shown_cells == 1
    assert e.mae_by_true_count["1-9"] == 2  # the withheld 2 costs 2
    assert e.mae_by_true_count["0"] == pytest.approx(1 / 2)  # the withheld 0 costs nothing
    assert e.mae == pytest.approx(3 / 4) and e.mae_shown == pytest.approx(1 / 2)
    assert e.mae_nonempty == pytest.approx(1) and e.mae_nonempty_shown == 0
    assert e.share_rel_error_above["50pct"] == pytest.approx(1 / 2)


def test_the_cell_key_method_is_not_flattered_by_its_zeros() -> None:
    """It never perturbs a true 0, so over all cells its error looks smaller than over the
    cells that hold persons."""
    population = synthesize(3_000, seed=5)
    release = api.protect(population, "cellkey", seed=2, ptable="maxent", bound=5, variance=3)
    p12 = api.evaluate(release, population).table("P12", "block")
    assert p12.mae_by_true_count["0"] == 0
    assert p12.mae_nonempty > 1.5 * p12.mae


def test_geounit_totals_are_the_bureau_s_detailed_summary_metrics() -> None:
    population = synthesize(3_000, seed=5)
    release = api.protect(population, "geometric", seed=3, epsilon="4")
    totals = api.evaluate(release, population).totals
    exact = api.protect(population, "none").tables["P1"].dense("block")[:, 0]
    noisy = release.tables["P1"].dense("block")[:, 0]
    error, positive = noisy - exact, exact > 0
    block = totals["block"]["all"]
    assert block["geounits"] == len(exact)
    assert block["mae"] == pytest.approx(np.abs(error).mean())
    assert block["bias"] == pytest.approx(error.mean())
    relative = error[positive] / exact[positive]
    assert block["mape"] == pytest.approx(100 * np.abs(relative).mean())
    assert block["malpe"] == pytest.approx(100 * relative.mean())
    assert block["share_off_10pct"] == pytest.approx(np.mean(np.abs(relative) > 0.1))
    small = (exact >= 1) & (exact <= 9)
    assert totals["block"]["1-9"]["mae"] == pytest.approx(np.abs(error[small]).mean())
    assert sum(totals["block"][c]["geounits"] for c in totals["block"] if c != "all") == len(exact)


def test_a_release_without_p1_says_why_it_has_no_totals() -> None:
    population = synthesize(1_000, seed=5)
    evaluation = api.evaluate(api.protect(population, "safetab_h", seed=1), population)
    assert evaluation.totals == {}
    (figure,) = [f for f in evaluation.figures() if f.metric == "totals"]
    assert "publishes no P1" in figure.value.reason

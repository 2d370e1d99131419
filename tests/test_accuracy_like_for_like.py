"""Accuracy like for like: the pooled accuracy of the compared tables, the distances between
each geounit's true and published distribution, and the key indicators of tracts."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.pipeline import api
from sdclab.pipeline.evaluation import _distances, tract_indicators
from sdclab.pipeline.results import COMPARED_TABLES, NotMeasured


@pytest.fixture(scope="module")
def population():
    return synthesize(3_000, seed=5)


def test_distances_by_hand() -> None:
    truth = sp.csr_matrix(np.array([[2.0, 2.0], [0.0, 0.0], [1.0, 0.0], [3.0, 1.0], [0, 0]]))
    published = sp.csr_matrix(np.array([[4.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0, 0]]))
    d = _distances(published, truth)
    # (½, ½) against (1, 0); persons published where none live, and none published where four
    # live: distance 1 each; (1, 0) against (0, 1); the geounit empty on both sides is left out
    assert d["distance_geounits"] == 4
    assert d["tv_mean"] == pytest.approx((0.5 + 1.0 + 1.0 + 1.0) / 4)
    first = math.sqrt(0.5 * ((math.sqrt(0.5) - 1) ** 2 + 0.5))
    assert d["hellinger_mean"] == pytest.approx((first + 1.0 + 1.0 + 1.0) / 4)


def test_a_negative_published_count_reads_as_zero_and_one_cell_has_no_distribution() -> None:
    truth = sp.csr_matrix(np.array([[1.0, 1.0]]))
    d = _distances(sp.csr_matrix(np.array([[-1.0, 3.0]])), truth)
    assert d["tv_mean"] == pytest.approx(0.5)
    one_cell = _distances(sp.csr_matrix(np.array([[3.0]])), sp.csr_matrix(np.array([[2.0]])))
    assert one_cell == {"distance_geounits": 0, "tv_mean": None, "hellinger_mean": None}


def test_the_exact_release_is_at_distance_zero_and_noise_is_not(population) -> None:
    exact = api.evaluate(api.protect(population, "none"), population).table("P12", "block")
    assert exact.tv_mean == 0 and exact.hellinger_mean == 0 and exact.distance_geounits > 50
    noisy = api.protect(population, "geometric", seed=3, epsilon="4")
    evaluation = api.evaluate(noisy, population)
    p12 = evaluation.table("P12", "block")
    assert 0 < p12.tv_mean <= 1 and 0 < p12.hellinger_mean <= 1
    p1 = evaluation.table("P1", "block")
    assert isinstance(p1.tv_mean, NotMeasured)


def _indicators_by_hand(matrix: np.ndarray) -> dict[str, np.ndarray]:
    """The indicators of each row of a P12 matrix, from the table's labels."""
    from sdclab.censuses.us2010.catalog import CATALOG

    labels = CATALOG["P12"].cell_labels
    sex = np.array([label.split(" / ")[0] for label in labels])
    start = np.array([int(label.split(" / ")[1].split("-")[0].rstrip("+")) for label in labels])
    total = matrix.sum(axis=1)
    return {
        "sex_ratio": 100 * matrix[:, sex == "male"].sum(axis=1) / matrix[:, sex == "female"].sum(1),
        "share_65_plus": matrix[:, start >= 65].sum(axis=1) / total,
        "share_under_18": matrix[:, start < 18].sum(axis=1) / total,
    }


def test_tract_indicators_against_the_table_read_by_hand(population) -> None:
    release = api.protect(population, "cellkey", seed=2, ptable="maxent", bound=5, variance=3)
    figures = tract_indicators(release, population)
    true = _indicators_by_hand(api.protect(population, "none").tables["P12"].dense("tract"))
    published = _indicators_by_hand(release.tables["P12"].dense("tract").astype(float))
    for name, values in figures.items():
        error = published[name] - true[name]
        assert values["tracts"] == len(error) and values["undefined_tracts"] == 0
        assert values["mae"] == pytest.approx(np.abs(error).mean())
        assert values["bias"] == pytest.approx(error.mean())
    exact = tract_indicators(api.protect(population, "none"), population)
    assert all(v["mae"] == 0 for v in exact.values())


def test_each_compared_table_apart_with_withheld_cells_at_their_true_counts(population) -> None:
    """P1 and P12 are compared each apart (a mean pooled over both would hide the totals'
    error among P12's cells), and a withheld cell's error is its true count."""
    release = api.protect(population, "suppress")
    truth = api.protect(population, "none")
    evaluation = api.evaluate(release, population)
    for name in COMPARED_TABLES:
        table = release.tables[name]
        hidden = table.suppressed("block").toarray() != 0
        assert hidden.any()  # the rule withholds cells of both tables
        shown = np.where(hidden, 0, table.dense("block"))
        true = truth.tables[name].dense("block")
        error = np.abs(shown - true)
        compared = evaluation.compared("block", name)
        assert compared.mae == pytest.approx(error.mean())
        assert compared.mae_nonempty == pytest.approx(error[true > 0].mean())
        assert compared.mae_shown == pytest.approx(error[~hidden].mean())
        assert compared.mae_nonempty_shown == pytest.approx(error[~hidden & (true > 0)].mean())
        assert compared.suppressed_share == pytest.approx(hidden.mean())
        assert compared.mae_nonempty > compared.mae_nonempty_shown  # withholding is not free


def test_a_release_without_the_compared_tables_says_which_it_lacks(population) -> None:
    pl94 = api.protect(population, "topdown", seed=4, product="pl94")
    evaluation = api.evaluate(pl94, population)
    lacking = evaluation.compared("tract")
    assert isinstance(lacking, NotMeasured) and "no P12 at tract" in lacking.reason
    figures = {
        (f.metric, f.level): f.value
        for f in evaluation.figures()
        if f.metric == "compared.mae_nonempty"
    }
    assert isinstance(figures[("compared.mae_nonempty", "block")], NotMeasured)
    assert evaluation.indicators == {}


def test_a_table_withheld_whole_costs_its_counts_and_has_no_shown_figure() -> None:
    import scipy.sparse as sp

    from sdclab.pipeline.evaluation import table_accuracy
    from sdclab.pipeline.results.accuracy import NO_POSITIVE_SHOWN_CELLS, NO_SHOWN_CELLS

    truth = sp.csr_matrix(np.array([[0, 2, 15]]))
    published = sp.csr_matrix(np.array([[0, 0, 0]]))
    for hidden, reason in (([1, 1, 1], NO_SHOWN_CELLS), ([0, 1, 1], NO_POSITIVE_SHOWN_CELLS)):
        suppressed = sp.csr_matrix(np.array([hidden], dtype=np.int8))
        table = table_accuracy("P1", "block", published, suppressed, truth)
        assert table.mae_nonempty == pytest.approx(17 / 2) and table.mae == pytest.approx(17 / 3)
        assert isinstance(table.mae_nonempty_shown, NotMeasured)
        assert table.mae_nonempty_shown.reason == reason

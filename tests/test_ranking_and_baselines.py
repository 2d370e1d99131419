"""Ranked records, the fixed baselines, the headline risk and the population's uniques."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from sdclab.attacks.linkage import BASELINE_TABLES, population_uniques, random_draw_records
from sdclab.attacks.reconstruction import record_confidence
from sdclab.attacks.variability import values_by_person
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.pipeline.evaluation import ranked_precision
from sdclab.pipeline.results import HeadlineRisk, Linkage, LinkRates, NotMeasured, Reidentification
from sdclab.release import exact_release


def test_confidence_is_the_share_of_draws_holding_each_copy() -> None:
    count = np.array([2, 1])
    drawn = np.array([[2, 1, 0, 2], [1, 1, 1, 0]])  # pair 0 in four draws, pair 1 in four
    confidence = record_confidence(count, drawn)
    # pair 0: the first copy is held where the draw has ≥ 1 (3 of 4), the second ≥ 2 (2 of 4)
    assert confidence.tolist() == [0.75, 0.5, 0.75]


def _records(rows: list[tuple[int, int, int, int, int, float]]) -> pl.DataFrame:
    names = ["block", "sex", "age", "race", "hispanic", "confidence"]
    return pl.DataFrame(rows, schema=names, orient="row")


class _Truth:
    def __init__(self, rows: list[tuple[int, int, int, int, int]]) -> None:
        self.persons = pl.DataFrame(
            rows,
            schema={
                "block": pl.String,
                "sex": pl.Int8,
                "age": pl.Int16,
                "race": pl.Int8,
                "hispanic": pl.Int8,
            },
            orient="row",
        )


def test_ranked_precision_matches_the_most_confident_first() -> None:
    block = "010010001001000"
    truth = _Truth([(block, 1, 30, 1, 0), (block, 2, 40, 2, 0)])
    records = _records(
        [
            (block, 1, 30, 1, 0, 1.0),  # right, most confident
            (block, 1, 30, 1, 0, 0.2),  # a second copy: only one true person there
            (block, 2, 40, 3, 0, 0.9),  # wrong race
            (block, 2, 40, 2, 0, 0.5),  # right
        ]
    ).with_columns(pl.col("block").cast(pl.String))
    curve = ranked_precision(records, truth)  # type: ignore[arg-type]
    assert curve["top_25%"] == 1.0  # the single most confident record
    assert curve["top_50%"] == 0.5  # then the wrong-race one
    assert curve["top_100%"] == 0.5  # 2 of 4 records are right


def test_ranked_precision_needs_confidence() -> None:
    block = "010010001001000"
    truth = _Truth([(block, 1, 30, 1, 0)])
    records = _records([(block, 1, 30, 1, 0, 1.0)]).drop("confidence")
    assert isinstance(ranked_precision(records, truth), NotMeasured)  # type: ignore[arg-type]


def _linkage(name: str, confirmed: int, records: int = 100) -> Linkage:
    rates = LinkRates(attacker_records=records, putative=records, confirmed=confirmed)
    return Linkage(name, {"all": rates, "nonmodal": LinkRates(10, 10, confirmed // 10)})


def test_headline_is_beyond_the_best_baseline_and_ignores_the_upper_bounds() -> None:
    reid = Reidentification(
        attacker="census",
        attacker_parameters={},
        attacker_records=100,
        attacker_match_share=1.0,
        reconstruction=_linkage("reconstruction", 60),
        mdg=_linkage("mdg", 40),
        prg=_linkage("prg", 30),
        fixed={
            "mdg_exact": _linkage("mdg_exact", 50),
            "random_draw": _linkage("random_draw", 20),
            "confidential": _linkage("confidential", 95),
        },
    )
    head = reid.headline("all")
    assert isinstance(head, HeadlineRisk)
    assert head.best_baseline == "mdg_exact"
    assert head.persons == 10
    assert head.points == pytest.approx(10.0)
    back = Reidentification.from_dict(reid.to_dict())
    assert back.headline("all").to_dict() == head.to_dict()
    assert set(back.fixed) == {"mdg_exact", "random_draw", "confidential"}


def test_headline_points_are_not_measured_without_attacker_records() -> None:
    empty = LinkRates(0, 0, 0)
    head = HeadlineRisk("nonmodal", empty, "prg", empty)
    assert isinstance(head.points, NotMeasured)


def test_population_uniques_count_persons_alone_in_their_cell() -> None:
    population = synthesize(2_000, seed=3)
    uniques = population_uniques(population)
    persons = population.persons
    alone = persons.group_by("block", "sex", "age").len().filter(pl.col("len") == 1).height
    assert uniques["unique_on_block_sex_age"] == alone / persons.height
    assert 0 < uniques["unique_on_block_sex_agebin"] <= uniques["unique_on_block_sex_age"]


def test_random_draw_records_fill_every_block_to_its_size() -> None:
    population = synthesize(2_000, seed=3)
    exact = exact_release(population, BASELINE_TABLES)
    records = random_draw_records(population, exact, np.random.default_rng(0))
    sizes = population.persons.group_by(pl.col("block").cast(pl.Int64)).len().sort("block")
    drawn = records.group_by("block").len().sort("block")
    assert drawn.equals(sizes)
    assert set(records["sex"].unique()) <= {1, 2}


def test_person_weighted_solvar() -> None:
    solvar = pl.DataFrame({"persons": [10, 30, 5], "solvar": [0.0, 0.5, float("nan")]})
    assert values_by_person(solvar) == pytest.approx(15 / 40)


def test_a_release_not_reconstructed_has_no_naive_agreement_for_that_reason() -> None:
    from sdclab.censuses.us2010.population.synth import synthesize
    from sdclab.pipeline import api
    from sdclab.pipeline.results.evaluation import NO_RECONSTRUCTION

    population = synthesize(1_000, seed=5)
    release = api.protect(population, "safetab_h", seed=1)
    evaluation = api.evaluate(release, population)
    assert evaluation.naive_agreement.reason == NO_RECONSTRUCTION

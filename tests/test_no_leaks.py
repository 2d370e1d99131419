"""Nothing confidential where it does not belong: release files, seeded releases, the source."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sdclab import mechanisms
from sdclab.mechanisms.cellkey import assign_record_keys
from sdclab.population.contract import RECORD_KEY
from sdclab.population.synth import synthesize
from sdclab.release import write_release
from sdclab.tables.tabulate import tabulate

SOURCE = Path(__file__).resolve().parent.parent / "src" / "sdclab"
QUICK = {
    "swap": {},
    "swap-low": {},
    "swap-high": {},
    "psa": {},
    "topdown": {"product": "pl94"},
    "cellkey": {},
    "geometric": {"epsilon": "8"},
    "safetab_h": {},
    "suppress": {},
}


@pytest.fixture(scope="module")
def population():
    population, _ = synthesize(4_000, seed=17)
    return assign_record_keys(population, 256, np.random.default_rng(2))


@pytest.fixture(scope="module")
def releases(population, tmp_path_factory):
    out = {}
    for name, settings in QUICK.items():
        release = mechanisms.run(name, population, settings, 3)
        path = tmp_path_factory.mktemp(name)
        write_release(release, path / "rel")
        out[name] = (release, path / "rel")
    return out


def test_every_mechanism_is_covered():
    assert set(QUICK) | {"none", "gaussian"} == set(mechanisms.MECHANISMS)


def test_no_release_file_holds_record_keys_or_the_input_ids(releases):
    for name, (_, path) in releases.items():
        for file in path.rglob("*.parquet"):
            frame = pl.read_parquet(file)
            assert RECORD_KEY.name not in frame.columns, (name, file)
            if "person_id" in frame.columns:
                published = frame["person_id"].to_list()
                # replaced by sequential ids in block order (publishable_microdata)
                assert sorted(published) == list(range(len(published))), (name, file)


def test_no_protected_release_publishes_the_exact_block_tables(population, releases):
    exact = tabulate(population)
    for name, (release, _) in releases.items():
        shown = [t for t in release.tables if "block" in exact[t].counts]
        if not shown:  # SafeTab-H publishes no catalogue tables
            assert name == "safetab_h"
            continue
        identical = 0
        for table in shown:
            truth = exact[table].to_long().filter(pl.col("level") == "block")
            published = release.table(table, "block")
            if published["count"].null_count() == 0 and published.sort("geoid", "cell").equals(
                truth.sort("geoid", "cell")
            ):
                identical += 1
        assert identical < len(shown), f"{name}: every block table is exact"


def test_seeded_releases_are_not_fit_for_publication(releases):
    for name, (release, _) in releases.items():
        assert release.randomness["fit_for_publication"] is False, name
        assert release.randomness["source"] == "seed", name


FORBIDDEN = (
    r"\bimport pickle\b",
    r"\bpickle\.loads?\(",
    r"\bcloudpickle\b",
    r"\bmarshal\b",
    r"\bshelve\b",
    r"(?<![\w.])eval\(",
    r"(?<![\w.])exec\(",
    r"allow_pickle\s*=\s*True",
    r"yaml\.load\(",
)


def test_no_pickle_or_eval_of_user_input_in_the_source():
    hits = []
    for file in SOURCE.rglob("*.py"):
        text = file.read_text(encoding="utf-8")
        for pattern in FORBIDDEN:
            for match in re.finditer(pattern, text):
                line = text[: match.start()].count("\n") + 1
                hits.append(f"{file.relative_to(SOURCE)}:{line}: {match.group(0)}")
    assert not hits, "\n".join(hits)

"""Nothing confidential where it does not belong: release files, seeded releases, the source."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from sdclab import protection
from sdclab.censuses.us2010.population.columns import RECORD_KEY
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.core.tables.tabulate import tabulate
from sdclab.pipeline.results.truth import has_path
from sdclab.protection.cellkey import assign_record_keys
from sdclab.release import RELEASE_FILE, write_release

SOURCE = Path(__file__).resolve().parent.parent / "src" / "sdclab"
QUICK = {
    name: dict(entry.example)
    for name, entry in protection.MECHANISMS.items()
    if entry.protect is not None and name != "none"
}
"""Every mechanism that protects data, at its example settings (from the registry: a new one is
covered without a line here)."""


@pytest.fixture(scope="module")
def population():
    population = synthesize(4_000, seed=17)
    return assign_record_keys(population, 256, np.random.default_rng(2))


@pytest.fixture(scope="module")
def small(population):
    """A smaller population with record keys, for the tests that run mechanisms themselves."""
    smaller = synthesize(1_200, seed=18)
    return assign_record_keys(smaller, 256, np.random.default_rng(2))


@pytest.fixture(scope="module")
def releases(population, tmp_path_factory):
    out = {}
    for name, settings in QUICK.items():
        release = protection.run(name, population, settings, 3)
        path = tmp_path_factory.mktemp(name)
        write_release(release, path / "rel")
        out[name] = (release, path / "rel")
    return out


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
            truth = exact[table].counts["block"][1]
            published = release.table(table)
            if (
                not published.suppressed("block").nnz
                and (published.matrix("block") != truth).nnz == 0
            ):
                identical += 1
        assert identical < len(shown), f"{name}: every block table is exact"


PUBLISHABLE_NOTES: dict[str, set[str]] = {
    "none": set(),  # the exact release writes no notes
    "psa": {
        "households",  # occupied housing units: an invariant of the swap (H3 publishes them)
        "largest_matching_group",  # b: the card's epsilon needs it; group sizes are invariants
        "matching_groups",  # non-empty (area x size) groups: a function of the invariants
    },
    **{
        name: {
            "households",  # occupied housing units: units and occupancy are invariants (H3)
            "target_swap_rate",  # a parameter
        }
        for name in ("swap", "swap-low", "swap-high")
    },
    "topdown": {
        "product",  # a parameter
        "budget",  # the strategy's shares, rho and sigma: parameters
        "tables_not_published",  # a fact about the product
        "problems_per_level",  # parents with several children: counts of the published geography
    },
    "cellkey": {
        "record_keys",  # how the record keys were obtained: a fact about the method
        "swap.mechanism",  # a parameter
        "swap.target_swap_rate",  # the swap preset's parameter
        "spsn",  # a parameter, in words
        "key_space",  # a parameter (or its documented default)
        "ptable",  # the p-table's format and design (D, V, js): public in the cell key method
        "absent_rows",  # what an absent row means: a fact about the method
    },
    **{
        name: {
            "all_cells_noised",  # a fact about the method
            "nonnegative",  # a parameter
        }
        for name in ("geometric", "truncated")
    },
    "safetab_h": {
        "stability",  # from the iteration mapping (a parameter)
        "t01001",  # a parameter
        "groups_with_tables",  # the (level, geoid, iteration) groups of the published tables
        "coterminous_geounits",  # from the geography (public: the release carries it)
        "geounits_without_housing_dropped",  # from the housing units, an invariant the card lists
    },
    "suppress": {
        "rules",  # the parameters, in words, and which tables the catalogue makes adult / unit
        "absent_rows",  # what an absent row means: a fact about the method
        "complementary.protects",  # what complementary suppression guarantees: the method
    },
}
"""Every key a release's notes may hold, per mechanism, as a dotted path (a listed path allows
everything under it): parameters and facts about the method, figures derivable from the published
tables and invariants the card lists as published exactly. Figures of the confidential data go to
the mechanism's diagnostics (evaluation only), never into the notes."""

NOTE_VARIANTS = {
    "none": {},
    "cellkey": {"swap": "swap-low", "threshold": "3", "spsn": "false"},
    "suppress": {"complementary": "true"},
    "safetab_h": {"coterminous": "true", "drop_no_housing": "true"},
}
"""Settings that make a mechanism write the notes its quick settings do not."""


def unlisted(notes: dict[str, Any], allowed: set[str], prefix: str = "") -> list[str]:
    """Paths of the notes that no allowed path covers (a dict is looked into when some allowed
    path lies under it)."""
    out = []
    for key, value in notes.items():
        path = prefix + key
        if path in allowed:
            continue
        if isinstance(value, dict) and any(a.startswith(path + ".") for a in allowed):
            out += unlisted(value, allowed, path + ".")
        else:
            out.append(path)
    return out


def test_release_notes_hold_only_publishable_keys(population, releases, tmp_path):
    assert set(PUBLISHABLE_NOTES) | {"gaussian"} == set(protection.MECHANISMS)  # gaussian: a card
    written = {name: [path] for name, (_, path) in releases.items()}
    for name, settings in NOTE_VARIANTS.items():
        write_release(protection.run(name, population, settings, 3), tmp_path / name)
        written.setdefault(name, []).append(tmp_path / name)
    assert set(written) == set(PUBLISHABLE_NOTES)
    for name, paths in written.items():
        notes = [json.loads((path / RELEASE_FILE).read_text())["notes"] for path in paths]
        for one in notes:
            leaked = unlisted(one, PUBLISHABLE_NOTES[name])
            assert not leaked, (
                f"{name}: notes {leaked} are not in PUBLISHABLE_NOTES (publishable: add them with "
                "why; a figure of the confidential data: move it to the mechanism's diagnostics)"
            )
        # the list is exact: every allowed key is written by one of the releases
        for path in PUBLISHABLE_NOTES[name]:
            assert any(has_path(one, path) for one in notes), (name, path)


def test_a_new_note_is_caught_at_any_depth():
    suppress, cellkey = PUBLISHABLE_NOTES["suppress"], PUBLISHABLE_NOTES["cellkey"]
    assert unlisted({"rules": {"any": 1}, "by_level": {}}, suppress) == ["by_level"]
    assert unlisted({"complementary": {"protects": "", "rounds": 2}}, suppress) == [
        "complementary.rounds"
    ]
    assert unlisted({"swap": {"mechanism": "swap", "households": 9}}, cellkey) == [
        "swap.households"
    ]


STREAM_FREE = {
    "cellkey": "the population's record_key column",  # stored keys, SPSN: no draw at all
    "suppress": "none (deterministic)",
}


def test_seeded_releases_are_not_fit_for_publication(releases):
    """Every release drawn from a seeded stream says so; one that drew nothing says what its
    protection rests on instead (the seed had no effect on it)."""
    for name, (release, _) in releases.items():
        record = release.randomness
        if name in STREAM_FREE:
            assert record["source"] == STREAM_FREE[name], name
            assert record["fit_for_publication"] is True, name
            continue
        assert record["fit_for_publication"] is False, name
        assert record["source"] == "seed", name


def test_randomness_records_follow_what_was_drawn(small):
    population = small
    none = protection.run("none", population, {}, None).randomness
    assert none["fit_for_publication"] is False and none["source"] == "none (deterministic)"
    from_ids = protection.run("cellkey", population, {"keys": "ids"}, None).randomness
    assert from_ids["fit_for_publication"] is False and from_ids["source"].startswith("record ids")
    drawn = protection.run("cellkey", population, {"keys": "drawn"}, None).randomness
    assert drawn == {"source": "os-entropy", "fit_for_publication": True, "drew_from_stream": True}
    seeded = protection.run("cellkey", population, {"spsn": "false"}, 4).randomness
    assert seeded["source"] == "the population's record_key column and seed"
    assert seeded["fit_for_publication"] is False and seeded["seed"] == 4
    assert protection.run("suppress", population, {}, 5).randomness["fit_for_publication"]
    assert protection.run("geometric", population, {"epsilon": "8"}, None).randomness == {
        "source": "os-entropy",
        "fit_for_publication": True,
        "drew_from_stream": True,
    }


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


def _toml_entries(table: str, entries: list[dict]) -> str:
    """``[[table]]`` entries as TOML (strings and numbers written as JSON, which TOML reads)."""
    lines = []
    for entry in entries:
        lines.append(f"[[{table}]]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in entry.items()]
    return "\n".join(lines) + "\n"


def test_releases_record_the_content_of_setting_files_never_their_paths(small, tmp_path):
    """An attacker is entitled to a strategy, an iteration mapping or a p-table, not to where the
    agency keeps them; execution settings (workers, checkpoint) stay out of the release."""
    from sdclab.censuses.us2010 import safetab_groups
    from sdclab.pipeline.api import read_release
    from sdclab.protection.ptable import ons_10_5_ptable, write_ptable
    from sdclab.protection.topdown_strategy import PRODUCTS, strategy_data

    population = small
    files = tmp_path / "agency-files"
    files.mkdir()
    strategy = strategy_data(PRODUCTS["pl94"].default)
    lines = [f'rho = "{strategy["rho"]}"', "[level_shares]"]
    lines += [f'{k} = "{v}"' for k, v in strategy["level_shares"].items()]
    for level, shares in strategy["query_shares"].items():
        lines += [f"[query_shares.{level}]", *(f'"{q}" = "{v}"' for q, v in shares.items())]
    (files / "strategy.toml").write_text("\n".join(lines))
    groups = safetab_groups.groups_data(safetab_groups.default_groups())
    (files / "iterations.toml").write_text(_toml_entries("group", groups))
    cuts = safetab_groups.thresholds_data(safetab_groups.PRODUCTION_THRESHOLDS)
    (files / "thresholds.toml").write_text(_toml_entries("threshold", cuts))
    write_ptable(ons_10_5_ptable(), files / "ptable.csv")
    cases = {
        "topdown": {
            "product": "pl94",
            "strategy": str(files / "strategy.toml"),
            "checkpoint": str(tmp_path / "ck"),
            "workers": "1",
        },
        "safetab_h": {
            "iterations": str(files / "iterations.toml"),
            "thresholds": str(files / "thresholds.toml"),
        },
        "cellkey": {"ptable": str(files / "ptable.csv")},
    }
    read = {}
    for name, settings in cases.items():
        release = protection.run(name, population, settings, 2)
        write_release(release, tmp_path / name)
        text = (tmp_path / name / RELEASE_FILE).read_text()
        assert str(tmp_path) not in text, name
        read[name] = release
    for file in files.iterdir():
        file.unlink()  # the releases must read, and their parameters parse, without the files
    recorded = {name: read_release(tmp_path / name).parameters for name in cases}
    assert recorded["topdown"]["strategy"] == strategy
    assert not {"checkpoint", "workers", "executor"} & set(recorded["topdown"])
    assert recorded["safetab_h"]["iterations"] == groups
    assert recorded["safetab_h"]["thresholds"] == cuts
    topdown_card = protection.get("topdown").guarantee(
        protection.get("topdown").parse(recorded["topdown"])
    )
    assert topdown_card == read["topdown"].card
    published = read_release(tmp_path / "cellkey").artifacts["ptable"]
    assert published.equals(ons_10_5_ptable().to_frame())
    assert "published as artifacts/ptable.parquet" in recorded["cellkey"]["ptable"]
    from sdclab.protection import (
        cellkey_risk as ckm_risk,  # the risk analysis uses the published table
    )
    from sdclab.protection.cellkey import CellKeyParameters

    back = read_release(tmp_path / "cellkey")
    params = CellKeyParameters.model_validate(back.parameters)
    expected = ckm_risk.bound_disclosure(
        ckm_risk.usable_tuples(back, params), params, ons_10_5_ptable()
    )
    assert ckm_risk.ckm_risk(back)["bound_disclosure"] == expected


def test_whether_a_release_drew_from_its_stream_is_read_off_its_record():
    from sdclab.core.randomness import drew_from_stream

    assert drew_from_stream({"source": "seed"}) and drew_from_stream({"source": "os-entropy"})
    assert drew_from_stream({"source": "the population's record_key column and seed"})
    assert not drew_from_stream({"source": "none (deterministic)"})
    assert not drew_from_stream({"source": "the population's record_key column"})


def test_the_record_says_whether_the_stream_was_drawn_from(small):
    """The randomness record carries a boolean, so that no reader parses its source text: a
    mechanism's own source may end in words that look like the stream's."""
    from sdclab.core.randomness import drew_from_stream, release_randomness

    own = {"source": "keys chosen by the agency and seed", "fit_for_publication": True}
    assert not drew_from_stream(release_randomness(own, 1, drew=False))
    assert drew_from_stream(release_randomness(own, 1, drew=True))
    for name, settings, drew in (
        ("none", {}, False),
        ("suppress", {}, False),
        ("cellkey", {"spsn": "false"}, True),
        ("geometric", {"epsilon": "8"}, True),
    ):
        record = protection.run(name, small, settings, 4).randomness
        assert record["drew_from_stream"] is drew, name
        assert drew_from_stream(record) is drew, name
    # a record written before the flag is read off its source, as before
    assert not drew_from_stream({"source": "none (deterministic)", "fit_for_publication": False})


def test_released_microdata_never_say_who_is_data_defined(small):
    """Whether a person's record is data-defined is a fact of the census's processing: a
    release's microdata drop the column, as they drop the record keys."""
    flags = np.arange(small.n_persons) % 3 > 0
    flagged = small.with_records(persons=small.persons.with_columns(data_defined=flags))
    release = protection.run("swap-low", flagged, {}, 4)
    assert release.person_microdata is not None
    assert "data_defined" not in release.person_microdata.columns

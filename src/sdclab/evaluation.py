"""Evaluation: the one place that sees both the truth and what was published or reconstructed."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from sdclab import schema
from sdclab.geography import GEOID_LENGTH
from sdclab.population import Population
from sdclab.release import Release
from sdclab.tables.catalog import CATALOG
from sdclab.tables.tabulate import tabulate

BLOCK_SIZE_CLASSES = ((1, 9), (10, 49), (50, 99), (100, 249), (250, 499), (500, 999), (1000, None))
"""Block population classes of the 2010 study."""

KEY = ("block", "sex", "race", "hispanic")


def size_class_label(low: int, high: int | None) -> str:
    return f"{low}+" if high is None else f"{low}-{high}"


def _size_class(persons: pl.Expr) -> pl.Expr:
    """The block-size class label of a block population."""
    expr = pl.lit(None, dtype=pl.String)
    for low, high in reversed(BLOCK_SIZE_CLASSES):
        inside = persons >= low if high is None else persons.is_between(low, high)
        expr = pl.when(inside).then(pl.lit(size_class_label(low, high))).otherwise(expr)
    return expr


def with_agebin(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame with an ``agebin`` column (the 38 bins of P12 + P14) derived from ``age``
    (null where age is)."""
    bins = pl.Series(schema.agebin38(frame["age"].fill_null(0).to_numpy()), dtype=pl.Int16)
    return frame.with_columns(agebin=pl.when(pl.col("age").is_not_null()).then(bins))


def has_person_attributes(frame: pl.DataFrame) -> bool:
    """Whether released person records carry what :func:`agreement` matches on."""
    return {"block", "sex", "age", "race", "hispanic"} <= set(frame.columns)


def unknown_attributes(records: pl.DataFrame) -> list[str]:
    """Person attributes null in every record: those the attacked release does not determine
    (sex and age for a PL 94-171 release). None of a frame without records."""
    if not records.height:
        return []
    return [a for a in schema.PERSON.names if records[a].null_count() == records.height]


def not_applicable(records: pl.DataFrame, what: str) -> dict[str, Any] | None:
    """Figures saying why ``what`` cannot be measured on records with unknown attributes."""
    unknown = unknown_attributes(records)
    if not unknown:
        return None
    return {
        "not_applicable": f"{what} needs sex, age, race and Hispanic origin; the release's tables "
        f"do not determine {', '.join(unknown)}",
        "unknown_attributes": unknown,
        "reconstructed_persons": records.height,
    }


def agreement(reconstructed: pl.DataFrame, truth: Population) -> dict[str, Any]:
    """One-to-one agreement of reconstructed with true records, by block-size class.

    Records are matched without replacement within each block: first on exact age (with sex,
    race and Hispanic origin), then the leftovers on the 38 agebins. The number of matches of a
    key is min(reconstructed, true) — what any one-to-one matching achieves at best.
    Records are never matched on an attribute they lack (null); when the release determines an
    attribute for no record at all, the figures say why agreement is not applicable.
    """
    unknown = not_applicable(reconstructed, "agreement with the truth")
    if unknown is not None:
        return unknown
    cols = ["block", "sex", "age", "race", "hispanic"]
    true = with_agebin(truth.persons.select(cols))
    recon = with_agebin(reconstructed.select(cols).cast({c: true.schema[c] for c in cols}))
    exact = _matched(recon, true, [*KEY, "age"])
    left_r = _leftovers(recon, exact, "r")
    left_t = _leftovers(true, exact, "t")
    binned = (
        left_r.join(left_t, on=[*KEY, "agebin"], how="inner")
        .with_columns(matched=pl.min_horizontal("r", "t"))
        .group_by("block")
        .agg(pl.col("matched").sum().alias("agebin_matches"))
    )
    per_block = (
        true.group_by("block")
        .len("persons")
        .join(
            exact.group_by("block").agg(pl.col("matched").sum().alias("exact_matches")),
            on="block",
            how="left",
        )
        .join(binned, on="block", how="left")
        .fill_null(0)
        .with_columns(size_class=_size_class(pl.col("persons")))
    )
    return _agreement_figures(per_block, recon.height)


def _matched(recon: pl.DataFrame, true: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    r = recon.group_by(key).len("r")
    t = true.group_by(key).len("t")
    return r.join(t, on=key, how="inner").with_columns(matched=pl.min_horizontal("r", "t"))


def _leftovers(records: pl.DataFrame, exact: pl.DataFrame, name: str) -> pl.DataFrame:
    """Records left after the exact pass, counted by key and agebin."""
    key = [*KEY, "age"]
    counts = records.group_by([*key, "agebin"]).len(name)
    return (
        counts.join(exact.select([*key, "matched"]), on=key, how="left")
        .with_columns(pl.col(name) - pl.col("matched").fill_null(0))
        .group_by([*KEY, "agebin"])
        .agg(pl.col(name).sum())
    )


def _agreement_figures(per_block: pl.DataFrame, reconstructed: int) -> dict[str, Any]:
    def rates(frame: pl.DataFrame) -> dict[str, float | int]:
        persons = int(frame["persons"].sum())
        exact = int(frame["exact_matches"].sum())
        binned = exact + int(frame["agebin_matches"].sum())
        return {
            "blocks": frame.height,
            "persons": persons,
            "agree_exact_age": exact / persons if persons else float("nan"),
            "agree_agebin": binned / persons if persons else float("nan"),
        }

    by_class = {
        size_class_label(low, high): rates(
            per_block.filter(pl.col("size_class") == size_class_label(low, high))
        )
        for low, high in BLOCK_SIZE_CLASSES
    }
    return {
        "all": rates(per_block),
        "reconstructed_persons": reconstructed,
        "by_block_size": by_class,
    }


def block_agebin_agreement(reconstructed: pl.DataFrame, truth: Population) -> float | None:
    """Share of true persons matched one-to-one on {block, sex, agebin} alone (None when the
    release does not determine sex or age)."""
    if {"sex", "age"} & set(unknown_attributes(reconstructed)):
        return None
    cols = ["block", "sex", "age"]
    true = with_agebin(truth.persons.select(cols))
    recon = with_agebin(reconstructed.select(cols).cast({c: true.schema[c] for c in cols}))
    key = ["block", "sex", "agebin"]
    matched = recon.group_by(key).len("r").join(true.group_by(key).len("t"), on=key)
    total = int(matched.select(pl.min_horizontal("r", "t")).sum().item())
    return total / true.height if true.height else float(np.nan)


# ---------------------------------------------------------------------------------------------
# Accuracy of published tables
# ---------------------------------------------------------------------------------------------

RELATIVE_ERROR_THRESHOLDS = (0.1, 0.5, 1.0)


def accuracy(release: Release, truth: Population) -> dict[str, dict[str, dict[str, Any]]]:
    """Error of every published table at every level against the exact tabulation of the truth.

    Over the shown (non-suppressed) cells of all geounits of the level, zeros included: mean
    absolute error, root mean squared error, share of negative counts; the share suppressed over
    all cells; over shown cells whose true count is positive: share with |relative error| above
    10/50/100%; cells whose true count is 0 but published otherwise; and the share of parent cells
    whose children do not add up to them.
    """
    exact = tabulate(truth, [n for n in release.tables if n in CATALOG])
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name, counts in exact.items():
        published = release.table(name)
        true_long = counts.to_long()
        table = CATALOG[name]
        out[name] = {}
        for level in table.levels:
            n_units = release.geography.n_units(level)
            out[name][level] = _level_errors(
                published.filter(pl.col("level") == level),
                true_long.filter(pl.col("level") == level),
                n_units * table.n_cells,
            )
        out[name]["additivity"] = _additivity(published, table.levels)
    return out


def _level_errors(published: pl.DataFrame, true: pl.DataFrame, n_cells: int) -> dict[str, Any]:
    """Errors over the cells a user can read: suppressed cells are counted apart, not as exact."""
    key = ["geoid", "cell"]
    joined = (
        published.select(
            *key, released=pl.col("count").cast(pl.Float64), suppressed=pl.col("count").is_null()
        )
        .join(
            true.select(*key, truth=pl.col("count").cast(pl.Float64)),
            on=key,
            how="full",
            coalesce=True,
        )
        .with_columns(pl.col("truth").fill_null(0.0), pl.col("suppressed").fill_null(False))
    )
    n_suppressed = int(joined["suppressed"].sum())
    shown = joined.filter(~pl.col("suppressed")).with_columns(pl.col("released").fill_null(0.0))
    n_shown = n_cells - n_suppressed
    error = (shown["released"] - shown["truth"]).to_numpy()
    truth_values = shown["truth"].to_numpy()
    positive = truth_values > 0
    relative = np.abs(error[positive]) / truth_values[positive]
    n_positive = int(positive.sum())
    return {
        "cells": n_cells,
        "shown_cells": n_shown,
        "mae": float(np.abs(error).sum() / n_shown) if n_shown else None,
        "rmse": float(np.sqrt((error**2).sum() / n_shown)) if n_shown else None,
        "max_abs_error": float(np.abs(error).max(initial=0.0)),
        "negative_share": float((shown["released"] < 0).sum() / n_shown) if n_shown else None,
        "suppressed_share": n_suppressed / n_cells if n_cells else 0.0,
        **{
            f"share_rel_error_above_{int(t * 100)}pct": float((relative > t).sum() / n_positive)
            if n_positive
            else None
            for t in RELATIVE_ERROR_THRESHOLDS
        },
        "false_positive_cells": int(((truth_values == 0) & (error != 0)).sum()),
    }


def _additivity(published: pl.DataFrame, levels: tuple[str, ...]) -> dict[str, float | None]:
    """Share of parent cells that differ from the sum of their children's cells, per level.

    Only cells where the parent and all its children are shown are compared (a suppressed cell
    is not a violation); None when there is no such cell.
    """
    out: dict[str, float | None] = {}
    for parent, child in zip(levels[:-1], levels[1:], strict=True):
        digits = GEOID_LENGTH[parent]
        children = (
            published.filter(pl.col("level") == child)
            .with_columns(geoid=pl.col("geoid").str.slice(0, digits) if digits else pl.lit("US"))
            .group_by("geoid", "cell")
            .agg(
                children=pl.col("count").cast(pl.Float64).sum(),
                hidden=pl.col("count").is_null().any(),
            )
        )
        parents = published.filter(pl.col("level") == parent).select(
            "geoid",
            "cell",
            parent_count=pl.col("count").cast(pl.Float64),
            parent_hidden=pl.col("count").is_null(),
        )
        joined = (
            parents.join(children, on=["geoid", "cell"], how="full", coalesce=True)
            .with_columns(
                pl.col("parent_count", "children").fill_null(0.0),
                pl.col("hidden", "parent_hidden").fill_null(False),
            )
            .filter(~pl.col("hidden") & ~pl.col("parent_hidden"))
        )
        differs = (joined["parent_count"] != joined["children"]).to_numpy()
        out[parent] = float(differs.mean()) if joined.height else None
    return out


def summarise_accuracy(
    figures: dict[str, dict[str, dict[str, Any]]],
) -> dict[str, dict[str, float]]:
    """Mean absolute error per level, averaged over the tables published at that level."""
    by_level: dict[str, list[float]] = {}
    for table in figures.values():
        for level, values in table.items():
            if level != "additivity" and values["mae"] is not None:
                by_level.setdefault(level, []).append(values["mae"])
    return {
        level: {"mean_mae": float(np.mean(v)), "tables": len(v)} for level, v in by_level.items()
    }


# ---------------------------------------------------------------------------------------------
# Tails of unbounded per-cell noise (Bach §§4.1–4.2), for the geometric mechanism
# ---------------------------------------------------------------------------------------------

TAIL_SIZE_CLASSES = ((1, 9), (10, 49), (50, 99), (100, 499), (500, None))
"""Size classes of the true total of an area, for the tail analysis."""
RELATIVE_ERRORS = (0.5, 1.0)
TAIL_BOUND = 20
"""E of the paper's tail probability Pr(|x| > E) reported per level (its E_α = 20)."""


def summed_laplace_pmf(scale: float, terms: int) -> tuple[np.ndarray, np.ndarray]:
    """pmf of the sum of ``terms`` independent discrete Laplace noises of ``scale`` (by FFT, on
    a window holding all but a negligible mass)."""
    reach = int(40 * scale * np.sqrt(terms)) + 40
    size = 1 << int(np.ceil(np.log2(2 * reach + 1)))
    k = np.arange(size)
    k = np.where(k <= size // 2, k, k - size)  # circular layout: 0, 1, …, −1
    single = np.tanh(1 / (2 * scale)) * np.exp(-np.abs(k) / scale)
    summed = np.fft.irfft(np.fft.rfft(single) ** terms, n=size)
    order = np.argsort(k)
    values, probs = k[order], np.clip(summed[order], 0, None)
    keep = np.abs(values) <= reach
    return values[keep], probs[keep] / probs[keep].sum()


def _tails(values: np.ndarray, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, Pr(x ≥ value)) of a pmf."""
    return values, np.cumsum(probs[::-1])[::-1]


def _upper(values: np.ndarray, tail: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """Pr(x ≥ threshold), elementwise, from :func:`_tails`."""
    position = np.searchsorted(values, np.ceil(threshold - 1e-9))
    return np.where(position < len(values), tail[np.minimum(position, len(values) - 1)], 0.0)


def noise_tails(release: Release, truth: Population) -> dict[str, Any]:
    """Analytic and sampled tail figures of a geometric release, by level and size class.

    T is the P1 total of an area; F and M are its females and males, summed from the 23 P12 cells
    of each sex (so their noise is a sum of 23 cell noises). Per class: areas; expected and sampled
    areas whose T is off by at least 50% / 100% of the truth; "depopulated" areas (true T > 0,
    published ≤ 0); broadband distortions (F, M and T all off by at least 50% / 100% in the same
    direction).
    """
    from sdclab.attacks.reconstruction import release_counts
    from sdclab.protection.geometric import GeometricParameters, allocation, scale_of

    params = GeometricParameters.model_validate(release.parameters)
    shares = allocation(params)
    exact = tabulate(truth, ["P1", "P12"])
    labels = CATALOG["P12"].cell_labels
    male = np.array([lab.startswith("male") for lab in labels])
    female = np.array([lab.startswith("female") for lab in labels])
    out: dict[str, Any] = {}
    for level in CATALOG["P1"].levels:
        codes = truth.geography.codes(level)
        true_t = exact["P1"].counts[level][1].toarray()[:, 0]
        true_p12 = exact["P12"].counts[level][1].toarray()
        published_t = np.nan_to_num(release_counts(release, ("P1",), level, codes))[:, 0]
        published_p12 = np.nan_to_num(release_counts(release, ("P12",), level, codes))
        truth_fmt = np.stack([true_p12[:, female].sum(1), true_p12[:, male].sum(1), true_t])
        noisy_fmt = np.stack(
            [published_p12[:, female].sum(1), published_p12[:, male].sum(1), published_t]
        )
        scale_t = float(scale_of(CATALOG["P1"], shares["P1", level], params.neighbours))
        scale_c = float(scale_of(CATALOG["P12"], shares["P12", level], params.neighbours))
        by_terms = {
            k: _tails(*summed_laplace_pmf(scale_c, k)) for k in {int(female.sum()), int(male.sum())}
        }
        pmfs = [
            by_terms[int(female.sum())],
            by_terms[int(male.sum())],
            _tails(*summed_laplace_pmf(scale_t, 1)),
        ]
        values, tail = pmfs[2]
        rows = []
        for low, high in TAIL_SIZE_CLASSES:
            inside = (true_t >= low) & (true_t <= (high if high is not None else true_t.max()))
            if not inside.any():
                continue
            n = truth_fmt[:, inside].astype(float)
            x = (noisy_fmt[:, inside] - truth_fmt[:, inside]).astype(float)
            row: dict[str, Any] = {"class": size_class_label(low, high), "areas": int(inside.sum())}
            for r in RELATIVE_ERRORS:
                up = _upper(values, tail, r * n[2])
                row[f"T_error_{r:g}_expected"] = float(2 * up.sum())
                row[f"T_error_{r:g}_sampled"] = int((np.abs(x[2]) >= r * n[2]).sum())
                # all three up, or all three down: equally likely for symmetric noise
                expected = 2 * np.prod(
                    [_upper(v, p, r * n[c]) for c, (v, p) in enumerate(pmfs)], axis=0
                )
                row[f"broadband_{r:g}_expected"] = float(expected.sum())
                same_up = (x >= r * n).all(axis=0)
                same_down = (x <= -r * n).all(axis=0)
                row[f"broadband_{r:g}_sampled"] = int((same_up | same_down).sum())
            row["depopulated_expected"] = float(_upper(values, tail, n[2]).sum())
            row["depopulated_sampled"] = int((noisy_fmt[2, inside] <= 0).sum())
            rows.append(row)
        out[level] = {
            "scale_total": scale_t,
            "tail_probability": float(2 * _upper(values, tail, np.array([TAIL_BOUND + 1]))[0]),
            "tail_bound": TAIL_BOUND,
            "classes": rows,
        }
    return out


def group_accuracy(release: Release, truth: Population) -> list[dict[str, Any]]:
    """Error of a SafeTab-H release's measured and derived cells, by geography and iteration
    level: mean absolute error, and the share of measured cells within their 95% margin."""
    from sdclab.protection.safetab_h import (
        REGION_TYPES,
        SafeTabHParameters,
        margin_of_error,
        stability,
        true_cells,
    )

    params = SafeTabHParameters.model_validate(release.parameters)
    groups = params.groups()
    cells = true_cells(truth, release).with_columns(error=pl.col("count") - pl.col("true"))
    region_of = {level: region for region, level in REGION_TYPES.items()}
    rows = []
    for (level, it_level), part in cells.group_by("level", "iteration_level", maintain_order=True):
        level, it_level = str(level), int(str(it_level))
        moe = margin_of_error(params.rho(region_of[level], it_level), stability(groups, it_level))
        derived = part["derived"].to_numpy()
        error = np.abs(part["error"].to_numpy())
        rows.append(
            {
                "level": level,
                "iteration_level": it_level,
                "groups": part.select("geoid", "iteration").unique().height,
                "measured_cells": int((~derived).sum()),
                "mae_measured": float(error[~derived].mean()) if (~derived).any() else None,
                "mae_derived": float(error[derived].mean()) if derived.any() else None,
                "moe": moe,
                "within_moe": float((error[~derived] <= moe).mean()) if (~derived).any() else None,
            }
        )
    return rows


def diagnostics(release: Release, truth: Population) -> dict[str, Any]:
    """What the release's mechanism measures about it on the confidential data (its entry's
    ``diagnostics``): a suppression release's shares of non-empty true cells by level, the
    non-empty cells a cell key release leaves below its threshold; empty for the other mechanisms.
    Evaluation only: such figures never go into a release's notes."""
    from sdclab.protection import MECHANISMS

    entry = MECHANISMS.get(release.mechanism)
    if entry is None or entry.diagnostics is None:
        return {}
    return entry.diagnostics(truth, release)


# ---------------------------------------------------------------------------------------------
# Which figures are evaluation only
# ---------------------------------------------------------------------------------------------

EVALUATION_ONLY = "evaluation_only"
"""Key under which figures list, as dotted paths, those computed with the truth (as
:func:`sdclab.attacks.ckm_risk.ckm_risk` already does): evaluation only, never to be published."""

TRUTH_BASED_FIELDS = (
    "accuracy",
    "accuracy_summary",
    "accuracy_by_level",
    "microdata_agreement",
    "reconstruction_agreement",
    "reconstruction_block_sex_agebin",
    "reidentification",
    "tails",
    "group_accuracy",
    "diagnostics",
)
"""Fields of a mechanism's results (an experiment's entry, the metrics of ``sdclab evaluate``)
computed with the truth. Reidentification is among them as a whole: confirmation needs the truth,
its breakdowns use true block sizes, and even its putative links are made against an attacker
file simulated from the confidential records. ``reconstruction`` (the attack's own figures,
solution variability included), ``specification``, ``budget`` and the release's notes (which hold
no figure of the confidential data: ``tests/test_no_leaks.py`` allows each key) are not."""


def evaluation_only(figures: dict[str, Any]) -> list[str]:
    """Dotted paths of the figures of one mechanism's results that were computed with the truth:
    the :data:`TRUTH_BASED_FIELDS` present and what ckm-risk lists under :data:`EVALUATION_ONLY`;
    only paths present in ``figures``."""
    paths = [name for name in TRUTH_BASED_FIELDS if name in figures]
    risk = figures.get("ckm_risk")
    if isinstance(risk, dict):
        paths += [f"ckm_risk.{path}" for path in risk.get(EVALUATION_ONLY, [])]
    return [path for path in paths if has_path(figures, path)]


def has_path(figures: dict[str, Any], path: str) -> bool:
    """Whether the dotted ``path`` of nested keys is present in ``figures``."""
    node: Any = figures
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True

"""Privacy audits: statistically valid lower bounds on a mechanism's privacy loss, measured by
running the mechanism on neighbouring datasets many times.

The method follows the auditing literature (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021): a
small neighbouring pair of datasets (D, D′) is copied into many geounits whose outputs the
mechanism draws independently (blocks, tracts, or the children of a TopDown parent), so that one
run of the real mechanism gives many independent trials of its observed outputs. Half of the
trials choose a distinguishing event: a linear score of the outputs (weights from the difference
of the means over the variances) above or below a threshold. The other half measure the event's
probability under D and under D′ with Clopper–Pearson intervals (of each only the one side used,
at level α/2, so that both hold together with confidence 1 − α). Then, with confidence 1 − α:

* pure ε-DP: ε ≥ ln(P̲[E | D] / P̄[E | D′]);
* ρ-zCDP: ρ ≥ max over α > 1 of D_α(Bern(P̲) ‖ Bern(P̄)) / α — post-processing into the event E
  cannot increase a Rényi divergence, and ρ-zCDP bounds D_α by αρ.

The bound is set beside what the mechanism's card claims for the outputs observed and the
neighbours used (sequential composition over the observed tables or queries). A bound above the
claim is a violation: the mechanism leaks more than its card says.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import polars as pl
from scipy import stats

from sdclab import protection
from sdclab.errors import InputError
from sdclab.population import Population
from sdclab.population.io import validate
from sdclab.protection import gaussian, geometric, topdown
from sdclab.release import Release
from sdclab.tables.catalog import CATALOG

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

ALPHA = 0.05
"""1 − the confidence of every reported bound."""

RENYI_ORDERS = 1.0 + np.geomspace(1e-3, 1e4, 400)
"""Orders α at which the Rényi divergence of the two event probabilities is evaluated."""


# ---------------------------------------------------------------------------------------------
# Statistics: Clopper–Pearson intervals and the bounds they give
# ---------------------------------------------------------------------------------------------


def clopper_pearson(successes: npt.ArrayLike, trials: int, alpha: float) -> tuple[Any, Any]:
    """Exact two-sided (1 − α) interval for a binomial probability (each side α/2)."""
    k = np.asarray(successes, dtype=np.float64)
    low = np.where(k > 0, stats.beta.ppf(alpha / 2, k, trials - k + 1), 0.0)
    high = np.where(k < trials, stats.beta.ppf(1 - alpha / 2, k + 1, trials - k), 1.0)
    return low, high


def epsilon_bound(p_low: npt.ArrayLike, q_high: npt.ArrayLike) -> FloatArray:
    """Pure ε implied by P[E | D] ≥ p_low and P[E | D′] ≤ q_high: ln(p_low / q_high), ≥ 0."""
    p, q = np.asarray(p_low, dtype=np.float64), np.asarray(q_high, dtype=np.float64)
    with np.errstate(divide="ignore"):
        ratio = np.log(np.maximum(p, 1e-300)) - np.log(np.maximum(q, 1e-300))
    return np.asarray(np.where((p > 0) & (p > q), ratio, 0.0), dtype=np.float64)


def rho_bound(p_low: npt.ArrayLike, q_high: npt.ArrayLike) -> FloatArray:
    """zCDP ρ implied by the two probabilities: max_α D_α(Bern(p) ‖ Bern(q)) / α, ≥ 0.

    For p > q the Bernoulli divergence grows with p and falls with q, so the interval ends
    (p̲, q̄) give a valid lower bound."""
    p = np.asarray(p_low, dtype=np.float64)[..., None]
    q = np.asarray(q_high, dtype=np.float64)[..., None]
    a = RENYI_ORDERS
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.where(p > 0, a * np.log(p) + (1 - a) * np.log(q), -np.inf)
        second = np.where(p < 1, a * np.log1p(-p) + (1 - a) * np.log1p(-q), -np.inf)
        divergence = np.logaddexp(first, second) / (a - 1)
    best = np.nanmax(np.where(np.isfinite(divergence), divergence / a, np.inf), axis=-1)
    ok = (p[..., 0] > q[..., 0]) & (q[..., 0] > 0)
    unbounded = (p[..., 0] > 0) & (q[..., 0] == 0)
    return np.asarray(np.where(ok, best, np.where(unbounded, np.inf, 0.0)), dtype=np.float64)


BOUNDS: dict[str, Callable[[npt.ArrayLike, npt.ArrayLike], FloatArray]] = {
    "pure": epsilon_bound,
    "zcdp": rho_bound,
}


# ---------------------------------------------------------------------------------------------
# The distinguisher: a linear score and a threshold, chosen on half of the trials
# ---------------------------------------------------------------------------------------------


SIGNIFICANT = 3.0
"""Outputs whose means under D and D′ differ by fewer standard errors get no weight."""


def score_weights(
    d: FloatArray, d_prime: FloatArray, shift: FloatArray | None = None
) -> FloatArray:
    """Weights of a linear score: difference of the means over the pooled variance, for the
    outputs whose means differ significantly (the others would only add noise to the score);
    outputs constant under each dataset but different between them get a dominant weight. With
    a known ``shift`` of the means, exactly the shifted outputs are weighted."""
    var = (d.var(axis=0) + d_prime.var(axis=0)) / 2
    if shift is not None:
        diff, keep = shift, shift != 0
    else:
        diff = d.mean(axis=0) - d_prime.mean(axis=0)
        keep = np.abs(diff) > SIGNIFICANT * np.sqrt(2 * var / len(d))
    weights = np.where(var > 0, diff / np.where(var > 0, var, 1), diff * 1e6)
    return np.asarray(np.where(keep, weights, 0.0))


@dataclass(frozen=True)
class Event:
    """E = {score ≥ threshold} (orientation +1, likelier under D) or {score < threshold}
    (orientation −1, likelier under D′)."""

    threshold: float
    orientation: int


def event_counts(
    score_d: FloatArray, score_dp: FloatArray, thresholds: FloatArray
) -> tuple[IntArray, IntArray]:
    """How many trials of D and of D′ score at or above each threshold."""
    above_d = len(score_d) - np.searchsorted(np.sort(score_d), thresholds, side="left")
    above_dp = len(score_dp) - np.searchsorted(np.sort(score_dp), thresholds, side="left")
    return above_d.astype(np.int64), above_dp.astype(np.int64)


def oriented_bounds(
    above_d: IntArray, above_dp: IntArray, n: int, premetric: str, alpha: float
) -> tuple[FloatArray, FloatArray]:
    """Lower bounds from the events {score ≥ t} (D likelier) and {score < t} (D′ likelier)."""
    bound = BOUNDS[premetric]
    low_d, _ = clopper_pearson(above_d, n, alpha)
    _, high_dp = clopper_pearson(above_dp, n, alpha)
    low_dp_below, _ = clopper_pearson(n - above_dp, n, alpha)
    _, high_d_below = clopper_pearson(n - above_d, n, alpha)
    return bound(low_d, high_dp), bound(low_dp_below, high_d_below)


def choose_event(score_d: FloatArray, score_dp: FloatArray, premetric: str, alpha: float) -> Event:
    """The threshold and orientation that give the largest bound on these (selection) trials."""
    pooled = np.concatenate([score_d, score_dp])
    thresholds = np.unique(np.quantile(pooled, np.linspace(0, 1, 401)))
    above_d, above_dp = event_counts(score_d, score_dp, thresholds)
    plus, minus = oriented_bounds(above_d, above_dp, len(score_d), premetric, alpha)
    if plus.max() >= minus.max():
        return Event(float(thresholds[int(plus.argmax())]), 1)
    return Event(float(thresholds[int(minus.argmax())]), -1)


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    """What the card claims for the outputs observed, under the neighbours used."""

    premetric: Literal["pure", "zcdp"]
    value: float
    observed: str
    neighbours: str


@dataclass(frozen=True)
class AuditResult:
    mechanism: str
    claim: Claim
    lower_bound: float
    """ε (pure) or ρ (zCDP), with confidence 1 − alpha."""
    trials: int
    """Trials of D and of D′ each (half choose the event, half measure it)."""
    alpha: float
    event: str
    p_d: float
    """P[E | D] measured on the evaluation half."""
    p_d_prime: float
    """P[E | D′] measured on the evaluation half."""

    @property
    def unit(self) -> str:
        return "epsilon" if self.claim.premetric == "pure" else "rho"

    @property
    def violated(self) -> bool:
        """The measured lower bound exceeds the claim: the card understates the privacy loss."""
        return self.lower_bound > self.claim.value

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"unit": self.unit, "violated": self.violated}


def measure(
    name: str,
    claim: Claim,
    d: FloatArray,
    d_prime: FloatArray,
    alpha: float = ALPHA,
    shift: FloatArray | None = None,
) -> AuditResult:
    """The lower bound from trials × outputs of D and D′ (rows independent, same columns).

    ``shift``: the known difference of the expected outputs (exact answers on D minus on D′) of
    an additive-noise mechanism; without it the difference is estimated on the selection half.
    """
    if d.shape != d_prime.shape or d.ndim != 2 or len(d) < 4:
        raise ValueError(
            f"audit {name}: need equal trials × outputs arrays, got {d.shape}, {d_prime.shape}"
        )
    half = len(d) // 2
    weights = score_weights(d[:half], d_prime[:half], shift)
    select_d, select_dp = d[:half] @ weights, d_prime[:half] @ weights
    event = choose_event(select_d, select_dp, claim.premetric, alpha)
    test_d, test_dp = d[half:] @ weights, d_prime[half:] @ weights
    n = len(test_d)
    above_d, above_dp = event_counts(test_d, test_dp, np.array([event.threshold]))
    plus, minus = oriented_bounds(above_d, above_dp, n, claim.premetric, alpha)
    below_d, below_dp = n - above_d[0], n - above_dp[0]
    where = "≥" if event.orientation > 0 else "<"
    return AuditResult(
        mechanism=name,
        claim=claim,
        lower_bound=float((plus if event.orientation > 0 else minus)[0]),
        trials=len(d),
        alpha=alpha,
        event=f"score {where} {event.threshold:.4g} over {d.shape[1]} outputs "
        f"(likelier under {'D' if event.orientation > 0 else 'D′'})",
        p_d=float((above_d[0] if event.orientation > 0 else below_d) / n),
        p_d_prime=float((above_dp[0] if event.orientation > 0 else below_dp) / n),
    )


# ---------------------------------------------------------------------------------------------
# Neighbouring populations, copied into many tracts
# ---------------------------------------------------------------------------------------------

TRACTS_PER_COUNTY = 9000
MAX_TRIALS = 1_000_000
"""Copies per dataset: the geocodes of :func:`geocodes` have room for 4.5 million."""


def geocodes(copy: pl.Expr, block: pl.Expr) -> pl.Expr:
    """15-digit block geocode of block ``block`` (0–999) of copy ``copy``: state 01, one tract
    per copy (9,000 per county), block group 1."""
    county = 1 + 2 * (copy // TRACTS_PER_COUNTY)
    tract = (copy % TRACTS_PER_COUNTY + 1) * 100
    code = 10**13 + county * 10**10 + tract * 10**4 + 1000 + block
    return code.cast(pl.String).str.zfill(15)


def copy_of_geoid(geoid: pl.Expr) -> pl.Expr:
    """Inverse of :func:`geocodes` for a block or tract geoid: the copy it belongs to."""
    county = geoid.str.slice(2, 3).cast(pl.Int64)
    tract = geoid.str.slice(5, 6).cast(pl.Int64)
    return (county - 1) // 2 * TRACTS_PER_COUNTY + tract // 100 - 1


def replicate(persons: pl.DataFrame, units: pl.DataFrame, copies: int) -> Population:
    """``copies`` copies of a one-tract template, copy r in its own tract.

    The template's ``block`` column holds the block's number (0, 1, …) and its ids run from 0.
    """
    index = pl.DataFrame({"copy": np.arange(copies, dtype=np.int64)})
    width = max(persons.height, units.height)

    def spread(frame: pl.DataFrame, ids: list[str]) -> pl.DataFrame:
        out = index.join(frame, how="cross")
        return out.with_columns(
            *[(pl.col("copy") * width + pl.col(c)).alias(c) for c in ids],
            block=geocodes(pl.col("copy"), pl.col("block")),
        ).drop("copy")

    return validate(spread(persons, ["person_id", "unit_id"]), spread(units, ["unit_id"]))


def _person(pid: int, unit: int, block: int, **values: Any) -> dict[str, Any]:
    base = {
        "person_id": pid,
        "unit_id": unit,
        "block": block,
        "relationship": 0,
        "sex": 1,
        "age": 40,
        "race": 1,
        "hispanic": 0,
    }
    return base | values


def _unit(uid: int, block: int, unit_type: int = 0, tenure: int | None = 1) -> dict[str, Any]:
    return {
        "unit_id": uid,
        "block": block,
        "unit_type": unit_type,
        "occupied": True,
        "tenure": tenure,
    }


# ---------------------------------------------------------------------------------------------
# Reading the observed outputs of each copy
# ---------------------------------------------------------------------------------------------


def copy_matrix(frames: list[pl.DataFrame], copies: int) -> list[FloatArray]:
    """Frames of (copy, key, value), one per dataset, as copies × keys arrays on shared columns
    (a key missing from a copy counts 0: long tables leave zero cells out)."""
    keys = (
        pl.concat([f.select("key") for f in frames]).unique().sort("key").with_row_index("column")
    )
    out = []
    for f in frames:
        placed = f.join(keys, on="key", how="left")
        matrix = np.zeros((copies, keys.height))
        matrix[placed["copy"].to_numpy(), placed["column"].to_numpy()] = placed["value"].to_numpy()
        out.append(matrix)
    return out


def block_outputs(release: Release) -> pl.DataFrame:
    """(copy, key, value) of every published block-level cell of the release's tables."""
    frames = [
        frame.filter(pl.col("level") == "block").select(
            copy=copy_of_geoid(pl.col("geoid")),
            key=pl.concat_str(
                pl.lit(name), pl.col("geoid").str.slice(12, 3), pl.col("cell"), separator="|"
            ),
            value=pl.col("count").cast(pl.Float64),
        )
        for name, frame in release.tables.items()
    ]
    return pl.concat(frames)


# ---------------------------------------------------------------------------------------------
# The audits, one per mechanism with a formal guarantee
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trials:
    """What a plan observed: trials × outputs under D and under D′, and for additive-noise
    mechanisms the exact difference of the expected outputs."""

    claim: Claim
    d: FloatArray
    d_prime: FloatArray
    shift: FloatArray | None = None


AuditPlan = Callable[[Mapping[str, Any], int, int], Trials]


def audit_gaussian(settings: Mapping[str, Any], trials: int, seed: int) -> Trials:
    """A histogram of two cells; one person moves between them (bounded) or is added."""
    given = dict(settings)
    default = {} if "rho" in given or "sigma2" in given else {"rho": "0.5"}
    p = protection.get("gaussian").parse(default | given)
    d = np.tile([1, 0], (trials, 1))
    d_prime = np.tile([0, 1] if p.neighbours == "bounded" else [0, 0], (trials, 1))
    rng = np.random.default_rng(seed)
    claim = Claim(
        "zcdp", float(p.total_rho()) / p.queries, "one histogram query of two cells", p.neighbours
    )
    noisy = [gaussian.noisy_histogram(x, p, rng).astype(float) for x in (d, d_prime)]
    return Trials(claim, noisy[0], noisy[1], shift=(d[0] - d_prime[0]).astype(float))


def audit_geometric(settings: Mapping[str, Any], trials: int, seed: int) -> Trials:
    """A block with one group-quarters facility and its resident; D′ has a second resident
    (unbounded) or the resident changed (bounded). The person tables change, the unit tables do
    not; every block-level cell is observed."""
    p = protection.get("geometric").parse(dict(settings))
    units = pl.DataFrame([_unit(0, 0, unit_type=3, tenure=None)])
    resident = _person(0, 0, 0, relationship=5, age=30)
    if p.neighbours == "unbounded":
        other = [resident, _person(1, 0, 0, relationship=5, age=70, sex=2, race=2)]
    else:
        other = [_person(0, 0, 0, relationship=5, age=70, sex=2, race=2)]
    datasets = [pl.DataFrame(people) for people in ([resident], other)]
    releases = [
        protection.run("geometric", replicate(people, units, trials), dict(settings), seed + i)
        for i, people in enumerate(datasets)
    ]
    exact = [protection.run("none", replicate(people, units, 1), {}, 0) for people in datasets]
    d, d_prime, exact_d, exact_dp = copy_matrix(
        [block_outputs(r) for r in releases + exact], trials
    )
    shares = geometric.allocation(p)
    claimed = sum(
        (
            e
            for (name, level), e in shares.items()
            if level == "block" and geometric.is_person_table(CATALOG[name])
        ),
        Fraction(0),
    )
    claim = Claim(
        "pure", float(claimed), "every block-level table (person tables change)", p.neighbours
    )
    return Trials(claim, d, d_prime, shift=exact_d[0] - exact_dp[0])


def audit_psa(settings: Mapping[str, Any], trials: int, seed: int) -> Trials:
    """A tract of two one-person households of the same size (one matching group, b = 2); D′
    exchanges the two persons' attributes — the nearest datasets sharing the swap's invariants
    (two household records differ), so the claim is 2ε(p, 2)."""
    if settings.get("matching_level", "tract") != "tract":
        raise InputError(
            "audit psa: matching_level must be tract (each copy is its own matching group; "
            "wider groups would swap households between copies and make the trials dependent)"
        )
    chosen = {"rate": "0.5"} | dict(settings) | {"matching_level": "tract"}
    a = {"age": 25, "race": 1, "sex": 1}
    b = {"age": 70, "race": 2, "sex": 2}
    datasets = [
        (
            [_person(0, 0, 0, **a), _person(1, 1, 1, **b)],
            [_unit(0, 0, tenure=1), _unit(1, 1, tenure=3)],
        ),
        (
            [_person(0, 0, 0, **b), _person(1, 1, 1, **a)],
            [_unit(0, 0, tenure=3), _unit(1, 1, tenure=1)],
        ),
    ]  # a household record is its persons and its tenure: D′ exchanges both
    releases = [
        protection.run(
            "psa", replicate(pl.DataFrame(people), pl.DataFrame(units), trials), chosen, seed + i
        )
        for i, (people, units) in enumerate(datasets)
    ]
    d, d_prime = copy_matrix([block_outputs(r) for r in releases], trials)
    epsilon = releases[0].card.budget.epsilon
    assert epsilon is not None
    claim = Claim(
        "pure",
        2 * epsilon,
        "every block-level table of both blocks",
        "bounded, two household records differ",
    )
    return Trials(claim, d, d_prime)


def audit_safetab_h(settings: Mapping[str, Any], trials: int, seed: int) -> Trials:
    """A tract with one household; D′ adds a second household of the same detailed race (so
    the same population groups are present). Observed: every measured tract-level cell."""
    p = protection.get("safetab_h").parse(dict(settings))
    if p.t01001 != "exact" or p.thresholds != "production":
        raise InputError(
            "audit safetab_h: only t01001=exact and the production thresholds are audited (with "
            "a noisy T01001 or other thresholds the pair's variants may differ, and the claim "
            "would have to include T01001's budget)"
        )
    codes = {"race_code1": 1001, "hispanic_origin": 0} | {
        f"race_code{i}": None for i in range(2, 9)
    }
    first = [_person(0, 0, 0, **codes), _person(1, 0, 0, relationship=1, sex=2, **codes)]
    second = [_person(2, 1, 0, age=60, **codes)]
    vacant = {"unit_id": 1, "block": 0, "unit_type": 0, "occupied": False, "tenure": None}
    unit_sets = [[_unit(0, 0), vacant], [_unit(0, 0), _unit(1, 0, tenure=3)]]
    schema_overrides = {f"race_code{i}": pl.Int16 for i in range(1, 9)}
    releases = [
        protection.run(
            "safetab_h",
            replicate(
                pl.DataFrame(people, schema_overrides=schema_overrides), pl.DataFrame(units), trials
            ),
            dict(settings),
            seed + i,
        )
        for i, (people, units) in enumerate(zip((first, first + second), unit_sets, strict=True))
    ]
    tables = [r.group_tables for r in releases]
    assert all(t is not None for t in tables)  # SafeTab-H always publishes its group tables
    frames = [
        t.filter((pl.col("level") == "tract") & ~pl.col("derived")).select(
            copy=copy_of_geoid(pl.col("geoid")),
            key=pl.concat_str("iteration", "table", "cell", separator="|"),
            value=pl.col("count").cast(pl.Float64),
        )
        for t in tables
        if t is not None
    ]
    d, d_prime = copy_matrix(frames, trials)
    claimed = sum((2 * p.rho("TRACT", level) for level in (1, 2)), Fraction(0))
    claim = Claim(
        "zcdp",
        float(claimed),
        "T03 and T04 of every tract-level group",
        "add or remove one household",
    )
    return Trials(claim, d, d_prime)


def audit_topdown(settings: Mapping[str, Any], trials: int, seed: int) -> Trials:
    """TopDown's block-level noisy measurements of many blocks, each holding one person; in D′
    the person's record is changed to another cell of the same housing type (bounded)."""
    p = protection.get("topdown").parse({"product": "pl94"} | dict(settings))
    product, strategy = p.resolve()
    allowed = np.flatnonzero(~product.structural_zeros())
    a, b = int(allowed[0]), int(allowed[1])
    support = np.array([a, b])
    rows = topdown.block_query_rows(product, strategy, support)
    trials_d = topdown.measure_blocks(product, strategy, seed, rows, np.full(trials, a), 0)
    trials_dp = topdown.measure_blocks(product, strategy, seed, rows, np.full(trials, b), trials)
    columns = [product.query_matrix(q)[r][:, [a, b]].toarray() for q, r in rows.items()]
    shift = np.concatenate([c[:, 0] - c[:, 1] for c in columns]).astype(float)
    claimed = sum((strategy.rho_of(q, "block") for q in rows), Fraction(0))
    claim = Claim(
        "zcdp",
        float(claimed),
        "every block-level measurement",
        "bounded (one person record changed)",
    )
    return Trials(claim, trials_d, trials_dp, shift=shift)


AUDITS: dict[str, AuditPlan] = {
    "gaussian": audit_gaussian,
    "geometric": audit_geometric,
    "psa": audit_psa,
    "safetab_h": audit_safetab_h,
    "topdown": audit_topdown,
}
"""Mechanisms with a formal guarantee and how each is audited."""


def audit(
    mechanism: str,
    settings: Mapping[str, Any] | None = None,
    trials: int = 10_000,
    seed: int = 0,
    alpha: float = ALPHA,
) -> AuditResult:
    """Run ``mechanism`` ``trials`` times on each of two neighbouring datasets and bound its
    privacy loss from below (confidence 1 − ``alpha``), beside its card's claim."""
    if mechanism not in AUDITS:
        raise InputError(
            f"audit: no audit for mechanism {mechanism!r}; auditable: {', '.join(AUDITS)}"
        )
    if not 100 <= trials <= MAX_TRIALS:
        raise InputError(f"audit: --trials must be between 100 and {MAX_TRIALS:,}, got {trials}")
    if not 0 < alpha < 1:
        raise InputError(f"audit: alpha must lie in (0, 1), got {alpha}")
    observed = AUDITS[mechanism](settings or {}, trials, seed)
    return measure(mechanism, observed.claim, observed.d, observed.d_prime, alpha, observed.shift)

"""Privacy audit benchmark: lower bounds beside the cards' claims, and the audit's speed.

For every mechanism with a formal guarantee, ``sdclab.attacks.audit`` runs the mechanism on many
copies of a neighbouring pair at once and bounds the privacy loss from below (95% confidence).
Reported per mechanism: the claim, the bound, the exact loss where it is known in closed form, and
the wall time. The peer, measured in the same run, is the plain audit that runs the mechanism once
per trial (the same plans with one copy and a fresh seed per run): its time per trial, and the
speed-up of running the copies together. Last, a deliberately broken Gaussian mechanism (noise at
half its scale) must be flagged. Prints one JSON line.

    python benchmarks/audit.py [TRIALS_SCALE]      # 1 = the figures in docs/reliability.md
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import Any

import numpy as np

from sdclab import protection
from sdclab.attacks.audit import audit
from sdclab.core import noise
from sdclab.protection import gaussian

CASES: list[tuple[str, dict[str, str], int, float | None]] = [
    # mechanism, settings, trials, exact loss of the audited outputs (None if not closed form)
    ("gaussian", {"rho": "0.5"}, 100_000, 0.5),
    ("psa", {"rate": "0.5"}, 20_000, math.log(7)),
    ("psa", {"rate": "0.05"}, 50_000, math.log((1 - 0.05**2 / 2) / (0.05**2 / 2))),
    ("safetab_h", {}, 20_000, None),
    ("safetab_h", {"rho_detailed_local": "2"}, 20_000, None),
    ("topdown", {"product": "pl94"}, 5_000, None),
    ("geometric", {"epsilon": "8"}, 5_000, None),
    ("geometric", {"epsilon": "40"}, 5_000, None),
]
NAIVE_TRIALS = int(sys.argv[2]) if len(sys.argv) > 2 else 20


def naive_seconds_per_trial(mechanism: str, settings: dict[str, str]) -> float:
    """The plain audit: one run of the mechanism per trial (both datasets)."""
    start = time.perf_counter()
    plan = protection.get(mechanism).audit_plan
    assert plan is not None
    for seed in range(NAIVE_TRIALS):
        plan(settings, 1, 1000 + seed)
    return (time.perf_counter() - start) / NAIVE_TRIALS


def half_noise(counts: Any, p: gaussian.GaussianParameters, rng: np.random.Generator) -> Any:
    return np.asarray(counts) + noise.discrete_gaussian(p.noise_variance() / 4, counts.shape, rng)


def main() -> None:
    scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    rows = []
    for mechanism, settings, trials, exact in CASES:
        n = max(100, int(trials * scale))
        start = time.perf_counter()
        result = audit(mechanism, settings, trials=n, seed=2026)
        seconds = time.perf_counter() - start
        per_trial = naive_seconds_per_trial(mechanism, settings)
        rows.append(
            {
                "mechanism": mechanism,
                "settings": settings,
                "unit": result.unit,
                "claim": round(result.claim.value, 4),
                "lower_bound": round(result.lower_bound, 4),
                "exact_loss": None if exact is None else round(exact, 4),
                "violated": result.violated,
                "trials": n,
                "seconds": round(seconds, 2),
                "naive_seconds_per_trial": round(per_trial, 4),
                "speedup_vs_naive": round(per_trial * n / seconds, 1),
            }
        )
    original = gaussian.noisy_histogram
    gaussian.noisy_histogram = half_noise  # type: ignore[assignment]
    try:
        broken = audit("gaussian", {"rho": "0.5"}, trials=max(100, int(20_000 * scale)), seed=7)
    finally:
        gaussian.noisy_histogram = original  # type: ignore[assignment]
    print(
        json.dumps(
            {
                "benchmark": "audit",
                "confidence": 0.95,
                "audits": rows,
                "all_within_claims": not any(r["violated"] for r in rows),
                "broken_gaussian_half_noise": {
                    "claim_rho": broken.claim.value,
                    "true_rho": 4 * broken.claim.value,
                    "lower_bound": round(broken.lower_bound, 4),
                    "flagged": broken.violated,
                },
            }
        )
    )


if __name__ == "__main__":
    main()

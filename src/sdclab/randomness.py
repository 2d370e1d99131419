"""Random streams (DESIGN.md §7): OS entropy by default, a seed for reproducible experiments."""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np


def make_rng(seed: int | None) -> np.random.Generator:
    """A PCG64 generator from ``seed``, or from 128 bits of OS entropy when ``seed`` is None."""
    entropy = secrets.randbits(128) if seed is None else seed
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))


def randomness_record(seed: int | None, *, uses_randomness: bool = True) -> dict[str, Any]:
    """What ``release.json`` says about the randomness behind a release."""
    if not uses_randomness:
        return {
            "source": "none (deterministic)",
            "fit_for_publication": False,
            "note": "an exact tabulation is never fit for publication",
        }
    if seed is None:
        return {"source": "os-entropy", "fit_for_publication": True}
    return {
        "source": "seed",
        "seed": seed,
        "fit_for_publication": False,
        "note": "seeded runs are reproducible and therefore not fit for publication",
    }

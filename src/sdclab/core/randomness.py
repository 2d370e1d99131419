"""Random streams: OS entropy by default, a seed for reproducible experiments.

A release records where its randomness came from and whether it is fit for publication. The
record states facts, not intentions: whether the mechanism drew from the stream it was given is
read off the stream's state (:func:`stream_position`), and a mechanism whose protection rests on
something other than the stream (the input's record keys, no randomness at all) says so itself.
"""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np

MAX_SEED = 2**128 - 1
"""Seeds are non-negative integers below 2¹²⁸ (what a SeedSequence takes as one entropy word)."""


def check_seed(seed: int | None, what: str = "--seed") -> None:
    """A seed is a whole number in 0..2¹²⁸ − 1 (or None for OS entropy)."""
    from sdclab.core.errors import InputError

    if seed is None:
        return
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise InputError(f"{what} {seed}: expected a whole number from 0 to 2^128 - 1")


def make_rng(seed: int | None) -> np.random.Generator:
    """A PCG64 generator from ``seed``, or from 128 bits of OS entropy when ``seed`` is None."""
    entropy = secrets.randbits(128) if seed is None else seed
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))


def stream_position(rng: np.random.Generator) -> tuple[Any, int]:
    """Where a stream stands: it moves with every draw and every spawned child stream."""
    return rng.bit_generator.state, rng.bit_generator.seed_seq.n_children_spawned  # type: ignore[attr-defined]


def randomness_record(seed: int | None) -> dict[str, Any]:
    """What ``release.json`` says of a release drawn from the stream of ``seed`` (None: entropy)."""
    if seed is None:
        return {"source": "os-entropy", "fit_for_publication": True}
    return {
        "source": "seed",
        "seed": seed,
        "fit_for_publication": False,
        "note": "seeded runs are reproducible and therefore not fit for publication",
    }


DREW = "drew_from_stream"
"""Key of the randomness record: whether the mechanism drew from the stream it was given (a
boolean, read off the stream's state when the release was made)."""


def exact_record() -> dict[str, Any]:
    """The record of an exact tabulation: nothing drawn, and nothing protected."""
    return {
        "source": "none (deterministic)",
        DREW: False,
        "fit_for_publication": False,
        "note": "an exact tabulation is never fit for publication",
    }


def deterministic_record(note: str) -> dict[str, Any]:
    """The record of a protection that draws no random numbers (a seed has no effect on it)."""
    return {"source": "none (deterministic)", "fit_for_publication": True, "note": note}


def release_randomness(own: dict[str, Any], seed: int | None, drew: bool) -> dict[str, Any]:
    """The record of a release: the mechanism's ``own`` record (empty: it relies on the stream
    alone) combined with the stream's, if the mechanism ``drew`` from it.

    A release is fit for publication only if every source of its randomness is. The record
    says whether the mechanism drew (:data:`DREW`), so that no reader parses its source."""
    if not drew:
        record = own or deterministic_record("the mechanism drew no random numbers")
        return {**record, DREW: False}
    stream = randomness_record(seed)
    if not own:
        return {**stream, DREW: True}
    combined = {
        **stream,
        "source": f"{own['source']} and {stream['source']}",
        "fit_for_publication": bool(own["fit_for_publication"] and stream["fit_for_publication"]),
    }
    notes = [n for n in (own.get("note"), stream.get("note")) if n]
    if notes:
        combined["note"] = "; ".join(notes)
    return {**combined, DREW: True}


def unprotected_record(record: dict[str, Any], reason: str) -> dict[str, Any]:
    """``record`` of a release that does not protect: not fit for publication, whatever its
    randomness, and the note says why."""
    if record.get("fit_for_publication") is False and reason in record.get("note", ""):
        return record
    notes = [n for n in (record.get("note"), f"the release does not protect: {reason}") if n]
    return {**record, "fit_for_publication": False, "note": "; ".join(notes)}


def drew_from_stream(record: dict[str, Any]) -> bool:
    """Whether a release's randomness record says it drew from its seeded or OS-entropy
    stream (:data:`DREW` of :func:`release_randomness`): a release that did not is the same
    whatever the seed. A record written before it carried the flag says so by its source
    alone: the stream's source, or another joined to it by "and"."""
    flag = record.get(DREW)
    if isinstance(flag, bool):
        return flag
    source = str(record.get("source", ""))
    return any(source == s or source.endswith(f" and {s}") for s in ("seed", "os-entropy"))

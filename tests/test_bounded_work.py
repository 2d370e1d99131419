"""Work is bounded on genuine inputs: a setting that would make a run allocate without bound, or
grow for ever, is refused in one line before any work, or its consumer does not scale with it."""

from __future__ import annotations

import pytest

import sdclab
from sdclab.core.errors import InputError


def test_a_huge_cell_key_threshold_is_reconstructed_without_scaling_with_it(tiny_population):
    # the attacker's preimage of a published 0 used to enumerate every count below the threshold
    release = sdclab.protect(tiny_population, "cellkey", seed=1, threshold=10**9)
    result = sdclab.reconstruct(release, workers=1)  # allocated 7.45 GiB
    assert result.n_persons == 0  # every count is below the threshold: nothing is shown
    with pytest.raises(InputError, match=r"threshold: expected .* below 9007199254740992"):
        sdclab.protect(tiny_population, "cellkey", seed=1, threshold=2**53)


def test_reconstruction_draws_are_bounded(tiny_population):
    release = sdclab.tabulate(tiny_population)
    with pytest.raises(InputError, match="draws 1000000000: expected .* from 0 to 100"):
        sdclab.reconstruct(release, draws=10**9)

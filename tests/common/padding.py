"""For the burn-in papers' learning tests: a batch whose games all end before its items do, and
the check that the learner's cut of that padding changes nothing."""

import numpy as np
import pytest
import tensorflow as tf

from common.runtime import acting
from common.replay import replay


def games_end_early(batch: dict, padded: int) -> dict:
    """`batch` (time-major items of a burn-in learner, its stored core state batch-major) with
    each item's last `padded` positions made padding the way `writers.BurnInSequenceWriter` pads:
    every step field zero, the mask 0. Each item's game then ends at its last real step, and the
    positions after it are padding in every item: what `replay.trim_trailing_padding` cuts."""

    def pad(x):
        return tf.concat([x[:-padded], tf.zeros_like(x[-padded:])], 0)

    return {
        key: value if key == acting.CORE_STATE else tf.nest.map_structure(pad, value)
        for key, value in batch.items()
    }


def check_the_cut_changes_nothing(train, batch: dict, burn_in: int, length: int) -> dict:
    """Makes every item of `batch` end its game 4 positions early, cuts the 3 positions after
    the new bootstrap position (`replay.trim_trailing_padding`, as `--trim_padding` does), and
    checks that `train(batch) -> (stats, weights)`, one train step of fresh models, gives the
    same stats (losses, gradient norms) and weights on both. Returns the whole batch's stats."""
    whole = games_end_early(batch, padded=4)
    trimmed = replay.trim_trailing_padding(whole, burn_in, length, quantum=1)
    assert trimmed[replay.MASK].shape[0] == burn_in + length + 1 - 3
    (stats, weights), (cut_stats, cut_weights) = train(whole), train(trimmed)
    assert stats.keys() == cut_stats.keys()
    for key, value in stats.items():
        assert float(cut_stats[key]) == pytest.approx(float(value), rel=1e-5, abs=1e-7), key
    for a, b in zip(weights, cut_weights, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-7)
    return stats

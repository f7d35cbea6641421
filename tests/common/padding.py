"""For the burn-in papers' learning tests: a batch whose games all end before its items do."""

import tensorflow as tf

from common import acting


def games_end_early(batch: dict, padded: int) -> dict:
    """`batch` (time-major items of a burn-in learner, its stored core state batch-major) with
    each item's last `padded` positions made padding the way `replay.BurnInSequenceWriter` pads:
    every step field zero, the mask 0. Each item's game then ends at its last real step, and the
    positions after it are padding in every item: what `replay.trim_trailing_padding` cuts."""

    def pad(x):
        return tf.concat([x[:-padded], tf.zeros_like(x[-padded:])], 0)

    return {
        key: value if key == acting.CORE_STATE else tf.nest.map_structure(pad, value)
        for key, value in batch.items()
    }

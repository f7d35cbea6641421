"""Instruments that say why an agent stalls: one set of learner scalars every agent logs.

Every train step returns these among its stats (averaged over the steps of each log line by
`common.runtime.learning`, so a 0/1 per update becomes a share):

- `optimizer/grad_norm`: the gradients' global norm before the clip;
- `optimizer/grad_norm_clipped`: after it;
- `optimizer/clipped`: 1 where the clip rescaled this update (its mean: the share clipped);
- `optimizer/mean_step`: the mean |Δθ| the update moved each parameter;
- `policy/entropy`: the learner policy's entropy per step, in nats;
- `value/error`: the mean squared gap between the critic's estimate and its target;
- `policy/abs_log_rho`: the mean |log π(a|x) / μ(a|x)| on the batch's actions (how far the
  learner's policy has moved from the one that acted);

and the bandit papers log each game's chosen arms as `behaviour/<name>` (`common.runtime.runlog`). A
paper with several networks (LBC's population) suffixes each network's with `_<i>`.

`common.runtime.run_summary` writes a finished run's summary of them.
"""

from typing import Sequence

import numpy as np
import tensorflow as tf

GRAD_NORM = "optimizer/grad_norm"
GRAD_NORM_CLIPPED = "optimizer/grad_norm_clipped"
CLIPPED = "optimizer/clipped"
MEAN_STEP = "optimizer/mean_step"
ENTROPY = "policy/entropy"
VALUE_ERROR = "value/error"
ABS_LOG_RHO = "policy/abs_log_rho"
LEARNER_INSTRUMENTS = (
    GRAD_NORM,
    GRAD_NORM_CLIPPED,
    CLIPPED,
    MEAN_STEP,
    ENTROPY,
    VALUE_ERROR,
    ABS_LOG_RHO,
)
BEHAVIOUR_PREFIX = "behaviour/"


def clip_by_global_norm(
    gradients: Sequence[tf.Tensor | None], max_norm: float | None
) -> tuple[list, dict[str, tf.Tensor]]:
    """The gradients rescaled together to a global norm of at most `max_norm` (None or ≤ 0: left
    as they are) and the clip's instruments: the norm before and after, and whether it clipped."""
    rescaled = list(gradients)
    norm = tf.linalg.global_norm([g for g in rescaled if g is not None])
    if max_norm is not None and max_norm > 0:
        rescaled, _ = tf.clip_by_global_norm(rescaled, max_norm, use_norm=norm)
        clipped = tf.cast(norm > max_norm, tf.float32)
        after = tf.minimum(norm, tf.cast(max_norm, norm.dtype))
    else:
        clipped, after = tf.zeros([], tf.float32), norm
    return rescaled, {GRAD_NORM: norm, GRAD_NORM_CLIPPED: after, CLIPPED: clipped}


def snapshot(variables: Sequence[tf.Variable]) -> list[tf.Tensor]:
    """The variables' values now, to measure an update by (`mean_step`)."""
    return [tf.identity(v.read_value()) for v in variables]


def mean_step(before: Sequence[tf.Tensor], variables: Sequence[tf.Variable]) -> dict:
    """{`optimizer/mean_step`: the mean over every parameter of |θ_after − θ_before|}."""
    total = tf.add_n([tf.reduce_sum(tf.abs(v - b)) for v, b in zip(variables, before)])
    count = sum(int(np.prod(v.shape)) for v in variables)
    return {MEAN_STEP: total / count}

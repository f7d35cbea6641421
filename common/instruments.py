"""Instruments that say why an agent stalls: one set of learner scalars every agent logs, and the
run's summary of them.

Every train step returns these among its stats (averaged over the steps of each log line by
`common.learning`, so a 0/1 per update becomes a share):

- `optimizer/grad_norm`: the gradients' global norm before the clip;
- `optimizer/grad_norm_clipped`: after it;
- `optimizer/clipped`: 1 where the clip rescaled this update (its mean: the share clipped);
- `optimizer/mean_step`: the mean |Δθ| the update moved each parameter;
- `policy/entropy`: the learner policy's entropy per step, in nats;
- `value/error`: the mean squared gap between the critic's estimate and its target;
- `policy/abs_log_rho`: the mean |log π(a|x) / μ(a|x)| on the batch's actions (how far the
  learner's policy has moved from the one that acted);

and the bandit papers log each game's chosen arms as `behaviour/<name>` (`common.runlog`). A
paper with several networks (LBC's population) suffixes each network's with `_<i>`.

At the end of a run the learner writes `summary.json` (`write_summary`): every instrument's mean
over the last fifth of the run's frames, read back from its TensorBoard events, so a resumed run's
summary is of the run it finished.
"""

import json
import os
import re
from typing import Sequence

import numpy as np
import tensorflow as tf

from common import runlog

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
SUMMARY_JSON = "summary.json"
# choice: the last fifth of a run's frames: late enough to describe where the run ended up, long
# enough (hundreds of log lines on MinAtar) that one noisy line does not set it.
SUMMARY_TAIL = 0.2
_SUFFIX = re.compile(r"_\d+$")


def clip_by_global_norm(
    gradients: Sequence[tf.Tensor | None], max_norm: float | None
) -> tuple[list, dict[str, tf.Tensor]]:
    """The gradients rescaled together to a global norm of at most `max_norm` (None or ≤ 0: left
    as they are) and the clip's instruments: the norm before and after, and whether it clipped."""
    gradients = list(gradients)
    norm = tf.linalg.global_norm([g for g in gradients if g is not None])
    if max_norm is not None and max_norm > 0:
        gradients, _ = tf.clip_by_global_norm(gradients, max_norm, use_norm=norm)
        clipped = tf.cast(norm > max_norm, tf.float32)
        after = tf.minimum(norm, tf.cast(max_norm, norm.dtype))
    else:
        clipped, after = tf.zeros([], tf.float32), norm
    return gradients, {GRAD_NORM: norm, GRAD_NORM_CLIPPED: after, CLIPPED: clipped}


def snapshot(variables: Sequence[tf.Variable]) -> list[tf.Tensor]:
    """The variables' values now, to measure an update by (`mean_step`)."""
    return [tf.identity(v.read_value()) for v in variables]


def mean_step(before: Sequence[tf.Tensor], variables: Sequence[tf.Variable]) -> dict:
    """{`optimizer/mean_step`: the mean over every parameter of |θ_after − θ_before|}."""
    total = tf.add_n([tf.reduce_sum(tf.abs(v - b)) for v, b in zip(variables, before)])
    count = sum(int(np.prod(v.shape)) for v in variables)
    return {MEAN_STEP: total / count}


def is_instrument(tag: str) -> bool:
    """A learner instrument (possibly suffixed with a network's index) or a behaviour scalar."""
    return tag.startswith(BEHAVIOUR_PREFIX) or _SUFFIX.sub("", tag) in LEARNER_INSTRUMENTS


def summarize(logdir: str, tail: float = SUMMARY_TAIL) -> dict[str, float]:
    """Every instrument's mean over its points in the last `tail` of its frames (the run's
    TensorBoard events under `logdir`): {tag: mean}, tags sorted. Each tag's own last point
    ends its window: a game's behaviour is logged at the frames the actors had produced, which
    run ahead of the learner's."""
    summary = {}
    for tag, points in sorted(runlog.read_scalars(logdir).items()):
        if is_instrument(tag) and points:
            start = (1.0 - tail) * max(step for step, _ in points)
            summary[tag] = float(np.mean([value for step, value in points if step >= start]))
    return summary


def write_summary(logdir: str, frames: int, mean_recent_return: float) -> dict:
    """Writes `<logdir>/summary.json`: the frames trained, the mean return of the recent games and
    the instruments (`summarize`); returns what it wrote. Written whole or not at all."""
    path = os.path.join(logdir, SUMMARY_JSON)
    content = {
        "frames": int(frames),
        "mean_recent_return": (
            float(mean_recent_return) if np.isfinite(mean_recent_return) else None
        ),
        "instruments_tail": SUMMARY_TAIL,
        "instruments": summarize(logdir),
    }
    temporary = path + ".tmp"
    with open(temporary, "w") as f:
        json.dump(content, f, indent=1)
        f.write("\n")
    os.replace(temporary, path)
    return content


_DESCRIBED = (
    (GRAD_NORM, "grad norm {:.3g}"),
    (CLIPPED, "clipped {:.0%}"),
    (MEAN_STEP, "mean step {:.2g}"),
    (ENTROPY, "entropy {:.3g}"),
    (VALUE_ERROR, "value error {:.3g}"),
    (ABS_LOG_RHO, "|log pi/mu| {:.3g}"),
)


def describe(summary: dict) -> str:
    """One console line of a summary's instruments (a network-suffixed instrument: the mean over
    the networks)."""
    instruments = summary["instruments"]
    parts = []
    for tag, text in _DESCRIBED:
        values = [v for t, v in instruments.items() if _SUFFIX.sub("", t) == tag]
        if values:
            parts.append(text.format(float(np.mean(values))))
    tail = summary["instruments_tail"]
    return f"instruments over the last {tail:.0%} of frames: " + (
        ", ".join(parts) if parts else "none logged"
    )


def read_summary(logdir: str) -> dict | None:
    """A run's `summary.json`, or None before it has finished."""
    path = os.path.join(logdir, SUMMARY_JSON)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)

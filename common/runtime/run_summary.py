"""A finished run's summary of its instruments (`common.equations.instruments`): `summary.json` and
one console line.

At the end of a run the learner writes `<logdir>/summary.json` (`write_summary`): the frames
trained, the mean return of the recent games, and every instrument's mean over the last fifth of
its frames, read back from the run's TensorBoard events, so a resumed run's summary is of the run
it finished.
"""

import json
import os
import re

import numpy as np

from common.runtime import runlog
from common.equations.instruments import (
    ABS_LOG_RHO,
    BEHAVIOUR_PREFIX,
    CLIPPED,
    ENTROPY,
    GRAD_NORM,
    LEARNER_INSTRUMENTS,
    MEAN_STEP,
    VALUE_ERROR,
)

SUMMARY_JSON = "summary.json"
# choice: the last fifth of a run's frames: late enough to describe where the run ended up, long
# enough (hundreds of log lines on MinAtar) that one noisy line does not set it.
SUMMARY_TAIL = 0.2
_SUFFIX = re.compile(r"_\d+$")  # a network's index (LBC's population)


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

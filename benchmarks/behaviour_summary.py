"""How the behaviour of runs moved while they trained: each behaviour and policy scalar a run wrote
to TensorBoard, averaged over each quarter of its frames, as one markdown table.

    python -m benchmarks.behaviour_summary runs/minatar/dice/breakout/seed0 \
        runs/minatar/lbc/breakout/seed0

DiCE, GDI and LBC log, for every training game, the behaviour parameters their bandits chose
(`behaviour/eta`, `behaviour/epsilon`, `behaviour/omega_0`, ...) and the behaviour's mean entropy
per step (`behaviour/entropy`), at the actors' frames; their learners log the entropy of the
trained policies (`policy/entropy`, `policy/entropy_1..3`) at the learner's frames. A learning
curve that stalls says little by itself: these say whether the behaviour collapsed onto one
action, stayed near uniform (ln 6 = 1.79 nats on MinAtar's six actions), or whether the bandits
settled on a corner of their range. Quarter k of a tag holds its points at frames in
(k F / 4, (k + 1) F / 4], F the tag's last frame count (the first quarter includes frame 0); a
quarter with no point is left blank. Every tag that starts with one of --prefixes is listed.
"""

from collections.abc import Mapping, Sequence

import numpy as np
from absl import app, flags

QUARTERS = 4
DEFAULT_PREFIXES = ("behaviour/", "policy/entropy")

FLAGS = flags.FLAGS
flags.DEFINE_list(
    "prefixes", list(DEFAULT_PREFIXES), "The TensorBoard tags to summarise, by prefix."
)


def quarter_means(points: Sequence[tuple[float, float]]) -> list[float]:
    """The mean value of `points` [(frames, value), ...] in each quarter of their frames (module
    docstring); nan for a quarter without a point."""
    frames = np.array([p[0] for p in points], dtype=float)
    values = np.array([p[1] for p in points], dtype=float)
    edges = frames.max() * np.arange(1, QUARTERS) / QUARTERS
    quarter = np.searchsorted(edges, frames, side="left")  # (edge_k, edge_k+1] -> k + 1
    return [
        float(values[quarter == k].mean()) if np.any(quarter == k) else float("nan")
        for k in range(QUARTERS)
    ]


def table(runs: Mapping[str, Mapping[str, Sequence[tuple[float, float]]]], prefixes) -> str:
    """A markdown table of every run's tags under `prefixes`: quarter means, points, last frame."""
    lines = [
        "| run | tag | 1st quarter | 2nd | 3rd | 4th | points | to frames |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run, scalars in runs.items():
        tags = sorted(t for t in scalars if t.startswith(tuple(prefixes)) and scalars[t])
        for tag in tags:
            means = quarter_means(scalars[tag])
            cells = ["" if np.isnan(m) else f"{m:.3f}" for m in means]
            last = max(frames for frames, _ in scalars[tag])
            lines.append(
                f"| {run} | `{tag}` | {' | '.join(cells)} | {len(scalars[tag]):,} | {last:,.0f} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str]) -> None:
    from common import runlog

    logdirs = argv[1:]
    if not logdirs:
        raise app.UsageError("name one or more run directories (their --logdir)")
    runs = {}
    for logdir in logdirs:
        scalars = runlog.read_scalars(logdir)
        if not any(t.startswith(tuple(FLAGS.prefixes)) and scalars[t] for t in scalars):
            raise app.UsageError(f"{logdir}: no TensorBoard tag starts with {FLAGS.prefixes}")
        runs[logdir] = scalars
    print(table(runs, FLAGS.prefixes))


if __name__ == "__main__":
    app.run(main)

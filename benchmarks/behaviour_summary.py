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

With `--returns_by=eta --edges=0,1.2,3.8,9.6,22,50`, a second table says what a behaviour
parameter bought: the games of each run's last quarter (ended past 3F/4, F the last game's
frames), split by the parameter each was played with into bins [edges[k], edges[k+1]) (the last
bin closed), each bin's mean return and its share of the quarter's games (a game outside every
bin counts in the total only). A run that draws the parameter uniformly (DiCE's `random`) shows
how the return depends on it at that point of training; a run whose bandits choose it shows
where they settled (docs/results/ablations_minatar/summary.md, DiCE).
"""

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
from absl import app, flags

from common.runtime import runlog

QUARTERS = 4
DEFAULT_PREFIXES = ("behaviour/", "policy/entropy")

FLAGS = flags.FLAGS


def define_flags() -> None:
    """This tool's flags, defined when it runs (not when it is imported)."""
    flags.DEFINE_list(
        "prefixes", list(DEFAULT_PREFIXES), "The TensorBoard tags to summarise, by prefix."
    )
    flags.DEFINE_string(
        "returns_by",
        None,
        "A behaviour parameter (eta, epsilon, ...): the last quarter's returns by it.",
    )
    flags.DEFINE_list("edges", None, "--returns_by's bin edges, increasing (at least two numbers).")


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


def returns_by(
    returns: Sequence[tuple[float, float]],
    params: Sequence[tuple[float, float]],
    edges: Sequence[float],
) -> tuple[int, list[tuple[float, float]]]:
    """The last quarter's games (module docstring) split by the behaviour parameter they were
    played with: (games in the quarter, [(mean return, share of those games) per bin]), mean nan
    for an empty bin. `returns` and `params` are one game's points each, in the order the games
    were logged ((frames, return) and (frames, parameter))."""
    if len(returns) != len(params) or any(r[0] != p[0] for r, p in zip(returns, params)):
        raise ValueError("the returns and the behaviour parameter are not logged game by game")
    frames = np.array([r[0] for r in returns], dtype=float)
    last = frames > frames.max() * (QUARTERS - 1) / QUARTERS
    value = np.array([r[1] for r in returns], dtype=float)[last]
    param = np.array([p[1] for p in params], dtype=float)[last]
    cells = []
    for k, (low, high) in enumerate(itertools.pairwise(edges)):
        closed = k == len(edges) - 2
        inside = (param >= low) & ((param <= high) if closed else (param < high))
        mean = float(value[inside].mean()) if inside.any() else float("nan")
        cells.append((mean, float(inside.mean())))
    return int(last.sum()), cells


def returns_table(
    runs: Mapping[str, Mapping[str, Sequence[tuple[float, float]]]],
    name: str,
    edges: Sequence[float],
) -> str:
    """A markdown table of `returns_by` for every run: mean return (share of games) per bin."""
    bins = [f"{name} {low:g}-{high:g}" for low, high in itertools.pairwise(edges)]
    lines = [
        f"| run | last quarter's games | {' | '.join(bins)} |",
        "|---|---|" + "---|" * len(bins),
    ]
    tag = f"{runlog.BEHAVIOUR_TAG_PREFIX}{name}"
    for run, scalars in runs.items():
        games, cells = returns_by(scalars[runlog.GAME_TAGS[0]], scalars[tag], edges)
        text = ["" if np.isnan(mean) else f"{mean:.2f} ({share:.0%})" for mean, share in cells]
        lines.append(f"| {run} | {games:,} | {' | '.join(text)} |")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> None:
    logdirs = argv[1:]
    if not logdirs:
        raise app.UsageError("name one or more run directories (their --logdir)")
    if FLAGS.edges is not None and not FLAGS.returns_by:
        raise app.UsageError("--edges bins --returns_by's parameter: name it too")
    edges = bin_edges(FLAGS.edges) if FLAGS.returns_by else None
    runs = {}
    for logdir in logdirs:
        scalars = runlog.read_scalars(logdir)
        if not any(t.startswith(tuple(FLAGS.prefixes)) and scalars[t] for t in scalars):
            raise app.UsageError(f"{logdir}: no TensorBoard tag starts with {FLAGS.prefixes}")
        if FLAGS.returns_by:
            tag = f"{runlog.BEHAVIOUR_TAG_PREFIX}{FLAGS.returns_by}"
            if not scalars.get(tag):
                raise app.UsageError(f"--returns_by={FLAGS.returns_by}: {logdir} has no `{tag}`")
        runs[logdir] = scalars
    print(table(runs, FLAGS.prefixes))
    if edges is not None:  # --returns_by given
        print()
        print(returns_table(runs, FLAGS.returns_by, edges))


def bin_edges(text: Sequence[str] | None) -> list[float]:
    """--edges as numbers, checked: at least two, increasing."""
    try:
        edges = [float(x) for x in text or ()]
    except ValueError:
        edges = []
    if len(edges) < 2 or any(b <= a for a, b in itertools.pairwise(edges)):
        raise app.UsageError(f"--edges={','.join(text or ())}: give two or more increasing numbers")
    return edges


if __name__ == "__main__":
    define_flags()
    app.run(main)

"""Learning benchmarks of any paper: runs `python -m <agent>.main` and reads its episodes.csv.

    python -m benchmarks.learning --agent=impala --task=cartpole      # frames / time to mean 450
    python -m benchmarks.learning --agent=lbc --task=cartpole --total_frames=400000
    python -m benchmarks.learning --agent=impala --task=pong --total_frames=10000000
    python -m benchmarks.learning --agent=reactor --task=breakout --total_frames=1500000

cartpole: trains CartPole with the agent's CartPole defaults (<agent>/config.py) and stops as
  soon as the mean return of the last 100 training episodes reaches --target (450), printing the
  frames and wall time it took (or the best mean if --total_frames ran out first).
pong, breakout: train that Atari game with the paper's defaults for --total_frames (a run
  stopped with Ctrl-C checkpoints; the same command resumes it).
Both plot the return curve (training episodes and the trailing mean, against frames) to
<logdir>/returns.png, with the evaluator's rounds (their mean, at the frames the evaluated
learner step stands for) when the run evaluates, and print the first round whose mean reached
--target. Extra flags after `--` go to the agent's main (e.g. `-- --variant=h3`).
"""

import csv
import os
import subprocess
import sys
import time

import numpy as np
from absl import app
from absl import flags
from matplotlib.figure import Figure

ATARI_TASKS = {"pong": "Pong", "breakout": "Breakout"}
_ATARI_WINDOW = 20  # choice: Atari games are long, so a shorter trailing mean
FLAGS = flags.FLAGS


def define_flags() -> None:
    """This tool's flags, defined when it runs (not when it is imported)."""
    flags.DEFINE_enum(
        "agent", "impala", ["impala", "reactor", "dice", "gdi", "lbc"], "Paper whose main trains."
    )
    flags.DEFINE_enum("task", "cartpole", ["cartpole", *ATARI_TASKS], "Which benchmark.")
    flags.DEFINE_float("target", 450.0, "CartPole: mean return of the last 100 episodes.")
    flags.DEFINE_integer("total_frames", None, "Frame budget (default: cartpole 1M, Atari 10M).")
    flags.DEFINE_bool("plot_only", False, "Only plot the run in --logdir (e.g. one in progress).")
    flags.DEFINE_string("logdir", None, "Run directory (default runs/bench_<agent>_<task>).")


_WINDOW = 100  # CartPole's usual "solved" window


def read_episodes(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(frames, returns, wall_time) of the rows written so far."""
    if not os.path.exists(path):
        return np.zeros(0), np.zeros(0), np.zeros(0)
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("wall_time")]
    column = lambda name: np.array([float(r[name]) for r in rows])
    return column("frames"), column("episode_return"), column("wall_time")


def read_eval_rounds(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(frames, mean return, wall time) of each evaluation round in eval.csv: consecutive rows
    with the same frames, logged together (two rounds may evaluate the same learner step; a
    round's rows share their wall time, within milliseconds in runs before that was so)."""
    frames, returns, wall = read_episodes(path)
    new_round = np.ones(len(frames), bool)
    new_round[1:] = (frames[1:] != frames[:-1]) | (np.abs(wall[1:] - wall[:-1]) > 1.0)
    starts = np.flatnonzero(new_round)
    ends = np.append(starts[1:], len(frames))
    means = np.array([returns[a:b].mean() for a, b in zip(starts, ends)])
    return frames[starts], means, wall[starts]


def trailing_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last `window` values at every index (of all values before `window`)."""
    cumulative = np.concatenate([[0.0], np.cumsum(values)])
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(ends - window, 0)
    return (cumulative[ends] - cumulative[starts]) / (ends - starts)


def start(env: str, logdir: str, total_frames: int, extra: list[str]) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        f"{FLAGS.agent}.main",
        f"--env={env}",
        f"--logdir={logdir}",
        f"--total_frames={total_frames}",
        *extra,
    ]
    print(" ".join(command), flush=True)
    return subprocess.Popen(command)


def cartpole(logdir: str, total_frames: int, extra: list[str]) -> None:
    process = start("CartPole", logdir, total_frames, extra)
    path = os.path.join(logdir, "episodes.csv")
    reached = None
    while process.poll() is None and reached is None:
        time.sleep(2.0)
        frames, returns, wall = read_episodes(path)
        if len(returns) >= _WINDOW:
            means = trailing_mean(returns, _WINDOW)
            hits = np.flatnonzero(means[_WINDOW - 1 :] >= FLAGS.target)
            if hits.size:
                i = hits[0] + _WINDOW - 1
                reached = (frames[i], wall[i])
    if process.poll() is None:
        process.terminate()  # SIGTERM: the launcher checkpoints and shuts down
        process.wait(60)
    frames, returns, wall = read_episodes(path)
    if reached:
        print(
            f"\nCartPole: mean return of the last {_WINDOW} episodes >= {FLAGS.target:.0f} "
            f"after {reached[0]:,.0f} frames, {reached[1]:.0f} s of training"
        )
    else:
        best = trailing_mean(returns, _WINDOW).max() if len(returns) else float("nan")
        print(f"\nCartPole: target not reached in {total_frames:,} frames (best mean {best:.1f})")
    plot_returns(logdir, "CartPole", _WINDOW)


def atari(env: str, logdir: str, total_frames: int, extra: list[str]) -> None:
    process = start(env, logdir, total_frames, extra)
    try:
        process.wait()
    except KeyboardInterrupt:
        process.terminate()
        process.wait(60)
    plot_returns(logdir, env, _ATARI_WINDOW)


def plot_returns(logdir: str, env: str, window: int) -> None:
    """The return curve of the run in `logdir` (finished or still going) -> returns.png."""
    frames, returns, wall = read_episodes(os.path.join(logdir, "episodes.csv"))
    if not len(returns):
        print("no finished episodes")
        return
    figure = Figure(figsize=(7, 4))
    axes = figure.subplots()
    axes.plot(frames, returns, ".", alpha=0.2, label="episode")
    axes.plot(frames, trailing_mean(returns, window), label=f"mean of last {window}")
    eval_frames, eval_means, eval_wall = read_eval_rounds(os.path.join(logdir, "eval.csv"))
    if len(eval_means):
        axes.plot(eval_frames, eval_means, "o-", label="evaluation round mean")
    axes.set(
        xlabel="environment frames",
        ylabel="episode return (raw score)",
        title=f"{FLAGS.agent}, {env}, {wall[-1] / 3600:.2f} h",
    )
    axes.legend()
    path = os.path.join(logdir, "returns.png")
    figure.savefig(path, dpi=100, bbox_inches="tight")
    print(
        f"\n{env}: {len(returns)} episodes, {frames[-1]:,.0f} frames, {wall[-1]:.0f} s; last "
        f"{window} mean {returns[-window:].mean():.1f}; curve in {path}"
    )
    if len(eval_means):
        hits = np.flatnonzero(eval_means >= FLAGS.target)
        first = (
            f"first >= {FLAGS.target:.0f} at {eval_frames[hits[0]]:,.0f} frames "
            f"({eval_wall[hits[0]]:.0f} s)"
            if hits.size
            else f"none >= {FLAGS.target:.0f}"
        )
        print(
            f"{env} evaluation: {len(eval_means)} rounds, {first}; last round mean "
            f"{eval_means[-1]:.1f}"
        )


def main(argv):
    extra = argv[1:]
    task = FLAGS.task
    logdir = FLAGS.logdir or os.path.join("runs", f"bench_{FLAGS.agent}_{task}")
    if task == "cartpole":
        if FLAGS.plot_only:
            plot_returns(logdir, "CartPole", _WINDOW)
        else:
            cartpole(logdir, FLAGS.total_frames or 1_000_000, extra)
    elif FLAGS.plot_only:
        plot_returns(logdir, ATARI_TASKS[task], _ATARI_WINDOW)
    else:
        atari(ATARI_TASKS[task], logdir, FLAGS.total_frames or 10_000_000, extra)


if __name__ == "__main__":
    define_flags()
    app.run(main)

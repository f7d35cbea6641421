"""IMPALA's multi-task agent on MinAtar's five games against one expert per game, at equal frames
per game (§5.3: Table 3 and Fig. 5 draw DMLab-30's this way).

    python -m benchmarks.multitask --seeds=200,201,202,203,204 --frames_per_game=5e6 \\
        --experts=docs/results/minatar_final/curves.csv --logdir=runs/multitask
    python -m benchmarks.multitask --report_only --logdir=runs/multitask --experts=...

Runs. One run per seed, resumable as the grid's (the same command skips the runs that reached
their budget and resumes the others from their checkpoints):

    python -m impala.main --env=<the five games> --envs_per_actor=130 --seed=<S>
        --total_frames=<5 x frames_per_game> --logdir=<logdir>/multitask/seed<S> <after -->

one network for the five games, the game not given to it (common.environments.multitask), at
IMPALA's MinAtar settings. Every actor's 130 environments are 26 per game (the experts act on
128: 130 is the nearest count that five games divide), so each game gets exactly a fifth of the
frames, and a game's frames are a fifth of the run's, read off episodes.csv's frames.

Experts. Each game's expert is the grid's IMPALA run on that game (benchmarks.minatar, the same
seeds), read from the grid's curves.csv (`--experts`) at `--frames_per_game` on its curve.

Report (written at the end or by --report_only, into --logdir):

* `summary.md`: per game, the final return (the mean of the last 100 training games at
  `frames_per_game` of that game) of the experts and of the multi-task agent, mean +- standard
  error over seeds, and their normalised scores ((return - random) / (best published - random),
  benchmarks.minatar's); then the paper's fitness, the mean capped normalised score (1/N)
  sum_g min(1, score_g) (Table G.1, with MinAtar's references in place of human scores), per
  seed, and its mean over seeds with a 95% bootstrap interval, for both;
* `curves.csv`: the multi-task agent's curve per game and seed (the grid's columns, agent
  `impala_multitask`, frames per game), which `--report_only` reads back where a run directory
  is missing;
* `multitask.png`: per game, each agent's seed-mean curve against frames per game.
"""

import csv
import dataclasses
import math
import os
import sys
from collections.abc import Mapping, Sequence

import numpy as np

from benchmarks import minatar_references, minatar_runs, minatar_statistics
from common.experiments import ablation_reports, ablation_runner, cli, dataclass_flags
from common.settings.config import field

TOOL = "benchmarks.multitask"
AGENT, EXPERT = "impala_multitask", "impala"
GAMES = tuple(minatar_runs.GAMES)
ENVS_PER_GAME = (
    26  # choice: 130 environments an actor, the nearest multiple of 5 to the experts' 128
)
ENV = ",".join(minatar_runs.env_id(game) for game in GAMES)


def run_command(seed: int, logdir: str, frames_per_game: int, extra: Sequence[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "impala.main",
        f"--env={ENV}",
        f"--envs_per_actor={ENVS_PER_GAME * len(GAMES)}",
        f"--seed={seed}",
        f"--total_frames={frames_per_game * len(GAMES)}",
        f"--logdir={ablation_reports.run_logdir(logdir, AGENT, seed)}",
        *extra,
    ]


Curve = tuple[np.ndarray, np.ndarray]  # (frames per game, mean return of the last 100 games)
NO_CURVE: Curve = (np.array([]), np.array([]))


def game_curves(directory: str, frames_per_game: int) -> dict[str, Curve]:
    """Each game's curve in a multi-task run's episodes.csv (its `game` column names the gym id),
    at the points the grid uses (`minatar_runs.curve_grid`), up to the frames the game has had: a
    fifth of the run's (the run's frames being its checkpoint's, `minatar_runs.trained_frames`)."""
    with open(os.path.join(directory, ablation_reports.EPISODES_CSV), newline="") as f:
        rows = list(csv.DictReader(f))
    trained = minatar_runs.trained_frames(directory) / len(GAMES)
    grid = minatar_runs.curve_grid(frames_per_game)
    grid = grid[grid <= trained]
    curves = {}
    for game in GAMES:
        mine = [row for row in rows if row["game"] == minatar_runs.env_id(game)]
        episodes = ablation_reports.Episodes(
            np.array([float(row["frames"]) for row in mine]) / len(GAMES),
            np.array([float(row["episode_return"]) for row in mine]),
            np.array([float(row["wall_time"]) for row in mine]),
        )
        curve = minatar_runs.last_games_curve(episodes, grid)
        known = np.isfinite(curve)
        curves[game] = (grid[known], curve[known])
    return curves


def read_multitask(logdir: str, seeds: Sequence[int], frames_per_game: int) -> dict:
    """{(game, seed): curve} of the runs under `logdir`, and of the curves.csv there for runs
    without a directory (a report written elsewhere)."""
    kept = minatar_runs.read_curves(
        [path] if os.path.isfile(path := os.path.join(logdir, minatar_runs.CURVES_CSV)) else []
    )
    curves = {}
    for seed in seeds:
        directory = ablation_reports.run_logdir(logdir, AGENT, seed)
        if os.path.isfile(os.path.join(directory, ablation_reports.EPISODES_CSV)):
            for game, curve in game_curves(directory, frames_per_game).items():
                curves[game, seed] = curve
        else:
            for game in GAMES:
                if (AGENT, game, seed) in kept:
                    curves[game, seed] = kept[AGENT, game, seed]
    return curves


def final(curve: Curve, frames: int) -> float:
    """The curve's value at `frames` (nan where it does not reach them)."""
    points, values = curve
    at = np.flatnonzero(points == frames)
    return float(values[at[0]]) if at.size else math.nan


def fitness(scores: np.ndarray) -> float:
    """The mean capped normalised score of a [seeds, games] matrix: each seed's mean over games
    of min(1, score), no floor (Table G.1's fitness), averaged over seeds."""
    return float(np.minimum(scores, 1.0).mean())


@dataclasses.dataclass(frozen=True)
class Comparison:
    seeds: tuple[int, ...]
    frames_per_game: int
    returns: dict[str, np.ndarray]  # {agent: [seeds, games] final returns, nan where missing}
    scores: dict[str, np.ndarray]  # the same, normalised


def compare_agents(
    multitask: Mapping, experts: minatar_runs.Curves, seeds: Sequence[int], frames_per_game: int
) -> Comparison:
    references = minatar_references.read_references()

    def finals(curve_of) -> np.ndarray:
        return np.array([[final(curve_of(g, s), frames_per_game) for g in GAMES] for s in seeds])

    returns = {
        AGENT: finals(lambda g, s: multitask.get((g, s), NO_CURVE)),
        EXPERT: finals(lambda g, s: experts.get((EXPERT, g, s), NO_CURVE)),
    }
    normalisers = [minatar_references.normaliser(references, game) for game in GAMES]
    scores = {
        agent: np.array(
            [
                [minatar_references.normalise(v, *normalisers[g]) for g, v in enumerate(row)]
                for row in values
            ]
        )
        for agent, values in returns.items()
    }
    return Comparison(tuple(seeds), frames_per_game, returns, scores)


def summary_markdown(comparison: Comparison, command: str) -> str:
    lines = [
        "# IMPALA's multi-task agent against one expert per game (MinAtar)",
        "",
        f"Frames per game: {comparison.frames_per_game:,}; seeds "
        f"{', '.join(map(str, comparison.seeds))}. Final return: the mean of the last 100 training "
        "games of the game at those frames; mean ± standard error over the seeds that reached "
        "them (n). Normalised: (return − random) / (best of DQN and AC(λ) − random).",
        "",
        f"Command: `{command}`",
        "",
        "| agent | " + " | ".join(GAMES) + " | mean capped normalised score |",
        "|---|" + "---|" * (len(GAMES) + 1),
    ]
    for agent in (EXPERT, AGENT):
        cells = []
        for g in range(len(GAMES)):
            values = comparison.returns[agent][:, g]
            values = values[np.isfinite(values)]
            if values.size:
                mean, error = minatar_statistics.mean_and_standard_error(values)
                cells.append(f"{mean:.2f} ± {error:.2f} ({values.size})")
            else:
                cells.append("—")
        complete = np.isfinite(comparison.scores[agent]).all(axis=1)
        if complete.any():
            point, low, high = minatar_statistics.bootstrap_interval(
                (comparison.scores[agent][complete],), fitness
            )
            cells.append(f"{point:.3f} [{low:.3f}, {high:.3f}] ({complete.sum()} seeds)")
        else:
            cells.append("—")
        name = "experts (one per game)" if agent == EXPERT else "multi-task (one for all)"
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "The interval is a 95% bootstrap over the seeds whose runs reached the frames on every "
        "game.",
    ]
    return "\n".join(lines) + "\n"


def write_curves(path: str, multitask: Mapping) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(minatar_runs.CURVES_COLUMNS)
        for (game, seed), (points, values) in sorted(multitask.items()):
            writer.writerows(
                [AGENT, game, seed, int(p), f"{v:.6g}"] for p, v in zip(points, values)
            )


def plot(path: str, multitask: Mapping, experts: minatar_runs.Curves, seeds, frames_per_game):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(GAMES), figsize=(4 * len(GAMES), 3.2))
    grid = minatar_runs.curve_grid(frames_per_game)
    for axis, game in zip(axes, GAMES):
        for label, curves in (
            ("experts", [experts.get((EXPERT, game, s)) for s in seeds]),
            ("multi-task", [multitask.get((game, s)) for s in seeds]),
        ):
            values = np.full((len(seeds), grid.size), np.nan)
            for row, curve in zip(values, curves):
                points, returns = curve if curve else NO_CURVE
                on_grid = np.isin(points, grid)  # an expert's longer curve has other points
                row[np.searchsorted(grid, points[on_grid])] = returns[on_grid]
            mean = np.ma.masked_invalid(values).mean(axis=0).filled(np.nan)
            if np.isfinite(mean).any():
                axis.plot(grid, mean, label=label)
        axis.set_title(game)
        axis.set_xlabel("frames per game")
    axes[0].set_ylabel("return, last 100 games")
    axes[0].legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


@dataclasses.dataclass(frozen=True)
class CommandLine:
    """The flags of `python -m benchmarks.multitask`."""

    seeds: tuple[int, ...] = field((200, 201, 202, 203, 204), "Seeds, or a number N (0..N-1).")
    frames_per_game: int = field(5_000_000, "Frames each game gets (the experts' budget).")
    experts: str = field("", "The grid's curves.csv holding the IMPALA experts (none: no experts).")
    logdir: str = field("runs/multitask", "Root directory of the runs and the report.")
    parallel: int = field(1, "Runs at a time.")
    report_only: bool = field(False, "Only write the report from the runs there are.")

    def validate(self) -> "CommandLine":
        if self.frames_per_game <= 0:
            raise dataclass_flags.FlagError(f"--frames_per_game={self.frames_per_game} must be > 0")
        if self.parallel < 1:
            raise dataclass_flags.FlagError(f"--parallel={self.parallel} must be >= 1")
        if self.experts and not os.path.isfile(self.experts):
            raise dataclass_flags.FlagError(f"--experts={self.experts}: no such file")
        return dataclasses.replace(self, seeds=tuple(cli.parse_seeds(self.seeds)))


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, extra = ablation_runner.tool_command_line(argv, CommandLine, TOOL, __doc__)
    budget = args.frames_per_game * len(GAMES)
    command = " ".join(["python -m", TOOL, *argv])
    if not args.report_only:
        print(
            f"[multitask] {len(args.seeds)} runs of {budget:,} frames (seeds "
            f"{', '.join(map(str, args.seeds))}; a lone --seeds=N means seeds 0..N-1) under "
            f"{args.logdir}",
            flush=True,
        )
        try:
            ablation_runner.run_all(
                lambda variant, seed: run_command(seed, args.logdir, args.frames_per_game, extra),
                [AGENT],
                args.seeds,
                args.logdir,
                args.parallel,
                skip=lambda variant, seed: (
                    minatar_runs.trained_frames(
                        ablation_reports.run_logdir(args.logdir, AGENT, seed)
                    )
                    >= budget
                ),
                append_logs=True,
            )
        except ablation_runner.AblationRunError as error:
            sys.exit(f"error: {error}")
        except KeyboardInterrupt:
            sys.exit(f"interrupted: the runs going were stopped; `{command}` resumes them")
    multitask = read_multitask(args.logdir, args.seeds, args.frames_per_game)
    experts = minatar_runs.read_curves([args.experts] if args.experts else [])
    comparison = compare_agents(multitask, experts, args.seeds, args.frames_per_game)
    os.makedirs(args.logdir, exist_ok=True)
    write_curves(os.path.join(args.logdir, minatar_runs.CURVES_CSV), multitask)
    plot(
        os.path.join(args.logdir, "multitask.png"),
        multitask,
        experts,
        args.seeds,
        args.frames_per_game,
    )
    summary = summary_markdown(comparison, command)
    with open(os.path.join(args.logdir, minatar_runs.SUMMARY_MD), "w") as f:
        f.write(summary)
    print(summary)


if __name__ == "__main__":
    main()

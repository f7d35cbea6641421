"""IMPALA's own sweep for its experts (§5.2, Table D.1) on MinAtar's games: the 24 combinations,
one grid each, the best per game.

    python -m benchmarks.sweep --games=all --seeds=300,301 --total_frames=1e6 --logdir=runs/sweep
    python -m benchmarks.sweep --report_only --logdir=runs/sweep

The combinations are the settings protocol's IMPALA trials (benchmarks.protocol.impala_trials:
entropy cost, learning rate and RMSProp epsilon pre-sampled from Table D.1's ranges, the same
set for every variant as §5.2 has it). Combination k runs as one MinAtar grid (benchmarks.minatar)
of IMPALA on the games and seeds:

    python -m benchmarks.minatar --agents=impala --games=<games> --seeds=<seeds>
        --total_frames=<frames> --logdir=<logdir>/combination<k> -- <its three flags>

so the sweep resumes as a grid does (the same command again), and a combination whose grid has
finished is skipped. Its seeds default to 300 and 301: neither a tuning seed of the protocol
(100, 101) nor a final one (200-204), so that no setting is chosen on the seeds it is reported on.

Report (`--logdir`/summary.md and sweep.csv): each combination's final return per game (the mean
over seeds of the mean of the last 100 training games at the budget, the grid's), and per game
the best combination against combination 10, the protocol's choice on Breakout and Space
Invaders (IMPALA's MinAtar default): a game's expert takes the best combination where it beats
the protocol's by more than the seeds' standard error, else the protocol's.
"""

import csv
import dataclasses
import math
import os
import sys
from collections.abc import Sequence

import numpy as np

from benchmarks import minatar, minatar_runs, minatar_statistics, protocol
from common.experiments import ablation_runner, cli, dataclass_flags
from common.settings.config import field

TOOL = "benchmarks.sweep"
COMBINATIONS = protocol.impala_trials()
PROTOCOL_CHOICE = 10  # docs/guides/minatar_protocol.md: IMPALA's chosen trial


def combination_logdir(logdir: str, index: int) -> str:
    return os.path.join(logdir, f"combination{index}")


def combination_returns(
    logdir: str, index: int, games: Sequence[str], seeds: Sequence[int], budget: int
) -> dict[str, np.ndarray]:
    """{game: the final returns of its runs that reached the budget}."""
    returns = {}
    for game in games:
        values = []
        for seed in seeds:
            directory = minatar_runs.run_dir(
                combination_logdir(logdir, index), "impala", game, seed
            )
            if os.path.isfile(os.path.join(directory, "episodes.csv")):
                result = minatar_runs.read_result(
                    combination_logdir(logdir, index), "impala", game, seed, budget
                )
                if result.reached:
                    values.append(result.final)
        returns[game] = np.array(values)
    return returns


@dataclasses.dataclass(frozen=True)
class GameChoice:
    game: str
    best: int  # the combination with the highest mean final return
    expert: int  # the best, or the protocol's choice unless the best beats it by one standard error
    means: dict[int, tuple[float, float, int]]  # combination: (mean, standard error, seeds)


def choose_per_game(returns: dict[int, dict[str, np.ndarray]], games: Sequence[str]) -> list:
    """Each game's best combination among those with every seed's run, and its expert's."""
    choices = []
    for game in games:
        counts = {k: r[game].size for k, r in returns.items()}
        full = max(counts.values(), default=0)
        means = {
            k: (*minatar_statistics.mean_and_standard_error(r[game]), r[game].size)
            for k, r in returns.items()
            if full and r[game].size == full
        }
        if not means:
            continue
        best = max(means, key=lambda k: (means[k][0], -k))
        expert = best
        if PROTOCOL_CHOICE in means and best != PROTOCOL_CHOICE:
            margin = means[best][1] if math.isfinite(means[best][1]) else 0.0
            if means[best][0] - means[PROTOCOL_CHOICE][0] <= margin:
                expert = PROTOCOL_CHOICE
        choices.append(GameChoice(game, best, expert, means))
    return choices


def write_report(
    logdir: str, returns: dict[int, dict[str, np.ndarray]], games, seeds, budget, command: str
) -> str:
    with open(os.path.join(logdir, "sweep.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["combination", *COMBINATIONS[0], *(f"return_{g}" for g in games)])
        for k in sorted(returns):
            means = [f"{r.mean():.4g}" if r.size else "nan" for r in returns[k].values()]
            writer.writerow([k, *(f"{v:g}" for v in COMBINATIONS[k].values()), *means])
    lines = [
        "# IMPALA's Table D.1 sweep on MinAtar",
        "",
        f"Games {', '.join(games)}; seeds {', '.join(map(str, seeds))}; {budget:,} frames a run; "
        f"{len(returns)} of {len(COMBINATIONS)} combinations with runs (sweep.csv: every "
        "combination's mean final return per game).",
        "",
        f"Command: `{command}`",
        "",
        f"| game | best combination (mean ± se, seeds) | the protocol's, {PROTOCOL_CHOICE} | "
        "the expert's |",
        "|---|---|---|---|",
    ]
    for choice in choose_per_game(returns, games):

        def cell(k):
            if k not in choice.means:
                return "—"
            mean, error, n = choice.means[k]
            flags = " ".join(protocol.trial_flags(COMBINATIONS[k]))
            return f"{k}: {mean:.2f} ± {error:.2f} ({n}) `{flags}`"

        lines.append(
            f"| {choice.game} | {cell(choice.best)} | {cell(PROTOCOL_CHOICE)} | {choice.expert} |"
        )
    lines += [
        "",
        "The expert's: the best combination where it beats the protocol's by more than its "
        "standard error over seeds, else the protocol's.",
    ]
    summary = "\n".join(lines) + "\n"
    with open(os.path.join(logdir, minatar_runs.SUMMARY_MD), "w") as f:
        f.write(summary)
    return summary


@dataclasses.dataclass(frozen=True)
class CommandLine:
    """The flags of `python -m benchmarks.sweep`."""

    games: tuple[str, ...] = field(("all",), "Games, of the grid's; or all.")
    seeds: tuple[int, ...] = field((300, 301), "Seeds, or a number N (0..N-1).")
    total_frames: int = field(1_000_000, "Frames a run (the protocol's IMPALA trial budget).")
    combinations: str = field("", "Combination indices and ranges, e.g. 0-23 (default: all).")
    logdir: str = field("runs/sweep", "Root directory of the runs and the report.")
    parallel: int = field(1, "Runs at a time.")
    report_only: bool = field(False, "Only write the report from the runs there are.")

    def validate(self) -> "CommandLine":
        games = minatar_runs.parse_games(self.games)
        if self.total_frames <= 0:
            raise dataclass_flags.FlagError(f"--total_frames={self.total_frames} must be > 0")
        if self.parallel < 1:
            raise dataclass_flags.FlagError(f"--parallel={self.parallel} must be >= 1")
        try:
            self.indices()
        except ValueError as error:
            raise dataclass_flags.FlagError(
                str(error).replace("--trials", "--combinations")
            ) from None
        return dataclasses.replace(self, games=games, seeds=tuple(cli.parse_seeds(self.seeds)))

    def indices(self) -> list[int]:
        return protocol.parse_trials(
            self.combinations or f"0-{len(COMBINATIONS) - 1}", len(COMBINATIONS)
        )


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args, extra = ablation_runner.parse_tool_command_line(argv, CommandLine, TOOL, __doc__)
        if extra:
            raise dataclass_flags.FlagError(
                "the sweep's runs take IMPALA's MinAtar defaults and their combination's flags "
                "only: nothing goes after --"
            )
    except dataclass_flags.FlagError as error:
        dataclass_flags.fail(str(error))
    command = " ".join(["python -m", TOOL, *argv])
    budgets = {"impala": args.total_frames}
    for index in [] if args.report_only else args.indices():
        print(f"[sweep] combination {index}: {' '.join(protocol.trial_flags(COMBINATIONS[index]))}")
        try:
            os.makedirs(combination_logdir(args.logdir, index), exist_ok=True)
            minatar.run_grid(
                ["impala"],
                args.games,
                args.seeds,
                budgets,
                combination_logdir(args.logdir, index),
                protocol.trial_flags(COMBINATIONS[index]),
                args.parallel,
            )
        except ablation_runner.AblationRunError as error:
            sys.exit(f"error: {error}")
        except KeyboardInterrupt:
            sys.exit(f"interrupted: the runs going were stopped; `{command}` resumes them")
    returns = {
        k: combination_returns(args.logdir, k, args.games, args.seeds, args.total_frames)
        for k in range(len(COMBINATIONS))
        if os.path.isdir(combination_logdir(args.logdir, k))
    }
    os.makedirs(args.logdir, exist_ok=True)
    print(write_report(args.logdir, returns, args.games, args.seeds, args.total_frames, command))


if __name__ == "__main__":
    main()

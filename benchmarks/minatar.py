"""The MinAtar grid: agents x games x seeds on a frame budget per agent, resumable, one report.

    python -m benchmarks.minatar --agents=impala,reactor,dice,gdi_h3,lbc --games=all --seeds=3 \\
        --total_frames=5e6 --agent_frames=reactor=2e5,dice=1e6,gdi_h3=5e5,lbc=5e5 \\
        --logdir=runs/minatar --parallel=2
    python -m benchmarks.minatar --report_only --logdir=runs/minatar        # reports only
    python -m benchmarks.minatar --measure_random --games=all               # the random rows

Budgets. An agent's runs train for its budget: --total_frames (5e6, the published curves'
length), or for an agent named in --agent_frames (`<agent>=<frames>,...`, the frames written as
--total_frames is, e.g. reactor=2e5; each one of --agents) that number. On a 2-core CPU the agents
train at very different rates (MinAtar Breakout, full training: IMPALA ~2,400 frames/s, DiCE ~300,
Reactor ~42), so one budget for all would take weeks. Below, "the budget" of a run is its agent's.

Runs. Each run is one paper's main with the paper's own defaults for everything but the game,
the seed, the budget and the logdir:

    python -m <paper>.main [--ablation=<ablation>] --seed=<S>
        --logdir=<logdir>/<agent>/<game>/seed<S> --env=MinAtar/<Game>-v0 --total_frames=<budget>
        <the arguments after -->

with the agents impala, reactor, dice, lbc (`<paper>.main`), gdi_h3, gdi_i3 (`gdi.main
--ablation=gdi_h3` / `gdi_i3`) and `<paper>.<ablation>` for any ablation a paper names (`python -m
<paper>.main --ablation=<ablation>`, e.g. impala.no_correction), and the games asterix, breakout,
freeway, seaquest, space_invaders (`all`); `-v0` is MinAtar's full set of 6 actions, as in the
published curves. An argument after `--` written `<agent or paper>:--flag=value` goes to that
agent's runs only (common.experiments.compare's rule). Before the first run starts, every agent's
command is checked with `--check_flags`, so a flag one paper refuses stops the grid at once.
`--parallel` runs go at a time, seed by seed (all agents on all games with seed 0 first, so a
partial grid already compares the agents), and a line with the runs done / running / left and an ETA
is printed whenever a run starts or ends. A run that fails stops the grid with one error naming its
agent, game and seed and the tail of its stderr; the runs still going are stopped (SIGTERM, on which
a paper's main checkpoints; common.experiments.ablation_runner sends SIGKILL after 60 s).
`--seeds=3` means seeds 0, 1, 2; `--seeds=3,4` those two.

Finished and resumed runs. The same command run again skips the runs that finished and resumes
the others: a paper's main restores the latest checkpoint under its logdir (`<run>/checkpoints`,
common.runtime.learning.Learner) and continues from there when started with the same command, and a
learner restored at or past its budget (`Learner.done`: its frame counter >= --total_frames)
trains no more. So a run is finished exactly when its latest checkpoint's frame counter (the
checkpoint's `frames` variable, read with TensorFlow) has reached its agent's budget; the learner
checkpoints when it stops for any reason, so every run that ran to its budget has such a
checkpoint. A run directory without checkpoints (copied from elsewhere, or a process killed
before its first checkpoint, which a resume starts afresh) counts the frames of its last
episodes.csv row instead. A run that exits 0 short of the budget (it was stopped from outside)
is an error naming it; the same command resumes it. stdout.log and stderr.log of a run are
appended to, so a resumed run keeps the logs of its earlier starts.

Runs finished elsewhere. A grid outlives the machine it started on through its curves.csv (below,
small enough to commit as runs finish): with `--curves_from=<earlier reports' curves.csv,...>`, a
run without a run directory here whose curve in one of those files reaches its agent's budget (its
last point is at the budget, the points spaced as this grid's) counts as finished: it is not run
again, and the report takes its curve and final return (the curve's point at the budget, the same
number) from the file and lists it, with its final evaluation from the evaluations.csv beside
that file where it has one. A run directory here always wins over the files; two files may hold
one run only with the same curve (a report's curves.csv holds the runs it took from others).

Reports (written at the end, or by `--report_only` from the run directories alone, also while a
grid runs; the arguments after `--` are then only quoted in summary.md's commands):

* `<logdir>/curves.csv`: agent, game, seed, frames, return_last_100: at 100 frame counts spaced
  the budget/100 apart (up to what the run has trained), the mean return of the last 100
  training games that ended at or before that count (fewer early on), from each run's
  episodes.csv (`frames,episode_return,episode_length,wall_time`);
* `<logdir>/evaluations.csv`: agent, game, seed, evaluation: each run's final evaluation, the mean
  return of the evaluation round it plays on reaching its budget (its eval.csv's last round);
* `<logdir>/<game>.png`: per agent, that curve's mean over seeds with a band of one standard error
  over the agent's own budget, and horizontal lines at the published DQN and AC(lambda=0.8)
  returns at 5M frames and at the random policy's return (where no agent's budget reaches those
  5M frames, the y-axis fits the curves and random play, and the references above it are named
  in the legend; each agent its own colour, and the legend beside the axes past 8 agents);
* `<logdir>/summary.md`: the final return of every agent on every game (mean over seeds +- the
  standard error, the number of seeds, runs short of the budget marked †), the published and random
  references, the final evaluations, the normalised scores and their aggregate (no interval over
  one seed), and the commands; every agent whose budget is below the references' 5M frames is
  marked ‡ with its budget (its returns and normalised scores are from earlier on the learning
  curve than the references'); where the agents' budgets differ, every agent again at each budget
  shorter than its own, read off its curve (is an agent run short behind for its budget, or slower
  per frame?).

What is measured:

* final return of a run = the mean return of the last 100 training games that ended at or before
  the budget (the MinAtar figure's y-axis: the moving average of returns over 100 episodes, at
  5M frames); a run short of the budget reports its last 100 games so far, marked;
* normalised score = (final return - random) / (reference - random) per game, with reference = the
  better of the published DQN and AC(lambda=0.8) returns at 5M frames and random = the uniformly
  random policy's mean return measured here with the installed minatar package;
* aggregate = the interquartile mean (IQM) of the normalised scores of all runs and games of an
  agent, with a 95% stratified-bootstrap confidence interval (runs resampled within each game;
  `rliable.library.get_interval_estimates` with `rliable.metrics.aggregate_iqm`, 2000 repetitions,
  numpy's generator seeded with 0), over the seeds whose runs reached the budget on every game of
  the report;
* orderings: where the agents include two variants of one paper that its `ablations.py` orders
  (ORDERINGS: the paper's claim that one beats the other, and where it says so), the
  probability of improvement P(X > Y) over those seeds' normalised scores (rliable's: per game,
  the share of pairs of runs where X scores higher, ties one half; then the mean over games),
  with the same kind of interval, and a verdict: holds (the interval above 0.5), reversed
  (below) or unresolved, with the seeds that would resolve it if the measured P held (the
  interval narrows as 1/√seeds); one seed gives no verdict (its interval collapses onto P). A
  paper's ablation study is thus a grid of its variants:

    python -m benchmarks.minatar --agents=lbc.lbc,lbc.reducing_h,lbc.reducing_h_psi,\
        lbc.random_selection --games=breakout,space_invaders --seeds=5 --total_frames=5e5

The references (`benchmarks/data/minatar_references.csv`): DQN and AC(lambda=0.8), the published
MinAtar learning curves (Young & Tian 2019, arXiv:1903.03176; the MinAtar README figure
img/learning_curves.gif at kenjyoung/MinAtar@87c2bc825e0a4171040323a8164e9ecd32d14731, 30 runs per
curve, full action set, sticky actions 0.1), read off the figure by eye at 5M frames; and a
uniformly random policy over the 6 actions, measured by `--measure_random` with
`minatar.Environment` (sticky actions 0.1, difficulty ramping, seed 0 for the game and the
actions), playing whole games until 1000 games or 1M frames, whichever comes first.
"""

import csv
import dataclasses
import importlib
import importlib.metadata
import logging
import math
import os
import shlex
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from common.experiments import ablation_runner, cli, compare, dataclass_flags

from common.experiments import ablation_reports
from common.runtime import runlog
from common.settings.config import field

TOOL = "benchmarks.minatar"

# The five MinAtar games, with the capitalisation of MinAtar's gym ids (minatar/gym.py
# registers game.title().replace("_", "")).
GAMES = {
    "asterix": "Asterix",
    "breakout": "Breakout",
    "freeway": "Freeway",
    "seaquest": "Seaquest",
    "space_invaders": "SpaceInvaders",
}
ALL = "all"


def env_id(game: str) -> str:
    """The env a run plays: `MinAtar/<Game>-v0`, all 6 actions (v1 is the minimal action set)."""
    return f"MinAtar/{GAMES[game]}-v0"


class AgentSpec(NamedTuple):
    """How an agent runs: `python -m <module or paper.main> [--ablation=<ablation>]`."""

    paper: str
    ablation: str | None = None
    module: str | None = None  # tests: a stand-in for `<paper>.main`


AGENTS: dict[str, AgentSpec] = {
    "impala": AgentSpec("impala"),
    "reactor": AgentSpec("reactor"),
    "dice": AgentSpec("dice"),
    "gdi_h3": AgentSpec("gdi", "gdi_h3"),
    "gdi_i3": AgentSpec("gdi", "gdi_i3"),
    "lbc": AgentSpec("lbc"),
}
DEFAULT_AGENTS = ("impala", "reactor", "dice", "gdi_h3", "lbc")
# Any paper's named ablation is an agent too, `<paper>.<ablation>` (`agent_spec`): a grid of one
# paper's variants is that paper's ablation study, reported with the orderings it claims.
PAPERS = ("impala", "reactor", "dice", "gdi", "lbc")

# The published budget of the MinAtar curves (Young & Tian 2019, Figure: 5 million frames).
PUBLISHED_FRAMES = 5_000_000
# choice: summary.md marks an agent whose budget is below PUBLISHED_FRAMES with ‡, not †: † already
# marks the runs that have not reached their own budget.
SHORT_BUDGET = "‡"
# The published curves' statistic: the moving average of returns over 100 episodes.
LAST_GAMES = 100
# choice: 100 curve points, as common.experiments.ablation_runner's plots.
CURVE_POINTS = 100
# choice: rliable's stratified bootstrap with 2000 repetitions (its default is 50000, ~25 times
# slower; on three random 3 x 5 score matrices in [0, 1.2] the bounds of 2000 were within 0.005 of
# those of 50000) and a fixed seed, so a report is reproducible (`bootstrap_interval`).
BOOTSTRAP_REPS = 2000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95

# The learner's checkpoints in a run's logdir and its frame counter in them
# (common.runtime.learning.Learner: CheckpointManager under <logdir>/checkpoints,
# tf.train.Checkpoint with frames=...).
CHECKPOINTS_DIR = "checkpoints"
FRAMES_KEY = "frames/.ATTRIBUTES/VARIABLE_VALUE"

REFERENCES_CSV = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "data", "minatar_references.csv"
)
REFERENCE_COLUMNS = ("game", "agent", "return", "frames", "seeds", "source", "note")
DQN, AC_LAMBDA, RANDOM = "dqn", "ac_lambda_0.8", "random"
REFERENCE_NAMES = {DQN: "DQN", AC_LAMBDA: "AC(λ=0.8)", RANDOM: "random policy"}

# The random policy's measurement (module docstring).
RANDOM_MIN_GAMES = 1000
RANDOM_MIN_FRAMES = 1_000_000
RANDOM_SEED = 0
STICKY_ACTION_PROB = 0.1  # MinAtar's default (minatar/environment.py), as in the published curves
NUM_ACTIONS = 6

CURVES_CSV, SUMMARY_MD = "curves.csv", "summary.md"
CURVES_COLUMNS = ("agent", "game", "seed", "frames", "return_last_100")
# Each run's final evaluation (`final_evaluation`), written beside curves.csv and read from beside
# each --curves_from file, so a run finished elsewhere keeps it too.
EVALUATIONS_CSV = "evaluations.csv"
EVALUATIONS_COLUMNS = ("agent", "game", "seed", "evaluation")

log = logging.getLogger(__name__)


class GridRunError(ablation_runner.AblationRunError):
    """A run of the grid exited 0 before its frame budget."""


# ---------------------------------------------------------------------------------------------
# Commands.


def paper_ablations(paper: str):
    """`<paper>/ablations.py`: its ABLATIONS and the ORDERINGS its paper claims among them."""
    return importlib.import_module(f"{paper}.ablations")


def default_variant(paper: str) -> str | None:
    """The ablation of `paper` that its defaults are, where its ablations name one after the
    paper (a test checks that its config is the defaults'); None otherwise."""
    return paper if paper in paper_ablations(paper).ABLATIONS else None


def agent_spec(name: str) -> AgentSpec:
    """An agent of --agents: one of AGENTS, or `<paper>.<ablation>` for an ablation its paper
    names (e.g. `impala.no_correction`); dataclass_flags.FlagError naming --agents otherwise."""
    if name in AGENTS:
        return AGENTS[name]
    paper, dot, ablation = name.partition(".")
    if not (dot and paper in PAPERS):
        raise dataclass_flags.FlagError(
            f"--agents: {name!r} is not one of {', '.join(AGENTS)} or <paper>.<ablation> with a "
            f"paper of {', '.join(PAPERS)} (e.g. impala.no_correction)"
        )
    ablations = paper_ablations(paper).ABLATIONS
    if ablation not in ablations:
        raise dataclass_flags.FlagError(
            f"--agents: {name!r}: {paper} has no ablation {ablation!r} (of: {', '.join(ablations)})"
        )
    return AgentSpec(paper, ablation)


def cell(agent: str, game: str) -> str:
    """An agent's runs on a game, as common.experiments.ablation_runner's "variant": their
    directories are
    `<logdir>/<agent>/<game>/seed<S>` (`ablation_reports.run_logdir`)."""
    return f"{agent}/{game}"


def run_dir(logdir: str, agent: str, game: str, seed: int) -> str:
    return ablation_reports.run_logdir(logdir, cell(agent, game), seed)


def cell_agent(variant: str) -> str:
    """The agent of a `cell`."""
    return variant.split("/")[0]


def frame_budgets(
    agents: Sequence[str], total_frames: int, agent_frames: Sequence[str] = ()
) -> dict[str, int]:
    """{agent: the frames of its runs}: `total_frames`, or the agent's `<agent>=<frames>` entry of
    --agent_frames (the frames written as --total_frames is, e.g. 1e6); dataclass_flags.FlagError naming
    --agent_frames on a bad entry."""
    budgets = dict.fromkeys(agents, total_frames)
    named = set()
    for entry in agent_frames:
        agent, equals, text = entry.partition("=")
        if not (agent and equals and text):
            raise dataclass_flags.FlagError(
                f"--agent_frames: {entry!r} is not <agent>=<frames>, e.g. dice=1e6"
            )
        if agent not in budgets:
            raise dataclass_flags.FlagError(
                f"--agent_frames: {agent!r} is not one of --agents ({', '.join(agents)})"
            )
        if agent in named:
            raise dataclass_flags.FlagError(f"--agent_frames names {agent} twice")
        try:
            frames = dataclass_flags.parse_scalar(int, text)  # as --total_frames is parsed
        except ValueError:
            raise dataclass_flags.FlagError(
                f"--agent_frames: {entry!r}: {text} is not an integer"
            ) from None
        if frames <= 0:
            raise dataclass_flags.FlagError(f"--agent_frames: {agent}={frames} must be > 0")
        named.add(agent)
        budgets[agent] = frames
    return budgets


def curve_grid(budget: int) -> np.ndarray:
    """The frame counts of a run's curve: CURVE_POINTS of them, budget / CURVE_POINTS apart."""
    return budget * np.arange(1, CURVE_POINTS + 1) / CURVE_POINTS


def _command(
    module: str, ablation: str | None, seed, directory: str, env: str, argv: Sequence[str]
) -> list[str]:
    ablation_flag = [f"--ablation={ablation}"] if ablation else []
    return [
        sys.executable,
        "-m",
        module,
        *ablation_flag,
        f"--seed={seed}",
        f"--logdir={directory}",
        f"--env={env}",
        *argv,
    ]


@dataclasses.dataclass(frozen=True)
class GridRun(compare.AgentRun):
    """One agent on one game (`name` is the agent). Its `command` puts the run in the grid's
    layout and plays `env_id(game)`; `arguments` (common.experiments.compare) keeps the arguments
    after `--` meant for this agent or paper, so `compare.check_flags` and `check_targets` take
    it."""

    game: str = ""
    module: str | None = None

    @classmethod
    def of(cls, agent: str, game: str) -> "GridRun":
        spec = agent_spec(agent)
        return cls(agent, spec.paper, spec.ablation, game, spec.module)

    def command(self, seed: int, logdir: str, argv: Sequence[str]) -> list[str]:
        return _command(
            self.module or f"{self.paper}.main",
            self.ablation,
            seed,
            run_dir(logdir, self.name, self.game, seed),
            env_id(self.game),
            self.arguments(argv),
        )


def shared_arguments(budget: int | str, extra_argv: Sequence[str]) -> list[str]:
    """The arguments every run of an agent with that budget gets after its own
    (`GridRun.command` filters targeted ones)."""
    return [f"--total_frames={budget}", *extra_argv]


def run_template(logdir: str, budgets: Mapping[str, int], extra_argv: Sequence[str]) -> str:
    """The command of every run (`GridRun.command`) with placeholders, for summary.md; the budget
    is FRAMES (the agent's, listed in summary.md) where the agents' budgets differ. An argument
    after `--` meant for some agents only is shown as those runs get it, with whose runs they
    are."""
    directory = ablation_reports.run_logdir(logdir, cell("AGENT", "GAME"), "SEED")
    frames = set(budgets.values())
    budget = frames.pop() if len(frames) == 1 else "FRAMES"
    targets = [compare.split_targeted(arg) for arg in extra_argv]
    shared = [flag for target, flag in targets if target is None]
    targeted = [f"{shlex.quote(flag)} ({target}'s runs)" for target, flag in targets if target]
    return " ".join(
        [
            "python -m PAPER.main [--ablation=ABLATION] --seed=SEED",
            shlex.quote(f"--logdir={directory}"),
            "--env=MinAtar/<Game>-v0",
            shlex.join(shared_arguments(budget, shared)),
            *targeted,
        ]
    )


def grid_command(
    agents: Sequence[str],
    games: Sequence[str],
    seeds: Sequence[int],
    total_frames: int,
    logdir: str,
    parallel: int,
    extra_argv: Sequence[str] = (),
    budgets: Mapping[str, int] | None = None,
    curves_from: Sequence[str] = (),
) -> str:
    """The command line of this tool that runs (and resumes) the grid: `budgets` that differ from
    `total_frames` are its --agent_frames."""
    own = {a: f for a, f in (budgets or {}).items() if f != total_frames}
    argv = [
        "python",
        "-m",
        TOOL,
        f"--agents={','.join(agents)}",
        f"--games={','.join(games)}",
        f"--seeds={','.join(map(str, seeds))}"
        if list(seeds) != list(range(len(seeds)))
        else f"--seeds={len(seeds)}",
        f"--total_frames={total_frames}",
        *([f"--agent_frames={','.join(f'{a}={f}' for a, f in own.items())}"] if own else []),
        f"--logdir={logdir}",
        f"--parallel={parallel}",
        *([f"--curves_from={','.join(curves_from)}"] if curves_from else []),
    ]
    return shlex.join([*argv, "--", *extra_argv] if extra_argv else argv)


# ---------------------------------------------------------------------------------------------
# Reading runs.


def _last_row_frames(path: str) -> int | None:
    """The frames of the last complete row of an episodes.csv (read from its end: the file of a
    long run holds tens of thousands of games); None without a row."""
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(size - 4096, 0))
        data = f.read()
    lines = data.split(b"\n")[:-1]  # the part after the last line end is not a complete row
    for line in reversed(lines):
        try:
            return int(float(line.split(b",", 1)[0]))
        except ValueError:
            return None  # the header: no row
    return None


def checkpoint_frames(directory: str) -> int | None:
    """The learner frame counter of the run's latest checkpoint; None without a checkpoint.
    Imports TensorFlow (only then)."""
    checkpoints = os.path.join(directory, CHECKPOINTS_DIR)
    if not os.path.isfile(os.path.join(checkpoints, "checkpoint")):
        return None
    if "tensorflow" not in sys.modules:
        # Quiet TensorFlow's start-up lines in this process only (the runs inherit the env).
        level = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        try:
            import tensorflow  # noqa: F401
        finally:
            if level is None:
                del os.environ["TF_CPP_MIN_LOG_LEVEL"]
            else:
                os.environ["TF_CPP_MIN_LOG_LEVEL"] = level
    import tensorflow as tf

    try:
        return int(tf.train.load_checkpoint(checkpoints).get_tensor(FRAMES_KEY))
    except (tf.errors.OpError, ValueError) as error:  # one being written by a running learner
        log.warning("cannot read the checkpoint in %s (%s); using episodes.csv", checkpoints, error)
        return None


def trained_frames(directory: str) -> int:
    """The frames the run has trained: its latest checkpoint's frame counter, or without a
    checkpoint the frames of its last episodes.csv row, or 0 (module docstring)."""
    frames = checkpoint_frames(directory)
    # choice: without a checkpoint, episodes.csv's frames (module docstring): a run copied without
    # its checkpoints is judged by its logs.
    if frames is None:
        frames = _last_row_frames(os.path.join(directory, ablation_reports.EPISODES_CSV))
    return frames or 0


def last_games_curve(
    episodes: ablation_reports.Episodes, at_frames: np.ndarray, games: int = LAST_GAMES
) -> np.ndarray:
    """At each of `at_frames`, the mean return of the last `games` games that ended at or before
    it (fewer if fewer had ended; nan if none)."""
    order = np.argsort(episodes.frames, kind="stable")
    frames, returns = episodes.frames[order], episodes.returns[order]
    cumulative = np.concatenate([[0.0], np.cumsum(returns)])
    end = np.searchsorted(frames, np.asarray(at_frames, dtype=float), side="right")
    start = np.maximum(end - games, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(end > 0, (cumulative[end] - cumulative[start]) / (end - start), np.nan)


@dataclasses.dataclass(frozen=True)
class RunResult:
    agent: str
    game: str
    seed: int
    frames: int  # trained (`trained_frames`)
    reached: bool  # frames >= the agent's budget
    final: float  # mean of the last 100 games at or before the agent's budget
    curve_frames: np.ndarray
    curve: np.ndarray
    elsewhere: bool = False  # taken from --curves_from (`finished_elsewhere`)
    # The mean return of its final evaluation (`final_evaluation`); nan without one.
    evaluation: float = math.nan


def read_result(logdir: str, agent: str, game: str, seed: int, budget: int) -> RunResult:
    """A run's result against `budget`, its agent's frames."""
    directory = run_dir(logdir, agent, game, seed)
    episodes = ablation_reports.read_episodes(
        os.path.join(directory, ablation_reports.EPISODES_CSV), ablation_reports.EPISODES_COLUMNS
    )
    frames = trained_frames(directory)
    grid = curve_grid(budget)
    grid = grid[grid <= frames]
    curve = last_games_curve(episodes, grid)
    known = np.isfinite(curve)
    return RunResult(
        agent=agent,
        game=game,
        seed=seed,
        frames=frames,
        reached=frames >= budget,
        # choice: games that ended after the budget (the actors run a little ahead of the learner,
        # whose frames set the budget) are left out, so every run's final return is at the budget.
        final=float(last_games_curve(episodes, [budget])[0]),
        curve_frames=grid[known],
        curve=curve[known],
        evaluation=final_evaluation(os.path.join(directory, ablation_reports.EVAL_CSV), budget),
    )


def final_evaluation(path: str, budget: int) -> float:
    """The mean return of an eval.csv's last round (its rows at the largest frame count) if that
    round came at or after `budget`, the evaluation a run plays when it reaches its budget; nan
    without the file, without a row, or when the last round came before the budget."""
    if _last_row_frames(path) is None:
        return math.nan
    evaluations = ablation_reports.read_episodes(path, ablation_reports.EVAL_COLUMNS)
    last = evaluations.frames.max()
    if last < budget:
        return math.nan
    return float(evaluations.returns[evaluations.frames == last].mean())


Curves = dict[tuple[str, str, int], tuple[np.ndarray, np.ndarray]]


def read_curves(paths: Sequence[str]) -> Curves:
    """{(agent, game, seed): (frames, return_last_100)} of the curves.csv files this tool wrote,
    each in frame order; ValueError naming the file and row on a bad one, or the run and files
    where two hold one run with different curves."""
    curves: Curves = {}
    source: dict[tuple[str, str, int], str] = {}
    for path in paths:
        for key, (frames, values) in _read_curves_file(path).items():
            if key in curves and not (
                np.array_equal(curves[key][0], frames) and np.array_equal(curves[key][1], values)
            ):
                raise ValueError(
                    "{}/{}/seed{} has different curves in {} and {}".format(*key, source[key], path)
                )
            curves[key], source[key] = (frames, values), path
    return curves


def read_evaluations(curves_paths: Sequence[str]) -> dict[tuple[str, str, int], float]:
    """{(agent, game, seed): final evaluation} from the evaluations.csv beside each curves.csv
    (none beside a file: nothing from it); ValueError naming the file and row on a bad one."""
    evaluations = {}
    for curves_path in curves_paths:
        path = os.path.join(os.path.dirname(curves_path), EVALUATIONS_CSV)
        if os.path.isfile(path):
            for key, (evaluation,) in _keyed_rows(path, EVALUATIONS_COLUMNS, "an evaluation"):
                evaluations[key] = evaluation
    return evaluations


def _keyed_rows(path: str, columns: tuple[str, ...], what: str):
    """((agent, game, seed), the numbers of its other columns) of each row of a file this tool
    wrote with `columns`; ValueError naming the file, and the row that is not `what`."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != columns:
            raise ValueError(f"{path}: columns {reader.fieldnames}, expected {','.join(columns)}")
        for line, row in enumerate(reader, start=2):
            try:
                key = (row["agent"], row["game"], int(row["seed"]))
                numbers = tuple(float(row[c]) for c in columns[3:])
            except (TypeError, ValueError):
                raise ValueError(f"{path} line {line}: not {what}: {row}") from None
            yield key, numbers


def _read_curves_file(path: str) -> Curves:
    points: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    for key, point in _keyed_rows(path, CURVES_COLUMNS, "a curve point"):
        points.setdefault(key, []).append(point)
    return {
        key: (np.array([f for f, _ in rows]), np.array([v for _, v in rows]))
        for key, rows in ((key, sorted(rows)) for key, rows in points.items())
    }


def finished_elsewhere(
    curves: Curves, agent: str, game: str, seed: int, budget: int
) -> RunResult | None:
    """The run's result from `curves` if its curve there reaches `budget` on this grid's points
    (`curve_grid`); None otherwise (not there, short of the budget, or another budget's grid)."""
    if (agent, game, seed) not in curves:
        return None
    frames, values = curves[agent, game, seed]
    if frames[-1] != budget or not np.isin(frames, curve_grid(budget)).all():
        return None
    return RunResult(
        agent=agent,
        game=game,
        seed=seed,
        frames=budget,
        reached=True,
        final=float(values[-1]),  # the curve's point at the budget is the final return
        curve_frames=frames,
        curve=values,
        elsewhere=True,
    )


# ---------------------------------------------------------------------------------------------
# References.


def read_references(path: str = REFERENCES_CSV) -> dict[str, dict[str, float]]:
    """{game: {agent: return}} of the reference file; ValueError naming the file on a bad one."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != REFERENCE_COLUMNS:
            raise ValueError(
                f"{path}: header {reader.fieldnames}, expected {','.join(REFERENCE_COLUMNS)}"
            )
        rows = list(reader)
    references: dict[str, dict[str, float]] = {}
    for line, row in enumerate(rows, start=2):
        if row["game"] not in GAMES:
            raise ValueError(
                f"{path}:{line}: game {row['game']!r} is not one of {', '.join(GAMES)}"
            )
        if row["agent"] in references.get(row["game"], {}):
            raise ValueError(f"{path}:{line}: a second {row['agent']} row for {row['game']}")
        try:
            value = float(row["return"])
        except (TypeError, ValueError):
            raise ValueError(f"{path}:{line}: return {row['return']!r} is not a number") from None
        references.setdefault(row["game"], {})[row["agent"]] = value
    return references


def normaliser(references: Mapping[str, Mapping[str, float]], game: str) -> tuple[float, float]:
    """(random, reference) of a game: the random policy's return and the better of the published
    DQN and AC(lambda=0.8) returns; ValueError naming what is missing."""
    known = references.get(game, {})
    missing = [name for name in (DQN, AC_LAMBDA, RANDOM) if name not in known]
    if missing:
        hint = " (python -m benchmarks.minatar --measure_random)" if RANDOM in missing else ""
        raise ValueError(f"the references lack {', '.join(missing)} for {game}{hint}")
    return known[RANDOM], max(known[DQN], known[AC_LAMBDA])


def normalise(score, random: float, reference: float):
    return (np.asarray(score, dtype=float) - random) / (reference - random)


# ---------------------------------------------------------------------------------------------
# The random policy.


@dataclasses.dataclass(frozen=True)
class RandomPolicyResult:
    game: str
    mean: float
    standard_error: float
    games: int
    frames: int


def measure_random_policy(
    game: str,
    min_games: int = RANDOM_MIN_GAMES,
    min_frames: int = RANDOM_MIN_FRAMES,
    seed: int = RANDOM_SEED,
) -> RandomPolicyResult:
    """A uniformly random policy over MinAtar's 6 actions on `game` (`minatar.Environment`,
    sticky actions 0.1, difficulty ramping; `seed` seeds the game and the actions), whole games
    until `min_games` games or `min_frames` frames, whichever comes first."""
    from minatar import Environment  # the MinAtar package (this module is benchmarks.minatar)

    env = Environment(game, sticky_action_prob=STICKY_ACTION_PROB, difficulty_ramping=True)
    env.seed(seed)
    env.reset()
    actions = np.random.default_rng(seed)
    returns: list[float] = []
    frames = 0
    game_return = 0.0
    # choice: the stopping rule is checked at the end of each game only, so no game is cut and
    # `frames` counts the frames of the games counted.
    while True:
        reward, terminal = env.act(int(actions.integers(NUM_ACTIONS)))
        frames += 1
        game_return += float(reward)
        if terminal:
            returns.append(game_return)
            game_return = 0.0
            if len(returns) >= min_games or frames >= min_frames:
                break
            env.reset()
    values = np.asarray(returns)
    standard_error = (
        float(values.std(ddof=1) / math.sqrt(values.size)) if values.size > 1 else math.nan
    )
    return RandomPolicyResult(game, float(values.mean()), standard_error, values.size, frames)


def write_random_rows(results: Sequence[RandomPolicyResult], path: str = REFERENCES_CSV) -> None:
    """Replaces the random rows of the measured games in the reference file (the others stay)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    measured = {r.game: r for r in results}
    version = importlib.metadata.version("minatar")
    new_rows = []
    for game in GAMES:
        new_rows += [row for row in rows if row["game"] == game and row["agent"] != RANDOM]
        old = [row for row in rows if row["game"] == game and row["agent"] == RANDOM]
        if game not in measured:
            new_rows += old
            continue
        result = measured[game]
        new_rows.append(
            dict(
                game=game,
                agent=RANDOM,
                **{"return": f"{result.mean:.4f}"},
                frames=str(result.frames),
                seeds="1",
                source=f"measured: python -m {TOOL} --measure_random --games={game}",
                note=(
                    f"uniform random over {NUM_ACTIONS} actions; sticky actions "
                    f"{STICKY_ACTION_PROB}; difficulty ramping; seed {RANDOM_SEED} (game and "
                    f"actions); minatar {version}; {result.games} games, {result.frames} frames; "
                    f"standard error {result.standard_error:.4f}"
                ),
            )
        )
    new_rows += [row for row in rows if row["game"] not in GAMES]
    temporary = f"{path}.tmp"
    with open(temporary, "w", newline="") as f:
        writer = csv.DictWriter(f, REFERENCE_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(new_rows)
    os.replace(temporary, path)


# ---------------------------------------------------------------------------------------------
# Reports.


@dataclasses.dataclass(frozen=True)
class Aggregate:
    """An agent's IQM of normalised scores over `seeds` (each with runs on every game)."""

    seeds: tuple[int, ...]
    scores: np.ndarray  # [len(seeds), games]
    iqm: float
    low: float
    high: float


@dataclasses.dataclass(frozen=True)
class GridReport:
    logdir: str
    agents: tuple[str, ...]
    games: tuple[str, ...]
    seeds: tuple[int, ...]
    budgets: dict[str, int]  # agent -> the frames of its runs
    results: tuple[RunResult, ...]
    references: dict[str, dict[str, float]]
    aggregates: dict[str, Aggregate | None]
    curves_from: tuple[str, ...] = ()  # where the runs finished elsewhere come from

    @property
    def short_budget(self) -> list[str]:
        """The agents whose budget is below the references' (PUBLISHED_FRAMES)."""
        return [a for a in self.agents if self.budgets[a] < PUBLISHED_FRAMES]

    def name(self, agent: str) -> str:
        """An agent as summary.md's tables write it: SHORT_BUDGET marks a short budget."""
        return f"{agent}{SHORT_BUDGET}" if agent in self.short_budget else agent

    def runs(self, agent: str, game: str) -> list[RunResult]:
        return [r for r in self.results if r.agent == agent and r.game == game]

    def finals(self, agent: str, game: str) -> np.ndarray:
        return np.array([r.final for r in self.runs(agent, game)])

    def evaluations(self, agent: str, game: str) -> np.ndarray:
        """The final evaluations of the agent's runs on the game that have one."""
        values = np.array([r.evaluation for r in self.runs(agent, game)])
        return values[np.isfinite(values)]

    @property
    def curves_csv(self) -> str:
        return os.path.join(self.logdir, CURVES_CSV)

    @property
    def evaluations_csv(self) -> str:
        return os.path.join(self.logdir, EVALUATIONS_CSV)

    @property
    def summary_md(self) -> str:
        return os.path.join(self.logdir, SUMMARY_MD)

    def figure(self, game: str) -> str:
        return os.path.join(self.logdir, f"{game}.png")


def mean_and_standard_error(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error (sample standard deviation, ddof 1, over sqrt(n); nan for n = 1)."""
    values = np.asarray(values, dtype=float)
    if values.size > 1:
        return float(values.mean()), float(values.std(ddof=1) / math.sqrt(values.size))
    return float(values.mean()), math.nan


def bootstrap_interval(
    scores: tuple[np.ndarray, ...],
    statistic: Callable[..., float],
    reps: int = BOOTSTRAP_REPS,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float, float]:
    """(statistic, CI low, CI high) of `statistic(*scores)`, each score matrix [runs, games]:
    rliable's `get_interval_estimates`, a stratified bootstrap (runs resampled within each game,
    each matrix on its own) with a 95% percentile interval. rliable 1.2 draws its resamples from
    numpy's global generator and ignores the `random_state` it passes on, so the global generator
    is seeded with `seed` for the call (and given its state back after): the same scores give the
    same interval."""
    from rliable import library as rly

    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():
            # arch 7 warns that rliable passes it a RandomState by its old keyword.
            warnings.filterwarnings("ignore", "random_state is deprecated", FutureWarning)
            arrays = tuple(np.asarray(m, dtype=float) for m in scores)
            points, intervals = rly.get_interval_estimates(
                # one matrix: rliable's StratifiedBootstrap; several: StratifiedIndependent...
                {"x": arrays[0] if len(arrays) == 1 else arrays},
                lambda *matrices: np.array([statistic(*matrices)]),
                reps=reps,
                confidence_interval_size=CONFIDENCE,
                random_state=np.random.RandomState(seed),
            )
    finally:
        np.random.set_state(saved)
    return float(points["x"][0]), float(intervals["x"][0, 0]), float(intervals["x"][1, 0])


def interquartile_mean(scores: np.ndarray, reps: int = BOOTSTRAP_REPS, seed: int = BOOTSTRAP_SEED):
    """(IQM, CI low, CI high) of a [runs, games] score matrix: rliable's `aggregate_iqm` and its
    stratified-bootstrap 95% confidence interval (`bootstrap_interval`)."""
    from rliable import metrics as rly_metrics

    return bootstrap_interval((scores,), rly_metrics.aggregate_iqm, reps, seed)


def _aggregate(
    results: Sequence[RunResult],
    agent: str,
    games: Sequence[str],
    seeds: Sequence[int],
    references: Mapping[str, Mapping[str, float]],
) -> Aggregate | None:
    by_key = {(r.game, r.seed): r for r in results if r.agent == agent}
    # choice: rliable's score matrix is runs x games, one run per game in each row: a seed counts
    # once its runs on every game reached the budget, so a partial grid aggregates finished seeds.
    complete = [s for s in seeds if all((g, s) in by_key and by_key[g, s].reached for g in games)]
    if not complete:
        return None
    scores = np.array(
        [
            [normalise(by_key[g, s].final, *normaliser(references, g)) for g in games]
            for s in complete
        ]
    )
    return Aggregate(tuple(complete), scores, *interquartile_mean(scores))


def _improvement(x: np.ndarray, y: np.ndarray) -> float:
    """rliable's `metrics.probability_of_improvement` (the Mann-Whitney U statistic over n·m per
    game, then the mean over games) as one array expression: the same numbers, and the bootstrap
    calls it thousands of times, where scipy's test per game took ~10 s per ordering."""
    pairs = x[:, None, :] - y[None, :, :]  # [runs of x, runs of y, games]
    return float(np.mean((pairs > 0) + 0.5 * (pairs == 0)))


def probability_of_improvement(
    x: np.ndarray, y: np.ndarray, reps: int = BOOTSTRAP_REPS, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float, float]:
    """(P(X > Y), CI low, CI high) of two [runs, games] score matrices: the probability that a run
    of X scores above a run of Y on a game drawn uniformly (ties count one half; rliable's
    `probability_of_improvement`, `_improvement`), with its stratified-bootstrap 95% confidence
    interval (`bootstrap_interval`: each agent's runs resampled within each game)."""
    return bootstrap_interval((x, y), _improvement, reps, seed)


# choice: with one run per agent and game the bootstrap has no spread to resample, and an interval
# collapses onto its estimate (an ordering's P is then 1.0 or 0.0 from a single pair of runs): no
# interval and no verdict below this many seeds.
MIN_BOOTSTRAP_SEEDS = 2


@dataclasses.dataclass(frozen=True)
class OrderingResult:
    """An ordering a paper claims between two agents of the grid, `better` > `worse`, measured by
    the probability of improvement over the normalised scores of their aggregates' seeds."""

    better: str
    worse: str
    source: str  # the paper, and where it makes the claim
    probability: float
    low: float
    high: float
    seeds: int  # the fewer of the two agents' seeds

    @property
    def verdict(self) -> str:
        """holds: the interval lies above 0.5; reversed: below 0.5; unresolved: it holds 0.5, or
        there are fewer than MIN_BOOTSTRAP_SEEDS seeds."""
        if self.seeds < MIN_BOOTSTRAP_SEEDS:
            return "unresolved"
        if self.low > 0.5:
            return "holds"
        if self.high < 0.5:
            return "reversed"
        return "unresolved"

    def seeds_to_resolve(self) -> float:
        """The seeds per agent at which the interval of an unresolved ordering would leave 0.5 if
        the measured probability held: the interval's half-width shrinks as 1/√seeds, so seeds ·
        (half-width / |P − 0.5|)², rounded up, and at least one more seed than measured (an
        interval that ends at 0.5 itself gives the seeds it has); inf where P = 0.5 (no
        difference measured)."""
        gap = abs(self.probability - 0.5)
        if gap == 0:
            return math.inf
        needed = self.seeds * ((self.high - self.low) / 2 / gap) ** 2
        return float(max(math.ceil(round(needed, 9)), self.seeds + 1))  # 3 · 4.000000000000001: 12


def orderings(report: "GridReport") -> list[OrderingResult]:
    """Every ordering of `<paper>/ablations.py`'s ORDERINGS whose two variants are agents of the
    report (as `<paper>.<ablation>` or an alias such as gdi_h3) with an aggregate each."""
    named: dict[tuple[str, str], str] = {}
    for agent in report.agents:
        spec = agent_spec(agent)
        if spec.module is not None:  # a test stand-in
            continue
        # A paper's main with its defaults is the variant its ablations name after the paper
        # (reactor, dice, lbc: the same config), so `reactor` is `reactor.reactor` here.
        ablation = spec.ablation or default_variant(spec.paper)
        if ablation:
            named.setdefault((spec.paper, ablation), agent)
    results = []
    for paper in dict.fromkeys(paper for paper, _ in named):
        for better, worse, source in paper_ablations(paper).ORDERINGS:
            agents = named.get((paper, better)), named.get((paper, worse))
            if None in agents:
                continue
            aggregates = [report.aggregates[a] for a in agents]
            if None in aggregates:
                continue
            x, y = (a.scores for a in aggregates)
            results.append(
                OrderingResult(
                    *agents,
                    f"{paper} {source}",
                    *probability_of_improvement(x, y),
                    min(len(a.seeds) for a in aggregates),
                )
            )
    return results


def _orderings_markdown(results: Sequence[OrderingResult]) -> list[str]:
    lines = [
        "",
        (
            "Orderings the papers claim among these agents (each paper's `ablations.py`, "
            "ORDERINGS). P(X > Y): the probability that a run of X scores above a run of Y on a "
            "game drawn at random (rliable `probability_of_improvement` over the normalised "
            "scores of the IQM's seeds, ties count ½; 0.5 = no difference), with its "
            f"{CONFIDENCE:.0%} stratified-bootstrap confidence interval ({BOOTSTRAP_REPS} "
            "repetitions). holds: the interval lies above 0.5; reversed: below; unresolved: it "
            "holds 0.5, and the last column estimates the seeds per agent that would resolve "
            "it if the measured P held (the interval narrows as 1/√seeds: seeds · (half-width "
            "/ |P − 0.5|)², and at least one more seed than measured)."
        ),
        "",
        "| claim X > Y | where | P(X > Y) [95% CI] | seeds | verdict |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        verdict = r.verdict
        if r.seeds < MIN_BOOTSTRAP_SEEDS:
            verdict += f" (one seed: no interval; {MIN_BOOTSTRAP_SEEDS} or more give a verdict)"
        elif verdict == "unresolved":
            needed = r.seeds_to_resolve()
            verdict += " (no difference)" if math.isinf(needed) else f" (~{needed:.0f} seeds)"
        lines.append(
            f"| {r.better} > {r.worse} | {r.source} | {r.probability:.2f} "
            f"[{r.low:.2f}, {r.high:.2f}] | {r.seeds} | {verdict} |"
        )
    return lines


def _cell_text(values: Sequence[float], short: bool, digits: int = 2) -> str:
    if not len(values):
        return "—"
    mean, se = mean_and_standard_error(values)
    text = f"{mean:.{digits}f}" if math.isnan(se) else f"{mean:.{digits}f} ± {se:.{digits}f}"
    return f"{text} ({len(values)}){'†' if short else ''}"


def return_at(run: RunResult, frames: int) -> float:
    """The run's curve at `frames` (the mean of its last games then), nan where its curve has no
    point there: not reached, or not on its grid (budget / CURVE_POINTS apart)."""
    hit = np.flatnonzero(np.isclose(run.curve_frames, frames, rtol=0, atol=0.5))
    return float(run.curve[hit[0]]) if hit.size else math.nan


def _evaluations_markdown(report: GridReport) -> list[str]:
    """The final evaluations, agent x game; nothing when no run has one."""
    if not any(report.evaluations(a, g).size for a in report.agents for g in report.games):
        return []
    lines = [
        "",
        (
            "Final evaluation: the mean return of the evaluation a run plays when it reaches its "
            "budget, after its last update, with its paper's own evaluator (the `eval_policy` and "
            "`eval_episodes` of `<paper>.main`; eval.csv). Each cell: mean ± standard error over "
            "the seeds that have one, (n seeds); — where none has (a run finished elsewhere brings "
            f"its evaluation from the {EVALUATIONS_CSV} beside its curves, where there is one). "
            "The training games above are played by the behaviour over the whole run, and where "
            "games are long beside the budget they lag the policy "
            "(on Freeway, 2,500 steps a game, a run of 160 environments ends its first games "
            "after 400,000 frames): this table measures the policy at the budget."
        ),
        "",
    ]
    return lines + _agent_table(report, lambda a, g: _cell_text(report.evaluations(a, g), False))


def _agent_table(report: GridReport, cell: Callable[[str, str], str]) -> list[str]:
    """A markdown table of agent x game with `cell(agent, game)` in each cell."""
    lines = ["| agent | " + " | ".join(report.games) + " |", "|---|" + "---|" * len(report.games)]
    for agent in report.agents:
        cells = [cell(agent, g) for g in report.games]
        lines.append(f"| {report.name(agent)} | " + " | ".join(cells) + " |")
    return lines


def _equal_frames_markdown(report: GridReport) -> list[str]:
    """Every agent at the budgets shorter than its own, read off its curve: whether an agent
    run short is behind because of its budget or learns slower per frame. Empty with one budget."""
    shorter = sorted({report.budgets[a] for a in report.agents})[:-1]
    if not shorter:
        return []
    games = report.games
    lines = [
        "",
        (
            "At equal frames: each agent at the budgets of the agents run shorter than it, the "
            f"mean return of its last {LAST_GAMES} training games at that frame count (its "
            "curve's point there, from the runs that reached it; — where none has a point "
            "there), and at its own budget its final returns as above. A longer run's schedules "
            "(learning rate, warm-up) anneal over its own budget, so it is at an earlier point "
            "of them there than a run of that budget. Each cell: mean ± standard error over "
            "seeds, (n seeds)."
        ),
        "",
        "| frames | agent | " + " | ".join(games) + " |",
        "|---|---|" + "---|" * len(games),
    ]
    for frames in shorter:
        for agent in report.agents:
            if report.budgets[agent] < frames:
                continue
            cells = []
            for g in games:
                runs = report.runs(agent, g)
                if report.budgets[agent] == frames:  # the table above's row
                    cells.append(
                        _cell_text(report.finals(agent, g), any(not r.reached for r in runs))
                    )
                    continue
                values = [return_at(r, frames) for r in runs]
                cells.append(_cell_text([v for v in values if not math.isnan(v)], short=False))
            lines.append(f"| {frames:,} | {report.name(agent)} | " + " | ".join(cells) + " |")
    return lines


def _summary_markdown(report: GridReport, command: str | None, template: str | None) -> str:
    games, refs = report.games, report.references
    short_budget = report.short_budget
    budgets = {report.budgets[a] for a in report.agents}
    if len(budgets) == 1:
        budget = f"budget {min(budgets):,} frames per run"
        at_budget = f"{min(budgets):,} frames"
    else:
        listed = ", ".join(f"{a} {report.budgets[a]:,}" for a in report.agents)
        budget = f"budget per run (frames): {listed}"
        at_budget = "its agent's budget"
    marked = (
        f"; {SHORT_BUDGET} = an agent run at fewer frames than the published curves (under the "
        "table)"
        if short_budget
        else ""
    )
    lines = [
        "# MinAtar grid",
        "",
        (
            f"Agents {', '.join(report.agents)}; games {', '.join(games)} "
            f"(`MinAtar/<Game>-v0`, all 6 actions); seeds {', '.join(map(str, report.seeds))}; "
            f"{budget}."
        ),
        "",
    ]
    if command:
        lines += [f"Grid (the same command resumes it): `{command}`", ""]
    if template:
        specs = {a: agent_spec(a) for a in report.agents}
        mapping = ", ".join(
            f"{a}: `{spec.module or spec.paper + '.main'}"
            f"{' --ablation=' + spec.ablation if spec.ablation else ''}`"
            for a, spec in specs.items()
        )
        lines += [f"Each run: `{template}` ({mapping}).", ""]
    lines += [
        (
            f"Final return of a run: the mean return of its last {LAST_GAMES} training games "
            f"that ended at or before {at_budget} (episodes.csv). Each cell: mean ± standard "
            "error (sample standard deviation / √n) over seeds, (n seeds); † = a run that has not "
            f"reached its budget (its last games so far){marked}. DQN and AC(λ=0.8): the "
            f"published curves at {PUBLISHED_FRAMES:,} frames (Young & Tian 2019, "
            "arXiv:1903.03176; the MinAtar README figure at "
            "kenjyoung/MinAtar@87c2bc825e0a4171040323a8164e9ecd32d14731, 30 runs each, read off "
            "by eye); random: a uniformly random policy measured with the installed minatar "
            "package (benchmarks/data/minatar_references.csv says how)."
        ),
        "",
    ]
    lines += _agent_table(
        report,
        lambda a, g: _cell_text(report.finals(a, g), any(not r.reached for r in report.runs(a, g))),
    )
    for name in (DQN, AC_LAMBDA, RANDOM):
        values = [refs.get(g, {}).get(name) for g in games]
        cells = ["—" if v is None else f"{v:.2f}" for v in values]
        lines.append(f"| {REFERENCE_NAMES[name]} | " + " | ".join(cells) + " |")
    if short_budget:
        listed = ", ".join(f"{a} {report.budgets[a]:,}" for a in short_budget)
        lines += [
            "",
            (
                f"{SHORT_BUDGET} Run at fewer frames than the references' {PUBLISHED_FRAMES:,}: "
                f"shorter than the published curves ({listed} frames)."
            ),
        ]
    lines += _evaluations_markdown(report)
    lines += [
        "",
        (
            "Normalised score per game: (final return − random) / (reference − random), "
            "reference = the better of the published DQN and AC(λ=0.8) returns (1 = the better "
            "published agent, 0 = random). Each cell: mean ± standard error over seeds. IQM: the "
            "interquartile mean (the mean of the middle 50%) of the normalised scores of all the "
            f"agent's runs on all games, with its {CONFIDENCE:.0%} stratified-bootstrap "
            "confidence interval (rliable `get_interval_estimates` with `aggregate_iqm`, "
            f"{BOOTSTRAP_REPS} repetitions resampling the runs within each game, seed "
            f"{BOOTSTRAP_SEED}), over the seeds whose runs reached their budget on every game."
        ),
        "",
        "| agent | " + " | ".join(games) + " | IQM [95% CI] | seeds in IQM |",
        "|---|" + "---|" * (len(games) + 2),
    ]
    for agent in report.agents:
        cells = []
        for g in games:
            runs = report.runs(agent, g)
            scores = normalise([r.final for r in runs], *normaliser(refs, g))
            cells.append(_cell_text(scores, any(not r.reached for r in runs)))
        aggregate = report.aggregates[agent]
        if aggregate is None:
            cells += ["—", "none on every game"]
        else:
            interval = f"[{aggregate.low:.2f}, {aggregate.high:.2f}]"
            if len(aggregate.seeds) < MIN_BOOTSTRAP_SEEDS:
                interval = "(one seed: no interval)"
            cells += [f"{aggregate.iqm:.2f} {interval}", ", ".join(map(str, aggregate.seeds))]
        lines.append(f"| {report.name(agent)} | " + " | ".join(cells) + " |")
    lines += _equal_frames_markdown(report)
    measured = orderings(report)
    if measured:
        lines += _orderings_markdown(measured)
    short = [r for r in report.results if not r.reached]
    missing = [
        f"{a}/{g}/seed{s}"
        for a in report.agents
        for g in games
        for s in report.seeds
        if not any(r.seed == s for r in report.runs(a, g))
    ]
    notes = []
    if short_budget:
        # choice: the scores of a short budget stay in the table and the IQM (what the grid ran),
        # named here, not dropped: the reader compares them knowing they are early.
        notes.append(
            f"{SHORT_BUDGET} Normalised scores and IQM of {', '.join(short_budget)}: at their "
            f"budgets (above), against the references at {PUBLISHED_FRAMES:,} frames."
        )
    if short:
        listed = ", ".join(f"{r.agent}/{r.game}/seed{r.seed} ({r.frames:,})" for r in short)
        notes.append(f"† Short of the budget (frames trained): {listed}.")
    if missing:
        notes.append(f"Not run yet: {', '.join(missing)}.")
    elsewhere = [f"{r.agent}/{r.game}/seed{r.seed}" for r in report.results if r.elsewhere]
    if elsewhere:
        notes.append(
            f"Finished elsewhere (their curves from {', '.join(report.curves_from)}; no run directory "
            f"here): {', '.join(elsewhere)}."
        )
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


def _write_curves_csv(report: GridReport) -> None:
    with open(report.curves_csv, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CURVES_COLUMNS)
        for r in report.results:
            for frames, value in zip(r.curve_frames, r.curve):
                writer.writerow(
                    [
                        r.agent,
                        r.game,
                        r.seed,
                        ablation_reports._number(frames),
                        ablation_reports._number(value),
                    ]
                )


def _write_evaluations_csv(report: GridReport) -> None:
    with open(report.evaluations_csv, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(EVALUATIONS_COLUMNS)
        for r in report.results:
            if np.isfinite(r.evaluation):
                writer.writerow([r.agent, r.game, r.seed, ablation_reports._number(r.evaluation)])


def seed_mean_curve(
    runs: Sequence[RunResult], grid: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, standard error, seeds) over the runs' curves at each grid point, of the runs that
    have a point there (standard error nan where fewer than 2 do)."""
    values = np.full((len(runs), grid.size), np.nan)
    for i, r in enumerate(runs):
        values[i, np.searchsorted(grid, r.curve_frames)] = r.curve
    count = np.isfinite(values).sum(axis=0)
    masked = np.ma.masked_invalid(values)
    mean = masked.mean(axis=0).filled(np.nan)
    std = masked.std(axis=0, ddof=1).filled(np.nan) if len(runs) > 1 else np.full(grid.size, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.where(count > 1, std / np.sqrt(count), np.nan)
    return mean, se, count


# choice: a figure of more agents than this (a paper's whole study: IMPALA's has 18) puts its
# legend to the right of the axes, where it hides no curve.
LEGEND_INSIDE_MAX = 8


def agent_colours(count: int) -> list[tuple[float, ...]]:
    """One colour per agent, no two alike: matplotlib's ten up to ten agents; beyond, tab20's
    dark shades first and then its light ones (up to 20 agents; more reuse them in turn)."""
    if count <= 10:
        return [colormaps["tab10"](i) for i in range(count)]
    order = list(range(0, 20, 2)) + list(range(1, 20, 2))
    return [colormaps["tab20"](order[i % 20]) for i in range(count)]


def _plot_game(report: GridReport, game: str) -> Figure:
    """The game's figure, saved to `report.figure(game)` and returned."""
    outside = len(report.agents) > LEGEND_INSIDE_MAX
    figure = Figure(figsize=(11.5 if outside else 7.5, 4.5), layout="constrained")
    axes = figure.subplots()
    low, high, longest = [], [], 0
    for agent, colour in zip(report.agents, agent_colours(len(report.agents))):
        runs = [r for r in report.runs(agent, game) if r.curve.size]
        if not runs:
            continue
        # choice: each agent over its own budget on one frame axis; the references stay lines
        # across it (they are the published returns at 5M frames).
        grid = curve_grid(report.budgets[agent])
        mean, se, _ = seed_mean_curve(runs, grid)
        seeds = f"{len(runs)} seed{'' if len(runs) == 1 else 's'}"
        if agent in report.short_budget:
            seeds += f", {runlog.format_count(report.budgets[agent])} frames{SHORT_BUDGET}"
        axes.plot(grid, mean, color=colour, label=f"{agent} ({seeds})")
        axes.fill_between(grid, mean - se, mean + se, color=colour, alpha=0.2, linewidth=0)
        band = np.where(np.isfinite(se), se, 0.0)
        low.append(np.nanmin(mean - band))
        high.append(np.nanmax(mean + band))
        longest = max(longest, report.budgets[agent])
    references = report.references.get(game, {})
    # choice: when no curve reaches the references' frames (an ablation study at its budget), the
    # axis fits the curves and random play, which the references at 5M frames would otherwise
    # squeeze into the bottom of the figure; a reference above the axis is in the legend only.
    top = None
    if low and longest < PUBLISHED_FRAMES:
        measured = [references[RANDOM]] if RANDOM in references else []
        bottom, top = min(low + measured), max(high + measured)
        margin = 0.05 * (top - bottom) or 0.5
        bottom, top = bottom - margin, top + margin
        axes.set_ylim(bottom, top)
    styles = {DQN: ("--", "black"), AC_LAMBDA: (":", "black"), RANDOM: ("-.", "grey")}
    for name, (style, color) in styles.items():
        value = references.get(name)
        if value is not None:
            where = "published, 5M frames" if name != RANDOM else "measured"
            above = ", above the axis" if top is not None and value > top else ""
            axes.axhline(
                value,
                linestyle=style,
                color=color,
                linewidth=1,
                label=f"{REFERENCE_NAMES[name]} ({where}): {value:.1f}{above}",
            )
    axes.set_title(f"MinAtar {GAMES[game]} ({env_id(game)})")
    axes.set_xlabel("environment frames")
    axes.set_ylabel(f"mean return of the last {LAST_GAMES} training games")
    axes.grid(alpha=0.3)
    if outside:
        axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        axes.legend(fontsize="small")
    figure.savefig(report.figure(game), dpi=100)
    return figure


def write_reports(
    logdir: str,
    agents: Sequence[str],
    games: Sequence[str],
    seeds: Sequence[int],
    budgets: Mapping[str, int],
    command: str | None = None,
    template: str | None = None,
    references: str = REFERENCES_CSV,
    curves_from: Sequence[str] = (),
) -> GridReport:
    """curves.csv, summary.md and <game>.png in `logdir` from the run directories of the grid
    that exist and the runs of `curves_from` finished elsewhere (module docstring); ValueError if
    there is none."""
    if not os.path.isdir(logdir):
        raise ValueError(f"logdir {logdir!r} is not a directory")
    table = read_references(references)
    for game in games:
        normaliser(table, game)  # every game has its references
    elsewhere = read_curves(curves_from)
    evaluations = read_evaluations(curves_from)
    results = []
    for s in seeds:
        for g in games:
            for a in agents:
                directory = run_dir(logdir, a, g, s)
                # A run that has not ended a game yet (its episodes.csv holds the header alone:
                # just started, or stopped before its first game) reports as not run yet.
                if (
                    _last_row_frames(os.path.join(directory, ablation_reports.EPISODES_CSV))
                    is not None
                ):
                    results.append(read_result(logdir, a, g, s, budgets[a]))
                elif not os.path.isdir(directory):  # a run directory here wins over the file
                    result = finished_elsewhere(elsewhere, a, g, s, budgets[a])
                    if result:
                        evaluation = evaluations.get((a, g, s), math.nan)
                        results.append(dataclasses.replace(result, evaluation=evaluation))
    results = tuple(results)
    if not results:
        raise ValueError(
            f"no {ablation_reports.EPISODES_CSV} of the grid under {logdir!r}; expected "
            f"<logdir>/<agent>/<game>/seed<S>/{ablation_reports.EPISODES_CSV}"
            + (f", or runs finished in {', '.join(curves_from)}" if curves_from else "")
        )
    report = GridReport(
        logdir=logdir,
        agents=tuple(agents),
        games=tuple(games),
        seeds=tuple(seeds),
        budgets={a: budgets[a] for a in agents},
        results=results,
        references=table,
        aggregates={a: _aggregate(results, a, games, seeds, table) for a in agents},
        curves_from=tuple(curves_from),
    )
    _write_curves_csv(report)
    _write_evaluations_csv(report)
    with open(report.summary_md, "w") as f:
        f.write(_summary_markdown(report, command, template))
    for game in games:
        _plot_game(report, game)
    return report


# ---------------------------------------------------------------------------------------------
# Running.


class Progress:
    """The runs done / running / left and an ETA, printed when a run starts or ends.

    choice: ETA = each unfinished run's frames left (to its agent's budget in `budgets`) at its
    agent's frames per second of one run, `parallel` runs at a time, and never less than the
    longest single run left. An agent's rate pools its runs of this invocation: those that ended
    (frames trained over wall time) and those running (frames in their episodes.csv gained since
    they started); an agent with none yet runs at the pooled rate of all agents. The agents'
    rates differ some fortyfold on MinAtar (IMPALA's to Reactor's), so one rate for all would
    misjudge a mixed grid by hours."""

    def __init__(
        self,
        frames: Mapping[tuple[str, int], int],
        budgets: Mapping[str, int],
        parallel: int,
        logdir: str,
        clock: Callable[[], float] = time.monotonic,
        current: Callable[[str, int], int] | None = None,
        out=None,
    ):
        self.frames = dict(frames)  # (cell, seed) -> frames trained, updated as runs go
        self.budgets = budgets
        self.parallel = parallel
        self.logdir = logdir
        self.clock = clock
        self.current = current or self._episodes_frames
        self.out = out
        self.done = {key for key, f in self.frames.items() if f >= self.budget(key)}
        self.running: dict[tuple[str, int], tuple[float, int]] = {}  # key -> (start time, frames)
        self.ended: list[tuple[str, int, float]] = []  # (agent, frames trained, seconds), ended

    def budget(self, key: tuple[str, int]) -> int:
        """The budget of a (cell, seed)'s run: its agent's."""
        return self.budgets[cell_agent(key[0])]

    def _episodes_frames(self, variant: str, seed: int) -> int:
        path = os.path.join(
            ablation_reports.run_logdir(self.logdir, variant, seed), ablation_reports.EPISODES_CSV
        )
        return _last_row_frames(path) or 0

    def start(self, variant: str, seed: int) -> str:
        # A resumed run's episodes.csv already holds the games its actors played after its last
        # checkpoint: its progress counts from the larger of the two, never from the checkpoint
        # alone (which made the first resumed run look millions of frames/s fast).
        start_frames = max(self.frames[variant, seed], self.current(variant, seed))
        self.running[variant, seed] = (self.clock(), start_frames)
        return self._line(f"started {variant} seed {seed}")

    def end(self, variant: str, seed: int, frames: int) -> str:
        started, start_frames = self.running.pop((variant, seed))
        gained = max(frames - start_frames, 0)
        self.ended.append((cell_agent(variant), gained, self.clock() - started))
        self.frames[variant, seed] = frames
        self.done.add((variant, seed))
        return self._line(f"finished {variant} seed {seed}")

    def _gains(self) -> dict[str, tuple[float, float]]:
        """{agent: (frames gained, run-seconds)} of its runs in this invocation: the ended ones and
        the running ones so far."""
        gains: dict[str, tuple[float, float]] = {}
        now = self.clock()
        running = [
            (cell_agent(v), max(self.current(v, s) - start_frames, 0), now - started)
            for (v, s), (started, start_frames) in self.running.items()
        ]
        for agent, frames, seconds in [*self.ended, *running]:
            total = gains.get(agent, (0.0, 0.0))
            gains[agent] = (total[0] + frames, total[1] + seconds)
        return gains

    def rates(self) -> dict[str, float]:
        """{agent: frames per second of one run}, for the agents that made progress."""
        return self._rates(self._gains())

    @staticmethod
    def _rates(gains: Mapping[str, tuple[float, float]]) -> dict[str, float]:
        return {a: f / s for a, (f, s) in gains.items() if f > 0 and s > 0}

    def eta(self) -> tuple[float, str]:
        """(seconds left, what the rates come from)."""
        gains = self._gains()  # read once: the running runs' progress comes from their files
        rates = self._rates(gains)
        left = []  # (agent, frames left) of each unfinished run
        for key, frames in self.frames.items():
            if key in self.done:
                continue
            if key in self.running:
                frames = max(frames, self.current(*key))
            left.append((cell_agent(key[0]), max(self.budget(key) - frames, 0)))
        if not rates:
            return (0.0 if not left else math.nan), "no progress yet"
        measured = ", ".join(f"{a} {runlog.format_count(r)}" for a, r in rates.items())
        basis = f"frames/s per run: {measured}"
        unmeasured = {a for a, _ in left} - rates.keys()
        if unmeasured:
            frames, seconds = map(sum, zip(*gains.values()))
            pooled = frames / seconds
            basis += f"; {', '.join(sorted(unmeasured))} at all runs' {runlog.format_count(pooled)}"
            rates.update(dict.fromkeys(unmeasured, pooled))
        if not left:
            return 0.0, basis
        seconds = [frames / rates[agent] for agent, frames in left]
        slots = min(self.parallel, len(seconds))
        return max(sum(seconds) / slots, max(seconds)), basis

    def _line(self, event: str) -> str:
        seconds, basis = self.eta()
        left = len(self.frames) - len(self.done) - len(self.running)
        line = (
            f"[minatar] {len(self.done)}/{len(self.frames)} done, {len(self.running)} running, "
            f"{left} left | ETA {runlog.format_duration(seconds)} ({basis}) | {event}"
        )
        print(line, file=self.out or sys.stdout, flush=True)
        return line


def _label(variant: str, seed: int) -> str:
    agent, game = variant.split("/")
    return f"agent {agent!r}, game {game!r}, seed {seed}"


def run_grid(
    agents: Sequence[str],
    games: Sequence[str],
    seeds: Sequence[int],
    budgets: Mapping[str, int],
    logdir: str,
    extra_argv: Sequence[str] = (),
    parallel: int = 2,
    check_flags: bool = True,
    curves: Curves | None = None,
) -> dict[tuple[str, int], int]:
    """Runs the grid's unfinished runs, each to its agent's budget in `budgets` (module
    docstring), but those `curves` holds as finished elsewhere; returns {(cell, seed): frames
    trained before this call} of all its runs. AblationRunError naming the run when one fails."""
    # choice: within a seed, game by game with every agent, so a partial grid compares agents on
    # the games it has.
    runs = {cell(a, g): GridRun.of(a, g) for g in games for a in agents}
    shared = {a: shared_arguments(budgets[a], extra_argv) for a in agents}
    compare.check_targets(list(runs.values()), extra_argv)
    before, elsewhere = {}, 0
    for seed in seeds:
        for variant, run in runs.items():
            directory = ablation_reports.run_logdir(logdir, variant, seed)
            budget = budgets[run.name]
            frames = trained_frames(directory)
            if not os.path.isdir(directory) and finished_elsewhere(
                curves or {}, run.name, run.game, seed, budget
            ):
                frames, elsewhere = budget, elsewhere + 1
            before[variant, seed] = frames
    finished = {key for key, frames in before.items() if frames >= budgets[cell_agent(key[0])]}
    resumed = [key for key, frames in before.items() if key not in finished and frames > 0]
    print(
        f"[minatar] {len(before)} runs: {len(finished)} finished (skipped"
        + (f"; {elsewhere} of them elsewhere" if elsewhere else "")
        + f"), {len(resumed)} to "
        f"resume, {len(before) - len(finished) - len(resumed)} to start; {parallel} at a time; "
        f"logs in {logdir}/<agent>/<game>/seed<S>",
        flush=True,
    )
    if len(finished) == len(before):
        return before
    if check_flags:
        checked = {}
        for run in runs.values():
            # choice: one game per agent: its runs' flags differ only in the MinAtar env id.
            checked.setdefault(run.name, run)
        for run in checked.values():
            compare.check_flags([run], seeds[0], logdir, shared[run.name])
    progress = Progress(before, budgets, parallel, logdir)

    def on_event(event: str, variant: str, seed: int) -> None:
        if event == "start":
            progress.start(variant, seed)
            return
        directory = ablation_reports.run_logdir(logdir, variant, seed)
        frames, budget = trained_frames(directory), budgets[cell_agent(variant)]
        if frames < budget:
            stdout = os.path.join(directory, ablation_runner.STDOUT_LOG)
            raise GridRunError(
                f"run of {_label(variant, seed)} exited 0 at {frames:,} of {budget:,} frames "
                "(stopped from outside?); the same command resumes it\n"
                f"stdout (last lines of {stdout}):\n{ablation_runner._stderr_tail(stdout)}"
            )
        progress.end(variant, seed, frames)

    ablation_runner.run_all(
        lambda variant, seed: runs[variant].command(seed, logdir, shared[cell_agent(variant)]),
        list(runs),
        list(seeds),
        logdir,
        parallel,
        skip=lambda variant, seed: (variant, seed) in finished,
        label=_label,
        on_event=on_event,
        append_logs=True,
    )
    return before


# ---------------------------------------------------------------------------------------------
# Command line.


def _names(values: Sequence[str], allowed: Sequence[str], flag: str) -> tuple[str, ...]:
    if not values:
        raise dataclass_flags.FlagError(f"--{flag} names at least one of {', '.join(allowed)}")
    for value in values:
        if value not in allowed:
            raise dataclass_flags.FlagError(
                f"--{flag}: {value!r} is not one of {', '.join(allowed)}"
            )
    if len(set(values)) != len(values):
        raise dataclass_flags.FlagError(f"--{flag}={','.join(values)} names one twice")
    return tuple(values)


@dataclasses.dataclass(frozen=True)
class CommandLine:
    """The flags of `python -m benchmarks.minatar`."""

    agents: tuple[str, ...] = field(
        DEFAULT_AGENTS,
        f"Agents, of: {', '.join(AGENTS)}; or <paper>.<ablation>, any ablation of a paper's "
        "--ablations (e.g. impala.no_correction).",
    )
    games: tuple[str, ...] = field((ALL,), f"Games, of: {', '.join(GAMES)}; or {ALL}.")
    seeds: tuple[int, ...] = field((3,), "Number of seeds N (seeds 0..N-1) or a list of seeds.")
    total_frames: int = field(
        5_000_000,
        "Environment frames of every run but those of --agent_frames (5e6: the published budget).",
    )
    agent_frames: tuple[str, ...] = field(
        (),
        "Budgets of some agents, overriding --total_frames: <agent>=<frames>,... with agents of "
        "--agents, e.g. reactor=2e5,dice=1e6.",
    )
    logdir: str = field("runs/minatar", "Root directory of the runs and the reports.")
    parallel: int = field(2, "Runs at a time.")
    report_only: bool = field(False, "Only write the reports from the run directories there are.")
    curves_from: tuple[str, ...] = field(
        (),
        "curves.csv files of earlier reports (e.g. docs/minatar_grid/curves.csv): their runs "
        "that reached their budget and have no run directory here count as finished.",
    )
    measure_random: bool = field(
        False, "Measure the random policy on --games and rewrite its rows of the reference file."
    )

    def validate(self) -> "CommandLine":
        """Raises dataclass_flags.FlagError naming the flag; returns the command line with the games and
        seeds spelt out."""
        # --agents is open-ended (any <paper>.<ablation>): agent_spec knows the names, and
        # _names checks only that none is named twice.
        if not self.agents:
            raise dataclass_flags.FlagError(f"--agents names at least one of {', '.join(AGENTS)}")
        for agent in self.agents:
            agent_spec(agent)
        agents = _names(self.agents, self.agents, "agents")
        games = (
            tuple(GAMES)
            if tuple(self.games) == (ALL,)
            else _names(self.games, tuple(GAMES) + (ALL,), "games")
        )
        if ALL in games:
            raise dataclass_flags.FlagError(f"--games={','.join(self.games)}: {ALL} stands alone")
        seeds = tuple(cli.parse_seeds(self.seeds))
        if self.total_frames <= 0:
            raise dataclass_flags.FlagError(f"--total_frames={self.total_frames} must be > 0")
        self.budgets()  # FlagError on a bad --agent_frames (--agents is checked above)
        if self.parallel < 1:
            raise dataclass_flags.FlagError(f"--parallel={self.parallel} must be >= 1")
        if not self.logdir:
            raise dataclass_flags.FlagError("--logdir must name a directory")
        if self.report_only and self.measure_random:
            raise dataclass_flags.FlagError("--report_only and --measure_random: give one of them")
        for path in self.curves_from:
            if not os.path.isfile(path):
                raise dataclass_flags.FlagError(f"--curves_from: {path}: no such file")
        return dataclasses.replace(self, agents=agents, games=games, seeds=seeds)

    def budgets(self) -> dict[str, int]:
        """{agent: frames of its runs} (`frame_budgets`)."""
        return frame_budgets(self.agents, self.total_frames, self.agent_frames)


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args, extra = ablation_runner.parse_tool_command_line(argv, CommandLine, TOOL, __doc__)
        if extra and args.measure_random:
            raise dataclass_flags.FlagError(
                f"--measure_random runs no agent: the arguments after -- ({shlex.join(extra)}) "
                "would go nowhere"
            )
    except dataclass_flags.FlagError as error:
        dataclass_flags.fail(str(error))
    # The runner's "starting <run>: <command>" lines; not rliable's per-estimate ones.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    logging.getLogger(ablation_runner.__name__).setLevel(logging.INFO)
    if args.measure_random:
        results = []
        for game in args.games:
            started = time.monotonic()
            result = measure_random_policy(game)
            print(
                f"[minatar] random policy on {game}: {result.mean:.4f} ± "
                f"{result.standard_error:.4f} ({result.games} games, {result.frames:,} frames, "
                f"{time.monotonic() - started:.0f} s)",
                flush=True,
            )
            results.append(result)
        write_random_rows(results)
        print(f"wrote the random rows of {REFERENCES_CSV}")
        return
    budgets = args.budgets()
    command = grid_command(
        args.agents,
        args.games,
        args.seeds,
        args.total_frames,
        args.logdir,
        args.parallel,
        extra,
        budgets,
        args.curves_from,
    )
    try:
        curves = read_curves(args.curves_from)
        if not args.report_only:
            run_grid(
                args.agents,
                args.games,
                args.seeds,
                budgets,
                args.logdir,
                extra,
                args.parallel,
                curves=curves,
            )
        report = write_reports(
            args.logdir,
            args.agents,
            args.games,
            args.seeds,
            budgets,
            command=command,
            template=run_template(args.logdir, budgets, extra),
            curves_from=args.curves_from,
        )
    except dataclass_flags.FlagError as error:
        dataclass_flags.fail(str(error))
    except (ablation_runner.AblationRunError, ValueError) as error:
        sys.exit(f"error: {error}")
    except KeyboardInterrupt:
        sys.exit(
            f"interrupted: the runs going were stopped (they checkpoint); `{command}` resumes them"
        )
    with open(report.summary_md) as f:
        print(f.read())
    figures = ", ".join(report.figure(g) for g in report.games)
    print(f"wrote {report.curves_csv}, {report.evaluations_csv}, {report.summary_md} and {figures}")


if __name__ == "__main__":
    main()

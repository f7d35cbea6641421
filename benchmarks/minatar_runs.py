"""The MinAtar grid's runs (`benchmarks.minatar`): the games and agents, each run's command and
directory, the agents' frame budgets, and what a run left behind read back (its curve of the last
100 training games, its final evaluation, the frames its checkpoints hold)."""

import csv
import dataclasses
import importlib
import importlib.metadata
import logging
import math
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from common.experiments import ablation_runner, compare, dataclass_flags

from common.experiments import ablation_reports


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


def check_names(values: Sequence[str], allowed: Sequence[str], flag: str) -> tuple[str, ...]:
    """`values` of a list flag, each one of `allowed` and none twice; FlagError naming the flag."""
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


def parse_games(values: Sequence[str]) -> tuple[str, ...]:
    """A tool's --games: the games named, or all five for `all` (alone)."""
    if tuple(values) == (ALL,):
        return tuple(GAMES)
    games = check_names(values, tuple(GAMES) + (ALL,), "games")
    if ALL in games:
        raise dataclass_flags.FlagError(f"--games={','.join(values)}: {ALL} stands alone")
    return games


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
    --agent_frames (the frames written as --total_frames is, e.g. 1e6); dataclass_flags.FlagError
    naming --agent_frames on a bad entry."""
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
            assert isinstance(frames, int)  # parse_scalar(int, ...) is an int or ValueError
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
    episodes: ablation_reports.Episodes,
    at_frames: np.ndarray | Sequence[float],
    games: int = LAST_GAMES,
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

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
grid runs; the arguments after `--` are then only quoted in summary.md's commands). curves.csv and
evaluations.csv are also rewritten each time a run reaches its budget, so that the runs finished so
far can be committed while the grid goes on:

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

import dataclasses
import logging
import math
import os
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence


from common.experiments import ablation_runner, cli, compare, dataclass_flags

from common.experiments import ablation_reports
from common.runtime import runlog
from common.settings.config import field
from benchmarks.minatar_references import measure_random_policy, write_random_rows
from benchmarks.minatar_reports import write_reports
from benchmarks.minatar_runs import (
    AGENTS,
    ALL,
    Curves,
    DEFAULT_AGENTS,
    GAMES,
    GridRun,
    GridRunError,
    REFERENCES_CSV,
    TOOL,
    _last_row_frames,
    agent_spec,
    cell,
    cell_agent,
    check_names,
    finished_elsewhere,
    frame_budgets,
    grid_command,
    parse_games,
    read_curves,
    run_template,
    shared_arguments,
    trained_frames,
)


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
            gained_frames, gained_seconds = map(sum, zip(*gains.values()))
            pooled = gained_frames / gained_seconds
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
    on_finished: Callable[[], None] | None = None,
) -> dict[tuple[str, int], int]:
    """Runs the grid's unfinished runs, each to its agent's budget in `budgets` (module
    docstring), but those `curves` holds as finished elsewhere, calling `on_finished` each time a
    run reaches its budget; returns {(cell, seed): frames trained before this call} of all its
    runs. AblationRunError naming the run when one fails."""
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
        checked: dict[str, GridRun] = {}
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
        if on_finished:
            on_finished()

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
        "curves.csv files of earlier reports (e.g. docs/results/minatar_grid/curves.csv): their runs "
        "that reached their budget and have no run directory here count as finished.",
    )
    measure_random: bool = field(
        False, "Measure the random policy on --games and rewrite its rows of the reference file."
    )

    def validate(self) -> "CommandLine":
        """Raises dataclass_flags.FlagError naming the flag; returns the command line with the games and
        seeds spelt out."""
        # --agents is open-ended (any <paper>.<ablation>): agent_spec knows the names, and
        # check_names checks only that none is named twice.
        if not self.agents:
            raise dataclass_flags.FlagError(f"--agents names at least one of {', '.join(AGENTS)}")
        for agent in self.agents:
            agent_spec(agent)
        agents = check_names(self.agents, self.agents, "agents")
        games = parse_games(self.games)
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

    def reports(curves_only: bool = False):
        return write_reports(
            args.logdir,
            args.agents,
            args.games,
            args.seeds,
            budgets,
            command=command,
            template=run_template(args.logdir, budgets, extra),
            curves_from=args.curves_from,
            curves_only=curves_only,
        )

    def reports_so_far() -> None:
        try:
            reports(curves_only=True)
        except ValueError as error:  # a run's episodes.csv caught mid-row: the next end rewrites
            print(f"[minatar] reports not rewritten this time: {error}", flush=True)

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
                on_finished=reports_so_far,
            )
        report = reports()
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

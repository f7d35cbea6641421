"""Run named ablation variants on the same seeds and budget, then write one table and one plot.

The runner knows nothing about a paper's training stack. Its whole contract with a paper package is:

* a run is the subprocess `python -m <module> --ablation=<variant> --seed=<seed>
  --logdir=<logdir>/<variant>/seed<seed> <extra argv>`, run with this interpreter
  (`sys.executable`); the budget (frames) goes in the extra argv, so every variant and seed gets the
  same one;
* a finished run has written `<run logdir>/episodes.csv` with the header
  `frames,episode_return,episode_length,wall_time` (training episodes; frames = environment frames
  consumed when the episode ended; wall_time = seconds since the run started), and may have written
  `<run logdir>/eval.csv` with the header `frames,episode_return,hns,wall_time`.

`write_reports` turns such run directories (from `run_ablations` or from anywhere else) into
`<logdir>/curves.csv`, `<logdir>/summary.md` and `<logdir>/curves.png`.

Choices (the papers compare final scores and learning curves but fix no procedure for seeds):

* final score of a run = mean return of the episodes that ended in the last 10% of that run's frames
  (the same rule for training and evaluation episodes); a variant reports the mean ± sample standard
  deviation (ddof = 1) of its runs' final scores over seeds;
* HNS, where the game is an Atari (or DMLab-30) game, comes from `common.equations.metrics` with a
  named normaliser, and every HNS column names it; the `hns` column of eval.csv is not used, so all
  numbers share one table;
* curves are sampled on one frames grid shared by all runs (100 points); each point is the mean
  return of the run's episodes that ended in the trailing 5% of the largest frame count; the plot
  shows the mean over seeds and shades the range between the lowest and highest seed.

Command line (absl flags, see `--help`; the arguments after `--` go to every run):

    python -m common.experiments.ablation_runner --module=impala.main
    --variants=vtrace,no_correction \\
        --seeds=0,1,2 --logdir=runs/impala_vtrace --game=Pong --parallel=2 -- --total_frames=2000000
    python -m common.experiments.ablation_runner --report_only --logdir=runs/impala_vtrace
    --game=Pong

A paper's main runs it for `--ablations` / `--seeds` (common.experiments.cli).
"""

import contextlib
import csv
import dataclasses
import logging
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from absl import flags
from matplotlib.figure import Figure


from common.experiments import dataclass_flags
from common.equations import metrics
from common.runtime import runlog
from common.settings.config import check_choice, field

# What a run writes, as common.runtime.runlog defines it (the runner only reads it).
EPISODES_CSV, EVAL_CSV = runlog.EPISODES_CSV, runlog.EVAL_CSV
EPISODES_COLUMNS, EVAL_COLUMNS = runlog.EPISODES_HEADER, runlog.EVAL_HEADER
CURVES_COLUMNS = ("variant", "seed", "source", "frames", "wall_time", "episode_return", "hns")
CURVES_CSV, SUMMARY_MD, CURVES_PNG = "curves.csv", "summary.md", "curves.png"
STDOUT_LOG, STDERR_LOG = "stdout.log", "stderr.log"

# choice: the final score averages the episodes of the last 10% of frames: late enough to be
# "final", wide enough to average over many episodes (training episodes are noisy; see the module
# docstring).
FINAL_FRACTION = 0.1
# choice: 100 curve points and a trailing window of 5% of the frames: smooth, still shows the trend.
GRID_POINTS = 100
SMOOTHING_FRACTION = 0.05
# How much of a failed run's stderr the error message quotes.
STDERR_TAIL_LINES = 25
# choice: seconds the stopped runs get, together, to exit on SIGTERM before SIGKILL: a run
# checkpoints on its way out, and the papers that replay write their replay buffer too.
STOP_GRACE_SECONDS = 60.0

log = logging.getLogger(__name__)


class AblationRunError(RuntimeError):
    """A run exited with a non-zero status or without writing episodes.csv."""


@dataclasses.dataclass(frozen=True)
class Episodes:
    """The episodes of one CSV file, in file order."""

    frames: np.ndarray
    returns: np.ndarray
    wall_time: np.ndarray


@dataclasses.dataclass(frozen=True)
class Run:
    variant: str
    seed: int
    train: Episodes
    eval: Episodes | None


@dataclasses.dataclass(frozen=True)
class SeedStat:
    """One number per seed, with its mean and sample standard deviation (nan for a single seed)."""

    per_seed: tuple[float, ...]

    @property
    def mean(self) -> float:
        return float(np.mean(self.per_seed))

    @property
    def std(self) -> float:
        return float(np.std(self.per_seed, ddof=1)) if len(self.per_seed) > 1 else float("nan")


@dataclasses.dataclass(frozen=True)
class VariantSummary:
    """Final scores (see `final_score`), frames and wall time of one variant over its seeds.

    The HNS fields are None without a game; the eval fields are None unless every run wrote
    eval.csv.
    """

    variant: str
    seeds: tuple[int, ...]
    final_return: SeedStat
    final_hns: SeedStat | None
    final_eval_return: SeedStat | None
    final_eval_hns: SeedStat | None
    frames: SeedStat
    wall_time: SeedStat


@dataclasses.dataclass(frozen=True)
class AblationSummary:
    logdir: str
    game: str | None
    normaliser: str | None
    variants: tuple[VariantSummary, ...]

    def __getitem__(self, variant: str) -> VariantSummary:
        for summary in self.variants:
            if summary.variant == variant:
                return summary
        raise KeyError(f"no variant {variant!r}; variants are {[v.variant for v in self.variants]}")

    @property
    def curves_csv(self) -> str:
        return os.path.join(self.logdir, CURVES_CSV)

    @property
    def summary_md(self) -> str:
        return os.path.join(self.logdir, SUMMARY_MD)

    @property
    def curves_png(self) -> str:
        return os.path.join(self.logdir, CURVES_PNG)


def run_logdir(logdir: str, variant: str, seed: int) -> str:
    """Where the run of `variant` with `seed` writes its logs: <logdir>/<variant>/seed<seed>."""
    return os.path.join(logdir, variant, f"seed{seed}")


def run_command(
    module: str, variant: str, seed: int, logdir: str, extra_argv: Sequence[str]
) -> list[str]:
    return [
        sys.executable,
        "-m",
        module,
        f"--ablation={variant}",
        f"--seed={seed}",
        f"--logdir={run_logdir(logdir, variant, seed)}",
        *extra_argv,
    ]


# ---------------------------------------------------------------------------------------------------
# Reading runs.


def read_episodes(path: str, columns: Sequence[str]) -> Episodes:
    """Frames, returns and wall times from a CSV with (at least) `columns`; ValueError naming the
    file."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(
                f"{path}: header {reader.fieldnames} lacks {missing}; expected {','.join(columns)}"
            )
        rows = list(reader)
    if not rows:
        raise ValueError(f"{path} has a header but no episodes")
    try:
        values = {
            c: np.array([float(row[c]) for row in rows])
            for c in ("frames", "episode_return", "wall_time")
        }
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"{path}: frames, episode_return and wall_time must be numbers ({error})"
        ) from None
    return Episodes(values["frames"], values["episode_return"], values["wall_time"])


def read_run(logdir: str, variant: str, seed: int) -> Run:
    directory = run_logdir(logdir, variant, seed)
    eval_path = os.path.join(directory, EVAL_CSV)
    return Run(
        variant=variant,
        seed=seed,
        train=read_episodes(os.path.join(directory, EPISODES_CSV), EPISODES_COLUMNS),
        eval=read_episodes(eval_path, EVAL_COLUMNS) if os.path.exists(eval_path) else None,
    )


def discover_runs(logdir: str) -> dict[str, list[int]]:
    """{variant: seeds} for every <logdir>/<variant>/seed<N>/episodes.csv, sorted by name and
    seed."""
    found: dict[str, list[int]] = {}
    for variant in sorted(os.listdir(logdir)):
        variant_dir = os.path.join(logdir, variant)
        if not os.path.isdir(variant_dir):
            continue
        seeds = sorted(
            int(match.group(1))
            for entry in os.listdir(variant_dir)
            if (match := re.fullmatch(r"seed(-?\d+)", entry))
            and os.path.isfile(os.path.join(variant_dir, entry, EPISODES_CSV))
        )
        if seeds:
            found[variant] = seeds
    return found


# ---------------------------------------------------------------------------------------------------
# Scores and curves.


def final_score(episodes: Episodes, fraction: float = FINAL_FRACTION) -> float:
    """Mean return of the episodes that ended in the last `fraction` of the run's frames.

    The window [(1 - fraction) * max frames, max frames] always holds the last episode, so it is
    never empty.
    """
    in_window = episodes.frames >= (1.0 - fraction) * episodes.frames.max()
    return float(np.mean(episodes.returns[in_window]))


def smoothed_curve(episodes: Episodes, grid: np.ndarray, window: float) -> np.ndarray:
    """At each grid point g, the mean return of the episodes that ended in (g - window, g]; nan if
    none."""
    order = np.argsort(episodes.frames, kind="stable")
    frames, returns = episodes.frames[order], episodes.returns[order]
    cumulative = np.concatenate([[0.0], np.cumsum(returns)])
    end = np.searchsorted(frames, grid, side="right")
    start = np.searchsorted(frames, grid - window, side="right")
    count = end - start
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, (cumulative[end] - cumulative[start]) / count, np.nan)


# Returns -> HNS in percent for the reported game; None without a game.
HnsFn = Callable[[Sequence[float]], np.ndarray] | None


def _summarize_variant(runs: Sequence[Run], hns: HnsFn) -> VariantSummary:
    def stat(values) -> SeedStat:
        return SeedStat(tuple(float(v) for v in values))

    train = [final_score(run.train) for run in runs]
    with_eval = all(run.eval is not None for run in runs)
    evaluations = [final_score(run.eval) for run in runs] if with_eval else None
    return VariantSummary(
        variant=runs[0].variant,
        seeds=tuple(run.seed for run in runs),
        final_return=stat(train),
        final_hns=stat(hns(train)) if hns else None,
        final_eval_return=stat(evaluations) if evaluations else None,
        final_eval_hns=stat(hns(evaluations)) if hns and evaluations else None,
        frames=stat(run.train.frames.max() for run in runs),
        wall_time=stat(run.train.wall_time.max() for run in runs),
    )


# ---------------------------------------------------------------------------------------------------
# Reports.


def _number(x) -> str:
    """Shortest exact text for a number: '1000' for frames, '20.5' for a return."""
    x = float(x)
    return str(int(x)) if x.is_integer() else repr(x)


def _write_curves_csv(path: str, runs: Sequence[Run], hns: HnsFn) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CURVES_COLUMNS)
        for run in runs:
            for source, episodes in (("train", run.train), ("eval", run.eval)):
                if episodes is None:
                    continue
                normalised = (
                    map(_number, hns(episodes.returns)) if hns else [""] * len(episodes.returns)
                )
                for frames, wall, ret, h in zip(
                    episodes.frames, episodes.wall_time, episodes.returns, normalised
                ):
                    numbers = [_number(frames), _number(wall), _number(ret)]
                    writer.writerow([run.variant, run.seed, source, *numbers, h])


def _format_stat(stat: SeedStat | None) -> str:
    if stat is None:
        return "—"
    return f"{stat.mean:.2f}" if len(stat.per_seed) == 1 else f"{stat.mean:.2f} ± {stat.std:.2f}"


def _summary_markdown(summary: AblationSummary, command: str | None, heading: str) -> str:
    columns = [
        ("variant", lambda v: v.variant),
        ("seeds", lambda v: ", ".join(map(str, v.seeds))),
        ("final return", lambda v: _format_stat(v.final_return)),
    ]
    if summary.game:
        columns.append((f"final HNS % ({summary.normaliser})", lambda v: _format_stat(v.final_hns)))
    if any(v.final_eval_return is not None for v in summary.variants):
        columns.append(("final eval return", lambda v: _format_stat(v.final_eval_return)))
        if summary.game:
            columns.append(
                (
                    f"final eval HNS % ({summary.normaliser})",
                    lambda v: _format_stat(v.final_eval_hns),
                )
            )
    columns += [
        ("frames (mean)", lambda v: f"{v.frames.mean:,.0f}"),
        ("wall time (mean)", lambda v: runlog.format_duration(v.wall_time.mean)),
    ]
    lines = [f"# {heading}", ""]
    if command:
        lines += [f"Each run: `{command}`", ""]
    if summary.game:
        source = metrics.get_normaliser(summary.normaliser).source
        lines += [f"Game: {summary.game}. HNS normaliser: `{summary.normaliser}` ({source}).", ""]
    lines += [
        f"Final score of a run: mean return of the episodes that ended in the last {FINAL_FRACTION:.0%} of "
        "its frames (training episodes from episodes.csv, evaluation episodes from eval.csv). "
        "Each cell: mean ± sample standard deviation (ddof = 1) over seeds.",
        "",
        "| " + " | ".join(name for name, _ in columns) + " |",
        "|" + "---|" * len(columns),
    ]
    lines += ["| " + " | ".join(cell(v) for _, cell in columns) + " |" for v in summary.variants]
    return "\n".join(lines) + "\n"


def _plot_curves(path: str, runs: Sequence[Run], variants: Sequence[str], title: str) -> None:
    sources = [("train", "training episodes")]
    if any(r.eval is not None for r in runs):
        sources.append(("eval", "evaluation episodes"))
    max_frames = max(
        float(ep.frames.max()) for r in runs for ep in (r.train, r.eval) if ep is not None
    )
    grid = np.linspace(max_frames / GRID_POINTS, max_frames, GRID_POINTS)
    window = SMOOTHING_FRACTION * max_frames
    figure = Figure(figsize=(7 * len(sources), 4.5), layout="constrained")
    for axes, (source, label) in zip(figure.subplots(1, len(sources), squeeze=False)[0], sources):
        for variant in variants:
            curves = [
                smoothed_curve(getattr(r, source), grid, window)
                for r in runs
                if r.variant == variant and getattr(r, source) is not None
            ]
            if not curves:
                continue
            seeds = np.ma.masked_invalid(
                np.stack(curves)
            )  # masked: no warnings where all seeds are nan
            # Markers keep sparse curves (a few evaluations) visible where a line has no two
            # neighbours.
            (line,) = axes.plot(
                grid,
                seeds.mean(axis=0).filled(np.nan),
                marker="o" if source == "eval" else None,
                markersize=3,
                label=f"{variant} ({len(curves)} seed{'' if len(curves) == 1 else 's'})",
            )
            axes.fill_between(
                grid,
                seeds.min(axis=0).filled(np.nan),
                seeds.max(axis=0).filled(np.nan),
                color=line.get_color(),
                alpha=0.2,
                linewidth=0,
            )
        axes.set_title(f"{title}: {label}")
        axes.set_xlabel("environment frames")
        axes.set_ylabel(f"episode return (mean over trailing {SMOOTHING_FRACTION:.0%} of frames)")
        axes.grid(alpha=0.3)
        axes.legend()
    figure.savefig(path, dpi=100)


def write_reports(
    logdir: str,
    variants: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    game: str | None = None,
    normaliser: str = metrics.DEFAULT_NORMALISER,
    command: str | None = None,
    heading: str = "Ablation summary",
) -> AblationSummary:
    """Write curves.csv, summary.md and curves.png into `logdir` from its run directories.

    variants / seeds: the runs to report (every <variant>/seed<N>/episodes.csv under `logdir` when
    None). game: an Atari-57 or DMLab-30 name known to `common.equations.metrics`; adds HNS with
    `normaliser`. command: the run command template, quoted in summary.md; heading: its title.
    """
    if not os.path.isdir(logdir):
        raise ValueError(f"logdir {logdir!r} is not a directory")
    found = discover_runs(logdir)
    variants = list(found) if variants is None else list(variants)
    plan = {v: found.get(v, []) if seeds is None else list(seeds) for v in variants}
    missing = [f"{v}/seed{s}" for v, ss in plan.items() for s in ss if s not in found.get(v, [])]
    missing += [f"{v}/seed*" for v, ss in plan.items() if not ss]
    if not variants or missing:
        raise ValueError(
            f"no {EPISODES_CSV} for {missing or 'any run'} under {logdir!r}; "
            f"expected <logdir>/<variant>/seed<N>/{EPISODES_CSV}"
        )
    hns: HnsFn = None
    if game is not None:
        table = metrics.get_normaliser(normaliser)
        game = table.game(game)

        def hns(returns: Sequence[float]) -> np.ndarray:
            return np.atleast_1d(
                metrics.human_normalized_score(game, np.asarray(returns, dtype=float), table)
            )

    runs = [read_run(logdir, v, s) for v, ss in plan.items() for s in ss]
    summary = AblationSummary(
        logdir=logdir,
        game=game,
        normaliser=normaliser if game is not None else None,
        variants=tuple(
            _summarize_variant([r for r in runs if r.variant == v], hns) for v in variants
        ),
    )
    _write_curves_csv(summary.curves_csv, runs, hns)
    with open(summary.summary_md, "w") as f:
        f.write(_summary_markdown(summary, command, heading))
    _plot_curves(
        summary.curves_png, runs, variants, game or os.path.basename(os.path.abspath(logdir))
    )
    return summary


# ---------------------------------------------------------------------------------------------------
# Running.


def _check_run_arguments(module, variants, seeds, extra_argv, parallel) -> None:
    if not isinstance(module, str) or not re.fullmatch(r"[A-Za-z_][\w.]*", module):
        raise ValueError(
            f"module must be a dotted Python module name like 'impala.main', got {module!r}"
        )
    if not variants or len(set(variants)) != len(variants):
        raise ValueError(f"variants must be a non-empty list of distinct names, got {variants!r}")
    bad = [
        v
        for v in variants
        if not isinstance(v, str) or not re.fullmatch(r"[\w.+-]+", v) or v in (".", "..")
    ]
    if bad:
        raise ValueError(
            f"variant names become directory names: use letters, digits and _.+- only, got {bad!r}"
        )
    if not seeds or len(set(seeds)) != len(seeds) or not all(isinstance(s, int) for s in seeds):
        raise ValueError(f"seeds must be a non-empty list of distinct integers, got {seeds!r}")
    if isinstance(extra_argv, str) or not all(isinstance(a, str) for a in extra_argv):
        raise ValueError(f"extra_argv must be a list of strings, got {extra_argv!r}")
    if not isinstance(parallel, int) or parallel < 1:
        raise ValueError(f"parallel must be an integer >= 1, got {parallel!r}")


def _stderr_tail(path: str) -> str:
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    return "\n".join(lines[-STDERR_TAIL_LINES:]) or "(empty)"


def _stop(processes: Sequence[subprocess.Popen]) -> None:
    """Stop the runs still going, and the processes they started (each leads its own process
    group): SIGTERM to all at once, then SIGKILL to any still there after STOP_GRACE_SECONDS."""
    going = [p for p in processes if p.poll() is None]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for process in going:
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for process in going:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        going = [p for p in going if p.poll() is None]
        if not going:
            return


@contextlib.contextmanager
def _stop_signals_recorded():
    """Within the block, SIGTERM and SIGINT are appended to the list it yields, for the block to
    act on where it chooses (`run_all`: between two starts).

    Without this, `kill <runner>` would end the runner at once and leave its runs training on
    alone (they lead their own sessions), and a runner started with SIGINT ignored (`nohup`, a
    script's `&`) would not hear Ctrl-C or `kill -INT` at all. A handler that raised instead could
    raise between a run's start and its entry among the runs to stop, and leave that run training
    on. Signal handlers can only be set from the main thread; elsewhere the block runs with the
    process's handlers as they are (and the list stays empty)."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = {
        sig: signal.signal(sig, lambda signum, frame: received.append(signum))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _start(command: list[str], directory: str, append: bool = False) -> subprocess.Popen:
    """Starts `command` with its output in `directory`'s stdout.log and stderr.log, replaced, or
    appended to with `append` (a resumed run keeps the logs of its earlier starts)."""
    os.makedirs(directory, exist_ok=True)
    mode = "ab" if append else "wb"
    with (
        open(os.path.join(directory, STDOUT_LOG), mode) as out,
        open(os.path.join(directory, STDERR_LOG), mode) as err,
    ):
        # A new session: stopping the run can then stop its actor processes too, and only those.
        return subprocess.Popen(
            command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True
        )


def _check_finished(
    process: subprocess.Popen, variant: str, seed: int, directory: str, label: str | None = None
) -> None:
    """AblationRunError unless the run exited 0 and wrote episodes.csv. `label` names the run in
    the error (e.g. "agent 'dice', game 'breakout', seed 0", then called a "run"); by default
    it is an "ablation run" of "variant 'v', seed s"."""
    command = shlex.join(process.args)
    kind = "ablation run" if label is None else "run"
    label = f"variant {variant!r}, seed {seed}" if label is None else label
    if process.returncode != 0:
        raise AblationRunError(
            f"{kind} failed: {label}, exit status {process.returncode}\n"
            f"command: {command}\n"
            f"stderr (last {STDERR_TAIL_LINES} lines of {os.path.join(directory, STDERR_LOG)}):\n"
            f"{_stderr_tail(os.path.join(directory, STDERR_LOG))}"
        )
    if not os.path.isfile(os.path.join(directory, EPISODES_CSV)):
        raise AblationRunError(
            f"{kind} of {label} exited 0 but wrote no "
            f"{os.path.join(directory, EPISODES_CSV)}; the module must write it (header "
            f"{','.join(EPISODES_COLUMNS)})\ncommand: {command}"
        )


def run_ablations(
    module: str,
    variants: list[str],
    seeds: list[int],
    logdir: str,
    extra_argv: Sequence[str] = (),
    parallel: int = 1,
    game: str | None = None,
    normaliser: str = metrics.DEFAULT_NORMALISER,
) -> AblationSummary:
    """Run every variant with every seed (`parallel` runs at a time), then `write_reports`.

    Runs start seed by seed (all variants of seed 0 first), so partial results compare variants.
    AblationRunError, naming the variant, seed and the run's stderr tail, as soon as a run fails;
    the other runs still going are then stopped.
    """
    _check_run_arguments(module, variants, seeds, extra_argv, parallel)
    if game is not None:
        metrics.get_normaliser(normaliser).game(game)  # fail on a bad game before hours of training
    run_all(
        lambda variant, seed: run_command(module, variant, seed, logdir, extra_argv),
        variants,
        seeds,
        logdir,
        parallel,
    )
    template = shlex.join(run_command(module, "VARIANT", "SEED", logdir, extra_argv))
    return write_reports(logdir, variants, seeds, game, normaliser, command=template)


def run_all(
    command: Callable[[str, int], list[str]],
    variants: Sequence[str],
    seeds: Sequence[int],
    logdir: str,
    parallel: int,
    skip: Callable[[str, int], bool] | None = None,
    label: Callable[[str, int], str] | None = None,
    on_event: Callable[[str, str, int], None] | None = None,
    append_logs: bool = False,
) -> None:
    """Runs `command(variant, seed)` for every variant and seed, `parallel` at a time, seed by
    seed; AblationRunError as soon as one fails (the others are then stopped), KeyboardInterrupt
    once this process has had SIGINT or SIGTERM (the runs going are stopped first: `_stop`).

    skip(variant, seed): True leaves that run out (e.g. one that already finished).
    label(variant, seed): how an error names the run (`_check_finished`).
    on_event(event, variant, seed): called with "start" once a run has started and with "end"
    once it has exited 0 with its episodes.csv; an exception it raises stops the runs still
    going, as a failed run does.
    append_logs: a run's stdout.log and stderr.log are appended to, not replaced (`_start`)."""
    pending = [
        (variant, seed)
        for seed in seeds
        for variant in variants
        if skip is None or not skip(variant, seed)
    ]
    running: dict[subprocess.Popen, tuple[str, int, str]] = {}
    with _stop_signals_recorded() as stop_signals:
        try:
            while pending or running:
                if stop_signals:
                    raise KeyboardInterrupt()
                while pending and len(running) < parallel and not stop_signals:
                    variant, seed = pending.pop(0)
                    directory = run_logdir(logdir, variant, seed)
                    argv = command(variant, seed)
                    log.info("starting %s seed %d: %s", variant, seed, shlex.join(argv))
                    running[_start(argv, directory, append_logs)] = (variant, seed, directory)
                    if on_event is not None:
                        on_event("start", variant, seed)
                finished = [p for p in running if p.poll() is not None]
                for process in finished:
                    variant, seed, directory = running.pop(process)
                    name = label(variant, seed) if label is not None else None
                    _check_finished(process, variant, seed, directory, name)
                    log.info("finished %s seed %d", variant, seed)
                    if on_event is not None:
                        on_event("end", variant, seed)
                if not finished:
                    time.sleep(0.05)
        finally:
            _stop(list(running))


@dataclasses.dataclass(frozen=True)
class CommandLine:
    """The flags of `python -m common.experiments.ablation_runner`."""

    module: str | None = field(None, "Training module run as `python -m MODULE`, e.g. impala.main.")
    variants: tuple[str, ...] = field(
        (), "Ablation names, e.g. vtrace,no_correction (with --report_only: all found)."
    )
    seeds: tuple[int, ...] = field((), "Integer seeds, e.g. 0,1,2 (with --report_only: all found).")
    logdir: str | None = field(None, "Root directory of the runs and the reports (required).")
    parallel: int = field(1, "Runs at a time.")
    game: str | None = field(None, "Atari-57 or DMLab-30 name, for HNS columns.")
    normaliser: str = field(
        metrics.DEFAULT_NORMALISER, f"HNS table: {', '.join(metrics.NORMALISERS)}."
    )
    report_only: bool = field(False, "Only write the reports from existing runs.")

    def validate(self) -> "CommandLine":
        """Raises dataclass_flags.FlagError naming the flag."""
        if not self.logdir:
            raise dataclass_flags.FlagError("--logdir is required")
        try:
            check_choice("normaliser", self.normaliser, tuple(metrics.NORMALISERS))
        except ValueError as error:
            raise dataclass_flags.FlagError(str(error)) from None
        if not self.report_only and not (self.module and self.variants and self.seeds):
            raise dataclass_flags.FlagError(
                "--module, --variants and --seeds are required unless --report_only"
            )
        return self


def parse_tool_command_line(
    argv: Sequence[str], command_line: type, module: str, doc: str
) -> tuple[Any, list[str]]:
    """A runner tool's flags (the dataclass `command_line`) before `--` and the arguments after
    it (they go to every run); dataclass_flags.FlagError with one line on a bad flag. `--help` prints `doc`
    and the flags, and exits."""
    own, extra = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    flag_values = flags.FlagValues()
    dataclass_flags.define_dataclass_flags(command_line, flag_values, module_name=module)
    if any(arg in ("-h", "--help", "--helpshort", "--helpfull") for arg in own):
        print(f"{doc}\nflags:\n{flag_values.get_help()}")
        sys.exit(0)
    rest = dataclass_flags.parse_flags([f"python -m {module}", *own], flag_values)
    if len(rest) > 1:
        raise dataclass_flags.FlagError(
            f"unexpected arguments {rest[1:]}; flags are written --name=value, "
            "and the arguments of every run follow --"
        )
    return command_line(**dataclass_flags.given_values(command_line, flag_values)).validate(), list(
        extra
    )


def parse_command_line(argv: Sequence[str]) -> tuple[CommandLine, list[str]]:
    """This tool's flags and the arguments of every run (`parse_tool_command_line`)."""
    return parse_tool_command_line(argv, CommandLine, "common.experiments.ablation_runner", __doc__)


def print_summary(summary: AblationSummary) -> None:
    with open(summary.summary_md) as f:
        print(f.read())
    print(f"wrote {summary.curves_csv}, {summary.summary_md} and {summary.curves_png}")


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args, extra = parse_command_line(argv)
    except dataclass_flags.FlagError as error:
        dataclass_flags.fail(str(error))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    variants = list(args.variants) or None
    seeds = list(args.seeds) or None
    try:
        if args.report_only:
            summary = write_reports(args.logdir, variants, seeds, args.game, args.normaliser)
        else:
            summary = run_ablations(
                args.module,
                variants,
                seeds,
                args.logdir,
                extra,
                args.parallel,
                args.game,
                args.normaliser,
            )
    except (AblationRunError, ValueError) as error:
        sys.exit(f"error: {error}")
    print_summary(summary)


if __name__ == "__main__":
    main()

"""Run named ablation variants on the same seeds and budget, then write one table and one plot.

The runner knows nothing about a paper's training stack. Its whole contract with a paper package is:

* a run is the subprocess `python -m <module> --ablation=<variant> --seed=<seed>
  --logdir=<logdir>/<variant>/seed<seed> <extra argv>`, run with this interpreter
  (`sys.executable`); the budget (frames) goes in the extra argv, so every variant and seed gets the
  same one;
* a finished run has written `<run logdir>/episodes.csv` and may have written
  `<run logdir>/eval.csv` (`common.experiments.ablation_reports` reads them and writes the study's
  table and plot).

Command line (absl flags, see `--help`; the arguments after `--` go to every run):

    python -m common.experiments.ablation_runner --module=impala.main
    --variants=vtrace,no_correction \\
        --seeds=0,1,2 --logdir=runs/impala_vtrace --game=Pong --parallel=2 -- --total_frames=2000000
    python -m common.experiments.ablation_runner --report_only --logdir=runs/impala_vtrace
    --game=Pong

A paper's main runs it for `--ablations` / `--seeds` (common.experiments.cli).
"""

import contextlib
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
from typing import Any, Iterator

from absl import flags


from common.experiments import dataclass_flags
from common.equations import metrics
from common.experiments import ablation_reports
from common.settings.config import check_choice, field

STDOUT_LOG, STDERR_LOG = "stdout.log", "stderr.log"
# How much of a failed run's stderr the error message quotes.
STDERR_TAIL_LINES = 25
# choice: seconds the stopped runs get, together, to exit on SIGTERM before SIGKILL: a run
# checkpoints on its way out, and the papers that replay write their replay buffer too.
STOP_GRACE_SECONDS = 60.0

log = logging.getLogger(__name__)


class AblationRunError(RuntimeError):
    """A run exited with a non-zero status or without writing episodes.csv."""


def run_command(
    module: str, variant: str, seed: int | str, logdir: str, extra_argv: Sequence[str]
) -> list[str]:
    """The command of one run; `seed` "SEED" (and `variant` "VARIANT") make the template the
    reports quote."""
    return [
        sys.executable,
        "-m",
        module,
        f"--ablation={variant}",
        f"--seed={seed}",
        f"--logdir={ablation_reports.run_logdir(logdir, variant, seed)}",
        *extra_argv,
    ]


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
def _stop_signals_recorded() -> Iterator[list[int]]:
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
    assert isinstance(process.args, list)  # every run starts from an argument list (`_start`)
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
    if not os.path.isfile(os.path.join(directory, ablation_reports.EPISODES_CSV)):
        raise AblationRunError(
            f"{kind} of {label} exited 0 but wrote no "
            f"{os.path.join(directory, ablation_reports.EPISODES_CSV)}; the module must write it (header "
            f"{','.join(ablation_reports.EPISODES_COLUMNS)})\ncommand: {command}"
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
) -> ablation_reports.AblationSummary:
    """Run every variant with every seed (`parallel` runs at a time), then
    `ablation_reports.write_reports`.

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
    return ablation_reports.write_reports(
        logdir, variants, seeds, game, normaliser, command=template
    )


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
                    directory = ablation_reports.run_logdir(logdir, variant, seed)
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
    it (they go to every run); dataclass_flags.FlagError with one line on a bad flag. `--help`
    prints `doc` and the flags, and exits."""
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


def tool_command_line(
    argv: Sequence[str], command_line: type, module: str, doc: str
) -> tuple[Any, list[str]]:
    """`parse_tool_command_line`, a bad flag ending the process with its one line."""
    try:
        return parse_tool_command_line(argv, command_line, module, doc)
    except dataclass_flags.FlagError as error:
        dataclass_flags.fail(str(error))


def parse_command_line(argv: Sequence[str]) -> tuple[CommandLine, list[str]]:
    """This tool's flags and the arguments of every run (`parse_tool_command_line`)."""
    return parse_tool_command_line(argv, CommandLine, "common.experiments.ablation_runner", __doc__)


def print_summary(summary: ablation_reports.AblationSummary) -> None:
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
    variants = list(args.variants)
    seeds = list(args.seeds)
    logdir = args.logdir
    assert logdir  # required (CommandLine.validate)
    try:
        if args.report_only:
            summary = ablation_reports.write_reports(
                logdir, variants or None, seeds or None, args.game, args.normaliser
            )
        else:
            assert args.module  # required unless --report_only (CommandLine.validate)
            summary = run_ablations(
                args.module,
                variants,
                seeds,
                logdir,
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

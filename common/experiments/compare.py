"""Several papers' agents on the same game, seeds and frame budget: one table, one plot.

    python -m common.experiments.compare --agents=impala,reactor,dice,gdi.gdi_i3,lbc --env=Pong \\
        --seeds=0,1 --total_frames=2000000 --logdir=runs/compare_pong
    python -m common.experiments.compare --agents=impala,dice --env=CartPole \\
        --total_frames=300000 --logdir=runs/compare_cartpole -- --eval_interval_s=0

An agent is a paper (`dice`: its defaults) or `<paper>.<ablation>` (`gdi.gdi_i3`: one of the
paper's named variants). Each run is `python -m <paper>.main [--ablation=<ablation>] --env=...
--seed=... --total_frames=... --logdir=<logdir>/<agent>/seed<seed>` plus the arguments after
`--`; every paper takes its own defaults for the rest (its network, batch, replay), so the
comparison is of the papers' agents as published, on one budget of environment frames.

An argument after `--` written `<agent or paper>:--flag=value` goes to that agent's runs only,
for a flag the other papers do not have, e.g. a budget too short for the burn-in learners'
4,000 warm-up updates:

    python -m common.experiments.compare --agents=impala,dice --env=Pong --total_frames=120000 \
        --logdir=runs/compare_pong -- --eval_interval_s=0 dice:--warmup_steps=2

Before the first run starts, every agent's command is checked (`--check_flags`), so a flag one
paper refuses fails at once with its one line, not hours into the comparison.

The reports are `common.experiments.ablation_runner`'s (`curves.csv`, `summary.md`, `curves.png`):
final scores over seeds, learning curves on one frame grid, and HNS named by its normaliser for
Atari games (CartPole and MinAtar have no human reference scores).
"""

import dataclasses
import importlib
import importlib.util
import logging
import shlex
import subprocess
import sys
from typing import Sequence

from common.experiments import ablation_runner

from common.experiments import ablation_reports
from common.experiments import cli
from common.experiments import dataclass_flags
from common.equations import metrics
from common.settings.config import check_choice, field

PAPERS = ("impala", "reactor", "dice", "gdi", "lbc")


@dataclasses.dataclass(frozen=True)
class AgentRun:
    """One agent of the comparison: a paper's main module and optionally one of its ablations."""

    name: str
    paper: str
    ablation: str | None

    @classmethod
    def parse(cls, name: str) -> "AgentRun":
        paper, _, ablation = name.partition(".")
        if paper not in PAPERS:
            raise dataclass_flags.FlagError(
                f"--agents: {name!r} is not <paper> or <paper>.<ablation> with a paper of {', '.join(PAPERS)}"
            )
        if importlib.util.find_spec(f"{paper}.main") is None:
            raise dataclass_flags.FlagError(f"--agents: {paper!r} has no {paper}/main.py yet")
        if ablation:
            known = importlib.import_module(f"{paper}.ablations").ABLATIONS
            if ablation not in known:
                raise dataclass_flags.FlagError(
                    f"--agents: {ablation!r} is not one of {paper}'s ablations: {', '.join(known)}"
                )
        return cls(name, paper, ablation or None)

    def command(self, seed: int, logdir: str, argv: Sequence[str]) -> list[str]:
        ablation = [f"--ablation={self.ablation}"] if self.ablation else []
        return [
            sys.executable,
            "-m",
            f"{self.paper}.main",
            *ablation,
            f"--seed={seed}",
            f"--logdir={ablation_reports.run_logdir(logdir, self.name, seed)}",
            *self.arguments(argv),
        ]

    def arguments(self, argv: Sequence[str]) -> list[str]:
        """The arguments after `--` that reach this agent: the shared ones, and those written
        `<agent or paper>:--flag` that name this agent or its paper (module docstring)."""
        kept = []
        for arg in argv:
            target, flag = split_targeted(arg)
            if target is None or target in (self.name, self.paper):
                kept.append(flag)
        return kept


def split_targeted(arg: str) -> tuple[str | None, str]:
    """`dice:--warmup_steps=2` -> ("dice", "--warmup_steps=2"); a shared argument -> (None, arg)."""
    target, colon, flag = arg.partition(":")
    if colon and not arg.startswith("-") and flag.startswith("-"):
        return target, flag
    return None, arg


def check_targets(runs: Sequence[AgentRun], argv: Sequence[str]) -> None:
    """FlagError unless every `<target>:--flag` names one of the agents or their papers."""
    names = {name for run in runs for name in (run.name, run.paper)}
    for arg in argv:
        target, _ = split_targeted(arg)
        if target is not None and target not in names:
            raise dataclass_flags.FlagError(
                f"{arg!r}: {target!r} is none of the agents or papers compared "
                f"({', '.join(sorted(names))})"
            )


def check_flags(runs: Sequence[AgentRun], seed: int, logdir: str, argv: Sequence[str]) -> None:
    """Runs each agent's command with `--check_flags` (it validates and exits, before
    TensorFlow); FlagError with the agent and its one-line error on the first that refuses."""
    for run in runs:
        command = [*run.command(seed, logdir, argv), "--check_flags"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            lines = result.stderr.strip().splitlines() or [f"exit status {result.returncode}"]
            raise dataclass_flags.FlagError(f"--agents: {run.name} refuses its flags: {lines[-1]}")


@dataclasses.dataclass(frozen=True)
class CommandLine:
    """The flags of `python -m common.experiments.compare`."""

    agents: tuple[str, ...] = field((), "Agents: <paper> or <paper>.<ablation>, e.g. impala,dice.")
    env: str = field(
        "Pong",
        "The game every agent plays: an Atari game, a MinAtar game (MinAtar/Breakout-v0, "
        "breakout-minatar) or CartPole.",
    )
    seeds: tuple[int, ...] = field((0,), "Seeds every agent runs with.")
    total_frames: int = field(1_000_000, "Environment frames of every run.")
    logdir: str | None = field(None, "Root directory of the runs and the reports (required).")
    parallel: int = field(1, "Runs at a time.")
    normaliser: str = field(
        metrics.DEFAULT_NORMALISER, f"HNS table: {', '.join(metrics.NORMALISERS)}."
    )

    def validate(self) -> "CommandLine":
        if not self.logdir:
            raise dataclass_flags.FlagError("--logdir is required")
        if not self.agents:
            raise dataclass_flags.FlagError(
                "--agents names at least one agent, e.g. --agents=impala,dice"
            )
        if self.total_frames <= 0:
            raise dataclass_flags.FlagError(f"--total_frames={self.total_frames} must be > 0")
        if self.parallel < 1:
            raise dataclass_flags.FlagError(f"--parallel={self.parallel} must be >= 1")
        try:
            check_choice("normaliser", self.normaliser, tuple(metrics.NORMALISERS))
        except ValueError as error:
            raise dataclass_flags.FlagError(str(error)) from None
        return self


def compare(
    agents: Sequence[str],
    env: str,
    seeds: Sequence[int],
    total_frames: int,
    logdir: str,
    argv: Sequence[str] = (),
    parallel: int = 1,
    normaliser: str = metrics.DEFAULT_NORMALISER,
) -> ablation_reports.AblationSummary:
    """Runs every agent with every seed on `env` for `total_frames`, then writes the reports."""
    from common.environments import env_names  # imports ale-py: not before the command line is read

    runs = {name: AgentRun.parse(name) for name in agents}
    env = cli.normalise_env(env)
    game = env_names.hns_game(env)  # HNS for Atari games only
    shared = [f"--env={env}", f"--total_frames={total_frames}", *argv]
    check_targets(list(runs.values()), argv)
    check_flags(list(runs.values()), seeds[0], logdir, shared)
    ablation_runner.run_all(
        lambda name, seed: runs[name].command(seed, logdir, shared),
        list(agents),
        list(seeds),
        logdir,
        parallel,
    )
    # Targeted arguments are quoted as written (`dice:--warmup_steps=2`).
    template = shlex.join([*AgentRun("AGENT", "PAPER", None).command(0, logdir, shared[:2]), *argv])
    return ablation_reports.write_reports(
        logdir,
        list(agents),
        list(seeds),
        game,
        normaliser,
        command=template,
        heading=f"Agents compared on {env}",
    )


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args, extra = ablation_runner.parse_tool_command_line(
            argv, CommandLine, "common.experiments.compare", __doc__
        )
        for name in args.agents:
            AgentRun.parse(name)
        cli.normalise_env(args.env)
    except dataclass_flags.FlagError as error:
        dataclass_flags.fail(str(error))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        summary = compare(
            args.agents,
            args.env,
            args.seeds,
            args.total_frames,
            args.logdir,
            extra,
            args.parallel,
            args.normaliser,
        )
    except dataclass_flags.FlagError as error:
        dataclass_flags.fail(str(error))
    except (ablation_runner.AblationRunError, ValueError) as error:
        sys.exit(f"error: {error}")
    ablation_runner.print_summary(summary)


if __name__ == "__main__":
    main()

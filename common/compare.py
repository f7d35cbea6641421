"""Several papers' agents on the same game, seeds and frame budget: one table, one plot.

    python -m common.compare --agents=impala,reactor,dice,gdi.gdi_i3,lbc --env=Pong \\
        --seeds=0,1 --total_frames=2000000 --logdir=runs/compare_pong
    python -m common.compare --agents=impala,dice --env=CartPole --total_frames=300000 \\
        --logdir=runs/compare_cartpole -- --eval_interval_s=0

An agent is a paper (`dice`: its defaults) or `<paper>.<ablation>` (`gdi.gdi_i3`: one of the
paper's named variants). Each run is `python -m <paper>.main [--ablation=<ablation>] --env=...
--seed=... --total_frames=... --logdir=<logdir>/<agent>/seed<seed>` plus the arguments after
`--`; every paper takes its own defaults for the rest (its network, batch, replay), so the
comparison is of the papers' agents as published, on one budget of environment frames.

The reports are `common.ablation_runner`'s (`curves.csv`, `summary.md`, `curves.png`): final
scores over seeds, learning curves on one frame grid, and HNS named by its normaliser for Atari
games.
"""

import dataclasses
import importlib
import importlib.util
import logging
import shlex
import sys
from typing import Sequence

from common import ablation_runner
from common import cli
from common import metrics
from common.config import check_choice, field

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
            raise cli.FlagError(
                f"--agents: {name!r} is not <paper> or <paper>.<ablation> with a paper of {', '.join(PAPERS)}"
            )
        if importlib.util.find_spec(f"{paper}.main") is None:
            raise cli.FlagError(f"--agents: {paper!r} has no {paper}/main.py yet")
        if ablation:
            known = importlib.import_module(f"{paper}.ablations").ABLATIONS
            if ablation not in known:
                raise cli.FlagError(
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
            f"--logdir={ablation_runner.run_logdir(logdir, self.name, seed)}",
            *argv,
        ]


@dataclasses.dataclass(frozen=True)
class CommandLine:
    """The flags of `python -m common.compare`."""

    agents: tuple[str, ...] = field((), "Agents: <paper> or <paper>.<ablation>, e.g. impala,dice.")
    env: str = field("Pong", "The game (or CartPole) every agent plays.")
    seeds: tuple[int, ...] = field((0,), "Seeds every agent runs with.")
    total_frames: int = field(1_000_000, "Environment frames of every run.")
    logdir: str | None = field(None, "Root directory of the runs and the reports (required).")
    parallel: int = field(1, "Runs at a time.")
    normaliser: str = field(
        metrics.DEFAULT_NORMALISER, f"HNS table: {', '.join(metrics.NORMALISERS)}."
    )

    def validate(self) -> "CommandLine":
        if not self.logdir:
            raise cli.FlagError("--logdir is required")
        if not self.agents:
            raise cli.FlagError("--agents names at least one agent, e.g. --agents=impala,dice")
        if self.total_frames <= 0:
            raise cli.FlagError(f"--total_frames={self.total_frames} must be > 0")
        if self.parallel < 1:
            raise cli.FlagError(f"--parallel={self.parallel} must be >= 1")
        try:
            check_choice("normaliser", self.normaliser, tuple(metrics.NORMALISERS))
        except ValueError as error:
            raise cli.FlagError(str(error)) from None
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
) -> ablation_runner.AblationSummary:
    """Runs every agent with every seed on `env` for `total_frames`, then writes the reports."""
    runs = {name: AgentRun.parse(name) for name in agents}
    env = cli.normalise_env(env)
    game = None if env == "CartPole" else env
    shared = [f"--env={env}", f"--total_frames={total_frames}", *argv]
    ablation_runner.run_all(
        lambda name, seed: runs[name].command(seed, logdir, shared),
        list(agents),
        list(seeds),
        logdir,
        parallel,
    )
    template = shlex.join(AgentRun("AGENT", "PAPER", None).command(0, logdir, shared))
    return ablation_runner.write_reports(
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
            argv, CommandLine, "common.compare", __doc__
        )
        for name in args.agents:
            AgentRun.parse(name)
        cli.normalise_env(args.env)
    except cli.FlagError as error:
        cli.fail(str(error))
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
    except (ablation_runner.AblationRunError, ValueError) as error:
        sys.exit(f"error: {error}")
    ablation_runner.print_summary(summary)


if __name__ == "__main__":
    main()

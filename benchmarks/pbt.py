"""Population based training of IMPALA on MinAtar (§5.3, App. F, Table G.1) on Ray Tune: by default
the multi-task agent on the five games, a population of 8, 5M frames a game.

    python -m benchmarks.pbt --population=8 --frames_per_game=5e6 --logdir=runs/pbt \\
        --experts=docs/results/minatar_final/curves.csv
    python -m benchmarks.pbt --report_only --logdir=runs/pbt --experts=...
    python -m benchmarks.pbt ... --ray_address=<head>:6379 --member_cpus=8   # on a Ray cluster

Members. Member i runs `python -m impala.main` (common.population.member) with the games
(`--env=<the games>`, 26 environments a game an actor when there are several, as
benchmarks.multitask), seed `--seed` + i, the whole budget (frames_per_game x games), no learning
rate annealing (`--lr_anneal=false`: PBT finds its own schedule, Fig. F.1), no evaluation while it
trains (a final one at its budget), the flags after `--`, and its adapted hyperparameters. Their
start values are the first `--population` of the 24 combinations drawn from Table D.1's ranges
(Table G.1: "start parameters same as DMLab-30 sweep"; benchmarks.protocol.impala_trials, the
sweep's and the protocol's set).

Rules (common.population.rules, scheduler): a member is ready after `--ready_episodes` games (App.
F: 5,000) once past `--burn_in_frames`; its fitness is the mean capped normalised score of those
games (MinAtar's random and best published returns in place of human scores); it then picks
another member at random and copies its run (weights, optimiser state, logs) and hyperparameters
if that member's fitness is more than `--copy_margin` (0.05) higher; copied or not, each adapted
hyperparameter is multiplied by 1.2 or 1/1.2 with probability 0.33.

choice: burn-in 1M frames. The paper's 20M frames are about one ready interval of 5,000 DMLab-30
games (thousands of frames each); on MinAtar 5,000 games of the five come every 0.4-0.8M frames
(the first multi-task run, seed 200), so 1M frames is one or two intervals, as there.

Runs on this machine: a local Ray with `--concurrent` CPUs, each member asking for one, so that
many members train at a time and the others wait paused (each ready point lets a waiting member
in). On a cluster (`--ray_address`), each member asks for `--member_cpus` and `--logdir` must be
storage every node mounts. A member whose run dies is restarted from its last ready point's
checkpoint (`--max_failures` times); the same command again resumes an interrupted population.

Report (`--logdir`/summary.md, population.png; `--report_only` rewrites them): each member's last
fitness, frames and hyperparameters, and its ancestry (the members whose runs it continues, from
its run's pbt_lineage.csv); the best member by last fitness, per game against the experts at
frames_per_game (benchmarks.multitask's comparison); per game every member's curve (its run's
episodes.csv, which copies carry: the curve through its ancestry, Fig. 6) and the best member's
learning rate along its ancestry (Fig. F.1).
"""

import dataclasses
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks import minatar_references, minatar_runs, minatar_statistics, multitask, protocol
from common.experiments import ablation_runner, dataclass_flags
from common.population import member as member_lib
from common.population import rules
from common.settings.config import field

TOOL = "benchmarks.pbt"
EXPERIMENT = "population"  # Tune's experiment: its state, results and checkpoints
MEMBERS = "members"  # the members' runs, <logdir>/members/<member>/run
TABLE_D1 = ("learning_rate", "entropy_cost", "rmsprop_epsilon")  # the start values drawn
ADAPTED = TABLE_D1  # §5.3, App. F: DMLab-30's three
CLIP = "max_grad_norm"  # Atari-57's fourth (§5.3.2, Table G.1)
CLIP_START = 40.0  # Table G.1's clip threshold: Table D.1 draws none


@dataclasses.dataclass(frozen=True)
class CommandLine:
    """The flags of `python -m benchmarks.pbt`."""

    games: tuple[str, ...] = field(("all",), "Games, of the grid's; or all (multi-task).")
    population: int = field(8, "Members (Table G.1: 24; at most 24).")
    frames_per_game: int = field(5_000_000, "Frames each game gets in a member's run.")
    ready_episodes: int = field(5000, "Games between ready points (App. F).")
    adapted: tuple[str, ...] = field(
        ADAPTED, f"Hyperparameters PBT adapts: of {TABLE_D1 + (CLIP,)}."
    )
    burn_in_frames: int = field(1_000_000, "Frames before the first ready point (module doc).")
    copy_margin: float = field(rules.COPY_MARGIN, "Copy a member this much fitter (App. F).")
    seed: int = field(400, "Member i's run has seed + i; the scheduler's draws use it too.")
    concurrent: int = field(2, "Members training at a time on this machine (its Ray's CPUs).")
    member_cpus: int = field(1, "CPUs a member asks Ray for.")
    ray_address: str = field("", "A Ray cluster's head (host:port); none: a Ray on this machine.")
    max_failures: int = field(3, "Restarts of a member whose run dies.")
    experts: str = field("", "The grid's curves.csv of the IMPALA experts (none: no comparison).")
    logdir: str = field("runs/pbt", "Directory of the population and its report.")
    report_only: bool = field(False, "Only write the report from the population there is.")

    def validate(self) -> "CommandLine":
        games = minatar_runs.parse_games(self.games)
        checks = [
            (2 <= self.population <= len(protocol.impala_trials()), "--population", "2 to 24"),
            (self.frames_per_game > 0, "--frames_per_game", "> 0"),
            (self.ready_episodes > 0, "--ready_episodes", "> 0"),
            (self.burn_in_frames >= 0, "--burn_in_frames", ">= 0"),
            (self.concurrent >= 1, "--concurrent", ">= 1"),
            (self.member_cpus >= 1, "--member_cpus", ">= 1"),
            (self.max_failures >= 0, "--max_failures", ">= 0"),
        ]
        for ok, flag, allowed in checks:
            if not ok:
                raise dataclass_flags.FlagError(
                    f"{flag}={getattr(self, flag[2:])} must be {allowed}"
                )
        unknown = [name for name in self.adapted if name not in (*TABLE_D1, CLIP)]
        if unknown or not self.adapted:
            raise dataclass_flags.FlagError(
                f"--adapted={','.join(self.adapted)}: each must be one of "
                f"{', '.join(TABLE_D1 + (CLIP,))}"
            )
        if self.experts and not os.path.isfile(self.experts):
            raise dataclass_flags.FlagError(f"--experts={self.experts}: no such file")
        return dataclasses.replace(self, games=games, logdir=os.path.abspath(self.logdir))


def member_spec(args: CommandLine, extra: Sequence[str]) -> member_lib.MemberSpec:
    references = minatar_references.read_references()
    flags = [f"--env={','.join(minatar_runs.env_id(g) for g in args.games)}"]
    if len(args.games) > 1:
        flags.append(f"--envs_per_actor={multitask.ENVS_PER_GAME * len(args.games)}")
    return member_lib.MemberSpec(
        module="impala.main",
        root=os.path.join(args.logdir, MEMBERS),
        flags=(*flags, "--lr_anneal=false", "--eval_interval_s=0", *extra),
        total_frames=args.frames_per_game * len(args.games),
        hyperparameters=hyperparameters(args),
        references={
            minatar_runs.env_id(g): minatar_references.normaliser(references, g) for g in args.games
        },
        ready_episodes=args.ready_episodes,
        burn_in_frames=args.burn_in_frames,
    )


def hyperparameters(args: CommandLine) -> tuple[str, ...]:
    """Those passed to a member's run: Table D.1's three (adapted or not), and the clip threshold
    when it is adapted."""
    return TABLE_D1 + ((CLIP,) if CLIP in args.adapted else ())


def param_space(args: CommandLine) -> dict:
    """Member i's config: its index, seed and start values (module docstring)."""
    from ray import tune

    starts = [{**trial, CLIP: CLIP_START} for trial in protocol.impala_trials()[: args.population]]

    def seed(spec: Any) -> int:
        return args.seed + spec.config.member

    def start(name: str) -> Any:
        def value(spec: Any) -> float:
            return starts[spec.config.member][name]

        return tune.sample_from(value)

    return {
        "member": tune.grid_search(list(range(args.population))),
        "seed": tune.sample_from(seed),
        **{name: start(name) for name in hyperparameters(args)},
    }


def member_name(trial) -> str:
    return f"member{trial.config['member']:02d}"


def run_population(args: CommandLine, extra: Sequence[str]) -> str:
    """Runs (or resumes) the population; what stopped it short, or "" when every member reached
    its budget."""
    import ray
    from ray import tune

    from common.population import scheduler

    ray.init(
        address=args.ray_address or None,
        num_cpus=None if args.ray_address else args.concurrent * args.member_cpus,
        include_dashboard=False,
        configure_logging=False,
        log_to_driver=False,
    )
    trainable = tune.with_resources(
        tune.with_parameters(member_lib.train_member, spec=member_spec(args, extra)),
        {"cpu": args.member_cpus},
    )
    path = os.path.join(args.logdir, EXPERIMENT)
    os.makedirs(args.logdir, exist_ok=True)
    if tune.Tuner.can_restore(path):
        tuner = tune.Tuner.restore(path, trainable, resume_unfinished=True, resume_errored=True)
    else:
        tuner = tune.Tuner(
            trainable,
            param_space=param_space(args),
            tune_config=tune.TuneConfig(
                scheduler=scheduler.AppendixF(
                    args.adapted,
                    os.path.join(args.logdir, scheduler.DECISIONS_CSV),
                    args.seed,
                    slots=int(ray.cluster_resources().get("CPU", 1) // args.member_cpus),
                    margin=args.copy_margin,
                ),
                trial_name_creator=member_name,
                trial_dirname_creator=member_name,
                reuse_actors=False,
            ),
            run_config=tune.RunConfig(
                name=EXPERIMENT,
                storage_path=args.logdir,
                failure_config=tune.FailureConfig(max_failures=args.max_failures),
                checkpoint_config=tune.CheckpointConfig(num_to_keep=4),
                sync_config=tune.SyncConfig(sync_artifacts=False),
                verbose=1,
            ),
        )
    results = [member for member in tuner.fit()]  # type: ignore[attr-defined]
    ray.shutdown()
    failed = [r for r in results if r.error]
    if failed:
        return f"error: {len(failed)} members failed: {failed[0].error}"
    # Tune ends fit() on Ctrl-C, with the population's state saved: the members short of the
    # budget (their last report not `budget_reached`) were stopped.
    stopped = [r for r in results if not (r.metrics or {}).get("budget_reached")]
    return f"interrupted: {len(stopped)} members were stopped" if stopped else ""


# ---------------------------------------------------------------------------------------------
# The report.


@dataclasses.dataclass(frozen=True)
class Member:
    name: str
    run_dir: str
    fitness: float
    frames: float
    lineage: list  # pbt_lineage.csv's rows


def read_members(args: CommandLine) -> list[Member]:
    root = os.path.join(args.logdir, MEMBERS)
    spec = member_spec(args, [])
    members = []
    names = os.listdir(root) if os.path.isdir(root) else []
    for name in sorted(n for n in names if n.startswith("member")):
        run_dir = os.path.join(root, name, member_lib.RUN_DIR)
        log = member_lib.EpisodeLog(
            os.path.join(run_dir, member_lib.EPISODES_CSV), next(iter(spec.references))
        ).refresh()
        if log.rows:
            fitness = log.fitness(spec.references, args.ready_episodes)
            members.append(
                Member(name, run_dir, fitness, log.frames, member_lib.read_lineage(run_dir))
            )
    return members


def ancestry(lineage: Sequence[dict]) -> str:
    """The members whose runs this one continues, each from the frames it took the run over."""
    steps: list[tuple[str, int]] = []
    for row in lineage:
        if not steps or steps[-1][0] != row["member"]:
            steps.append((row["member"], int(row["frames"])))
    return " → ".join(f"{name} ({frames / 1e6:.2f}M)" for name, frames in steps)


def summary_markdown(args: CommandLine, members: Sequence[Member], command: str) -> str:
    lines = [
        "# IMPALA with population based training (MinAtar)",
        "",
        f"Games {', '.join(args.games)}; {args.frames_per_game:,} frames a game; population "
        f"{args.population}; ready every {args.ready_episodes:,} games after "
        f"{args.burn_in_frames:,} frames; copy margin {args.copy_margin}. Fitness: the mean capped "
        f"normalised score of a member's last {args.ready_episodes:,} games.",
        "",
        f"Command: `{command}`",
        "",
        "| member | fitness | frames | " + " | ".join(args.adapted) + " | ancestry (from frames) |",
        "|---|---|---|" + "---|" * len(args.adapted) + "---|",
    ]
    for m in sorted(members, key=lambda m: -m.fitness):
        last = m.lineage[-1] if m.lineage else {}
        values = " | ".join(f"{float(last[n]):.3g}" if n in last else "—" for n in args.adapted)
        lines.append(
            f"| {m.name} | {m.fitness:.3f} | {m.frames:,.0f} | {values} | {ancestry(m.lineage)} |"
        )
    if members and args.experts and args.games == tuple(minatar_runs.GAMES):
        lines += ["", *against_experts(args, max(members, key=lambda m: m.fitness))]
    return "\n".join(lines) + "\n"


def against_experts(args: CommandLine, best: Member) -> list[str]:
    """The best member's final return per game (the mean of its last 100 games of the game at
    frames_per_game) and fitness, beside the experts' mean ± standard error over their seeds and
    their fitness with a 95% bootstrap interval (benchmarks.multitask's)."""
    experts = minatar_runs.read_curves([args.experts])
    seeds = sorted({seed for (agent, _, seed) in experts if agent == multitask.EXPERT})
    comparison = multitask.compare_agents({}, experts, seeds, args.frames_per_game)
    curves = multitask.game_curves(best.run_dir, args.frames_per_game)
    mine = np.array([multitask.final(curves[g], args.frames_per_game) for g in multitask.GAMES])
    references = minatar_references.read_references()
    scores = np.array(
        [
            minatar_references.normalise(v, *minatar_references.normaliser(references, g))
            for g, v in zip(multitask.GAMES, mine)
        ]
    )
    cells = []
    for g, value in enumerate(mine):
        expert = comparison.returns[multitask.EXPERT][:, g]
        mean, error = minatar_statistics.mean_and_standard_error(expert[np.isfinite(expert)])
        cells.append(f"{value:.2f} ({mean:.2f} ± {error:.2f})")
    complete = np.isfinite(comparison.scores[multitask.EXPERT]).all(axis=1)
    point, low, high = minatar_statistics.bootstrap_interval(
        (comparison.scores[multitask.EXPERT][complete],), multitask.fitness
    )
    return [
        f"The best member ({best.name}) at {args.frames_per_game:,} frames a game, and in brackets "
        f"the experts (benchmarks.minatar's IMPALA, seeds {', '.join(map(str, seeds))}):",
        "",
        "| | " + " | ".join(multitask.GAMES) + " | mean capped normalised score |",
        "|---|" + "---|" * (len(multitask.GAMES) + 1),
        f"| {best.name} | " + " | ".join(cells) + f" | {multitask.fitness(scores[None]):.3f} "
        f"(experts {point:.3f} [{low:.3f}, {high:.3f}], {complete.sum()} seeds) |",
    ]


def plot(path: str, args: CommandLine, members: Sequence[Member]) -> None:
    """Per game every member's curve through its ancestry (Fig. 6), and the best member's
    learning rate along its ancestry (Fig. F.1)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    games = list(args.games)
    figure, axes = plt.subplots(1, len(games) + 1, figsize=(4 * (len(games) + 1), 3.2))
    rows = {
        m.name: member_lib.EpisodeLog(
            os.path.join(m.run_dir, member_lib.EPISODES_CSV), minatar_runs.env_id(games[0])
        )
        .refresh()
        .rows
        for m in members
    }
    for axis, game in zip(axes, games):
        for m in members:
            mine = [(f, r) for g, f, r in rows[m.name] if g == minatar_runs.env_id(game)]
            if len(mine) >= 100:
                frames = np.array([f for f, _ in mine]) / len(games)
                returns = np.convolve([r for _, r in mine], np.ones(100) / 100, mode="valid")
                axis.plot(frames[99:], returns, label=m.name, linewidth=1)
        axis.set_title(game)
        axis.set_xlabel("frames per game")
    axes[0].set_ylabel("return, last 100 games")
    axes[0].legend(fontsize=6)
    if members:
        best = max(members, key=lambda m: m.fitness)
        starts = [int(row["frames"]) / len(games) for row in best.lineage]
        rates = [float(row["learning_rate"]) for row in best.lineage]
        axes[-1].step(starts + [args.frames_per_game], rates + rates[-1:], where="post")
        axes[-1].set_title(f"{best.name}'s learning rate")
        axes[-1].set_xlabel("frames per game")
        axes[-1].set_yscale("log")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, extra = ablation_runner.tool_command_line(argv, CommandLine, TOOL, __doc__)
    command = " ".join(["python -m", TOOL, *argv])
    stopped = ""
    if not args.report_only:
        print(
            f"[pbt] {args.population} members of {args.frames_per_game * len(args.games):,} "
            f"frames on {', '.join(args.games)} under {args.logdir}",
            flush=True,
        )
        try:
            stopped = run_population(args, extra)
        except KeyboardInterrupt:
            stopped = "interrupted"
    members = read_members(args)
    summary = summary_markdown(args, members, command)
    with open(os.path.join(args.logdir, minatar_runs.SUMMARY_MD), "w") as f:
        f.write(summary)
    plot(os.path.join(args.logdir, "population.png"), args, members)
    print(summary)
    if stopped:
        sys.exit(f"{stopped}; `{command}` resumes the population")


if __name__ == "__main__":
    main()

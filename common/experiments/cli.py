"""One command line for every paper: `python -m <paper>.main --env=Pong --<field>=<value> ...`.

A paper's `builder.py` holds the paper's `common.experiments.builder.Builder`, whose class
attributes describe the paper (its name, config class, ablations, env defaults), and its `main.py`
calls `main(<Paper>Builder)` under `__main__`. This module then

- makes one flag per field of the paper's frozen config dataclass
  (`common.experiments.dataclass_flags`); the help text shows the default;
- adds the run flags every paper shares, the fields of `RunSettings` (--logdir, --role,
  --replay_address, --first_actor, --launcher, --ray_address, --replay_port, --ablation,
  --ablations, --seeds, --parallel, --check_flags, --record_dir, --record_games);
- builds the config: the paper's defaults < the env's defaults (`Builder.env_defaults`: its
  family's, e.g. "MinAtar", then its own) < the named ablation's overrides < the flags given on
  the command line, with the env name normalised (`common.environments.env_names.canonical_env`:
  CartPole-v1, pong, PongNoFrameskip-v4, ALE/MsPacman-v5, MinAtar/Breakout-v0, breakout-minatar,
  ...), and validates it;
- reports a bad command line on one line, `error: --<flag>=<value> ...`, with exit status 2, before
  TensorFlow or Reverb is imported;
- runs one role of one training run through `common.launchers.launch`, or several ablation variants
  and/or seeds as subprocesses through `common.experiments.ablation_runner`.

Flags are defined when `main` runs (`define_flags`), not when a paper's modules are imported,
so every paper's `main` and `builder` can be imported in one process. Importing this module
imports absl's flags and nothing heavier.
"""

import dataclasses
import functools
import importlib.util
import os
import sys
from typing import Any, Mapping, Sequence

from absl import flags

from common.experiments import builder as builder_lib
from common.experiments.dataclass_flags import (
    EXIT_FAILURE,
    FlagError,
    calling_module_name,
    define_dataclass_flags,
    fail,
    flag_text,
    given_values,
    parse_flags,
)
from common.runtime import stderr_filter
from common.runtime import stop_signals
from common.settings.config import Derived, check_all, check_choice, field

# common.launchers.launch.ROLES, written out: importing common.launchers.launch imports TensorFlow
# (a test asserts both agree).
ROLES = ("local", "replay", "learner", "actor", "evaluate")
# The roles that play a final evaluation, which --record_dir records.
RECORDING_ROLES = ("local", "learner", "evaluate")
# How `--role=local` places its processes: `common.launchers.launch` (this machine) or
# `common.launchers.ray_launch`.
LAUNCHERS = ("local", "ray")

# `Builder.env_defaults` keys that hold the defaults of a whole env family
# (`common.environments.env_names.env_family`), besides canonical env names: "MinAtar" for all five
# MinAtar games at once. ("CartPole" is both the family's key and its one env's name.)
ENV_FAMILY_KEYS = {"cartpole": "CartPole", "minatar": "MinAtar", "atari": "Atari"}
# The --env spellings --help shows, after the config field's own help.
ENV_HELP = (
    "Written as people write it: Pong, ms_pacman, ALE/Pong-v5, PongNoFrameskip-v4; MinAtar's "
    "games (asterix, breakout, freeway, seaquest, space_invaders) as MinAtar/Breakout-v0 (all 6 "
    "actions), MinAtar/Breakout-v1 (the game's minimal action set), breakout-minatar or "
    "minatar:space_invaders (v0 without a version)."
)


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """The run flags every paper shares: where and how to run, not what to train."""

    logdir: str | None = field(
        None,
        "Run directory (default runs/<paper>_<env>[_<ablation>], with several runs "
        "runs/<paper>_<env>_ablations); the same logdir resumes from its last checkpoint.",
    )
    role: str = field(
        "local",
        "local (Reverb, actors, learner and evaluator on this machine), replay, learner "
        "or actor (the last two need --replay_address), or evaluate (the final evaluation "
        "protocol on --logdir's latest checkpoint, into <logdir>/evaluate/).",
    )
    replay_address: str | None = field(
        None, "host:port of the Reverb server a --role=replay started."
    )
    # choice: 0, the index the local launcher's first actor has, so one actor host needs no flag.
    first_actor: int = field(
        0,
        "With --role=actor: the cluster-wide index of this host's first actor; its actors are "
        "first_actor..first_actor+num_actors-1 (seeds, behaviour state files, names). Each "
        "actor host needs a range no live host holds; an overlapping one is refused.",
    )
    # choice: local, so the default commands need no Ray (an optional extra).
    launcher: str = field(
        "local",
        "local (the processes of --role=local on this machine) or ray (the same roles as Ray "
        "actors on a Ray cluster: pip install -e .[ray]; docs/guides/several_machines.md).",
    )
    ray_address: str | None = field(
        None,
        "With --launcher=ray: the Ray cluster to join, host:port of its head or auto (default: "
        "start a Ray cluster on this machine).",
    )
    replay_port: int = field(8000, "Port of --role=replay.")
    # choice: closed unless asked, so that a run on a shared machine is nobody else's
    # (common/launchers/private_network.py).
    open_port: bool = field(
        False,
        "Serve the run's Reverb server on every network interface, without authentication, so "
        "that other machines' roles connect: --role=replay and --launcher=ray need it, and a "
        "--role=local run that actor hosts join. Without it --role=local runs in a network of "
        "its own, loopback only (docs/guides/several_machines.md, 'Ports').",
    )
    ablation: str | None = field(None, "One named variant of the paper's ablations.")
    ablations: tuple[str, ...] = field(
        (),
        "Several variants, each run as a subprocess through common.experiments.ablation_runner, "
        "which writes one table and plot under --logdir.",
    )
    seeds: tuple[int, ...] = field(
        (),
        "Number of seeds N (seeds 0..N-1) or a list of seeds, e.g. 0,3,7; several run as "
        "--ablations do (default: one run with --seed).",
    )
    parallel: int = field(1, "Runs of --ablations / --seeds at a time.")
    check_flags: bool = field(
        False, "Validate every flag, print what would run, and exit without running it."
    )
    record_dir: str | None = field(
        None,
        "Write the first --record_games games of the final evaluation (a training run's, or "
        "--role=evaluate's of the latest checkpoint; Atari or MinAtar) into this directory as "
        "animated GIFs, one a game, named "
        "<agent>_<env>_frames<checkpoint frames>_game<k>_score<score>.gif.",
    )
    # choice: 3 games show how an agent plays and how much its games vary, in a few seconds
    # of writing; the whole evaluation (eval_episodes games) is rarely worth watching.
    record_games: int = field(3, "How many of the evaluation's games --record_dir records.")

    def validate(self) -> "RunSettings":
        """Raises FlagError naming the first flag whose value is not allowed."""
        try:
            check_choice("role", self.role, ROLES)
            check_choice("launcher", self.launcher, LAUNCHERS)
            check_all(self, "in [1, 65535]", lambda v: 1 <= v <= 65535, ("replay_port",))
            check_all(self, ">= 1", lambda v: v >= 1, ("parallel", "record_games"))
            check_all(self, ">= 0", lambda v: v >= 0, ("first_actor",))
        except ValueError as error:
            raise FlagError(str(error)) from None
        if self.record_dir is not None:
            if not self.record_dir:
                raise FlagError("--record_dir='' must name a directory")
            if self.launcher == "ray":
                raise FlagError(
                    f"--record_dir={self.record_dir} records on this machine's launcher, not "
                    "--launcher=ray (record the checkpoint with --role=evaluate)"
                )
            if self.role not in RECORDING_ROLES:
                raise FlagError(
                    f"--record_dir={self.record_dir} records a final evaluation, which "
                    f"--role={self.role} does not play (allowed: --role="
                    f"{', '.join(RECORDING_ROLES)})"
                )
        if self.role in ("learner", "actor") and not self.replay_address:
            raise FlagError(
                f"--role={self.role} needs --replay_address=host:port (see --role=replay)"
            )
        if self.first_actor and self.role != "actor":
            raise FlagError(
                f"--first_actor={self.first_actor} numbers the actors of --role=actor; with "
                f"--role={self.role} it must be 0"
            )
        if self.ray_address is not None and self.launcher != "ray":
            raise FlagError(
                f"--ray_address={self.ray_address} names the Ray cluster of --launcher=ray, "
                f"not of --launcher={self.launcher}"
            )
        if self.launcher == "ray":
            if self.role != "local":
                raise FlagError(
                    f"--launcher=ray places every role of --role=local on a Ray cluster; with "
                    f"--role={self.role} start each role by hand (docs/guides/several_machines.md)"
                )
            if importlib.util.find_spec("ray") is None:
                raise FlagError(
                    "--launcher=ray needs Ray, which is not installed: pip install -e '.[ray]' "
                    "-c constraints.txt"
                )
        serving = "--role=replay" if self.role == "replay" else None
        if self.launcher == "ray":
            serving = "--launcher=ray"
        if serving and not self.open_port:
            raise FlagError(
                f"{serving} serves its Reverb server to other machines: add --open_port, which "
                "opens its port on every network interface without authentication "
                "(docs/guides/several_machines.md, 'Ports')"
            )
        if self.open_port and self.role not in ("local", "replay"):
            raise FlagError(
                f"--open_port opens the Reverb server of --role=local or replay; --role={self.role} "
                "starts none"
            )
        if self.ablation and self.ablations:
            raise FlagError(
                f"--ablation={self.ablation} and --ablations="
                f"{','.join(self.ablations)}: give one of them"
            )
        parse_seeds(self.seeds)
        return self


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a validated command line asks for."""

    config: Any  # the run's config; with several runs, the first variant's
    settings: RunSettings
    variants: tuple[str, ...]  # ablations to run; () for one run without one
    seeds: tuple[int, ...]

    @property
    def several_runs(self) -> bool:
        """Several variants or seeds: subprocesses through common.experiments.ablation_runner."""
        return len(self.variants) > 1 or len(self.seeds) > 1

    @property
    def ablation(self) -> str | None:
        """The variant of a single run, if any."""
        return None if self.several_runs or not self.variants else self.variants[0]


# `define_flags` marks this run flag with the name of the paper whose flags it defined.
_OWNER_FLAG = "logdir"
_OWNER_ATTRIBUTE = "defined_by_paper"


def define_flags(
    paper: type[builder_lib.Builder],
    flag_values: flags.FlagValues = flags.FLAGS,
    module_name: str | None = None,
) -> None:
    """The flags of `paper`'s config fields and the shared run flags (`RunSettings`), listed by
    `--helpfull` under `module_name` (default: the calling module; `main` passes the program's).
    Idempotent: a second call for the same paper defines nothing; ValueError if `flag_values`
    holds another paper's flags (papers share flag names)."""
    defined = flag_values[_OWNER_FLAG] if _OWNER_FLAG in flag_values else None
    if defined is not None:
        owner = getattr(defined, _OWNER_ATTRIBUTE, None)
        if owner == paper.name:
            return
        raise ValueError(
            f"the flags of {owner or 'another command line'} are already defined; "
            f"{paper.name}'s need a FlagValues of their own"
        )
    module_name = module_name or calling_module_name(1)
    define_dataclass_flags(
        paper.config_class,
        flag_values,
        module_name,
        paper.env_defaults,
        extra_help={"env": ENV_HELP},
    )
    names = ", ".join(paper.ablations) or "none"
    define_dataclass_flags(
        RunSettings,
        flag_values,
        module_name,
        extra_help=dict(ablation=f"One of: {names}.", ablations=f"Of: {names}."),
    )
    setattr(flag_values[_OWNER_FLAG], _OWNER_ATTRIBUTE, paper.name)


# --------------------------------------------------------------------------- config and plan


def normalise_env(env: str, cartpole: bool = True, multitask: bool = True) -> str:
    """The canonical name of `env` (`common.environments.env_names.canonical_env`); FlagError if it
    names no env the paper runs (every paper runs Atari and MinAtar games, CartPole where
    `cartpole`, a comma-separated list of games where `multitask`). Imports gymnasium and ale-py,
    not TensorFlow."""
    from common.environments import env_names

    if len(env_names.games(env)) > 1 and not multitask:
        raise FlagError(
            f"--env={env!r} lists several games: this paper trains on one (a list is IMPALA's "
            "multi-task agent)"
        )
    try:
        name = env_names.canonical_env(env)
    except ValueError as error:  # an unknown MinAtar game (listed), a game twice, mixed families
        raise FlagError(f"--env={error}") from None
    if name is None or (name == env_names.CARTPOLE and not cartpole):
        allowed = "CartPole or an Atari game" if cartpole else "an Atari game"
        raise FlagError(
            f"--env={env!r} is not {allowed} (e.g. Pong, Breakout, MsPacman, "
            "ms_pacman, ALE/Pong-v5, PongNoFrameskip-v4) or a MinAtar game (e.g. "
            "MinAtar/Breakout-v0, breakout-minatar, minatar:space_invaders)"
        )
    return name


def env_defaults_for(env_defaults: Mapping[str, Mapping[str, Any]], env: str) -> dict[str, Any]:
    """The defaults `env_defaults` (`Builder.env_defaults`) give the canonical env `env`: those of
    its family's key (ENV_FAMILY_KEYS, e.g. "MinAtar"), then, over them, those of its own name."""
    from common.environments import env_names

    family_key = ENV_FAMILY_KEYS[env_names.env_family(env)]
    values = dict(env_defaults.get(family_key, {}))
    if env != family_key:
        values.update(env_defaults.get(env, {}))
    return values


def _check_ablation(paper: type[builder_lib.Builder], name: str, flag: str) -> None:
    if name not in paper.ablations:
        allowed = ", ".join(paper.ablations) or "(the paper has none)"
        if flag == "ablation":
            raise FlagError(f"--ablation={name!r} is not one of {allowed}")
        raise FlagError(f"--ablations: {name!r} is not one of {allowed}")


def make_config(
    paper: type[builder_lib.Builder], given: Mapping[str, Any], ablation: str | None = None
) -> Any:
    """The validated config: the paper's defaults < `paper.env_defaults` of the env < the
    overrides of `ablation` < `given` (the flags given on the command line); an env default that
    is `Derived` (e.g. MinAtar's warm-up) is computed from the config the others make. FlagError
    naming the flag if a value is not allowed."""
    env_field = {f.name: f for f in dataclasses.fields(paper.config_class)}["env"]
    env = normalise_env(given.get("env", env_field.default), paper.cartpole, paper.multitask)
    values = env_defaults_for(paper.env_defaults, env)
    if ablation is not None:
        _check_ablation(paper, ablation, "ablation")
        values.update(paper.ablations[ablation])
    values.update(given)
    values["env"] = env
    derived = {k: v for k, v in values.items() if isinstance(v, Derived)}
    try:
        config = paper.config_class(**{k: v for k, v in values.items() if k not in derived})
        config = dataclasses.replace(config, **{k: v.resolve(config) for k, v in derived.items()})
        config = config.validate()
    except ValueError as error:
        raise FlagError(str(error)) from None
    from common.environments import env_names  # imported already by `normalise_env`

    games = len(env_names.games(env))
    if games > 1 and config.envs_per_actor < games:
        raise FlagError(
            f"--envs_per_actor={config.envs_per_actor} must be at least the {games} games of "
            "--env: every actor plays every game"
        )
    return config


def config_from_flags(
    paper: type[builder_lib.Builder], flag_values: flags.FlagValues = flags.FLAGS
) -> Any:
    """`make_config` with the parsed flags: those given, and the --ablation's overrides."""
    return make_config(
        paper, given_values(paper.config_class, flag_values), flag_values["ablation"].value
    )


def parse_seeds(seeds: Sequence[int], default: int = 0) -> list[int]:
    """--seeds=3 -> [0, 1, 2]; --seeds=0,5 -> [0, 5]; none given -> [default]."""
    if not seeds:
        return [default]
    if len(seeds) == 1:
        if seeds[0] < 1:
            raise FlagError(f"--seeds={seeds[0]} must be >= 1 (a count, or a list of seeds)")
        return list(range(seeds[0]))
    if len(set(seeds)) != len(seeds):
        raise FlagError(f"--seeds={flag_text(tuple(seeds))} must be distinct")
    if min(seeds) < 0:
        raise FlagError(f"--seeds={flag_text(tuple(seeds))} must be seeds >= 0")
    return list(seeds)


def plan_from_flags(
    paper: type[builder_lib.Builder],
    argv: Sequence[str],
    flag_values: flags.FlagValues = flags.FLAGS,
) -> Plan:
    """Validates parsed flags (`argv`: what `parse_flags` returned) into a `Plan`; FlagError
    with one line naming the flag on anything not allowed. Imports no TensorFlow."""
    if len(argv) > 1:
        raise FlagError(f"unexpected arguments {list(argv[1:])}; flags are written --name=value")
    settings = RunSettings(**given_values(RunSettings, flag_values)).validate()
    for name in settings.ablations:
        _check_ablation(paper, name, "ablations")
    variants = settings.ablations or ((settings.ablation,) if settings.ablation else ())
    several_runs = len(variants) > 1 or len(parse_seeds(settings.seeds)) > 1
    if several_runs:
        if settings.role != "local":
            raise FlagError(
                f"--role={settings.role} runs one variant with one seed; several "
                "(--ablations, --seeds) run with --role=local"
            )
        if not variants:
            if paper.default_ablation is None:
                raise FlagError(
                    f"--seeds={flag_text(settings.seeds)} needs --ablation or "
                    "--ablations: each run is a named variant"
                )
            variants = (paper.default_ablation,)
    given = given_values(paper.config_class, flag_values)
    configs = [make_config(paper, given, variant) for variant in variants or (None,)]
    seeds = tuple(parse_seeds(settings.seeds, configs[0].seed))
    config = configs[0]
    if settings.record_dir is not None:
        from common.environments import env_names

        if env_names.env_family(config.env) == "cartpole":
            raise FlagError(
                f"--record_dir={settings.record_dir} needs an Atari or MinAtar env: CartPole's "
                "observations are not images"
            )
        if settings.role != "evaluate" and not config.eval_interval_s > 0:
            raise FlagError(
                f"--record_dir={settings.record_dir} records the run's final evaluation, which "
                f"--eval_interval_s={config.eval_interval_s:g} turns off (set it > 0, or record "
                "a checkpoint with --role=evaluate)"
            )
    if settings.seeds and not several_runs:
        config = dataclasses.replace(config, seed=seeds[0])
    return Plan(config, settings, variants, seeds)


# ---------------------------------------------------------------------------------- running


def default_logdir(paper: type[builder_lib.Builder], plan: Plan) -> str:
    env = plan.config.env.replace("/", "_")  # MinAtar/Breakout-v0: one directory, not two
    if plan.several_runs:
        return os.path.join("runs", f"{paper.name}_{env}_ablations")
    suffix = f"_{plan.ablation}" if plan.ablation else ""
    return os.path.join("runs", f"{paper.name}_{env}{suffix}")


def forwarded_argv(
    paper: type[builder_lib.Builder], plan: Plan, flag_values: flags.FlagValues = flags.FLAGS
) -> list[str]:
    """The flags given on the command line that every ablation run gets, as --name=value: all
    but those the runner sets per run; --env in its canonical spelling."""
    own = ("ablation", "ablations", "seeds", "seed", "logdir", "parallel")
    names = [f.name for f in dataclasses.fields(paper.config_class)]
    names += [f.name for f in dataclasses.fields(RunSettings)]
    argv = []
    for name in names:
        if flag_values[name].present and name not in own:
            argv.append(
                f"--env={plan.config.env}" if name == "env" else flag_values[name].serialize()
            )
    return argv


def run_several(
    paper: type[builder_lib.Builder], plan: Plan, flag_values: flags.FlagValues = flags.FLAGS
) -> None:
    """Every variant with every seed as a subprocess, then one table and plot
    (`common.experiments.ablation_runner`; docs/architecture.md#comparing-papers)."""
    from common.environments import env_names
    from common.experiments import ablation_runner

    logdir = plan.settings.logdir or default_logdir(paper, plan)
    game = env_names.hns_game(plan.config.env)  # None on CartPole and MinAtar: no human scores
    try:
        ablation_runner.run_ablations(
            paper.module(),
            list(plan.variants),
            list(plan.seeds),
            logdir,
            forwarded_argv(paper, plan, flag_values),
            parallel=plan.settings.parallel,
            game=game,
        )
    except ablation_runner.AblationRunError as error:
        fail(str(error), EXIT_FAILURE)
    print(f"ablation results in {logdir}: summary.md, curves.csv, curves.png", flush=True)


def run_one(paper: type[builder_lib.Builder], plan: Plan) -> None:
    """One role of one training run (imports TensorFlow and Reverb)."""
    config, settings = plan.config, plan.settings
    open_because: str | None = "--open_port"  # why a local run's Reverb port is open to the network
    if settings.role == "local" and settings.launcher == "local" and not settings.open_port:
        # First, before TensorFlow starts its threads (common/launchers/private_network.py).
        from common.launchers import private_network

        refused = private_network.enter()
        open_because = refused and f"no network of its own here: {refused}"
    # Reverb's routine C++ lines off the console, as TensorFlow's are (TF_CPP_MIN_LOG_LEVEL=0
    # brings both back); started after the private network, so that every process of the run,
    # the filter too, is in it.
    stderr_filter.filter_reverb_lines()
    from common.launchers import actor_range
    from common.launchers import launch

    logdir = settings.logdir or default_logdir(paper, plan)
    if settings.launcher == "ray":
        # Ray actors run in other directories, on other nodes (common/launchers/ray_launch.py).
        logdir = os.path.abspath(logdir)
    record = None
    if settings.record_dir is not None:
        from common.environments import recording

        record = recording.RecordSettings(
            settings.record_dir,
            settings.record_games,
            recording.agent_name(paper.name, plan.ablation),
        )
    experiment = builder_lib.build_experiment(paper(config), logdir, settings.replay_port)
    if record is not None and experiment.evaluator is None:
        fail(f"--record_dir={settings.record_dir}: these flags play no evaluation to record")
    if settings.role in ("local", "learner"):
        os.makedirs(logdir, exist_ok=True)
        print(f"[{paper.name}] {config.env}: {paper(config).describe()} -> {logdir}", flush=True)
    try:
        if settings.launcher == "ray":
            from common.launchers import ray_launch

            ray_launch.run(experiment, settings.ray_address)
        else:
            launch.run(
                experiment,
                role=settings.role,
                replay_address=settings.replay_address,
                record=record,
                first_actor=settings.first_actor,
                open_because=open_because,
            )
    except (ConnectionError, launch.CheckpointError, actor_range.ActorRangeError) as error:
        fail(str(error), EXIT_FAILURE)


def _parse_or_exit(argv: Sequence[str]) -> list[str]:
    try:
        return parse_flags(argv)
    except FlagError as error:
        fail(str(error))


def _main(paper: type[builder_lib.Builder], argv: Sequence[str]) -> None:
    try:
        try:
            plan = plan_from_flags(paper, argv)
        except FlagError as error:
            fail(str(error))
        if plan.settings.check_flags:
            print(f"[{paper.name}] flags ok, {plan.config.env}: {paper(plan.config).describe()}")
        elif plan.several_runs:
            run_several(paper, plan)
        else:
            run_one(paper, plan)
    except (KeyboardInterrupt, stop_signals.Terminated):
        # Stopped before the launcher took over (TensorFlow importing, the experiment being
        # built): nothing has started that needs saving. The launcher's own line covers the rest.
        print(f"[{paper.name}] interrupted; shut down", flush=True)


def main(paper: type[builder_lib.Builder], argv: Sequence[str] | None = None) -> None:
    """The whole command line of `paper` (a paper's `Builder` class): define its flags
    (`define_flags`, under the program's name, where `--help` looks for them), parse, validate,
    run. Exits 2 with one line on a bad flag, 1 if the run fails."""
    # First: from here on a stop ends the run with one line (common/runtime/stop_signals.py).
    stop_signals.install()
    from absl import app

    # choice: numpy's BLAS on one thread, set before numpy loads: the run's numpy work is small
    # arrays (bandits, batches), whose extra threads would only compete with TensorFlow's for
    # the cores, and a process that is still single-threaded when its run starts can enter a
    # network of its own as an unprivileged user (common/launchers/private_network.py).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    define_flags(paper, module_name=sys.argv[0])
    app.run(
        functools.partial(_main, paper),
        argv=None if argv is None else list(argv),
        flags_parser=_parse_or_exit,
    )

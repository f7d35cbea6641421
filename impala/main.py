"""Train IMPALA: `python -m impala.main --env=Pong`.

Every `impala.config.ImpalaConfig` field is a flag (defaults: Table G.1; CartPole has its own
documented choices). Run flags:

  --logdir             run directory (default runs/impala_<env>[_<ablation>]); the same logdir
                       resumes from its last checkpoint
  --role               local (default: Reverb + actors + learner + evaluator on this machine),
                       replay, learner or actor (the last two need --replay_address)
  --replay_address     host:port of the replay role; --replay_port picks the replay role's port
  --ablation           one named variant of impala/ablations.py
  --ablations, --seeds several variants and/or seeds: runs each as a subprocess through
                       common.ablation_runner and writes one table and plot under --logdir

Flags are validated before TensorFlow or Reverb are imported, so mistakes fail in a second.
"""

import dataclasses
import functools
import os
import sys

from absl import app
from absl import flags

from impala import ablations
from impala import config as config_lib

_FLAG_DEFINERS = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer, float: flags.DEFINE_float,
                  str: flags.DEFINE_string}
for _field in dataclasses.fields(config_lib.ImpalaConfig):
    _FLAG_DEFINERS[config_lib.field_types()[_field.name]](
        _field.name, None, f"{_field.metadata['help']} (default {_field.default!r})")

# common.launch.ROLES, written out: importing common.launch would import TensorFlow.
ROLES = ("local", "replay", "learner", "actor")

_LOGDIR = flags.DEFINE_string("logdir", None, "Run directory (default runs/impala_<env>).")
_ROLE = flags.DEFINE_enum("role", "local", ROLES, "Which part of the system to run.")
_REPLAY_ADDRESS = flags.DEFINE_string("replay_address", None,
                                      "host:port of a Reverb server started with --role=replay.")
_REPLAY_PORT = flags.DEFINE_integer("replay_port", 8000, "Port of --role=replay.")
_ABLATION = flags.DEFINE_string("ablation", None,
                                f"One named variant: {', '.join(ablations.ABLATIONS)}.")
_ABLATIONS = flags.DEFINE_list("ablations", None, "Several variants, run side by side.")
_SEEDS = flags.DEFINE_list("seeds", None, "Number of seeds N (0..N-1) or a list, e.g. 0,3,7.")
_PARALLEL = flags.DEFINE_integer("parallel", 1, "Ablation runs at a time.")

_CONFIG_FIELDS = frozenset(f.name for f in dataclasses.fields(config_lib.ImpalaConfig))
_RUN_FLAGS = ("logdir", "role", "replay_address", "replay_port", "ablation", "ablations", "seeds",
              "parallel")


def _fail(message: str):
    raise app.UsageError(message)


def parse_seeds(values: list[str] | None) -> list[int]:
    """--seeds=3 -> [0, 1, 2]; --seeds=0,5 -> [0, 5]."""
    if not values:
        return [config_lib.ImpalaConfig.seed]
    try:
        numbers = [int(v) for v in values]
    except ValueError:
        _fail(f"--seeds={','.join(values)} must be a count or a list of integers")
    if len(numbers) == 1:
        if numbers[0] < 1:
            _fail(f"--seeds={numbers[0]} must be >= 1")
        return list(range(numbers[0]))
    return numbers


def config_from_flags() -> config_lib.ImpalaConfig:
    """Env defaults < the --ablation's overrides < flags given on the command line."""
    env = flags.FLAGS.env or config_lib.ImpalaConfig.env
    overrides = ablations.overrides_for(_ABLATION.value) if _ABLATION.value else {}
    for field in dataclasses.fields(config_lib.ImpalaConfig):
        value = getattr(flags.FLAGS, field.name)
        if value is not None and field.name != "env":
            overrides[field.name] = value
    return config_lib.default_config(env, **overrides).validate()


def check_env(env: str) -> None:
    from common import envs  # no TensorFlow behind it
    if env != "CartPole" and envs.atari_game(env) is None:
        _fail(f"--env={env!r} is not CartPole or an Atari game (e.g. Pong, Breakout, "
              f"MsPacman, ms_pacman)")


def default_logdir(config: config_lib.ImpalaConfig) -> str:
    suffix = f"_{_ABLATION.value}" if _ABLATION.value else ""
    return os.path.join("runs", f"impala_{config.env}{suffix}")


def _explicit_argv(skip: tuple[str, ...]) -> list[str]:
    """The flags given on the command line, minus `skip`, as --name=value."""
    argv = []
    for name in flags.FLAGS:
        flag = flags.FLAGS[name]
        if flag.present and name not in skip and (name in _RUN_FLAGS or name in _CONFIG_FIELDS):
            argv.append(flag.serialize())
    return argv


def run_ablations(variants: list[str], seeds: list[int],
                  config: config_lib.ImpalaConfig) -> None:
    from common import ablation_runner
    logdir = _LOGDIR.value or os.path.join("runs", f"impala_{config.env}_ablations")
    extra = _explicit_argv(skip=("ablation", "ablations", "seeds", "seed", "logdir", "parallel"))
    game = None if config.env == "CartPole" else config.env
    ablation_runner.run_ablations("impala.main", variants, seeds, logdir, extra,
                                  parallel=_PARALLEL.value, game=game)
    print(f"ablation results in {logdir}: summary.md, curves.csv, curves.png", flush=True)


def make_replay(config: config_lib.ImpalaConfig):
    """The queue of §5.4, or Table 2's queue plus uniform replay (impala.md §6.2, A24)."""
    from common import patterns
    if config.replay == "queue":
        return patterns.Queue(length=config.unroll_length, capacity=config.queue_capacity)
    return patterns.QueueWithReplay(length=config.unroll_length, capacity=config.queue_capacity,
                                    replay_capacity=config.replay_capacity,
                                    replay_fraction=config.replay_fraction)


def build_agent(config: config_lib.ImpalaConfig):
    """IMPALA's pieces on the shared stack (common.agent)."""
    from common import agent
    from impala import acting as impala_acting
    from impala import networks

    return agent.Agent(
        replay=make_replay(config),
        make_policy=functools.partial(impala_acting.make_policy, config),
        policy_extras=impala_acting.policy_extras,
        make_learner=functools.partial(make_learner, config),
        core_state_spec=networks.core_state_spec(config))


def build_experiment(config: config_lib.ImpalaConfig, logdir: str,
                     replay_port: int | None = None):
    """The launcher's description of an IMPALA run (imports TensorFlow)."""
    from common import acting
    from common import launch
    from common import learning
    from impala import acting as impala_acting

    protocol = impala_acting.training_protocol(config)
    evaluator = None
    if config.eval_interval_s > 0:
        evaluator = acting.EvaluatorSettings(
            env=config.env, protocol=impala_acting.evaluation_protocol(config),
            num_envs=min(config.eval_round_episodes, config.envs_per_actor),
            round_episodes=config.eval_round_episodes, final_episodes=config.eval_episodes,
            interval_s=config.eval_interval_s, frames_per_learner_step=config.frames_per_batch,
            greedy=config.eval_policy == "greedy", seed=config.seed + 10_000,
            niceness=config.actor_niceness)
    return launch.Experiment(
        agent=build_agent(config),
        actor=acting.ActorSettings(
            env=config.env, num_envs=config.envs_per_actor, seed=config.seed,
            params_pull_interval=config.params_pull_interval, protocol=protocol,
            state_dir=logdir, niceness=config.actor_niceness),
        num_actors=config.num_actors,
        learner=learning.LearnerSettings(
            logdir=logdir, total_frames=config.total_frames,
            frames_per_batch=config.frames_per_batch, batch_size=config.batch_size,
            publish_interval=config.publish_interval, publish_lag=config.publish_lag,
            checkpoint_interval_s=config.checkpoint_interval_s,
            log_interval_s=config.log_interval_s, name=f"impala {config.env}"),
        evaluator=evaluator,
        replay_port=replay_port)


def make_learner(config: config_lib.ImpalaConfig, spec):
    """Network, compiled train step and optimizer of the learner process."""
    from common import learning as common_learning
    from impala import learning
    from impala import networks

    tf_seed(config.seed)
    network = networks.make_network(config, spec.num_actions)
    network.create_variables(spec.observation_shape, spec.observation_dtype)
    optimizer = learning.make_optimizer(config)
    train_step = learning.make_train_step(network, optimizer, config)
    return common_learning.LearnerParts(
        train_step=train_step, checkpointables={"network": network, "optimizer": optimizer},
        acting_variables=network.variables)


def tf_seed(seed: int) -> None:
    import tensorflow as tf
    tf.random.set_seed(seed)


def main(argv):
    if len(argv) > 1:
        _fail(f"unexpected arguments {argv[1:]}; flags are written --name=value")
    try:
        config = config_from_flags()
    except ValueError as error:
        _fail(str(error))
    check_env(config.env)
    if _ROLE.value in ("learner", "actor") and not _REPLAY_ADDRESS.value:
        _fail(f"--role={_ROLE.value} needs --replay_address=host:port (see --role=replay)")
    variants = _ABLATIONS.value or ([_ABLATION.value] if _ABLATION.value else ["vtrace"])
    for variant in variants:
        if variant not in ablations.ABLATIONS:
            _fail(f"--ablations: {variant!r} is not one of {', '.join(ablations.ABLATIONS)}")
    seeds = parse_seeds(_SEEDS.value)
    if len(variants) > 1 or len(seeds) > 1:
        run_ablations(variants, seeds, config)
        return
    if _ABLATIONS.value:  # one variant, one seed: a normal run of that variant
        flags.FLAGS.ablation = variants[0]
        config = config_from_flags()
    if _SEEDS.value:
        config = dataclasses.replace(config, seed=seeds[0])

    from common import launch  # TensorFlow and Reverb from here on
    logdir = _LOGDIR.value or default_logdir(config)
    if _ROLE.value in ("local", "learner"):
        os.makedirs(logdir, exist_ok=True)
        print(f"[impala] {config.env}: {config.num_actors} actors x {config.envs_per_actor} "
              f"envs, {config.network} net, {config.correction}, batch {config.batch_size}x"
              f"{config.unroll_length}, {config.total_frames:,} frames -> {logdir}", flush=True)
    try:
        launch.run(build_experiment(config, logdir, _REPLAY_PORT.value), role=_ROLE.value,
                   replay_address=_REPLAY_ADDRESS.value)
    except ConnectionError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    app.run(main)

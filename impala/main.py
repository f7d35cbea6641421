"""Train IMPALA: `python -m impala.main --env=Pong`.

Every `impala.config.ImpalaConfig` field is a flag (defaults: Table G.1; CartPole has its own
documented choices), and so is every run setting every paper shares (`common.cli.RunSettings`):

  --logdir             run directory (default runs/impala_<env>[_<ablation>]); the same logdir
                       resumes from its last checkpoint
  --role               local (default: Reverb + actors + learner + evaluator on this machine),
                       replay, learner or actor (the last two need --replay_address)
  --replay_address     host:port of the replay role; --replay_port picks the replay role's port
  --ablation           one named variant of impala/ablations.py
  --ablations, --seeds several variants and/or seeds: runs each as a subprocess through
                       common.ablation_runner and writes one table and plot under --logdir

--env takes CartPole or any Atari game as people write it (Pong, pong, ALE/Pong-v5,
PongNoFrameskip-v4, MsPacman, ms_pacman). Flags are validated before TensorFlow or Reverb are
imported, so a mistake fails in a second, on one line (common/cli.py).
"""

import functools

from common import cli
from impala import ablations
from impala import config as config_lib


def make_replay(config: config_lib.ImpalaConfig):
    """The queue of §3, Table 2's queue plus uniform replay (§5.2.2, Table D.3), or another
    paper's pattern with IMPALA's learner (config.replay)."""
    from common import patterns

    length, capacity = config.unroll_length, config.replay_capacity
    pattern = {
        "queue": lambda: patterns.Queue(length=length, capacity=config.queue_capacity),
        "queue_with_replay": lambda: patterns.QueueWithReplay(
            length=length,
            capacity=config.queue_capacity,
            replay_capacity=capacity,
            replay_fraction=config.replay_fraction,
        ),
        # choice: one sample per `length` inserts: each step (an item per step, each covering
        # `length` steps) is trained on about once, so a learner step is a batch of new frames
        # (frames_per_batch) and the learner cannot outrun the actors on stale data.
        "prioritized": lambda: patterns.Prioritized(
            length=length,
            capacity=capacity,
            min_size=config.batch_size,
            samples_per_insert=1.0 / length,
            error_buffer=4.0 * config.batch_size,
        ),
        "sample_k": lambda: patterns.SampleK(
            length=length,
            capacity=capacity,
            burn_in=config.burn_in,
            times_sampled=config.times_sampled,
            min_size=config.batch_size,
        ),
    }[config.replay]()
    pattern.validate()
    return pattern


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
        core_state_spec=networks.core_state_spec(config),
    )


def build_experiment(config: config_lib.ImpalaConfig, logdir: str, replay_port: int | None = None):
    """The launcher's description of an IMPALA run (imports TensorFlow)."""
    from common import launch
    from impala import acting as impala_acting

    return launch.experiment_from_config(
        config,
        build_agent(config),
        logdir,
        replay_port,
        protocol=impala_acting.training_protocol(config),
        eval_protocol=impala_acting.evaluation_protocol(config),
        frames_per_learner_step=config.frames_per_batch,
        greedy_evaluation=config.eval_policy == "greedy",
        publish_lag=config.publish_lag,
        name=f"impala {config.env}",
    )


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
        train_step=train_step,
        checkpointables={"network": network, "optimizer": optimizer},
        acting_variables=network.variables,
    )


def tf_seed(seed: int) -> None:
    import tensorflow as tf

    tf.random.set_seed(seed)


def describe(config: config_lib.ImpalaConfig) -> str:
    return (
        f"{config.num_actors} actors x {config.envs_per_actor} envs, {config.network} net, "
        f"{config.correction}, batch {config.batch_size}x{config.unroll_length}, "
        f"{config.total_frames:,} frames"
    )


PAPER = cli.Paper(
    name="impala",
    config_class=config_lib.ImpalaConfig,
    build_experiment=build_experiment,
    ablations=ablations.ABLATIONS,
    default_ablation="vtrace",
    env_defaults={
        "CartPole": config_lib.CARTPOLE_OVERRIDES,
        "MinAtar": config_lib.MINATAR_OVERRIDES,
    },
    cartpole=True,
    describe=describe,
)
cli.define_flags(PAPER)


if __name__ == "__main__":
    cli.main(PAPER)

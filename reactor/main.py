"""Train Reactor: `python -m reactor.main --env=Pong`.

Every `reactor.config.ReactorConfig` field is a flag (defaults: the paper where it says, cited
`# choice:` where it does not; CartPole has its own choices, `config.CARTPOLE_OVERRIDES`), and
so is every run setting every paper shares (`common.cli.RunSettings`: --logdir, which resumes
from its last checkpoint with the replay, --role, --replay_address, --ablation(s), --seeds).
Ablations of Fig. 3-left / §4.4: `reactor/ablations.py`, e.g.
`python -m reactor.main --env=CartPole --ablations=reactor,no_prioritisation,tislr --seeds=3`.
Flags are validated before TensorFlow or Reverb are imported (common/cli.py).
"""

import functools

from common import cli
from reactor import ablations
from reactor import config as config_lib


def build_agent(config: config_lib.ReactorConfig):
    """Reactor's pieces on the shared stack (common.agent)."""
    from common import agent
    from reactor import acting as reactor_acting
    from reactor import replay as reactor_replay

    return agent.Agent(
        replay=reactor_replay.make_pattern(config),
        make_policy=functools.partial(reactor_acting.make_policy, config),
        policy_extras=reactor_acting.policy_extras,
        make_learner=functools.partial(make_learner, config),
        core_state_spec=reactor_acting.core_state_spec(config),
    )


def build_experiment(config: config_lib.ReactorConfig, logdir: str, replay_port=None):
    """The launcher's description of a Reactor run (imports TensorFlow)."""
    from common import acting
    from common import launch
    from common import learning
    from reactor import acting as reactor_acting

    protocol = reactor_acting.protocol(config)
    evaluator = None
    if config.eval_interval_s > 0:
        evaluator = acting.EvaluatorSettings(
            env=config.env,
            protocol=protocol,
            num_envs=min(config.eval_round_episodes, config.envs_per_actor),
            round_episodes=config.eval_round_episodes,
            final_episodes=config.eval_episodes,
            interval_s=config.eval_interval_s,
            frames_per_learner_step=config.frames_per_batch,
            greedy=config.eval_policy == "greedy",
            seed=config.seed + 10_000,
            niceness=config.actor_niceness,
        )
    return launch.Experiment(
        agent=build_agent(config),
        actor=acting.ActorSettings(
            env=config.env,
            num_envs=config.envs_per_actor,
            seed=config.seed,
            params_pull_interval=config.params_pull_interval,
            protocol=protocol,
            state_dir=logdir,
            niceness=config.actor_niceness,
        ),
        num_actors=config.num_actors,
        learner=learning.LearnerSettings(
            logdir=logdir,
            total_frames=config.total_frames,
            frames_per_batch=config.frames_per_batch,
            batch_size=config.batch_size,
            publish_interval=config.publish_interval,
            checkpoint_interval_s=config.checkpoint_interval_s,
            log_interval_s=config.log_interval_s,
            name=f"reactor {config.env}",
        ),
        evaluator=evaluator,
        replay_port=replay_port,
    )


def make_learner(config: config_lib.ReactorConfig, spec):
    """Online and target networks, Adam, the priority state and the compiled train step. The
    target network is checkpointed, never published (§2.11)."""
    import tensorflow as tf

    from common import learning as common_learning
    from reactor import acting as reactor_acting
    from reactor import learning

    tf.random.set_seed(config.seed)
    network = reactor_acting.make_network(config, spec.num_actions)
    target = reactor_acting.make_network(config, spec.num_actions)
    for net in (network, target):
        net.create_variables(spec.observation_shape, spec.observation_dtype)
    learning.copy_variables(network, target)
    optimizer = learning.make_optimizer(config)
    priority_state = learning.PriorityState()
    train_step = learning.make_train_step(network, target, optimizer, priority_state, config)
    return common_learning.LearnerParts(
        train_step=train_step,
        checkpointables={
            "network": network,
            "target": target,
            "optimizer": optimizer,
            "priorities": priority_state,
        },
        # The policy's weights, then the new-key estimate the actors' writers read.
        acting_variables=[*network.variables, priority_state.insert_priority],
    )


def describe(config: config_lib.ReactorConfig) -> str:
    critic = "distributional" if config.distributional else "ND"
    return (
        f"{config.num_actors} actors x {config.envs_per_actor} envs, {critic} Retrace, "
        f"{config.policy_gradient}, {config.prioritisation} replay, batch {config.batch_size}x"
        f"{config.sequence_length - 1}, {config.total_frames:,} frames"
    )


PAPER = cli.Paper(
    name="reactor",
    config_class=config_lib.ReactorConfig,
    build_experiment=build_experiment,
    ablations=ablations.ABLATIONS,
    default_ablation="reactor",
    env_defaults={"CartPole": config_lib.CARTPOLE_OVERRIDES},
    cartpole=True,
    describe=describe,
)
cli.define_flags(PAPER)


if __name__ == "__main__":
    cli.main(PAPER)

"""A Reactor run on the shared stack: the agent (`common.agent`), the launcher's experiment
(`common.launch`) and the learner's parts (`common.learning`). Separate from `reactor.main`,
which defines the command-line flags when imported, so tests and tools can build runs without
them. Imports TensorFlow only inside the functions.
"""

import functools

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


def build_experiment(config: config_lib.ReactorConfig, logdir: str, replay_port: int | None = None):
    """The launcher's description of a Reactor run (imports TensorFlow)."""
    from common import launch
    from reactor import acting as reactor_acting

    return launch.experiment_from_config(
        config,
        build_agent(config),
        logdir,
        replay_port,
        protocol=reactor_acting.protocol(config),
        frames_per_learner_step=config.frames_per_batch,
        greedy_evaluation=config.eval_policy == "greedy",
        name=f"reactor {config.env}",
    )


def make_learner(config: config_lib.ReactorConfig, spec):
    """Online and target networks, Adam, the priority state and the compiled train step. The
    target network is checkpointed, never published (only the learner uses it)."""
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

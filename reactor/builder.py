"""Reactor on the shared stack: `ReactorBuilder` (`common.experiments.builder.Builder`),
which is the paper the command line runs. Imports TensorFlow only inside the methods that
build something."""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from common.experiments import builder
from reactor import ablations as ablations_lib
from reactor import config as config_lib

if TYPE_CHECKING:
    from common.environments.protocols import AtariProtocol
    from common.replay.patterns import Pattern
    from common.runtime.acting import PolicyFactory
    from common.runtime.agent import EnvSpec
    from common.runtime.learning import LearnerParts


@dataclasses.dataclass(frozen=True)
class ReactorBuilder(builder.Builder[config_lib.ReactorConfig]):
    """Reactor's pieces: lazily prioritised sequence replay (§3.3, `reactor.replay`), the
    eps-mixed policy of Table 3's network (App. 6.4), the distributional Retrace and beta-LOO
    learner with a target network (§3)."""

    name = "reactor"
    config_class = config_lib.ReactorConfig
    ablations = ablations_lib.ABLATIONS
    default_ablation = "reactor"
    env_defaults = {
        "CartPole": config_lib.CARTPOLE_OVERRIDES,
        "MinAtar": config_lib.MINATAR_OVERRIDES,
    }
    cartpole = True

    config: config_lib.ReactorConfig

    def replay(self) -> Pattern:
        from reactor import replay

        return replay.make_pattern(self.config)

    def policy_factory(self) -> PolicyFactory:
        from reactor import acting

        return functools.partial(acting.make_policy, self.config)

    def policy_extras(self, spec: EnvSpec) -> dict:
        from reactor import acting

        return acting.policy_extras(spec)

    def make_learner(self, spec: EnvSpec) -> LearnerParts:
        """Online and target networks, Adam, the priority state and the compiled train step.
        The target network is checkpointed, never published (only the learner uses it)."""
        import tensorflow as tf

        from common.runtime import learning as common_learning
        from reactor import learning, networks

        config = self.config
        tf.random.set_seed(config.seed)
        network = networks.make_network(config, spec.num_actions)
        target = networks.make_network(config, spec.num_actions)
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

    def core_state_spec(self) -> Any:
        from reactor import networks

        return networks.core_state_spec(self.config)

    def protocol(self) -> AtariProtocol:
        from reactor import acting

        return acting.protocol(self.config)

    def evaluation(self) -> builder.Evaluation:
        """The training protocol (§4.1), sampling pi unless --eval_policy=greedy (argmax Q)."""
        return builder.Evaluation(greedy=self.config.eval_policy == "greedy")

    def run_name(self) -> str:
        return f"reactor {self.config.env}"

    def describe(self) -> str:
        config = self.config
        critic = "distributional" if config.distributional else "ND"
        return (
            f"{config.num_actors} actors x {config.envs_per_actor} envs, {critic} Retrace, "
            f"{config.policy_gradient}, {config.prioritisation} replay, batch "
            f"{config.batch_size}x{config.sequence_length - 1}, {config.total_frames:,} frames"
        )

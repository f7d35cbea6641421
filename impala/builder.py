"""IMPALA on the shared stack: `ImpalaBuilder` (`common.experiments.builder.Builder`),
which is the paper the command line runs. Imports TensorFlow only inside the methods that
build something."""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from common.experiments import builder
from impala import ablations as ablations_lib
from impala import config as config_lib

if TYPE_CHECKING:
    from common.environments.protocols import AtariProtocol
    from common.replay.patterns import Pattern
    from common.runtime.acting import PolicyFactory
    from common.runtime.agent import EnvSpec
    from common.runtime.learning import LearnerParts


@dataclasses.dataclass(frozen=True)
class ImpalaBuilder(builder.Builder[config_lib.ImpalaConfig]):
    """IMPALA's pieces: the queue (§3) or another pattern, the V-trace learner, the
    softmax(logits) behaviour policy (§4.1) and Table G.1's protocols."""

    name = "impala"
    config_class = config_lib.ImpalaConfig
    ablations = ablations_lib.ABLATIONS
    default_ablation = "vtrace"
    env_defaults = {
        "CartPole": config_lib.CARTPOLE_OVERRIDES,
        "MinAtar": config_lib.MINATAR_OVERRIDES,
    }
    cartpole = True
    multitask = True  # §5.3: one agent for all games (common.environments.multitask)

    config: config_lib.ImpalaConfig

    def replay(self) -> Pattern:
        """The queue of §3, Table 2's queue plus uniform replay (§5.2.2, Table D.3), or another
        paper's pattern with IMPALA's learner (config.replay)."""
        from common.replay import patterns

        config = self.config
        length, capacity = config.unroll_length, config.replay_capacity
        pattern = {
            "queue": lambda: patterns.Queue(length=length, capacity=config.queue_capacity),
            "queue_with_replay": lambda: patterns.QueueWithReplay(
                length=length,
                capacity=config.queue_capacity,
                replay_capacity=capacity,
                replay_fraction=config.replay_fraction,
            ),
            # choice: one sample per `length` inserts: each step (an item per step, each
            # covering `length` steps) is trained on about once, so a learner step is a batch
            # of new frames (frames_per_learner_step) and the learner cannot outrun the actors on
            # stale data.
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

    def policy_factory(self) -> PolicyFactory:
        from impala import acting

        return functools.partial(acting.make_policy, self.config)

    def policy_extras(self, spec: EnvSpec) -> dict:
        from impala import acting

        return acting.policy_extras(spec)

    def make_learner(self, spec: EnvSpec) -> LearnerParts:
        """Network, compiled train step and optimizer of the learner process."""
        import tensorflow as tf

        from common.runtime import learning as common_learning
        from impala import learning, networks

        config = self.config
        tf.random.set_seed(config.seed)
        network = networks.make_network(config, spec.num_actions)
        network.create_variables(spec.observation_shape, spec.observation_dtype)
        optimizer = learning.make_optimizer(config)
        train_step = learning.make_train_step(network, optimizer, config)
        return common_learning.LearnerParts(
            train_step=train_step,
            checkpointables={"network": network, "optimizer": optimizer},
            acting_variables=network.variables,
        )

    def core_state_spec(self) -> Any:
        from impala import networks

        return networks.core_state_spec(self.config)

    def protocol(self) -> AtariProtocol:
        from impala import acting

        return acting.protocol(self.config)

    def evaluation(self) -> builder.Evaluation:
        """§5.3.2's evaluation protocol, sampling pi unless --eval_policy=greedy (our choice:
        docs/papers/impala.md#departures-from-the-paper)."""
        from impala import acting

        return builder.Evaluation(
            protocol=acting.evaluation_protocol(self.config),
            greedy=self.config.eval_policy == "greedy",
        )

    def publish_lag(self) -> int:
        return self.config.publish_lag

    def run_name(self) -> str:
        return f"impala {self.config.env}"

    def describe(self) -> str:
        config = self.config
        return (
            f"{config.num_actors} actors x {config.envs_per_actor} envs, {config.network} net, "
            f"{config.correction}, batch {config.batch_size}x{config.unroll_length}, "
            f"{config.total_frames:,} frames"
        )

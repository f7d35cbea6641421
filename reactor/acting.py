"""Reactor's acting policy and Atari protocol.

Actors sample a_t ~ pi(.|x_t), the network's eps-mixed policy (App. 6.4; no eps-greedy on Q, no
noisy nets, App. 6.5), and store the whole distribution mu = pi(.|x_t) with each step
(footnote 1: mu is stored with the actions; the whole vector serves the TISLR ablation too). The
state of both LSTMs at each item's first step is stored by the replay pattern (our choice:
`replay_lstm_state` in docs/papers/reactor.md#departures-from-the-paper).
Evaluation samples from pi as well unless `--eval_policy=greedy` (argmax of Q).
"""

import dataclasses
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import tensorflow as tf

from common.runtime import acting
from common.equations import distributional
from common.environments import protocols
from common.equations import policies
from reactor import config as config_lib
from reactor import networks

if TYPE_CHECKING:
    from common.runtime.agent import EnvSpec

BEHAVIOUR_PROBS = "behaviour_probs"


def policy_extras(spec: "EnvSpec") -> dict:
    return {BEHAVIOUR_PROBS: tf.TensorSpec([spec.num_actions], tf.float32)}


class ReactorPolicy:
    """`common.runtime.acting.Policy` of Reactor: one compiled call per batched step."""

    def __init__(
        self,
        network: networks.ReactorNet,
        observation_shape: tuple,
        observation_dtype: np.dtype,
        seed: int,
        greedy: bool,
        support: tf.Tensor,
        jit_compile: bool = False,
    ) -> None:
        network.create_variables(observation_shape, observation_dtype)
        self.network = network
        self.greedy = greedy
        self.support = support
        self._rng = tf.random.Generator.from_seed(seed)
        self._step = acting.CompiledCall(self._step_graph, jit_compile)
        self._value = acting.CompiledCall(self._value_graph, jit_compile)

    def initial_state(self, batch_size: int) -> tuple:
        return tuple(s.numpy() for s in self.network.initial_state(batch_size))

    def _step_graph(self, observation, reset, state):
        outputs, new_state = self.network.step(observation, reset, state)
        probs = outputs.policy_probs
        if self.greedy:
            q_values = self.network.q_values(outputs.q, self.support)
            return tf.argmax(q_values, -1, output_type=tf.int32), probs, new_state
        seed = tf.cast(self._rng.make_seeds(1)[:, 0], tf.int32)
        return policies.sample_actions(probs=probs, seed=seed), probs, new_state

    def _value_graph(self, observation, state):
        reset = tf.zeros(tf.shape(observation)[:1], tf.bool)
        outputs, _ = self.network.step(observation, reset, state)
        q_values = self.network.q_values(outputs.q, self.support)
        return tf.reduce_sum(outputs.policy_probs * q_values, -1)

    def step(
        self,
        observation: np.ndarray,
        prev_action: np.ndarray,
        prev_reward: np.ndarray,
        reset: np.ndarray,
        state: Any,
        behaviour: Mapping[str, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray], tuple]:
        """The LSTMs see only the frame (Table 3), not the previous action or reward."""
        del prev_action, prev_reward, behaviour
        actions, probs, new_state = self._step(observation, reset, state)
        return (
            actions.numpy(),
            {BEHAVIOUR_PROBS: probs.numpy()},
            tuple(s.numpy() for s in new_state),
        )

    def bootstrap_value(
        self, observation: np.ndarray, prev_action: np.ndarray, prev_reward: np.ndarray, state: Any
    ) -> np.ndarray:
        """V(x) = sum_a pi(a|x) Q(x, a): the expected bootstrap of Eq. (3)."""
        del prev_action, prev_reward
        return self._value(observation, state).numpy()

    def set_weights(self, weights: list[np.ndarray]) -> None:
        """The published weights: the network's, then the new-key priority estimate, which is
        the replay writer's (reactor.replay), not the policy's."""
        acting.assign_weights(self.network.variables, weights[: len(self.network.variables)])


def make_policy(
    config: config_lib.ReactorConfig,
    num_actions: int,
    observation_shape: tuple,
    observation_dtype: np.dtype,
    seed: int,
    greedy: bool,
) -> ReactorPolicy:
    support = distributional.make_support(config.num_atoms, config.v_min, config.v_max)
    return ReactorPolicy(
        networks.make_network(config, num_actions),
        observation_shape,
        observation_dtype,
        seed,
        greedy,
        support,
        jit_compile=config.jit_compile,
    )


def protocol(config: config_lib.ReactorConfig) -> protocols.AtariProtocol:
    """DQN preprocessing with 4 action repeats and a single frame (§4.1, Table 3); training and
    evaluation share it (30 no-op starts, §4.1; human starts were never released)."""
    return dataclasses.replace(
        protocols.PROTOCOLS[config_lib.PROTOCOL], **config.protocol_overrides()
    )

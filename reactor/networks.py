"""The Reactor network (Table 3, App. 6.4, §3.4.1).

    frame -> conv 8x8/4 x16 -> CReLU -> conv 4x4/2 x32 -> CReLU -> conv 3x3/1 x32 -> CReLU
          -> linear 128 -> CReLU = shared features [256]
    shared -> policy LSTM 128 -> linear 32 -> CReLU -> linear A -> softmax -> (1-eps) pi + eps/A
    shared -> Q LSTM 128 -> value logits (linear 32 -> CReLU -> linear N)
                         -> advantage logits (linear 32 -> CReLU -> linear A x N)
    q(x, a) = softmax over bins of l_V + l_A(a) - mean_b l_A(b)            (App. 6.5, dueling)

The policy LSTM reads the shared features through a stop-gradient: the policy loss trains
neither the shared layer nor the torso (§3.4.1: "avoids positive feedback loops"). The LSTMs see
only the shared features (Table 3: input [256]), no previous action or reward; their states are
zeroed where an episode starts. Reactor ND (`distributional=False`) has the same network with a
scalar dueling head: V + A(a) - mean_b A(b). Initialisers are Keras' defaults. The paper gives
none of these three (docs/papers/reactor.md#departures-from-the-paper). With 18 actions and 51
bins this has 908,235 parameters (Test 11 of docs/papers/reactor.md#worked-test-numbers).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np
import tensorflow as tf


from common.models import recurrent
from common.equations import policies
from reactor import config as config_lib

TORSOS = ("table3", "minatar", "mlp")


class ReactorOutputs(NamedTuple):
    policy_probs: tf.Tensor  # [..., A] pi after the uniform mixing
    q: tf.Tensor  # [..., A, N] bin logits (distributional) or [..., A] Q-values (ND)


def crelu(x: tf.Tensor) -> tf.Tensor:
    """Concatenated ReLU [relu(x), relu(-x)] on the last axis (Table 3; doubles the width)."""
    return tf.concat([tf.nn.relu(x), tf.nn.relu(-x)], axis=-1)


def _fold_time(fn, x: tf.Tensor) -> tf.Tensor:
    """fn on [T*B, ...], returned as [T, B, ...]: the torso runs once per unroll."""
    outer = tf.shape(x)[:2]
    y = fn(tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], 0)))
    return tf.reshape(y, tf.concat([outer, tf.shape(y)[1:]], 0))


class ReactorNet(tf.keras.Model):
    """Table 3's network; `step` for actors, `unroll` for the learner (same weights).

    State: (policy h, policy c, Q h, Q c), each [B, lstm_units].
    """

    def __init__(
        self,
        num_actions: int,
        num_atoms: int = 51,
        distributional: bool = True,
        policy_epsilon: float = 0.01,
        torso: str = "table3",
        lstm_units: int = 128,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if torso not in TORSOS:
            raise ValueError(f"torso must be one of {TORSOS}, got {torso!r}")
        self.num_actions = num_actions
        self.num_atoms = num_atoms
        self.distributional = distributional
        self.policy_epsilon = policy_epsilon
        self.lstm_units = lstm_units
        self.torso = torso
        if torso == "table3":  # Table 3: VALID convolutions, 84 -> 20 -> 9 -> 7
            self.convs = [
                tf.keras.layers.Conv2D(16, 8, 4, "valid"),
                tf.keras.layers.Conv2D(32, 4, 2, "valid"),
                tf.keras.layers.Conv2D(32, 3, 1, "valid"),
            ]
        elif torso == "minatar":
            # choice: the published MinAtar agents' convolution (3x3/1 x16, VALID, 10 -> 8) with
            # their ReLU, under Table 3's shared linear 128 + CReLU (docs/papers/reactor.md).
            self.convs = [tf.keras.layers.Conv2D(16, 3, 1, "valid")]
        else:  # choice: CartPole's 4 numbers need no convolutions; one CReLU layer of 64
            self.convs = [tf.keras.layers.Dense(64)]
        self.shared = tf.keras.layers.Dense(128)  # Table 3 row 7
        self.policy_core = tf.keras.layers.LSTMCell(lstm_units)
        self.q_core = tf.keras.layers.LSTMCell(lstm_units)
        # The cells hold the LSTMs' weights (and their checkpoint names);
        # `common.models.recurrent.lstm_step` computes both cells at once from them. Built here:
        # variables cannot be created inside tf.scan.
        for core in (self.policy_core, self.q_core):
            core.build((None, 256))
        head_atoms = num_atoms if distributional else 1
        self.policy_hidden = tf.keras.layers.Dense(32)
        self.policy_out = tf.keras.layers.Dense(num_actions)
        self.value_hidden = tf.keras.layers.Dense(32)
        self.value_out = tf.keras.layers.Dense(head_atoms)
        self.advantage_hidden = tf.keras.layers.Dense(32)
        self.advantage_out = tf.keras.layers.Dense(num_actions * head_atoms)

    def initial_state(self, batch_size: int) -> tuple[tf.Tensor, ...]:
        zeros = tf.zeros([batch_size, self.lstm_units])
        return (zeros, zeros, zeros, zeros)

    def features(self, observation: tf.Tensor) -> tf.Tensor:
        """Shared features [N, 256] of observations [N, ...]."""
        x = tf.cast(observation, tf.float32)
        if self.torso == "table3":
            x = x / 255.0  # uint8 pixels; MinAtar's channels are already 0 or 1
        activation = tf.nn.relu if self.torso == "minatar" else crelu
        for layer in self.convs:
            x = activation(layer(x))
        x = tf.reshape(x, [-1, int(np.prod(x.shape[1:]))])
        return crelu(self.shared(x))

    def heads(self, policy_hidden: tf.Tensor, q_hidden: tf.Tensor) -> ReactorOutputs:
        logits = self.policy_out(crelu(self.policy_hidden(policy_hidden)))
        probs = policies.mix_with_uniform(tf.nn.softmax(logits), self.policy_epsilon)
        value = self.value_out(crelu(self.value_hidden(q_hidden)))
        advantage = self.advantage_out(crelu(self.advantage_hidden(q_hidden)))
        if self.distributional:  # per bin: l_V + l_A(a) - mean_b l_A(b), actions on axis -2
            shape = tf.concat([tf.shape(advantage)[:-1], [self.num_actions, self.num_atoms]], 0)
            advantage = tf.reshape(advantage, shape)
            q = value[..., None, :] + advantage - tf.reduce_mean(advantage, -2, keepdims=True)
        else:
            q = value + advantage - tf.reduce_mean(advantage, -1, keepdims=True)
        return ReactorOutputs(probs, q)

    def _core_inputs(self, features: tf.Tensor) -> tf.Tensor:
        """x W + b of both LSTMs' gates, [..., 2, B, 4U] (policy, Q) for features [..., B, 256]:
        for an unroll, one matmul per LSTM for all its steps, out of the recurrence. The policy
        LSTM reads the features through a stop-gradient (§3.4.1 gradient blocking)."""
        policy, q = self.policy_core, self.q_core
        policy_inputs = tf.tensordot(tf.stop_gradient(features), policy.kernel, 1) + policy.bias
        q_inputs = tf.tensordot(features, q.kernel, 1) + q.bias
        return tf.stack([policy_inputs, q_inputs], axis=-3)

    def _recurrent_kernels(self) -> tf.Tensor:
        """Both LSTMs' recurrent kernels [2, U, 4U]: one batched matmul steps both."""
        return tf.stack([self.policy_core.recurrent_kernel, self.q_core.recurrent_kernel])

    @staticmethod
    def _stacked(state) -> tuple[tf.Tensor, tf.Tensor]:
        """(policy h, policy c, Q h, Q c) -> (h, c), each [2, B, U] (policy, Q)."""
        policy_h, policy_c, q_h, q_c = state
        return tf.stack([policy_h, q_h]), tf.stack([policy_c, q_c])

    @staticmethod
    def _unstacked(h, c) -> tuple[tf.Tensor, ...]:
        return (h[0], c[0], h[1], c[1])

    @staticmethod
    def _keep(reset) -> tf.Tensor:
        return 1.0 - tf.cast(reset, tf.float32)[..., None]

    def step(
        self, observation: tf.Tensor, reset: tf.Tensor, state: Sequence[tf.Tensor]
    ) -> tuple[ReactorOutputs, tuple[tf.Tensor, ...]]:
        """One step of B envs: observation [B, ...], reset [B] bool -> (outputs [B, ...], state)."""
        inputs = self._core_inputs(self.features(observation))
        h, c = self._stacked(state)
        h, c = recurrent.lstm_step(inputs, self._keep(reset), h, c, self._recurrent_kernels())
        return self.heads(h[0], h[1]), self._unstacked(h, c)

    def unroll(
        self, observation: tf.Tensor, reset: tf.Tensor, state: Sequence[tf.Tensor]
    ) -> tuple[ReactorOutputs, tuple[tf.Tensor, ...]]:
        """T steps: observation [T, B, ...], reset [T, B] -> (outputs [T, B, ...], final state);
        equals T calls of `step`. Fewer, larger ops than stepping the two Keras cells in the
        scan (the learner's step is op-bound): the input projections of all T steps hoisted out
        of it, one batched matmul a step for both LSTMs (1.4x the learner's updates/s), and
        the recurrence's gradient written by hand (`common.models.recurrent.lstm_unroll`, 1.15x)."""
        inputs = self._core_inputs(_fold_time(self.features, observation))  # [T, 2, B, 4U]
        hs, cs = recurrent.lstm_unroll(
            inputs, self._keep(reset), *self._stacked(state), self._recurrent_kernels()
        )
        return self.heads(hs[:, 0], hs[:, 1]), self._unstacked(hs[-1], cs[-1])

    def create_variables(
        self, observation_shape: Sequence[int], observation_dtype: tf.DType = tf.uint8
    ) -> None:
        self.step(
            tf.zeros([1, *observation_shape], observation_dtype),
            tf.ones([1], tf.bool),
            self.initial_state(1),
        )

    def q_probs(self, q: tf.Tensor) -> tf.Tensor:
        """q_i(x, a): softmax over bins of the dueling logits (§3.4.1; App. 6.5 prints it
        without exp: docs/papers/reactor.md#errata)."""
        return tf.nn.softmax(q, axis=-1)

    def q_values(self, q: tf.Tensor, support: tf.Tensor | None) -> tf.Tensor:
        """Q(x, a) = sum_i q_i z_i (Eq. 5), or the ND head's values as they are."""
        if not self.distributional:
            return q
        return tf.reduce_sum(self.q_probs(q) * support, axis=-1)


def make_network(config: config_lib.ReactorConfig, num_actions: int) -> ReactorNet:
    """The network of `config` (the actors' and the learner's online and target networks)."""
    return ReactorNet(
        num_actions,
        config.num_atoms,
        distributional=config.distributional,
        policy_epsilon=config.policy_epsilon,
        torso=config.torso,
    )


def core_state_spec(config: config_lib.ReactorConfig) -> tuple:
    """(policy h, policy c, Q h, Q c) of one env (Table 3: 128 units each)."""
    del config
    return (tf.TensorSpec([128], tf.float32),) * 4

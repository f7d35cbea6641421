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

from typing import NamedTuple

import numpy as np
import tensorflow as tf

from common import policies
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
        **kwargs,
    ):
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
        for core in (self.policy_core, self.q_core):
            core.build((None, 256))  # variables cannot be created inside tf.scan
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

    def _core_step(self, features, reset, state):
        """Both LSTMs one step; state zeroed where an episode starts. The policy LSTM's input
        is stop-gradient (§3.4.1 gradient blocking)."""
        keep = 1.0 - tf.cast(reset, tf.float32)[:, None]
        policy_h, policy_c, q_h, q_c = (s * keep for s in state)
        policy_out, (policy_h, policy_c) = self.policy_core(
            tf.stop_gradient(features), (policy_h, policy_c)
        )
        q_out, (q_h, q_c) = self.q_core(features, (q_h, q_c))
        return (policy_out, q_out), (policy_h, policy_c, q_h, q_c)

    def step(self, observation, reset, state):
        """One step of B envs: observation [B, ...], reset [B] bool -> (outputs [B, ...], state)."""
        (policy_out, q_out), state = self._core_step(self.features(observation), reset, state)
        return self.heads(policy_out, q_out), state

    def unroll(self, observation, reset, state):
        """T steps: observation [T, B, ...], reset [T, B] -> (outputs [T, B, ...], final state);
        equals T calls of `step`."""
        features = _fold_time(self.features, observation)

        def scan_step(carry, inputs):
            return self._core_step(inputs[0], inputs[1], carry[1])

        zeros = tf.zeros_like(state[0])
        outputs, states = tf.scan(
            scan_step,
            (features, tf.convert_to_tensor(reset)),
            initializer=((zeros, zeros), tuple(state)),
        )
        return self.heads(*outputs), tuple(s[-1] for s in states)

    def create_variables(self, observation_shape, observation_dtype=tf.uint8) -> None:
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


def core_state_spec(config: config_lib.ReactorConfig):
    """(policy h, policy c, Q h, Q c) of one env (Table 3: 128 units each)."""
    del config
    return (tf.TensorSpec([128], tf.float32),) * 4

"""LBC's population of networks (lbc.md §2.3, §3): one `common.networks.ActorCriticNet` per
h_i = (gamma_i, RS_i), no weights shared between them (Assumption 1: same architecture only).

Each network reads its A head as Phi_{h_i} = A_i (its target policy pi_i = softmax(A_i)) and has a
V head; its LSTM gets the previous reward shaped by its own RS_i (lbc.md §8 #17) and never sees psi
or h (§3). The auxiliary forward- and inverse-dynamics tasks of Table 3 live in `DynamicsHeads`, a
learner-only module per network that reads the network's torso embedding (`ActorCriticNet.embed`,
the one its core reads): actors do not need it, so the weights they pull are the networks' alone.
"""

import tensorflow as tf

from common import networks
from lbc import config as config_lib


def make_network(
    config: config_lib.LbcConfig, num_actions: int, index: int
) -> networks.ActorCriticNet:
    """Network h_{index+1} of the population."""
    return networks.ActorCriticNet(
        num_actions,
        torso=config.network,
        use_lstm=True,  # Table 3 "LSTM Units 256"
        lstm_units=config.lstm_units,
        prev_reward_clip=None,  # Table 3 "Reward Clip No"
        prev_reward_transform=config.reward_shapings[index],  # lbc.md §8 #17: RS_i(r_{t-1})
        head_hidden=config.head_hidden or None,
        name=f"network_{index + 1}",
    )


def make_population(config: config_lib.LbcConfig, num_actions: int) -> list:
    return [make_network(config, num_actions, i) for i in range(config.num_networks)]


def core_state_spec(config: config_lib.LbcConfig):
    """Per-env state stored at each item's first step (Table 3 "Burn-in Stored Recurrent State"):
    one (h, c) per network, in population order (`common.advantage_policy`)."""
    lstm = tf.TensorSpec([config.lstm_units], tf.float32)
    return ((lstm, lstm),) * config.num_networks


def _mlp(hidden: int, units: int, inputs: int, name: str) -> tf.keras.Sequential:
    mlp = tf.keras.Sequential(
        [tf.keras.layers.Dense(hidden, "relu"), tf.keras.layers.Dense(units)], name=name
    )
    mlp.build((None, inputs))  # built here, so that checkpoints and the optimiser see every weight
    return mlp


class DynamicsHeads(tf.Module):
    """lbc.md §3's auxiliary tasks on a torso embedding e (Table 3: "Auxiliary Forward / Inverse
    Dynamic Task Yes"; their form is the spec's choice):
    - inverse: MLP([e_t, e_{t+1}]) -> logits of a_t;
    - forward: MLP([e_t, one_hot(a_t)]) -> a prediction of e_{t+1}."""

    def __init__(self, embedding_units: int, num_actions: int, hidden: int, name: str):
        super().__init__(name=name)
        self.num_actions = num_actions
        self.inverse = _mlp(hidden, num_actions, 2 * embedding_units, "inverse_dynamics")
        self.forward = _mlp(hidden, embedding_units, embedding_units + num_actions, "forward")

    def inverse_logits(self, embedding, next_embedding) -> tf.Tensor:
        return self.inverse(tf.concat([embedding, next_embedding], -1))

    def predict_next(self, embedding, actions) -> tf.Tensor:
        one_hot = tf.one_hot(actions, self.num_actions, dtype=embedding.dtype)
        return self.forward(tf.concat([embedding, one_hot], -1))


def make_dynamics_heads(config: config_lib.LbcConfig, network, index: int) -> DynamicsHeads:
    return DynamicsHeads(
        network.torso.output_units,
        network.num_actions,
        config.aux_hidden,
        name=f"dynamics_{index + 1}",
    )

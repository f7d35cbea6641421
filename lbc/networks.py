"""LBC's population of networks (§5.1.2, App. L): one `common.models.networks.ActorCriticNet` per
h_i = (gamma_i, RS_i), no weights shared between them (Assumption 1: same architecture only).

Each network reads its A head as Phi_{h_i} = A_i (its target policy pi_i = softmax(A_i)) and has a
V head; its LSTM gets the previous reward shaped by its own RS_i and never sees psi or h (our
reading of Fig. 8, the LSTM-inputs row of docs/papers/lbc.md#departures-from-the-paper). The
auxiliary forward- and inverse-dynamics tasks of Table 3 are `common.burn_in.dynamics` heads, one
learner-only module per network on its torso embedding: actors do not need them, so the weights
they pull are the networks' alone.
"""

import tensorflow as tf

from common.burn_in import dynamics
from common.models import networks
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
        prev_reward_clip=None,  # no clipping: Table 3 has no reward-clip row
        prev_reward_transform=config.reward_shapings[index],  # RS_i(r_{t-1}): our choice
        head_hidden=config.head_hidden or None,
        name=f"network_{index + 1}",
    )


def make_population(config: config_lib.LbcConfig, num_actions: int) -> list:
    return [make_network(config, num_actions, i) for i in range(config.num_networks)]


def core_state_spec(config: config_lib.LbcConfig) -> tuple:
    """Per-env state stored at each item's first step (Table 3 "Burn-in Stored Recurrent State"):
    one (h, c) per network, in population order (`common.burn_in.advantage_policy`)."""
    lstm = tf.TensorSpec([config.lstm_units], tf.float32)
    return ((lstm, lstm),) * config.num_networks


def make_dynamics_heads(
    config: config_lib.LbcConfig, network: networks.ActorCriticNet, index: int
) -> dynamics.DynamicsHeads:
    """Network `index`'s auxiliary heads (`common.burn_in.dynamics`; hidden 512 and MSE are our
    choices, docs/papers/lbc.md#departures-from-the-paper)."""
    return dynamics.DynamicsHeads(
        network.num_actions,
        network.torso.output_units,
        config.aux_hidden,
        config.aux_forward_loss,
        name=f"dynamics_{index + 1}",
    )

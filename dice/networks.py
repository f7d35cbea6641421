"""DiCE's network (Table 5, §4.1): IMPALA-deep torso, LSTM(256) fed the one-hot previous action
and the previous *shaped* reward, linear A (|A| actions) and V heads; the LSTM's inputs and the
heads are our choices (docs/papers/dice.md#departures-from-the-paper).

It is `common.models.networks.ActorCriticNet` with its logits head read as the advantage head A:
DiCE has no policy head, pi_tau = softmax(eta · A) (§3.1, with v = A_theta of §3.2). The network
never sees tau: V_theta and A_theta estimate the tau-free V^Omega and A^Omega (§3.1).
"""

import tensorflow as tf

from common.models import networks
from dice import config as config_lib


def make_network(config: config_lib.DiceConfig, num_actions: int) -> networks.ActorCriticNet:
    return networks.ActorCriticNet(
        num_actions,
        torso=config.network,
        use_lstm=True,  # Table 5 "LSTM Units 256"
        lstm_units=config.lstm_units,
        prev_reward_clip=None,  # Table 5 "Reward Clip No"
        prev_reward_transform=config.reward_shaping,  # choice: the shaped reward
        head_hidden=config.head_hidden or None,
    )


def make_network_list(config: config_lib.DiceConfig, num_actions: int) -> list:
    """The acting policy's networks: DiCE's one."""
    return [make_network(config, num_actions)]


def core_state_spec(config: config_lib.DiceConfig) -> tuple:
    """Per-env state stored at each item's first step (Table 5 "Burn-in Stored Recurrent State"):
    one (h, c) per network of `common.burn_in.advantage_policy` (DiCE has one)."""
    lstm = tf.TensorSpec([config.lstm_units], tf.float32)
    return ((lstm, lstm),)

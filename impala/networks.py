"""The IMPALA network of a config: `common.models.networks.ActorCriticNet` with the paper's choices.

Atari (§5.3.2, App. G): feed-forward, 4-frame stack, deep or shallow torso, no LSTM.
DMLab (§5, Fig. 3): add `--use_lstm` (256 units, previous action and clipped reward as inputs;
the details are ours, docs/papers/impala.md#departures-from-the-paper).
"""

import tensorflow as tf

from common.models import networks
from impala import config as config_lib


def make_network(config: config_lib.ImpalaConfig, num_actions: int) -> networks.ActorCriticNet:
    return networks.ActorCriticNet(
        num_actions, torso=config.network, use_lstm=config.use_lstm, lstm_units=config.lstm_units
    )


def core_state_spec(config: config_lib.ImpalaConfig) -> tuple | None:
    """Per-env spec of the LSTM state (h, c) the actors store at each unroll start (§3), or None
    for the feed-forward Atari nets."""
    if not config.use_lstm:
        return None
    return (
        tf.TensorSpec([config.lstm_units], tf.float32),
        tf.TensorSpec([config.lstm_units], tf.float32),
    )

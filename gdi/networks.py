"""GDI's networks (Table 6, Eqs. (9)-(12)): GDI-I3 has one, GDI-H3 two complete ones, theta_1 and
theta_2 ("two different families of trainable variables", §4.1, Eqs. (11)-(12)). What the paper
leaves open is ours: docs/papers/gdi.md#departures-from-the-paper.

Each is `common.models.networks.ActorCriticNet` with its logits head read as the advantage head A
(there is no policy head: pi = Softmax(A / tau) per mixture component, Eq. (2)): IMPALA-deep torso,
LSTM(256) fed the one-hot previous action and the previous reward in that network's own reward
shaping, linear A and V heads. The networks never see lambda (the paper never mentions it as an
input). Each torso has its auxiliary forward / inverse dynamics heads (`common.burn_in.dynamics`),
used by the learner only. With `--shared_torso` (GDI-H3, our option:
docs/papers/gdi.md#options-and-readings-that-are-not-departures) network 2 is built on network
1's torso: one torso, one set of dynamics heads, two LSTMs and two head sets.
"""

from typing import Sequence

import tensorflow as tf

from common.burn_in import dynamics
from common.models import networks
from gdi import config as config_lib


def component_networks(config: config_lib.GdiConfig) -> tuple[int, int]:
    """The network each mixture component of Eq. (2) reads: I3 both A (Eq. (10)), H3 A_1 and A_2
    (Eq. (12))."""
    return (0, 1) if config.variant == "h3" else (0, 0)


def make_networks(config: config_lib.GdiConfig, num_actions: int) -> list[networks.ActorCriticNet]:
    """One `ActorCriticNet` per reward shaping of `config.reward_shapings` (1 for I3, 2 for H3),
    all on the first one's torso with `config.shared_torso`."""
    nets: list[networks.ActorCriticNet] = []
    for shaping in config.reward_shapings:
        torso = nets[0].torso if nets and config.shared_torso else config.network
        nets.append(
            networks.ActorCriticNet(
                num_actions,
                torso=torso,
                use_lstm=True,  # Table 6 "LSTM Units 256"
                lstm_units=config.lstm_units,
                prev_reward_clip=None,  # Table 6 "Reward Clip No"
                prev_reward_transform=shaping,  # choice (IMPALA's input): the shaped reward
                head_hidden=config.head_hidden or None,
            )
        )
    return nets


def make_dynamics(
    config: config_lib.GdiConfig, num_actions: int, nets: Sequence[networks.ActorCriticNet]
) -> list[dynamics.DynamicsHeads]:
    """The auxiliary dynamics heads of each torso (Table 6 "Yes"; their form is ours,
    docs/papers/gdi.md#departures-from-the-paper): one per network, or one on the shared torso
    (paired with network 1's outputs by the loss)."""
    torsos = nets[:1] if config.shared_torso else nets
    return [
        dynamics.DynamicsHeads(num_actions, net.torso.output_units, config.aux_hidden)
        for net in torsos
    ]


def core_state_spec(config: config_lib.GdiConfig) -> tuple:
    """Per-env state stored at each item's first step (Table 6 "Burn-in Stored Recurrent State
    Yes"): one (h, c) per network."""
    lstm = tf.TensorSpec([config.lstm_units], tf.float32)
    return ((lstm, lstm),) * len(config.reward_shapings)

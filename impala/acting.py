"""IMPALA's behaviour and evaluation policies and its Atari protocols.

The behaviour policy is mu = softmax(logits) of the actor's (possibly stale) copy of the network
(§3, §4.1): `common.runtime.acting.CategoricalPolicy`. Evaluation samples from pi as well unless
`--eval_policy=greedy` (our choice: docs/papers/impala.md#departures-from-the-paper).
"""

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from common.runtime import acting
from common.environments import protocols
from common.models import networks as common_networks
from impala import config as config_lib
from impala import networks

if TYPE_CHECKING:
    from common.runtime.agent import EnvSpec


def make_policy(
    config: config_lib.ImpalaConfig,
    num_actions: int,
    observation_shape: tuple,
    observation_dtype: np.dtype,
    seed: int,
    greedy: bool,
) -> acting.CategoricalPolicy:
    """A `common.runtime.acting.PolicyFactory` once `config` is bound (functools.partial)."""
    network = common_networks.build_in_precision(
        config.actor_precision, lambda: networks.make_network(config, num_actions)
    )
    return acting.CategoricalPolicy(
        network,
        observation_shape,
        observation_dtype,
        seed,
        greedy=greedy,
        jit_compile=config.jit_compile,
    )


def policy_extras(spec: "EnvSpec") -> dict:
    """What IMPALA's actors store besides the action: the behaviour logits of mu (§4.1)."""
    return acting.CategoricalPolicy.extras_spec(spec.num_actions)


def protocol(config: config_lib.ImpalaConfig) -> protocols.AtariProtocol:
    """Table G.1 preprocessing (common.environments.envs "impala"), with the configured action
    set."""
    return dataclasses.replace(
        protocols.PROTOCOLS["impala"], full_action_space=config.full_action_set
    )


def evaluation_protocol(config: config_lib.ImpalaConfig) -> protocols.AtariProtocol:
    """§5.3.2 evaluation: no-op starts, episode cap and sticky actions of the config.

    Scores are whole games (common.environments.envs reports the raw game score), so the life-loss
    flag of training does not change them.
    """
    return dataclasses.replace(
        protocol(config),
        noop_max=config.eval_noop_max,
        max_episode_frames=config.eval_max_episode_frames,
        # choice: 0.25 is the usual sticky probability (Machado et al., 2018) when asked for.
        repeat_action_probability=0.25 if config.eval_sticky_actions else 0.0,
    )

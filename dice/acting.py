"""DiCE's behaviour policy (Algorithm 1): each environment's game plays softmax(eta · A) with the
eta its bandits-vote controller drew at the game's start (`common.control.behaviour`), and stores
eta and log mu(a_t|x_t) with every step: the learner's pi_tau pairs with mu_tau (Eq. (8)) at the eta
each step was played with."""

import dataclasses
import functools
from typing import Any, Callable, Mapping

import numpy as np

from common.burn_in import advantage_policy
from common.control import controllers
from common.control import behaviour
from common.environments import protocols
from dice import config as config_lib
from dice import controller
from dice import networks


def behaviour_mixture(params: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The mixture hook of `common.burn_in.advantage_policy`: the games' eta [B] as a one-component
    mixture, etas [B, 1] and weights [B, 1] = 1."""
    eta = np.asarray(params["eta"], np.float32)[:, None]
    return eta, np.ones_like(eta)


def make_policy(
    config: config_lib.DiceConfig,
) -> Callable[..., advantage_policy.AdvantageMixturePolicy]:
    """The actors' `common.runtime.acting.PolicyFactory` of `config`: one network, one component."""
    return advantage_policy.policy_factory(
        functools.partial(networks.make_network_list, config),
        behaviour_mixture,
        [0],
        config.jit_compile,
    )


def behaviour_spec(config: config_lib.DiceConfig) -> behaviour.BehaviourSpec:
    """The bandits vote (§3.3) per env, or eta fixed (`baseline`, §4.3)."""
    make: Callable[..., controllers.Controller]
    if config.fixed_behaviour:
        make = functools.partial(controllers.FixedController, {"eta": config.fixed_eta})
    else:
        make = functools.partial(controller.DiceController, **config.bandit_kwargs())
    return behaviour.BehaviourSpec(
        make_controller=make,
        param_shapes={"eta": ()},
        scope=config.controller_scope,
        evaluation="training" if config.eval_policy == "bandits" else "best",
    )


def protocol(config: config_lib.DiceConfig) -> protocols.AtariProtocol:
    """Table 5's preprocessing (common.environments.envs "dice_gdi_lbc"), for training and
    evaluation (the same 30 no-ops and 108,000-frame cap;
    docs/papers/dice.md#departures-from-the-paper)."""
    return dataclasses.replace(
        protocols.PROTOCOLS[config_lib.PROTOCOL], **config.protocol_overrides()
    )

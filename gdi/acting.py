"""GDI's behaviour policy (Algorithms 2-3): each environment's game draws lambda = (1/tau_1,
1/tau_2, eps) from its bandits (`gdi.controller.GdiController`, App. G) at its start and plays

    pi_lambda = eps * Softmax(A_1 / tau_1) + (1 - eps) * Softmax(A_2 / tau_2)      (Eq. (2))

with A_1 = A_2 = A of the one network (GDI-I3, Eq. (10)) or A_i of network i (GDI-H3, Eq. (12)).
lambda and log mu(a_t|x_t) are stored with every step; the raw game return feeds the bandits
(`common.control.behaviour`)."""

import dataclasses
import functools
from typing import Any, Callable, Mapping

import numpy as np

from common.burn_in import advantage_policy
from common.control import controllers
from common.control import behaviour
from common.environments import protocols
from gdi import config as config_lib
from gdi import controller
from gdi import losses
from gdi import networks


def behaviour_mixture(params: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The mixture hook of `common.burn_in.advantage_policy`: the games' lambda ({name: [B]}) as
    Eq. (2)'s (etas [B, 2], weights [B, 2])."""
    arrays = {name: np.asarray(value, np.float32) for name, value in params.items()}
    return losses.lambda_mixture(arrays, np.stack)


def make_policy(
    config: config_lib.GdiConfig,
) -> Callable[..., advantage_policy.AdvantageMixturePolicy]:
    """The actors' `common.runtime.acting.PolicyFactory` of `config`: Eq. (2) over one (I3) or two
    (H3) networks."""
    return advantage_policy.policy_factory(
        functools.partial(networks.make_networks, config),
        behaviour_mixture,
        networks.component_networks(config),
        config.jit_compile,
    )


def behaviour_spec(config: config_lib.GdiConfig) -> behaviour.BehaviourSpec:
    """The bandits controller per env (App. G), or lambda fixed ("Fix Selection", App. K.1)."""
    make: Callable[..., controllers.Controller]
    if config.fixed_behaviour:
        make = functools.partial(controllers.FixedController, config.fixed_params)
    else:
        make = functools.partial(controller.GdiController, **config.bandit_kwargs())
    return behaviour.BehaviourSpec(
        make_controller=make,
        param_shapes={name: () for name in config_lib.BEHAVIOUR_PARAMS},
        scope=config.controller_scope,
        evaluation="best" if config.eval_policy == "best_region" else "own",
    )


def protocol(config: config_lib.GdiConfig) -> protocols.AtariProtocol:
    """Table 5's preprocessing (common.environments.envs "dice_gdi_lbc" with GDI's 100,000-frame
    cap), for training and evaluation."""
    return dataclasses.replace(
        protocols.PROTOCOLS[config_lib.PROTOCOL], **config.protocol_overrides()
    )

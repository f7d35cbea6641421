"""LBC's hybrid behaviour mapping (§4.1, Eqs. (9)-(10)) on the actor.

Each environment's game plays mu_psi = sum_n omega_n softmax(tau_n · A_{i(n)}) with the psi =
(tau_1..N, omega_1..N) its actor's bandit population drew at the game's start (§4.2, App. E,
`lbc.controller.LbcController` through `common.control.behaviour`); psi is stored with every step
and log mu(a_t|x_t) with the action (our choice: the behaviour-probability row of
docs/papers/lbc.md#departures-from-the-paper), and the raw game return feeds the bandits.

Component n reads network i(n) = n of the population; with one network (Table 12 "Reducing H")
every component reads A_1, and "Reducing H and Psi" is one component on A_1.
"""

import dataclasses
import functools
from typing import Any, Callable, Mapping

import numpy as np

from common.burn_in import advantage_policy
from common.control import behaviour
from common.environments import protocols
from lbc import config as config_lib
from lbc import controller
from lbc import networks


def behaviour_mixture(params: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The mixture hook of `common.burn_in.advantage_policy`: the games' psi [B, N] each as the
    mixture's (inverse temperatures tau, weights omega). LBC's tau_i multiplies the logits
    (§4.1, softmax_tau(Phi)), so it is an `eta` as it stands."""
    return np.asarray(params["eta"], np.float32), np.asarray(params["omega"], np.float32)


def component_networks(config: config_lib.LbcConfig) -> list[int]:
    """i(n) for each mixture component n (module docstring)."""
    if config.num_networks == 1:
        return [0] * config.bandit_num_policies
    return list(range(config.bandit_num_policies))


def make_policy(
    config: config_lib.LbcConfig,
) -> Callable[..., advantage_policy.AdvantageMixturePolicy]:
    """The actors' `common.runtime.acting.PolicyFactory` of `config`: all networks at every step
    (Eq. (10) mixes every A_i), each bootstrapping a truncation with its own V_i."""
    return advantage_policy.policy_factory(
        functools.partial(networks.make_population, config),
        behaviour_mixture,
        component_networks(config),
        config.jit_compile,
    )


def behaviour_spec(config: config_lib.LbcConfig) -> behaviour.BehaviourSpec:
    """Algorithm 1's bandit population per env (or Random Selection); the evaluator plays the
    training behaviour (`eval_policy=bandits`), or each population's greedy arm (`best_arm`:
    `LbcController.propose_best`)."""
    shape = (config.bandit_num_policies,)
    return behaviour.BehaviourSpec(
        make_controller=functools.partial(controller.LbcController, **config.bandit_kwargs()),
        param_shapes={"eta": shape, "omega": shape},
        scope=config.controller_scope,
        evaluation="best" if config.eval_policy == "best_arm" else "training",
    )


def protocol(config: config_lib.LbcConfig) -> protocols.AtariProtocol:
    """Table 3's preprocessing (common.environments.envs "dice_gdi_lbc"), for training and
    evaluation."""
    return dataclasses.replace(
        protocols.PROTOCOLS[config_lib.PROTOCOL], **config.protocol_overrides()
    )

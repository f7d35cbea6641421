"""LBC's hybrid behaviour mapping on the actor (lbc/acting.py, Eq. (10); Tests 1-2 of
docs/papers/lbc.md#worked-test-numbers): the stored log mu(a_t|x_t) is that of
mu_psi = sum_i omega_i softmax(tau_i A_i) and actions follow it; mu is invariant to a per-state
shift of each A_i, tau = 0 gives uniform, a one-hot omega recovers one policy, and the Table 12
variants wire the components to the right networks."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from common.burn_in import advantage_policy
from lbc import ablations
from lbc import acting
from lbc import config as config_lib
from lbc import controller as lbc_controller

T1_LOGITS = np.array([[1.0, 0.0, -1.0], [0.0, 2.0, 0.0], [0.5, 0.5, 0.5]], np.float32)
T1_MU = np.array([0.462870, 0.361866, 0.175264])
ENVS = 6000


class FixedAdvantages(tf.Module):
    """A network whose A head is the same row for every observation (V = 0)."""

    def __init__(self, advantages):
        super().__init__()
        self.advantages = tf.constant(advantages, tf.float32)
        self.torso = tf.keras.layers.Identity()  # what `common.models.networks.torso_outputs` runs

    def create_variables(self, observation_shape, observation_dtype):
        pass

    def initial_state(self, batch_size):
        return (tf.zeros([batch_size, 1]), tf.zeros([batch_size, 1]))

    def step(self, observation, prev_action, prev_reward, reset, state, features):
        batch = tf.shape(features)[0]
        return (tf.tile(self.advantages[None], [batch, 1]), tf.zeros([batch])), state


def act(logits, psi, config=config_lib.LbcConfig(), greedy=False):
    """Actions and stored log mu of ENVS envs in one state under psi (each [N])."""
    policy = advantage_policy.AdvantageMixturePolicy(
        [FixedAdvantages(row) for row in logits],
        acting.behaviour_mixture,
        acting.component_networks(config),
        (1,),
        np.float32,
        seed=0,
        greedy=greedy,
    )
    behaviour = {k: np.tile(np.asarray(v, np.float32), (ENVS, 1)) for k, v in psi.items()}
    actions, extras, _ = policy.step(
        np.zeros((ENVS, 1), np.float32),
        np.zeros(ENVS, np.int32),
        np.zeros(ENVS, np.float32),
        np.ones(ENVS, bool),
        policy.initial_state(ENVS),
        behaviour,
    )
    return actions, extras[advantage_policy.BEHAVIOUR_LOG_PROB]


def assert_behaves_as(mu, actions, log_mu):
    """The stored log mu(a_t) is mu's for every env, and the actions are drawn from mu."""
    assert np.isclose(np.sum(mu), 1.0)
    np.testing.assert_allclose(log_mu, np.log(np.asarray(mu)[actions]), atol=1e-5)
    frequencies = np.bincount(actions, minlength=len(mu)) / len(actions)
    np.testing.assert_allclose(frequencies, mu, atol=0.025)  # 4 sigma at 6000 draws


def test_t1_mixture_and_its_invariance_to_a_shift_of_each_advantage():
    psi = {"eta": [1.0, 0.5, 10.0], "omega": [0.5, 0.3, 0.2]}
    actions, log_mu = act(T1_LOGITS, psi)
    assert_behaves_as(T1_MU, actions, log_mu)
    shifted = T1_LOGITS + np.array([[3.0], [-7.0], [100.0]], np.float32)
    actions, log_mu = act(shifted, psi)
    assert_behaves_as(T1_MU, actions, log_mu)


def test_t2_reductions():
    # tau = 0: uniform whatever the advantages.
    actions, log_mu = act(T1_LOGITS, {"eta": [0.0] * 3, "omega": [0.5, 0.3, 0.2]})
    assert_behaves_as(np.full(3, 1 / 3), actions, log_mu)
    # A one-hot omega is single-policy selection (Prop. 1): softmax(0.5 A_2).
    actions, log_mu = act(T1_LOGITS, {"eta": [1.0, 0.5, 10.0], "omega": [0.0, 1.0, 0.0]})
    assert_behaves_as([0.211942, 0.576117, 0.211942], actions, log_mu)
    # Corollary 1: with A_1 = A_2 = A_3 and equal taus, omega changes nothing.
    same = np.repeat(T1_LOGITS[:1], 3, 0)
    expected = np.exp(0.7 * T1_LOGITS[0]) / np.exp(0.7 * T1_LOGITS[0]).sum()
    for omega in ([0.5, 0.3, 0.2], [0.0, 0.0, 1.0]):
        assert_behaves_as(expected, *act(same, {"eta": [0.7] * 3, "omega": omega}))
    # tau = 1000 on A_1 alone: the argmax, without NaN.
    actions, log_mu = act(T1_LOGITS, {"eta": [1000.0, 1.0, 1.0], "omega": [1.0, 0.0, 0.0]})
    assert (actions == 0).all() and np.allclose(log_mu, 0.0)


def test_reduced_spaces_read_network_1_and_are_members_of_the_full_space():
    """Corollary 3: Reducing H (three components on A_1) and Reducing H and Psi (softmax(tau A_1))
    behave as the full mixture with A_2 = A_3 = A_1, resp. omega = (1, 0, 0)."""
    reducing_h = config_lib.LbcConfig(**ablations.ABLATIONS["reducing_h"]).validate()
    assert acting.component_networks(reducing_h) == [0, 0, 0]
    psi = {"eta": [1.0, 0.5, 10.0], "omega": [0.5, 0.3, 0.2]}
    a_1 = T1_LOGITS[0]
    expected = sum(
        w * np.exp(e * a_1) / np.exp(e * a_1).sum() for e, w in zip(psi["eta"], psi["omega"])
    )
    assert_behaves_as(expected, *act(T1_LOGITS[:1], psi, reducing_h))
    one = config_lib.LbcConfig(**ablations.ABLATIONS["reducing_h_psi"]).validate()
    assert acting.component_networks(one) == [0]
    expected = np.exp(2.0 * a_1) / np.exp(2.0 * a_1).sum()
    assert_behaves_as(expected, *act(T1_LOGITS[:1], {"eta": [2.0], "omega": [1.0]}, one))
    full = act(T1_LOGITS, {"eta": [2.0, 1.0, 1.0], "omega": [1.0, 0.0, 0.0]})
    assert_behaves_as(expected, *full)


@pytest.mark.parametrize("name, size", [("lbc", 3), ("reducing_h", 3), ("reducing_h_psi", 1)])
def test_psi_of_the_bandits_is_stored_per_step_and_played(name, size):
    config = config_lib.LbcConfig(**ablations.ABLATIONS[name]).validate()
    spec = acting.behaviour_spec(config)
    assert dict(spec.param_shapes) == {"eta": (size,), "omega": (size,)}
    assert spec.evaluation == "training"  # the evaluator plays the training behaviour (App. H.2)
    controller = spec.make_controller(seed=0)
    assert isinstance(controller, lbc_controller.LbcController)
    params = controller.propose()
    etas, weights = acting.behaviour_mixture(
        {k: np.asarray(params[k])[None] for k in ("eta", "omega")}
    )
    assert etas.shape == weights.shape == (1, size)
    assert np.isclose(weights.sum(), 1.0) and (0 <= etas).all() and (etas <= np.e**4).all()


def test_make_policy_runs_the_population_and_bootstraps_each_value():
    config = dataclasses.replace(
        config_lib.LbcConfig(env="CartPole", **config_lib.CARTPOLE_OVERRIDES), lstm_units=8
    ).validate()
    policy = acting.make_policy(config)(2, (4,), np.float32, seed=0, greedy=False)
    assert len(policy.networks) == policy.value_heads == 3
    assert policy.component_networks == [0, 1, 2]
    state = policy.initial_state(5)
    values = policy.bootstrap_value(
        np.zeros((5, 4), np.float32), np.zeros(5, np.int32), np.zeros(5, np.float32), state
    )
    assert values.shape == (5, 3)  # V_i(x_final) of each network, in its own RS_i units

"""common/burn_in/advantage_policy.py: actors act with and store mu = sum_n w_n softmax(eta_n
A_i(n)) (DiCE one component, GDI / LBC mixtures), one batched call for all networks."""

import numpy as np
import pytest
import tensorflow as tf

from common.runtime import acting
from common.burn_in import advantage_policy
from common.models import networks

NUM_ACTIONS = 4


def net(seed):
    tf.keras.utils.set_random_seed(seed)
    return networks.ActorCriticNet(NUM_ACTIONS, torso="mlp", lstm_units=8)


def one_eta(params):
    eta = params["eta"][:, None]
    return eta, np.ones_like(eta)


def two_networks(params):
    return np.stack([params["eta1"], params["eta2"]], 1), np.stack(
        [params["epsilon"], 1 - params["epsilon"]], 1
    )


def inputs(B, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(B, 4)).astype(np.float32),
        np.zeros(B, np.int32),
        np.zeros(B, np.float32),
        np.ones(B, bool),
    )


def advantages(network, obs, prev_a, prev_r, reset, state):
    (adv, _), _ = network.step(obs, prev_a, prev_r, reset, state)
    return adv.numpy()


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_one_component_stores_log_softmax_of_eta_times_a():
    policy = advantage_policy.AdvantageMixturePolicy([net(0)], one_eta, [0], (4,), np.float32, 0)
    B = 6
    obs, prev_a, prev_r, reset = inputs(B)
    state = policy.initial_state(B)
    eta = np.array([0.0, 0.5, 1.0, 2.0, 5.0, 50.0], np.float32)
    actions, extras, new_state = policy.step(obs, prev_a, prev_r, reset, state, {"eta": eta})
    adv = advantages(policy.networks[0], obs, prev_a, prev_r, reset, state[0])
    pi = softmax(eta[:, None] * adv)
    np.testing.assert_allclose(
        extras["behaviour_log_prob"], np.log(pi[np.arange(B), actions]), rtol=1e-5, atol=1e-6
    )
    assert extras["behaviour_log_prob"][0] == pytest.approx(np.log(0.25))  # eta = 0: uniform
    # The behaviour entropy of each env's step (not stored; averaged per game by the actor):
    # log 4 for the uniform eta = 0, finite where eta = 50 may underflow mu(a) to 0.
    entropy = extras[acting.BEHAVIOUR_ENTROPY]
    expected = [-(p * np.log(np.where(p > 0, p, 1))).sum() for p in pi]
    np.testing.assert_allclose(entropy, expected, rtol=1e-4, atol=1e-6)
    assert entropy[0] == pytest.approx(np.log(4)) and np.isfinite(entropy).all()
    assert len(new_state) == 1 and new_state[0][0].shape == (B, 8)


def test_mixture_of_two_networks_and_greedy():
    networks_ = [net(1), net(2)]
    B = 5
    obs, prev_a, prev_r, reset = inputs(B, seed=3)
    params = {
        "eta1": np.array([0.0, 1.0, 3.0, 0.0, 2.0], np.float32),
        "eta2": np.array([2.0, 0.0, 1.0, 9.0, 2.0], np.float32),
        "epsilon": np.array([0.0, 1.0, 0.3, 0.5, 0.9], np.float32),
    }
    policy = advantage_policy.AdvantageMixturePolicy(
        networks_, two_networks, [0, 1], (4,), np.float32, seed=0
    )
    state = policy.initial_state(B)
    actions, extras, _ = policy.step(obs, prev_a, prev_r, reset, state, params)
    a1 = advantages(networks_[0], obs, prev_a, prev_r, reset, state[0])
    a2 = advantages(networks_[1], obs, prev_a, prev_r, reset, state[1])
    eps = params["epsilon"][:, None]
    mu = eps * softmax(params["eta1"][:, None] * a1) + (1 - eps) * softmax(
        params["eta2"][:, None] * a2
    )
    np.testing.assert_allclose(
        np.exp(extras["behaviour_log_prob"]), mu[np.arange(B), actions], rtol=1e-5
    )
    np.testing.assert_allclose(
        extras[acting.BEHAVIOUR_ENTROPY], -(mu * np.log(mu)).sum(-1), rtol=1e-5
    )
    greedy = advantage_policy.AdvantageMixturePolicy(
        networks_, two_networks, [0, 1], (4,), np.float32, seed=0, greedy=True
    )
    greedy.set_weights([v.numpy() for v in policy.variables])
    actions, _, _ = greedy.step(obs, prev_a, prev_r, reset, state, params)
    np.testing.assert_array_equal(actions, mu.argmax(-1))


def test_samples_follow_mu():
    policy = advantage_policy.AdvantageMixturePolicy([net(4)], one_eta, [0], (4,), np.float32, 7)
    B = 4000
    obs = np.repeat(inputs(1, seed=5)[0], B, 0)
    _, prev_a, prev_r, reset = inputs(B)
    state = policy.initial_state(B)
    eta = np.full(B, 3.0, np.float32)
    actions, extras, _ = policy.step(obs, prev_a, prev_r, reset, state, {"eta": eta})
    mu = np.exp(extras["behaviour_log_prob"])
    freq = np.bincount(actions, minlength=NUM_ACTIONS) / B
    for a in np.unique(actions):
        assert freq[a] == pytest.approx(mu[actions == a][0], abs=0.03)


def test_bad_arguments():
    with pytest.raises(ValueError, match="must index the 1 networks"):
        advantage_policy.AdvantageMixturePolicy([net(0)], one_eta, [1], (4,), np.float32, 0)
    policy = advantage_policy.AdvantageMixturePolicy([net(0)], one_eta, [0], (4,), np.float32, 0)
    with pytest.raises(ValueError, match="acts with the game's behaviour parameters"):
        policy.step(*inputs(2), policy.initial_state(2))


def test_each_network_bootstraps_its_own_truncated_value():
    from types import SimpleNamespace

    networks_ = [net(1), net(2)]
    policy = advantage_policy.AdvantageMixturePolicy(
        networks_, two_networks, [0, 1], (4,), np.float32, seed=0
    )
    B = 3
    obs, prev_a, prev_r, _ = inputs(B, seed=4)
    state = policy.initial_state(B)
    values = policy.bootstrap_value(obs, prev_a, prev_r, state)
    no_reset = np.zeros(B, bool)
    for i, network in enumerate(networks_):
        (_, v), _ = network.step(obs, prev_a, prev_r, no_reset, state[i])
        np.testing.assert_allclose(values[:, i], v, rtol=1e-6)
    result = SimpleNamespace(
        truncated=np.array([True, False, True]),
        terminated=np.array([False, False, True]),  # a terminal step never bootstraps
        final_observation=obs,
        reward=prev_r,
    )
    stored = acting.truncation_values(policy, result, prev_a, state)
    np.testing.assert_array_equal(stored[1:], 0.0)
    np.testing.assert_allclose(stored[0], values[0], rtol=1e-6)
    result.truncated = np.zeros(B, bool)
    assert acting.truncation_values(policy, result, prev_a, state).shape == (B, 2)
    spec = acting.step_spec((4,), np.float32, {}, value_heads=2)
    assert spec["truncation_value"].shape == (2,)

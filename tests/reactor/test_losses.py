"""Reactor's critic and actor losses against Tests 3, 6, 7, 8 and 9 of
docs/papers/reactor.md#worked-test-numbers."""

import numpy as np
import pytest
import tensorflow as tf

from common.equations import distributional
from common.equations import instruments
from reactor import losses
from reactor import networks

# Test 3's sequence: T = 3, |A| = 2, gamma = 0.9, lambda = 1.
REWARDS = np.array([1.0, 0.0, 2.0])
ACTIONS = np.array([0, 1, 0, 0])  # a_3 is never used
MU = np.array([0.5, 0.25, 0.8])
PI = np.array([[0.6, 0.4], [0.5, 0.5], [0.4, 0.6], [0.3, 0.7]])
Q = np.array([[0.7, 0.0], [1.0, 2.0], [0.5, -1.0], [3.0, 1.0]])
RETRACE = [1.4167, 0.963, 3.44]
# Test 6: target-net distributions on 11 atoms over [-5, 5] (means equal Test 3's Q).
DIRACS = {(1, 0): {1: 1}, (1, 1): {1: 0.5, 3: 0.5}, (2, 0): {0: 0.5, 1: 0.5}, (2, 1): {-1: 1}}
DIRACS.update({(3, 0): {3: 1}, (3, 1): {1: 1}})
Q_STAR_0 = [0, 0, 0, 0, 0, 0.486, 0.0795, 0.1845, 0.15285, -0.0239, 0.12105]
Q_STAR_1 = [0, 0, 0, 0, 0.54, 0.005, -0.045, 0.1365, 0.2135, 0.1155, 0.0345]


def hparams(**overrides):
    values = dict(
        distributional=True,
        retrace_lambda=1.0,
        clip_c_threshold=1.0,
        retrace_form="expected",
        policy_gradient="beta_loo",
        beta_loo_c=1.0,
        tislr_c=10.0,
        entropy_cost=0.0,
    )
    values.update(overrides)
    return losses.LossHyperparameters(**values)


def batch1(x, dtype=tf.float32):
    """[T, ...] -> [T, 1, ...]."""
    return tf.constant(np.asarray(x)[:, None], dtype)


def target_logits():
    probs = np.full((4, 2, 11), 1 / 11)
    for (t, a), masses in DIRACS.items():
        probs[t, a] = 0
        for value, mass in masses.items():
            probs[t, a, value + 5] = mass
    return np.log(np.maximum(probs, 1e-30))


def critic_inputs():
    log_rhos = np.log(PI[np.arange(3), ACTIONS[:3]] / MU)
    return dict(
        trace_probs=batch1(PI),
        actions=batch1(ACTIONS, tf.int32),
        log_rhos=batch1(log_rhos),
        rewards=batch1(REWARDS),
        discounts=batch1(np.full(3, 0.9)),
    )


def test_distributional_critic_test_6_and_7():
    support = distributional.make_support(11, -5.0, 5.0)
    uniform = tf.zeros([3, 1, 2, 11])  # online prediction q = 1/11
    loss, priority, retrace_return = losses.critic(
        hparams(), uniform, batch1(target_logits()), support=support, **critic_inputs()
    )
    np.testing.assert_allclose(loss[:, 0], np.log(11.0), atol=1e-5)  # Test 7: ln 11
    np.testing.assert_allclose(priority[0, 0], 1.161527, atol=1e-5)  # Test 6 priority
    np.testing.assert_allclose(retrace_return[:, 0], RETRACE, atol=1e-4)
    q_star = distributional.distributional_retrace_target(
        tf.nn.softmax(batch1(target_logits())),
        support=support,
        lambda_=1.0,
        target_probs=critic_inputs()["trace_probs"],
        **{k: v for k, v in critic_inputs().items() if k != "trace_probs"},
    )
    np.testing.assert_allclose(q_star[0, 0], Q_STAR_0, atol=1e-5)
    np.testing.assert_allclose(q_star[1, 0], Q_STAR_1, atol=1e-5)
    # The priority is the total variation (sum, no 1/2) against the online prediction.
    np.testing.assert_allclose(
        priority[:, 0], np.abs(q_star[:, 0].numpy() - 1 / 11).sum(-1), atol=1e-5
    )


def test_nd_critic_is_classical_retrace_test_3():
    online = tf.constant(Q[:3, None], tf.float32)
    loss, priority, retrace_return = losses.critic(
        hparams(distributional=False), online, batch1(Q), support=None, **critic_inputs()
    )
    np.testing.assert_allclose(retrace_return[:, 0], RETRACE, atol=1e-4)
    error = np.array(RETRACE) - Q[np.arange(3), ACTIONS[:3]]
    np.testing.assert_allclose(priority[:, 0], np.abs(error), atol=1e-4)
    np.testing.assert_allclose(loss[:, 0], 0.5 * error**2, atol=1e-4)


# Test 8: softmax policy with logits theta, behaviour mu, true Q^pi and a biased critic.
THETA = np.array([0.2, -0.1, 0.5])
MU8 = np.array([0.5, 0.3, 0.2])
Q_PI = np.array([1.0, 2.0, 0.5])
CRITIC = np.array([1.5, 1.0, 0.0])
TRUE_G = np.array([-0.006898, 0.234585, -0.227687])


def expected_gradient(q_values, **overrides):
    """E_{a ~ mu}[G_hat(a)]: the tape gradient of minus the actor loss for each sampled action,
    weighted by mu."""
    total = np.zeros(3)
    for a in range(3):
        theta = tf.Variable(THETA[None, None], dtype=tf.float32)
        with tf.GradientTape() as tape:
            loss, _ = losses.actor(
                hparams(**overrides),
                tf.nn.softmax(theta),
                tf.constant(q_values[None, None], tf.float32),
                tf.constant([[a]]),
                tf.constant([[Q_PI[a]]], tf.float32),  # R(a) unbiased for Q^pi(a)
                tf.constant(MU8[None, None], tf.float32),
            )
        total += MU8[a] * -tape.gradient(loss, theta).numpy()[0, 0]
    return total


def test_beta_loo_test_8():
    # beta = 1/mu (c large) is unbiased for a biased critic.
    np.testing.assert_allclose(expected_gradient(CRITIC, beta_loo_c=1e9), TRUE_G, atol=1e-5)
    # beta = 1 (the paper's runs): Proposition 1's bias.
    np.testing.assert_allclose(
        expected_gradient(CRITIC) - TRUE_G, [0.165530, -0.105082, -0.060447], atol=1e-5
    )
    np.testing.assert_allclose(
        expected_gradient(CRITIC, beta_loo_c=2.0) - TRUE_G,
        [0.073415, -0.041490, -0.031925],
        atol=1e-5,
    )


@pytest.mark.parametrize("c", [1.0, 2.0, 10.0])
def test_tislr_is_unbiased_with_an_exact_critic_test_9(c):
    gradient = expected_gradient(Q_PI, policy_gradient="tislr", tislr_c=c)
    np.testing.assert_allclose(gradient, TRUE_G, atol=1e-5)


def online_and_target_outputs():
    """A small network's outputs on 3 steps (online) and 4 (target) of 2 random sequences."""
    net = networks.ReactorNet(2, 11, torso="mlp")
    net.create_variables((4,), tf.float32)
    online, _ = net.unroll(
        tf.random.normal([3, 2, 4]), tf.zeros([3, 2], tf.bool), net.initial_state(2)
    )
    target, _ = net.unroll(
        tf.random.normal([4, 2, 4]), tf.zeros([4, 2], tf.bool), net.initial_state(2)
    )
    return online, target


def test_entropy_cost_and_importance_weights_scale_the_loss():
    online, target = online_and_target_outputs()
    args = dict(
        online=online,
        target=target,
        trace_probs=target.policy_probs,
        actions=tf.zeros([4, 2], tf.int32),
        behaviour_probs=tf.fill([3, 2, 2], 0.5),
        rewards=tf.ones([3, 2]),
        discounts=tf.fill([3, 2], 0.9),
        support=distributional.make_support(11, -5.0, 5.0),
    )
    one = losses.reactor_loss(hparams(), importance_weights=tf.ones([2]), **args)
    half = losses.reactor_loss(hparams(), importance_weights=tf.constant([1.0, 0.0]), **args)
    assert one.priorities.shape == (2,)
    # The weights multiply each sequence's loss; priorities do not depend on them.
    np.testing.assert_allclose(half.priorities, one.priorities)
    assert float(half.loss) < float(one.loss)
    with_entropy = losses.reactor_loss(
        hparams(entropy_cost=0.5), importance_weights=tf.ones([2]), **args
    )
    entropy = float(one.stats["policy/entropy"])
    assert float(with_entropy.loss) == pytest.approx(float(one.loss) - 0.5 * entropy, abs=1e-5)


def test_the_instruments_are_the_critic_s_error_and_pi_s_distance_from_mu():
    online, target = online_and_target_outputs()
    actions = tf.constant([[0, 1], [1, 1], [0, 0], [1, 0]], tf.int32)
    mu = np.array([[[0.8, 0.2], [0.3, 0.7]]] * 3, np.float32)
    support = distributional.make_support(11, -5.0, 5.0)
    outputs = losses.reactor_loss(
        hparams(),
        online,
        target,
        target.policy_probs,
        actions,
        tf.constant(mu),
        tf.constant(REWARDS_AT_GAME_ENDS),
        tf.zeros([3, 2]),  # every step ends a game: the Retrace return is the reward
        tf.ones([2]),
        support,
    )
    taken = actions.numpy()[:-1, :, None]
    pi = np.take_along_axis(online.policy_probs.numpy(), taken, -1)[..., 0]
    mu_taken = np.take_along_axis(mu, taken, -1)[..., 0]
    np.testing.assert_allclose(
        outputs.stats[instruments.ABS_LOG_RHO], np.abs(np.log(pi / mu_taken)).mean(), rtol=1e-5
    )
    # The critic's error: its expected Q(x, a) against the Retrace return, squared and averaged.
    q = (tf.nn.softmax(online.q, -1).numpy() * support.numpy()).sum(-1)
    q_taken = np.take_along_axis(q, taken, -1)[..., 0]
    np.testing.assert_allclose(
        outputs.stats[instruments.VALUE_ERROR],
        np.mean((REWARDS_AT_GAME_ENDS - q_taken) ** 2),
        rtol=1e-5,
    )


REWARDS_AT_GAME_ENDS = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]], np.float32)

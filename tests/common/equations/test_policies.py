"""Tests for common/equations/policies.py: numpy ground truths from the equations, the worked
numbers of docs/papers/<paper>.md#worked-test-numbers, limiting cases, exact enumeration for the
Reactor estimators, gradient flow and XLA equality."""

import numpy as np
import pytest
import tensorflow as tf

from common.equations import policies


def _np(x):
    return np.asarray(x.numpy() if tf.is_tensor(x) else x)


def _softmax(x):
    z = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def _entropy(p):
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=-1)


def _grad(fn, x):
    """Tape gradient of sum(fn(x)) with respect to x (float64)."""
    x = tf.Variable(np.asarray(x, np.float64))
    with tf.GradientTape() as tape:
        out = tf.reduce_sum(fn(x))
    return _np(tape.gradient(out, x))


# ----------------------------------------------------------------------------- Boltzmann policy

DICE_A = np.array([1.0, 2.0, 0.5, -1.0])


@pytest.mark.parametrize(
    "eta, probs, ent",
    [
        # docs/papers/dice.md#worked-test-numbers (Test 2).
        (0.0, [0.25, 0.25, 0.25, 0.25], 1.386294),
        (0.5, [0.263477, 0.434400, 0.205196, 0.096928], 1.264817),
        (1.0, [0.224208, 0.609460, 0.135989, 0.030343], 1.014403),
        (2.0, [0.113957, 0.842034, 0.041922, 0.002087], 0.538139),
        (5.0, [0.006689, 0.992761, 0.000549, 3e-7], 0.044833),
    ],
)
def test_dice_test2_policy_and_entropy(eta, probs, ent):
    pi = _np(policies.inverse_temperature_softmax(DICE_A, eta))
    np.testing.assert_allclose(pi, probs, atol=1e-6)
    np.testing.assert_allclose(pi, _softmax(eta * DICE_A), rtol=1e-12)
    assert _np(policies.entropy(probs=pi)) == pytest.approx(ent, abs=1e-6)
    assert _np(policies.entropy(logits=eta * DICE_A)) == pytest.approx(ent, abs=1e-6)


def test_dice_test2_entropy_decreasing_and_order_preserved():
    etas = np.linspace(0.0, 50.0, 201)
    pis = _np(policies.inverse_temperature_softmax(np.tile(DICE_A, (201, 1)), etas))
    entropies = _np(policies.entropy(probs=pis))
    assert np.all(np.diff(entropies) < 0)
    assert entropies[-1] < 1e-18 and not np.any(np.isnan(pis))
    for pi in pis[1:]:  # C5: pi_tau ranks actions as A does for every eta > 0
        np.testing.assert_array_equal(np.argsort(pi), np.argsort(DICE_A))
    # Tie case: the tau -> 0 limit of two tied maxima has entropy ln 2, not 0.
    tied = policies.inverse_temperature_softmax(np.array([1.0, 1.0, 0.0]), 1e4)
    assert _np(policies.entropy(probs=tied)) == pytest.approx(np.log(2), abs=1e-9)


def test_dice_test3_entropy_inversion():
    # docs/papers/dice.md#worked-test-numbers (Test 3): H(softmax(eta_0 A)) = 1 nat at
    # eta_0 = 1.026989 (tau_0 = 0.973720).
    pi = policies.inverse_temperature_softmax(DICE_A, 1.026989)
    assert _np(policies.entropy(probs=pi)) == pytest.approx(1.0, abs=2e-6)


def test_eta_zero_is_uniform_even_for_huge_logits_and_per_step_eta():
    logits = tf.constant([[1e30, -1e30, 0.0], [3.0, -2.0, 1e4]], tf.float32)
    np.testing.assert_array_equal(
        _np(policies.inverse_temperature_softmax(logits, 0.0)), np.full((2, 3), np.float32(1 / 3))
    )
    # Per-step eta [T, B] against logits [T, B, A].
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 5, 6))
    eta = rng.uniform(0, 3, size=(4, 5))
    eta[1, 2] = 0.0
    pi = _np(policies.inverse_temperature_softmax(logits, eta))
    np.testing.assert_allclose(pi, _softmax(eta[..., None] * logits), rtol=1e-12)
    np.testing.assert_allclose(pi[1, 2], np.full(6, 1 / 6), rtol=1e-12)
    np.testing.assert_allclose(
        _np(policies.inverse_temperature_log_softmax(logits, eta)), np.log(pi), rtol=1e-12
    )


def test_impala_t11_policy_and_entropy():
    # docs/papers/impala.md#worked-test-numbers (Test 11): logits z = [1, 0, -1].
    pi = policies.inverse_temperature_softmax([1.0, 0.0, -1.0], 1.0)
    np.testing.assert_allclose(_np(pi), [0.665241, 0.244728, 0.090031], atol=1e-6)
    assert _np(policies.entropy(logits=[1.0, 0.0, -1.0])) == pytest.approx(0.832396, abs=1e-6)


def test_lbc_t3_entropy_control():
    # docs/papers/lbc.md#worked-test-numbers (Test 3): LBC's tau is an inverse temperature.
    a = np.array([1.0, 0.0, -1.0, 0.5])
    taus = np.array([0.0, 0.5, 1.0, 2.0, 5.0, 20.0])
    entropies = _np(
        policies.entropy(probs=policies.inverse_temperature_softmax(np.tile(a, (6, 1)), taus))
    )
    np.testing.assert_allclose(
        entropies, [1.386294, 1.327253, 1.192979, 0.887543, 0.304960, 0.000499], atol=1e-6
    )
    assert np.all(np.diff(entropies) < 0)


# ----------------------------------------------------------------------------- mixtures


def _np_mixture(component_logits, etas, weights):
    components = _softmax(np.asarray(etas)[..., None] * component_logits)
    return np.sum(np.asarray(weights)[..., None] * components, axis=-2)


def test_gdi_t1_behaviour_mixture():
    # docs/papers/gdi.md#worked-test-numbers (Test 1). GDI-I3 (GDI Eq. (2)): one head A at two
    # inverse temperatures, weights (eps, 1 - eps).
    a = np.array([1.0, 2.0, 3.0])
    pi = _np(policies.mixture_policy(a[None, :], [0.5, 2.0], [0.3, 0.7]))
    np.testing.assert_allclose(pi, [0.067010, 0.174276, 0.758713], atol=1e-6)
    np.testing.assert_allclose(
        _np(policies.inverse_temperature_softmax(a, 0.5)), [0.186324, 0.307196, 0.506480], atol=1e-6
    )
    np.testing.assert_allclose(
        _np(policies.inverse_temperature_softmax(a, 2.0)), [0.015876, 0.117310, 0.866813], atol=1e-6
    )
    assert pi.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(
        _np(policies.mixture_policy(a[None, :] + 7.5, [0.5, 2.0], [0.3, 0.7])), pi, rtol=1e-12
    )
    # Fixed selection [1/tau1, 1/tau2, eps] = [1, 0, 1] is Softmax(A).
    np.testing.assert_allclose(
        _np(policies.mixture_policy(a[None, :], [1.0, 0.0], [1.0, 0.0])),
        [0.090031, 0.244728, 0.665241],
        atol=1e-6,
    )
    # kappa1 = 0, kappa2 -> inf is eps-greedy.
    np.testing.assert_allclose(
        _np(policies.mixture_policy(a[None, :], [0.0, 1e4], [0.3, 0.7])),
        [0.1, 0.1, 0.8],
        atol=1e-12,
    )
    np.testing.assert_allclose(_np(policies.epsilon_greedy(a, 0.3)), [0.1, 0.1, 0.8], atol=1e-12)
    uniform = _np(policies.mixture_policy(a[None, :], [0.0, 0.0], [0.3, 0.7]))
    np.testing.assert_allclose(uniform, np.full(3, 1 / 3), rtol=1e-12)
    # GDI-H3: two heads.
    h3 = np.array([[0.5, -0.2, 0.1], [1.0, 3.0, -1.0]])
    np.testing.assert_allclose(
        _np(policies.mixture_policy(h3, [1.0, 0.5], [0.25, 0.75])),
        [0.298918, 0.556223, 0.144859],
        atol=1e-6,
    )


LBC_A = np.array([[1.0, 0.0, -1.0], [0.0, 2.0, 0.0], [0.5, 0.5, 0.5]])
LBC_TAU = np.array([1.0, 0.5, 10.0])
LBC_OMEGA = np.array([0.5, 0.3, 0.2])


def test_lbc_t1_boltzmann_mixture():
    # docs/papers/lbc.md#worked-test-numbers (Test 1).
    components = _np(policies.inverse_temperature_softmax(LBC_A, LBC_TAU))
    np.testing.assert_allclose(
        components,
        [[0.665241, 0.244728, 0.090031], [0.211942, 0.576117, 0.211942], [1 / 3, 1 / 3, 1 / 3]],
        atol=1e-6,
    )
    mu = _np(policies.mixture_policy(LBC_A, LBC_TAU, LBC_OMEGA))
    np.testing.assert_allclose(mu, [0.462870, 0.361866, 0.175264], atol=1e-6)
    np.testing.assert_allclose(mu, _np_mixture(LBC_A, LBC_TAU, LBC_OMEGA), rtol=1e-12)
    assert _np(policies.entropy(probs=mu)) == pytest.approx(1.029599, abs=1e-6)
    shifted = LBC_A + np.array([3.0, -7.0, 100.0])[:, None]
    np.testing.assert_allclose(
        _np(policies.mixture_policy(shifted, LBC_TAU, LBC_OMEGA)), mu, rtol=1e-12
    )
    # LBC's Test 3, concavity: H(mu) >= sum_i omega_i H(pi_i).
    component_entropies = _np(policies.entropy(probs=components))
    np.testing.assert_allclose(component_entropies, [0.832396, 0.975328, 1.098612], atol=1e-6)
    assert LBC_OMEGA @ component_entropies == pytest.approx(0.928519, abs=1e-6)


def test_lbc_t2_reductions():
    # docs/papers/lbc.md#worked-test-numbers (Test 2): LBC Prop. 1 and Corollaries 1-3.
    np.testing.assert_allclose(
        _np(policies.mixture_policy(LBC_A, LBC_TAU, [0.0, 1.0, 0.0])),
        [0.211942, 0.576117, 0.211942],
        atol=1e-6,
    )
    np.testing.assert_allclose(
        _np(policies.mixture_policy(LBC_A, [0.0, 0.0, 0.0], LBC_OMEGA)),
        np.full(3, 1 / 3),
        rtol=1e-12,
    )
    greedy = _np(policies.inverse_temperature_softmax(tf.constant(LBC_A[0], tf.float32), 1000.0))
    np.testing.assert_array_equal(greedy, [1.0, 0.0, 0.0])
    same = np.tile(LBC_A[0], (3, 1))
    for omega in ([0.5, 0.3, 0.2], [0.0, 0.0, 1.0], [0.1, 0.8, 0.1]):
        np.testing.assert_allclose(
            _np(policies.mixture_policy(same, [2.0, 2.0, 2.0], omega)),
            _softmax(2.0 * LBC_A[0]),
            rtol=1e-12,
        )
    entropies = [
        _np(policies.entropy(probs=policies.mixture_policy(same, [t, t, 0.0], LBC_OMEGA)))
        for t in (0.5, 2.0)
    ]
    assert abs(entropies[0] - entropies[1]) > 0.1
    np.testing.assert_allclose(
        _np(policies.mixture_policy(LBC_A, [3.7, 1.0, 1.0], [1.0, 0.0, 0.0])),
        _softmax(3.7 * LBC_A[0]),
        rtol=1e-12,
    )


def test_lbc_t8_ratios_against_the_mixture():
    # docs/papers/lbc.md#worked-test-numbers (Test 8): clipped ratios min(1.05, pi_i(a) / mu(a))
    # with pi_i = softmax(A_i).
    mu = _np(policies.mixture_policy(LBC_A, LBC_TAU, LBC_OMEGA))
    targets = _np(policies.inverse_temperature_softmax(LBC_A, 1.0))
    np.testing.assert_allclose(
        np.minimum(1.05, targets / mu),
        [[1.05, 0.676296, 0.513684], [0.230101, 1.05, 0.607693], [0.720145, 0.921151, 1.05]],
        atol=1e-6,
    )
    assert targets[0, 0] / mu[0] == pytest.approx(1.437210, abs=1e-6)
    on_policy = _np(policies.mixture_policy(LBC_A, [1.0, 7.0, 7.0], [1.0, 0.0, 0.0]))
    np.testing.assert_allclose(targets[0] / on_policy, np.ones(3), rtol=1e-12)


def test_mixture_log_policy_is_stable_and_matches_numpy():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(3, 4, 2, 5)) * 3.0
    etas = rng.uniform(0, 50, size=(3, 4, 2))
    weights = rng.dirichlet([1.0, 1.0], size=(3, 4))
    log_mu = _np(policies.mixture_log_policy(logits, etas, weights))
    np.testing.assert_allclose(np.exp(log_mu), _np_mixture(logits, etas, weights), rtol=1e-10)
    # Float32 with eta = 50 and a large logit spread: probabilities underflow, log-probabilities do
    # not.
    wide = tf.constant([[[0.0, 30.0, -30.0], [5.0, 0.0, -5.0]]], tf.float32)
    log_mu32 = _np(policies.mixture_log_policy(wide, [[50.0, 50.0]], [[0.5, 0.5]]))
    assert np.all(np.isfinite(log_mu32))
    expected = np.logaddexp(
        np.log(0.5) + 50 * (wide[0, 0] - 30.0),
        np.log(0.5) + 50 * (wide[0, 1] - 5.0) - np.log1p(np.exp(-250.0) + np.exp(-500.0)),
    )
    np.testing.assert_allclose(log_mu32[0], expected, rtol=1e-5)


def test_responsibilities_follow_bayes_rule():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(6, 3, 4))
    etas = rng.uniform(0, 5, size=(6, 3))
    weights = rng.dirichlet([1.0, 1.0, 1.0], size=6)
    weights[0] = [0.0, 1.0, 0.0]
    actions = rng.integers(0, 4, size=6)
    resp = _np(policies.mixture_responsibilities(logits, etas, weights, actions))
    joint = weights * _softmax(etas[..., None] * logits)[np.arange(6), :, actions]
    np.testing.assert_allclose(resp, joint / joint.sum(-1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(resp.sum(-1), np.ones(6), rtol=1e-12)
    np.testing.assert_array_equal(resp[0], [0.0, 1.0, 0.0])


# ----------------------------------------------------------------------------- epsilon mixing


def test_dice_test13_epsilon_greedy_is_a_temperature_mixture():
    # docs/papers/dice.md#worked-test-numbers (Test 13), DiCE §4.2: eps softmax(0 A)
    # + (1 - eps) softmax(1e4 A) is eps-greedy.
    expected = [0.075, 0.775, 0.075, 0.075]
    mixture = policies.mixture_policy(DICE_A[None, :], [0.0, 1e4], [0.3, 0.7])
    np.testing.assert_allclose(_np(mixture), expected, atol=1e-9)
    eps_greedy = _np(policies.epsilon_greedy(DICE_A, 0.3))
    np.testing.assert_allclose(eps_greedy, expected, atol=1e-12)
    # eps-greedy ties the non-greedy actions: the order of A among them is lost (contrast with C5).
    assert len(set(eps_greedy[[0, 2, 3]])) == 1


def test_reactor_t10_uniform_mixing_and_per_row_epsilon():
    # docs/papers/reactor.md#worked-test-numbers (Test 10): eps = 0.01, |A| = 18, one-hot softmax.
    pi = _np(policies.mix_with_uniform(np.eye(18)[0], 0.01))
    np.testing.assert_allclose(pi, [0.990556] + [0.000556] * 17, atol=1e-6)
    assert pi.sum() == pytest.approx(1.0, abs=1e-12) and pi.min() >= 0.01 / 18 - 1e-15
    probs = _softmax(np.random.default_rng(3).normal(size=(2, 5)))
    mixed = _np(policies.mix_with_uniform(probs, [0.0, 1.0]))
    np.testing.assert_allclose(mixed, [probs[0], np.full(5, 0.2)], rtol=1e-12)


# ----------------------------------------------------------------------------- policy-gradient
# surrogates


def test_dice_test3_gradient_identity_and_tau_free_surrogate():
    # docs/papers/dice.md#worked-test-numbers (Test 3): A as in Test 2, tau = 0.5 (eta = 2), a = 2.
    action = 2
    grad_log_pi = _grad(lambda a: policies.inverse_temperature_log_softmax(a, 2.0)[action], DICE_A)
    np.testing.assert_allclose(grad_log_pi, [-0.227914, -1.684067, 1.916155, -0.004174], atol=1e-6)
    e_minus_pi = [-0.113957, -0.842034, 0.958078, -0.002087]
    np.testing.assert_allclose(0.5 * grad_log_pi, e_minus_pi, atol=1e-6)
    # The surrogate with advantage 1 has tape gradient -(e_a - pi) (DiCE §3.2's tau-scaled
    # gradient with a minus sign).
    grad = _grad(lambda a: policies.tau_free_policy_gradient_loss(a, 2.0, action, 1.0), DICE_A)
    np.testing.assert_allclose(grad, -np.asarray(e_minus_pi), atol=1e-6)
    np.testing.assert_allclose(grad, -(np.eye(4)[action] - _softmax(2.0 * DICE_A)), rtol=1e-12)
    # At eta = 0 the gradient is -(e_a - 1/4), finite.
    grad0 = _grad(lambda a: policies.tau_free_policy_gradient_loss(a, 0.0, action, 1.0), DICE_A)
    np.testing.assert_allclose(grad0, -(np.eye(4)[action] - 0.25), rtol=1e-12)


def test_tau_free_gradient_equals_tau_times_log_policy_gradient_on_a_batch():
    # docs/papers/gdi.md#worked-test-numbers (Test 6, eps in {0, 1}):
    # d loss/dA = -Adv * tau * d log softmax(A / tau)[a], per step.
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(3, 2, 5))
    eta = np.array([[0.02, 0.5], [1.0, 3.0], [10.0, 50.0]])
    actions = rng.integers(0, 5, size=(3, 2))
    advantages = rng.normal(size=(3, 2))
    grad = _grad(
        lambda a: policies.tau_free_policy_gradient_loss(a, eta, actions, advantages), logits
    )
    tau = 1.0 / eta

    def scaled_log_policy(a):
        log_pi = tf.nn.log_softmax(
            a / tau[..., None]
        )  # dividing by tau is fine in a test with finite tau
        return (
            -advantages * tau * tf.reduce_sum(log_pi * tf.one_hot(actions, 5, dtype=tf.float64), -1)
        )

    np.testing.assert_allclose(grad, _grad(scaled_log_policy, logits), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        grad,
        -advantages[..., None] * (np.eye(5)[actions] - _softmax(eta[..., None] * logits)),
        rtol=1e-10,
    )


def _mixture_inputs():
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(4, 2, 3))
    etas = np.array([[0.5, 2.0], [0.0, 1.0], [3.0, 0.0], [1.5, 50.0]])
    weights = np.array([[0.3, 0.7], [0.5, 0.5], [0.9, 0.1], [0.25, 0.75]])
    actions = np.array([0, 2, 1, 2])
    advantages = rng.normal(size=(4, 2))
    return logits, etas, weights, actions, advantages


def test_gdi_t6_mixture_tau_free_gradient_per_component():
    # docs/papers/gdi.md#worked-test-numbers (Test 6):
    # d loss / d A_i = -Adv_i * w_i(a) * (e_a - pi_i), and the GDI-H3 form (per-component
    # advantages) reaches A_i only with its own advantage.
    logits, etas, weights, actions, advantages = _mixture_inputs()
    grad = _grad(
        lambda a: policies.mixture_tau_free_policy_gradient_loss(
            a, etas, weights, actions, advantages
        ),
        logits,
    )
    pis = _softmax(etas[..., None] * logits)
    joint = weights * pis[np.arange(4), :, actions]
    resp = joint / joint.sum(-1, keepdims=True)
    expected = -(advantages * resp)[..., None] * (np.eye(3)[actions][:, None, :] - pis)
    np.testing.assert_allclose(grad, expected, rtol=1e-10, atol=1e-14)
    assert np.all(np.isfinite(grad))


def test_mixture_tau_free_equals_sum_of_responsibility_weighted_tau_log_gradients():
    # docs/papers/gdi.md#worked-test-numbers (Test 6): the gradient is sum_i w_i tau_i d log pi_i
    # for positive temperatures.
    logits, _, weights, actions, advantages = _mixture_inputs()
    etas = np.array([[0.5, 2.0], [0.2, 1.0], [3.0, 0.7], [1.5, 50.0]])
    shared_adv = advantages[:, 0]
    grad = _grad(
        lambda a: policies.mixture_tau_free_policy_gradient_loss(
            a, etas, weights, actions, shared_adv[:, None]
        ),
        logits,
    )
    resp = _np(policies.mixture_responsibilities(logits, etas, weights, actions))

    def weighted_tau_log(a):
        log_pi = tf.reduce_sum(
            tf.nn.log_softmax(etas[..., None] * a)
            * tf.one_hot(actions[:, None], 3, dtype=tf.float64),
            -1,
        )
        return -shared_adv[:, None] * resp * log_pi / etas

    np.testing.assert_allclose(grad, _grad(weighted_tau_log, logits), rtol=1e-9, atol=1e-12)


def test_mixture_tau_free_reduces_to_dice_for_eps_in_0_1_and_shared_head_broadcasts():
    logits, etas, _, actions, advantages = _mixture_inputs()
    head = logits[:, 0, :]
    adv = advantages[:, 0]
    for eps in (0.0, 1.0):
        weights = np.tile([eps, 1.0 - eps], (4, 1))
        active = etas[:, 0] if eps == 1.0 else etas[:, 1]
        mixture = policies.mixture_tau_free_policy_gradient_loss(
            head[:, None, :], etas, weights, actions, adv[:, None]
        )
        single = policies.tau_free_policy_gradient_loss(head, active, actions, adv)
        np.testing.assert_allclose(_np(mixture), _np(single), rtol=1e-12, atol=1e-15)
        grad_mixture = _grad(
            lambda a: policies.mixture_tau_free_policy_gradient_loss(
                a[:, None, :], etas, weights, actions, adv[:, None]
            ),
            head,
        )
        grad_single = _grad(
            lambda a: policies.tau_free_policy_gradient_loss(a, active, actions, adv), head
        )
        np.testing.assert_allclose(grad_mixture, grad_single, rtol=1e-12, atol=1e-15)
    # GDI-I3: one shared head, general eps; the gradient sums the two components' terms.
    weights = np.tile([0.3, 0.7], (4, 1))
    grad = _grad(
        lambda a: policies.mixture_tau_free_policy_gradient_loss(
            a[:, None, :], etas, weights, actions, adv[:, None]
        ),
        head,
    )
    pis = _softmax(etas[..., None] * head[:, None, :])
    joint = weights * pis[np.arange(4), :, actions]
    resp = joint / joint.sum(-1, keepdims=True)
    expected = -adv[:, None] * np.sum(
        resp[..., None] * (np.eye(3)[actions][:, None, :] - pis), axis=1
    )
    np.testing.assert_allclose(grad, expected, rtol=1e-10, atol=1e-14)


def test_gdi_t6_log_mixture_gradient():
    # docs/papers/gdi.md#worked-test-numbers (Test 6) `log_mixture`: autodiff of log mu(a) gives
    # sum_i w_i(a) d log pi_i(a).
    logits, etas, weights, actions, advantages = _mixture_inputs()
    grad = _grad(
        lambda a: policies.policy_gradient_loss(
            policies.mixture_log_policy(a, etas, weights), actions, advantages[:, 0]
        ),
        logits,
    )
    pis = _softmax(etas[..., None] * logits)
    joint = weights * pis[np.arange(4), :, actions]
    resp = joint / joint.sum(-1, keepdims=True)
    expected = (
        -advantages[:, :1, None] * (resp * etas)[..., None] * (np.eye(3)[actions][:, None, :] - pis)
    )
    np.testing.assert_allclose(grad, expected, rtol=1e-10, atol=1e-14)


def test_lbc_t15_policy_gradient_term():
    # docs/papers/lbc.md#worked-test-numbers (Test 15): d(beta L_pi)/dA = -5 Adv (e_a - pi),
    # Adv = 2, A = [1, 2, 0], a = 0.
    grad = _grad(
        lambda a: 5.0 * policies.policy_gradient_loss(tf.nn.log_softmax(a), 0, 2.0), [1.0, 2.0, 0.0]
    )
    np.testing.assert_allclose(grad, [-7.552715, 6.652410, 0.900306], atol=1e-6)


def test_gradients_never_reach_advantages():
    logits, etas, weights, actions, advantages = _mixture_inputs()
    source = tf.Variable(advantages)
    logit_var = tf.Variable(logits)
    with tf.GradientTape(persistent=True) as tape:
        adv = 3.0 * source
        losses = [
            policies.mixture_tau_free_policy_gradient_loss(logit_var, etas, weights, actions, adv),
            policies.tau_free_policy_gradient_loss(logit_var[:, 0], etas[:, 0], actions, adv[:, 0]),
            policies.policy_gradient_loss(tf.nn.log_softmax(logit_var[:, 0]), actions, adv[:, 0]),
        ]
    for loss in losses:
        assert tape.gradient(loss, source) is None
        assert np.any(_np(tape.gradient(loss, logit_var)) != 0)


# ----------------------------------------------------------------------------- Reactor beta-LOO and
# TISLR

THETA = np.array([0.2, -0.1, 0.5])
MU = np.array([0.5, 0.3, 0.2])
Q_TRUE = np.array([1.0, 2.0, 0.5])
Q_CRITIC = np.array([1.5, 1.0, 0.0])


def _jacobian_pi(theta):
    pi = _softmax(theta)
    return pi[:, None] * (np.eye(len(pi)) - pi[None, :])  # row a: d pi(a) / d theta


def _estimates(loss_fn, q_values):
    """-d loss / d theta for every sampled action a_hat (rows), with R(a_hat) = Q^pi(a_hat)."""
    actions = np.arange(3)
    theta = np.tile(THETA, (3, 1))
    critic = np.tile(q_values, (3, 1))
    return -_grad(lambda t: loss_fn(tf.nn.softmax(t), actions, Q_TRUE[actions], critic), theta)


def test_reactor_t8_true_gradient_and_policy():
    np.testing.assert_allclose(_softmax(THETA), [0.323554, 0.239694, 0.436752], atol=1e-6)
    np.testing.assert_allclose(
        _jacobian_pi(THETA).T @ Q_TRUE, [-0.006898, 0.234585, -0.227687], atol=1e-6
    )


def test_reactor_t8_beta_one_over_mu_is_unbiased_by_exact_enumeration():
    # docs/papers/reactor.md#worked-test-numbers (Test 8): beta = 1/mu (c = inf) makes
    # E_mu[G_hat] = G for any critic (Reactor Eq. (11)).
    true_g = _jacobian_pi(THETA).T @ Q_TRUE
    est = _estimates(
        lambda p, a, r, q: policies.beta_loo_policy_gradient_loss(p, a, r, q, MU[a], np.inf),
        Q_CRITIC,
    )
    np.testing.assert_allclose(MU @ est, true_g, rtol=1e-10, atol=1e-14)
    # Per action, Eq. (10) with beta = 1/mu equals Eq. (11).
    pi = _softmax(THETA)
    jac = _jacobian_pi(THETA)
    for a in range(3):
        eq11 = pi[a] / MU[a] * (Q_TRUE[a] - Q_CRITIC[a]) * (np.eye(3)[a] - pi) + jac.T @ Q_CRITIC
        np.testing.assert_allclose(est[a], eq11, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize(
    "c, expected_mean, expected_bias",
    [
        (1.0, [0.158632, 0.129502, -0.288134], [0.165530, -0.105082, -0.060447]),
        (2.0, None, [0.073415, -0.041490, -0.031925]),
    ],
)
def test_reactor_t8_bias_matches_proposition_1(c, expected_mean, expected_bias):
    jac = _jacobian_pi(THETA)
    est = _estimates(
        lambda p, a, r, q: policies.beta_loo_policy_gradient_loss(p, a, r, q, MU[a], c), Q_CRITIC
    )
    bias = MU @ est - jac.T @ Q_TRUE
    beta = np.minimum(c, 1.0 / MU)
    proposition_1 = jac.T @ ((1.0 - MU * beta) * (Q_CRITIC - Q_TRUE))
    np.testing.assert_allclose(bias, proposition_1, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(bias, expected_bias, atol=1e-6)
    if expected_mean is not None:
        np.testing.assert_allclose(MU @ est, expected_mean, atol=1e-6)
    if c == 1.0:  # beta = 1 is LOO, Eq. (9), for every a_hat
        for a in range(3):
            loo = Q_TRUE[a] * jac[a] + sum(Q_CRITIC[b] * jac[b] for b in range(3) if b != a)
            np.testing.assert_allclose(est[a], loo, rtol=1e-10, atol=1e-14)


def test_reactor_t10_beta_truncation():
    mu = np.array([0.7, 0.2, 0.1])
    np.testing.assert_allclose(
        _np(policies.beta_loo_coefficient(mu, 1.0)), [1.0, 1.0, 1.0], rtol=1e-12
    )
    np.testing.assert_allclose(
        _np(policies.beta_loo_coefficient(mu, 5.0)), [1.428571, 5.0, 5.0], atol=1e-6
    )
    np.testing.assert_allclose(_np(policies.beta_loo_coefficient(mu, np.inf)), 1.0 / mu, rtol=1e-12)
    assert policies.BETA_LOO_C == 1.0


@pytest.mark.parametrize("c", [1.0, 2.0, 10.0])
def test_reactor_t9_tislr_is_unbiased_with_an_exact_critic(c):
    true_g = _jacobian_pi(THETA).T @ Q_TRUE
    mu = np.tile(MU, (3, 1))
    est = _estimates(
        lambda p, a, r, q: policies.tislr_policy_gradient_loss(p, a, r, q, mu, c), Q_TRUE
    )
    np.testing.assert_allclose(MU @ est, true_g, rtol=1e-10, atol=1e-14)
    # Each estimate follows Reactor §3.1's printed TISLR estimator with V = sum_b pi(b) Q(b).
    pi = _softmax(THETA)
    grad_log = np.eye(3) - pi
    value = pi @ Q_TRUE
    correction = sum(
        max(pi[b] / MU[b] - c, 0.0) * MU[b] * (Q_TRUE[b] - value) * grad_log[b] for b in range(3)
    )
    for a in range(3):
        printed = min(c, pi[a] / MU[a]) * (Q_TRUE[a] - value) * grad_log[a] + correction
        np.testing.assert_allclose(est[a], printed, rtol=1e-10, atol=1e-14)


def test_tislr_with_an_inexact_critic_is_biased():
    # Discriminates the unbiasedness check above: with c = 1 the correction term uses the critic.
    mu = np.tile(MU, (3, 1))
    est = _estimates(
        lambda p, a, r, q: policies.tislr_policy_gradient_loss(p, a, r, q, mu, 1.0), Q_CRITIC
    )
    assert np.max(np.abs(MU @ est - _jacobian_pi(THETA).T @ Q_TRUE)) > 1e-2


def test_reactor_losses_differentiate_only_the_policy():
    theta = tf.Variable(np.tile(THETA, (3, 1)))
    critic = tf.Variable(np.tile(Q_CRITIC, (3, 1)))
    returns = tf.Variable(Q_TRUE)
    behaviour = tf.Variable(np.tile(MU, (3, 1)))
    actions = np.arange(3)
    with tf.GradientTape(persistent=True) as tape:
        pi = tf.nn.softmax(theta)
        mu_a = tf.reduce_sum(behaviour * tf.one_hot(actions, 3, dtype=tf.float64), -1)
        losses = [
            policies.beta_loo_policy_gradient_loss(pi, actions, returns, critic, mu_a, 2.0),
            policies.tislr_policy_gradient_loss(pi, actions, returns, critic, behaviour, 1.0),
        ]
    for loss in losses:
        assert [tape.gradient(loss, v) for v in (critic, returns, behaviour)] == [None, None, None]
        assert np.any(_np(tape.gradient(loss, theta)) != 0)


# ----------------------------------------------------------------------------- XLA and sampling


def test_jit_compiled_equals_eager():
    logits, etas, weights, actions, advantages = _mixture_inputs()
    mu = np.tile(MU, (4, 1))

    def everything(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            pi = policies.mix_with_uniform(tf.nn.softmax(x[:, 0]), 0.01)
            losses = tf.stack(
                [
                    policies.mixture_tau_free_policy_gradient_loss(
                        x, etas, weights, actions, advantages
                    ),
                    policies.tau_free_policy_gradient_loss(
                        x[:, 1], etas[:, 1], actions, advantages[:, 1]
                    ),
                    policies.policy_gradient_loss(
                        policies.mixture_log_policy(x, etas, weights), actions, advantages[:, 0]
                    ),
                    policies.beta_loo_policy_gradient_loss(
                        pi, actions, advantages[:, 0], x[:, 1], mu[:, 0], 2.0
                    ),
                    policies.tislr_policy_gradient_loss(
                        pi, actions, advantages[:, 0], x[:, 1], mu, 1.0
                    ),
                ]
            )
            loss = tf.reduce_sum(losses)
        return (
            losses,
            tape.gradient(loss, x),
            policies.mixture_policy(x, etas, weights),
            policies.mixture_responsibilities(x, etas, weights, actions),
            policies.epsilon_greedy(x[:, 0], 0.1),
            policies.entropy(logits=x[:, 0]),
        )

    x = tf.constant(logits, tf.float32)
    eager = everything(x)
    compiled = tf.function(everything, jit_compile=True)(x)
    for e, c in zip(eager, compiled):
        np.testing.assert_allclose(_np(c), _np(e), rtol=1e-5, atol=1e-6)


def test_sample_actions_seeded_frequencies_and_jit():
    probs = np.tile([0.1, 0.2, 0.7, 0.0], (20000, 1)).astype(np.float32)
    seed = tf.constant([7, 11])
    first = _np(policies.sample_actions(probs=probs, seed=seed))
    np.testing.assert_array_equal(first, _np(policies.sample_actions(probs=probs, seed=seed)))
    assert first.dtype == np.int32 and first.shape == (20000,)
    counts = np.bincount(first, minlength=4) / 20000
    assert counts[3] == 0.0
    np.testing.assert_allclose(counts[:3], [0.1, 0.2, 0.7], atol=4 * np.sqrt(0.7 * 0.3 / 20000))
    assert not np.array_equal(
        first, _np(policies.sample_actions(probs=probs, seed=tf.constant([7, 12])))
    )
    # eta = 0 on huge logits samples uniformly.
    logits = tf.constant(np.tile([1e30, -1e30, 0.0], (30000, 1)), tf.float32)
    compiled = tf.function(lambda l, s: policies.sample_actions(logits=l, seed=s), jit_compile=True)
    uniform_logits = policies.inverse_temperature_log_softmax(logits, 0.0)
    uniform = _np(compiled(uniform_logits, seed))
    np.testing.assert_allclose(
        np.bincount(uniform, minlength=3) / 30000,
        np.full(3, 1 / 3),
        atol=4 * np.sqrt(2 / 9 / 30000),
    )
    np.testing.assert_array_equal(uniform, _np(compiled(uniform_logits, seed)))


# ----------------------------------------------------------------------------- bad input


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="eta must lie in"):
        policies.inverse_temperature_softmax([1.0, 2.0], -0.5)
    with pytest.raises(ValueError, match="sum to 1"):
        policies.mixture_policy(LBC_A, LBC_TAU, [0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="weights must lie in"):
        policies.mixture_policy(LBC_A, LBC_TAU, [1.5, -0.5, 0.0])
    with pytest.raises(ValueError, match="actions must lie in"):
        policies.policy_gradient_loss(np.log([[0.5, 0.5]]), [2], [1.0])
    with pytest.raises(TypeError, match="actions must be integers"):
        policies.policy_gradient_loss(np.log([[0.5, 0.5]]), [1.0], [1.0])
    with pytest.raises(ValueError, match="epsilon must lie in"):
        policies.mix_with_uniform([0.5, 0.5], 1.5)
    with pytest.raises(ValueError, match="beta_loo_c must be >= 1"):
        policies.beta_loo_coefficient([0.5], 0.5)
    with pytest.raises(ValueError, match="behaviour_action_probs must lie in"):
        policies.beta_loo_coefficient([0.0], 1.0)
    with pytest.raises(ValueError, match="tislr_c must be > 0"):
        policies.tislr_policy_gradient_loss(
            [[0.5, 0.5]], [0], [1.0], [[1.0, 1.0]], [[0.5, 0.5]], 0.0
        )
    with pytest.raises(ValueError, match="exactly one of logits= or probs="):
        policies.sample_actions(logits=[0.0, 1.0], probs=[0.5, 0.5], seed=tf.constant([1, 2]))

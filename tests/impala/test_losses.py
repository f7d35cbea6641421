"""IMPALA loss and the §5.2.2 corrections, with the hand-worked numbers of Tests 1, 2, 11 and 12
in docs/papers/impala.md#worked-test-numbers."""

import numpy as np
import pytest
import tensorflow as tf

from common.equations import instruments
from impala import ablations
from impala import losses
from tests import oracles

GAMMA = 0.9
# The common fixture of docs/papers/impala.md#worked-test-numbers:
# T = 3, r = [1, 2, 3], V = [0.5, 1, 1.5], bootstrap 2, gamma 0.9.
REWARDS = np.array([[1.0], [2.0], [3.0]])
VALUES = np.array([[0.5], [1.0], [1.5]])
BOOTSTRAP = np.array([2.0])
DISCOUNTS = np.full((3, 1), GAMMA)
T2_LOG_RHOS = np.log(np.array([[2.0], [0.5], [1.5]]))  # Test 2: pi/mu = [2, 0.5, 1.5]


def hparams(**overrides) -> losses.LossHyperparameters:
    return losses.LossHyperparameters()._replace(**overrides)


def targets(correction: str, **overrides):
    vs, adv = losses.off_policy_targets(
        hparams(correction=correction, **overrides),
        tf.constant(T2_LOG_RHOS, tf.float32),
        tf.constant(DISCOUNTS, tf.float32),
        tf.constant(REWARDS, tf.float32),
        tf.constant(VALUES, tf.float32),
        tf.constant(BOOTSTRAP, tf.float32),
    )
    return vs.numpy()[:, 0], adv.numpy()[:, 0]


# --- §5.2.2 corrections on the common fixture (hand-worked numbers) ---------------------------


def test_vtrace_matches_spec_T2():
    vs, adv = targets("vtrace")  # docs/papers/impala.md#worked-test-numbers (Test 2)
    np.testing.assert_allclose(vs, [4.294, 3.66, 4.8], atol=1e-5)
    np.testing.assert_allclose(adv, [3.794, 2.66, 3.3], atol=1e-5)


@pytest.mark.parametrize("correction", ["no_correction", "eps_correction"])
def test_no_correction_ignores_ratios_spec_T1(correction):
    # Off-policy data, but the targets are the on-policy ones of Eq. (2):
    # docs/papers/impala.md#worked-test-numbers (Test 1).
    vs, adv = targets(correction)
    np.testing.assert_allclose(vs, [6.688, 6.32, 4.8], atol=1e-5)
    np.testing.assert_allclose(adv, [6.188, 5.32, 3.3], atol=1e-5)


def test_one_step_is_weights_uncorrected_advantage():
    # §5.2.2 item 3: Test 1's value targets; its advantages times min(1, [2, 0.5, 1.5]) =
    # [1, 0.5, 1].
    vs, adv = targets("one_step_is")
    np.testing.assert_allclose(vs, [6.688, 6.32, 4.8], atol=1e-5)
    np.testing.assert_allclose(adv, [6.188, 2.66, 3.3], atol=1e-5)


def test_baseline_q_estimate_app_e3():
    # q_s = r_s + gamma V(x_{s+1}): advantages are rho_s * (r + gamma V' - V) = rho * [1.4, 2.35,
    # 3.3] with rho = [1, 0.5, 1], i.e. the hand deltas of Test 2 in
    # docs/papers/impala.md#worked-test-numbers.
    vs, adv = targets("vtrace", pg_q_estimate="baseline")
    np.testing.assert_allclose(vs, [4.294, 3.66, 4.8], atol=1e-5)
    np.testing.assert_allclose(adv, [1.4, 1.175, 3.3], atol=1e-5)


def test_unknown_correction_is_rejected_by_name():
    with pytest.raises(ValueError, match="correction='bogus'"):
        targets("bogus")


def test_ablations_name_the_four_corrections():
    for name in ("vtrace", "no_correction", "eps_correction", "one_step_is"):
        assert ablations.overrides_for(name)["correction"] == name
    with pytest.raises(ValueError, match="--ablation='nope' is not one of vtrace"):
        ablations.overrides_for("nope")


# --- Loss terms: docs/papers/impala.md#worked-test-numbers (Test 11) ------------------------


def t11_loss(logits, value):
    advantage = tf.constant([[2.0]])  # already rho-weighted
    vs = tf.constant([[3.0]])
    return (
        losses.policy_gradient_loss(logits, tf.constant([[1]]), advantage)
        + 0.5 * losses.baseline_loss(vs, value)
        + 0.01 * losses.entropy_loss(logits)
    )


def test_loss_terms_match_spec_T11():
    logits = tf.Variable([[[1.0, 0.0, -1.0]]])
    value = tf.Variable([[1.0]])
    with tf.GradientTape() as tape:
        loss = t11_loss(logits, value)
    grad_logits, grad_value = tape.gradient(loss, [logits, value])
    np.testing.assert_allclose(loss.numpy(), 3.806888, atol=1e-5)
    np.testing.assert_allclose(
        grad_logits.numpy()[0, 0], [1.333308, -1.511951, 0.178643], atol=1e-5
    )
    np.testing.assert_allclose(grad_value.numpy(), [[-1.0]], atol=1e-6)
    np.testing.assert_allclose(-losses.entropy_loss(logits).numpy(), 0.832396, atol=1e-6)


def test_eps_correction_uses_log_pi_plus_epsilon():
    logits = tf.constant([[[1.0, 0.0, -20.0]]])
    actions = tf.constant([[2]])
    advantage = tf.constant([[1.0]])
    pi = np.exp([1.0, 0.0, -20.0]) / np.exp([1.0, 0.0, -20.0]).sum()
    for eps in (1e-6, 1e-2):
        got = losses.policy_gradient_loss(logits, actions, advantage, epsilon=eps).numpy()
        np.testing.assert_allclose(got, -np.log(pi[2] + eps), rtol=1e-5)
    np.testing.assert_allclose(
        losses.policy_gradient_loss(logits, actions, advantage).numpy(), -np.log(pi[2]), rtol=1e-5
    )


# --- Full loss against a numpy ground truth written from the sums (tests/oracles.py) ------------


def np_log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def np_impala_loss(
    correction,
    logits,
    behaviour_logits,
    actions,
    rewards,
    discounts,
    values,
    bootstrap,
    baseline_cost,
    entropy_cost,
    eps=1e-6,
):
    """The §4.2 loss with the §5.2.2 corrections (docs/papers/impala.md#equations-in-code), summed
    over batch and time, with the gradients of the loss."""
    log_pi = np_log_softmax(logits)
    log_mu = np_log_softmax(behaviour_logits)
    take = lambda x: np.take_along_axis(x, actions[..., None], -1)[..., 0]
    log_rhos = take(log_pi) - take(log_mu)
    corrected = correction == "vtrace"
    vs, _ = oracles.vtrace_sum(
        log_rhos if corrected else 0 * log_rhos,
        discounts,
        rewards,
        values,
        bootstrap,
        rho_bar=1.0,
        pg_rho_bar=1.0,
        c_bar=1.0,
    )
    vs_tp1 = np.concatenate([vs[1:], bootstrap[None]])
    weight = np.minimum(1.0, np.exp(log_rhos)) if correction in ("vtrace", "one_step_is") else 1.0
    adv = weight * (rewards + discounts * vs_tp1 - values)
    pi = np.exp(log_pi)
    log_pi_a = np.log(take(pi) + eps) if correction == "eps_correction" else take(log_pi)
    neg_entropy = (pi * log_pi).sum(-1)
    loss = (
        -(adv * log_pi_a).sum()
        + baseline_cost * 0.5 * ((vs - values) ** 2).sum()
        + entropy_cost * neg_entropy.sum()
    )
    onehot = np.eye(logits.shape[-1])[actions]
    dlogpia_dz = onehot - pi
    if correction == "eps_correction":
        dlogpia_dz = take(pi)[..., None] * (onehot - pi) / (take(pi) + eps)[..., None]
    grad_logits = -adv[..., None] * dlogpia_dz + entropy_cost * pi * (
        log_pi - neg_entropy[..., None]
    )
    grad_values = -baseline_cost * (vs - values)
    return loss, grad_logits, grad_values


@pytest.mark.parametrize("correction", ["vtrace", "no_correction", "eps_correction", "one_step_is"])
def test_loss_and_gradients_match_numpy(correction):
    rng = np.random.default_rng(7)
    T, B, A = 6, 4, 5
    logits = rng.normal(size=(T, B, A)) * 2
    behaviour_logits = logits + rng.normal(size=(T, B, A)) * 1.5  # ratios on both sides of 1
    actions = rng.integers(0, A, size=(T, B))
    rewards = rng.normal(size=(T, B))
    discounts = np.where(rng.random((T, B)) < 0.2, 0.0, 0.99)
    values = rng.normal(size=(T, B))
    bootstrap = rng.normal(size=B)
    want_loss, want_grad_logits, want_grad_values = np_impala_loss(
        correction,
        logits,
        behaviour_logits,
        actions,
        rewards,
        discounts,
        values,
        bootstrap,
        baseline_cost=0.5,
        entropy_cost=0.01,
    )

    tf_logits = tf.Variable(logits, dtype=tf.float32)
    tf_values = tf.Variable(values, dtype=tf.float32)
    tf_bootstrap = tf.Variable(bootstrap, dtype=tf.float32)
    with tf.GradientTape() as tape:
        loss, stats = losses.impala_loss(
            hparams(correction=correction),
            tf_logits,
            tf_values,
            tf_bootstrap,
            tf.constant(behaviour_logits, tf.float32),
            tf.constant(actions, tf.int32),
            tf.constant(rewards, tf.float32),
            tf.constant(discounts, tf.float32),
        )
    grad_logits, grad_values, grad_bootstrap = tape.gradient(
        loss, [tf_logits, tf_values, tf_bootstrap]
    )
    np.testing.assert_allclose(loss.numpy(), want_loss, rtol=1e-4)
    # Targets, advantages and ratios are constants: gradients reach only log pi, H and V(x_s).
    np.testing.assert_allclose(grad_logits.numpy(), want_grad_logits, atol=1e-4)
    np.testing.assert_allclose(grad_values.numpy(), want_grad_values, atol=1e-4)
    assert grad_bootstrap is None
    assert stats["importance/rho_clipped_fraction"].numpy() > 0  # the data crosses rho_bar = 1
    assert stats["importance/rho_min"].numpy() < 1
    log_pi, log_mu = (
        np.take_along_axis(z - np.log(np.exp(z).sum(-1, keepdims=True)), actions[..., None], -1)
        for z in (logits, behaviour_logits)
    )
    np.testing.assert_allclose(
        stats[instruments.ABS_LOG_RHO].numpy(), np.abs(log_pi - log_mu).mean(), rtol=1e-5
    )
    # The value error is the mean of (v_s - V(x_s))^2, which the baseline's gradient carries.
    errors = want_grad_values / -0.5
    np.testing.assert_allclose(
        stats[instruments.VALUE_ERROR].numpy(), np.mean(errors**2), rtol=1e-4
    )
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(
        stats[instruments.ENTROPY].numpy(), -(probs * np.log(probs)).sum(-1).mean(), rtol=1e-5
    )


def test_loss_is_summed_spec_T12():
    # docs/papers/impala.md#worked-test-numbers (Test 12): duplicating the batch doubles the loss
    # and its gradients (no means).
    rng = np.random.default_rng(3)
    T, B, A = 4, 3, 4
    inputs = dict(
        logits=rng.normal(size=(T, B, A)),
        behaviour=rng.normal(size=(T, B, A)),
        actions=rng.integers(0, A, (T, B)),
        rewards=rng.normal(size=(T, B)),
        discounts=np.full((T, B), 0.99),
        values=rng.normal(size=(T, B)),
        bootstrap=rng.normal(size=B),
    )

    def loss_and_grads(repeat):
        tile = lambda x: np.concatenate([x] * repeat, axis=1 if x.ndim > 1 else 0)
        x = {k: tile(v) for k, v in inputs.items()}
        logits = tf.Variable(x["logits"], dtype=tf.float32)
        values = tf.Variable(x["values"], dtype=tf.float32)
        with tf.GradientTape() as tape:
            loss, _ = losses.impala_loss(
                hparams(),
                logits,
                values,
                tf.constant(x["bootstrap"], tf.float32),
                tf.constant(x["behaviour"], tf.float32),
                tf.constant(x["actions"], tf.int32),
                tf.constant(x["rewards"], tf.float32),
                tf.constant(x["discounts"], tf.float32),
            )
        g_logits, g_values = tape.gradient(loss, [logits, values])
        return loss.numpy(), g_logits.numpy()[:, :B].sum(), g_values.numpy()[:, :B].sum()

    single, double = loss_and_grads(1), loss_and_grads(2)
    np.testing.assert_allclose(double[0], 2 * single[0], rtol=1e-5)
    # Each copy's gradient is unchanged by the duplicate (a mean over the batch would halve it).
    np.testing.assert_allclose(double[1:], single[1:], rtol=1e-4, atol=1e-6)


def test_compiled_loss_equals_eager():
    rng = np.random.default_rng(11)
    T, B, A = 5, 3, 4
    args = (
        tf.constant(rng.normal(size=(T, B, A)), tf.float32),
        tf.constant(rng.normal(size=(T, B)), tf.float32),
        tf.constant(rng.normal(size=B), tf.float32),
        tf.constant(rng.normal(size=(T, B, A)), tf.float32),
        tf.constant(rng.integers(0, A, (T, B)), tf.int32),
        tf.constant(rng.normal(size=(T, B)), tf.float32),
        tf.constant(np.full((T, B), 0.99), tf.float32),
    )
    for correction in ("vtrace", "one_step_is"):
        h = hparams(correction=correction)
        eager, _ = losses.impala_loss(h, *args)
        compiled, _ = tf.function(lambda *a: losses.impala_loss(h, *a), jit_compile=True)(*args)
        np.testing.assert_allclose(compiled.numpy(), eager.numpy(), rtol=1e-5)

"""LBC's per-policy loss (lbc/losses.py) against the paper's sums and the worked numbers of
docs/papers/lbc.md#worked-test-numbers: V-trace targets and advantages (Test 5), Retrace
(Test 7, the printed sampled form), the ratios of each pi_i = softmax(A_i) against the mixture mu
(Test 8), the loss terms' gradients (Test 15), and a numpy ground truth of
xi L_V + alpha L_Q + beta L_pi with masks."""

import numpy as np
import pytest
import tensorflow as tf

from common.equations import policies
from lbc import acting
from lbc import config as config_lib
from lbc import losses
from tests import oracles

HP = losses.LossHyperparameters.from_config(config_lib.LbcConfig())
ONLY = {  # one term at a time: its gradient reads off its target
    "v": losses.LossHyperparameters(**{**vars(HP), "q_loss_scale": 0.0, "pi_loss_scale": 0.0}),
    "q": losses.LossHyperparameters(**{**vars(HP), "v_loss_scale": 0.0, "pi_loss_scale": 0.0}),
    "pi": losses.LossHyperparameters(**{**vars(HP), "v_loss_scale": 0.0, "q_loss_scale": 0.0}),
}


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def gradients(hp, advantages, values, actions, log_mu, rewards, discounts, mask=None):
    """The loss and its gradients with respect to A [T+1, B, A] and V [T+1, B]."""
    advantages = tf.Variable(np.asarray(advantages, np.float32))
    values = tf.Variable(np.asarray(values, np.float32))
    T, B = np.shape(rewards)
    with tf.GradientTape() as tape:
        loss, stats = losses.policy_loss(
            hp,
            advantages,
            values,
            tf.constant(actions, tf.int32),
            tf.constant(log_mu, tf.float32),
            tf.constant(rewards, tf.float32),
            tf.constant(discounts, tf.float32),
            tf.ones((T, B)) if mask is None else tf.constant(mask, tf.float32),
        )
    grad_a, grad_v = tape.gradient(loss, [advantages, values])
    zero = lambda g, x: np.zeros(x.shape) if g is None else g.numpy()
    return loss, stats, zero(grad_a, advantages), zero(grad_v, values)


# docs/papers/lbc.md#worked-test-numbers, Tests 5 and 7: one sequence, T = 4, gamma = 0.99,
# action 0 with pi(a_t) as given.
R = [1.0, 0.0, -1.0, 2.0]
PI = [0.5, 0.9, 0.2, 0.6, 0.5]  # row 4 is the bootstrap state's
MU = [0.4, 0.3, 0.5, 0.6, 0.5]


def two_action_logits(p):
    """A with softmax(A) = (p, 1 − p): pi(a_t = 0) = p."""
    p = np.asarray(p, np.float64)
    return np.stack([np.log(p), np.log(1 - p)], -1)[:, None, :]


def column(x):
    return np.asarray(x, np.float64)[:, None]


def t5(discounts):
    values = column([0.5, 0.4, 0.3, 0.2, 0.1])
    args = (two_action_logits(PI), values, np.zeros((5, 1), int), column(np.log(MU)), column(R))
    _, _, _, grad_v = gradients(ONLY["v"], *args, column(discounts))
    _, _, grad_a, _ = gradients(ONLY["pi"], *args, column(discounts))
    vs = values[:4, 0] - 4 * grad_v[:4, 0]  # d/dV_t mean ½ (v_t − V_t)² = (V_t − v_t) / 4
    # d/dA_t(0) of mean −Â_t log pi(a_t) = −Â_t (1 − pi_t(0)) / 4, times beta = 5
    pg = -4 * grad_a[:4, 0, 0] / (5 * (1 - np.asarray(PI[:4])))
    return vs, pg


def test_t5_vtrace_targets_and_policy_gradient_advantages():
    vs, pg = t5([0.99] * 4)
    np.testing.assert_allclose(vs, [1.664653, 0.615347, 0.611204, 2.099000], atol=1e-5)
    np.testing.assert_allclose(pg, [1.164653, 0.215347, 0.311204, 1.899000], atol=1e-5)
    # A terminal after t = 1 (gamma_1 = 0).
    vs, _ = t5([0.99, 0.0, 0.99, 0.99])
    np.testing.assert_allclose(vs, [1.004210, -0.020000, 0.611204, 2.099000], atol=1e-5)


def test_t7_retrace_targets_sampled_form():
    """Q(x_t, a_t) = [0.6, 0.2, 0.1, 0.5], Q(x_4, a_4) = 0.3 through Q = V + A − E_pi A."""
    logits = two_action_logits(PI)
    pi = softmax(logits)
    centred = logits[..., 0] - (pi * logits).sum(-1)  # A(a_t) − E_pi A
    q_taken = column([0.6, 0.2, 0.1, 0.5, 0.3])
    values = q_taken - centred
    actions = np.zeros((5, 1), int)

    def targets(pi_rows, mu_rows):
        args = (two_action_logits(pi_rows), values, actions, column(np.log(mu_rows)), column(R))
        _, stats, _, grad_v = gradients(ONLY["q"], *args, column([0.99] * 4))
        # d/dV_t of alpha mean ½ (Q̂_t − Q_t)² = 5 (Q_t − Q̂_t) / 4 (dQ/dV = 1)
        return q_taken[:4, 0] - 4 * grad_v[:4, 0] / 5

    np.testing.assert_allclose(targets(PI, MU), [1.576291, 0.563916, 1.274030, 2.297000], atol=1e-5)
    # On-policy (mu = pi, c = 1) the printed form is the n-step return bootstrapped on Q(x_4, a_4).
    np.testing.assert_allclose(targets(PI, PI), [2.248677, 1.261290, 1.274030, 2.297000], atol=1e-5)
    # --pg_advantage=retrace: Â_t = rho_t (Q̂_t − V(x_t)); on-policy rho = 1.
    hp = losses.LossHyperparameters(**{**vars(ONLY["pi"]), "pg_advantage": "retrace"})
    args = (two_action_logits(PI), values, actions, column(np.log(PI)), column(R))
    _, _, grad_a, _ = gradients(hp, *args, column([0.99] * 4))
    pg = -4 * grad_a[:4, 0, 0] / (5 * (1 - np.asarray(PI[:4])))
    n_step = np.array([2.248677, 1.261290, 1.274030, 2.297000])
    np.testing.assert_allclose(pg, n_step - values[:4, 0], atol=1e-5)


T1_LOGITS = np.array([[1.0, 0.0, -1.0], [0.0, 2.0, 0.0], [0.5, 0.5, 0.5]])
T1_PSI = {"eta": np.array([[1.0, 0.5, 10.0]]), "omega": np.array([[0.5, 0.3, 0.2]])}


def clipped_ratios(policy_logits, psi):
    """Each action a once (B = 3, T = 1) with r = 1, gamma = 0, V = 0: Â = min(rho_bar, pi/mu),
    read off the policy term's gradient. mu is the actor's mixture of psi (lbc/acting.py)."""
    etas, weights = acting.behaviour_mixture(psi)
    log_mu = policies.mixture_log_policy(T1_LOGITS[None], etas, weights).numpy()[0]
    actions = np.array([[0, 1, 2], [0, 0, 0]])
    logits = np.broadcast_to(policy_logits, (2, 3, 3))
    _, _, grad_a, grad_v = gradients(
        ONLY["pi"],
        logits,
        np.zeros((2, 3)),
        actions,
        log_mu[actions],
        np.ones((1, 3)),
        np.zeros((1, 3)),
    )
    assert not grad_v.any()  # Test 15: the policy term has no gradient into V
    pi = softmax(policy_logits)
    taken = grad_a[0, [0, 1, 2], [0, 1, 2]]
    return -3 * taken / (5 * (1 - pi))


def test_t8_each_policy_s_ratios_against_the_mixture():
    np.testing.assert_allclose(
        clipped_ratios(T1_LOGITS[0], T1_PSI), [1.05, 0.676296, 0.513684], atol=1e-5
    )
    np.testing.assert_allclose(
        clipped_ratios(T1_LOGITS[1], T1_PSI), [0.230101, 1.05, 0.607693], atol=1e-5
    )
    np.testing.assert_allclose(
        clipped_ratios(T1_LOGITS[2], T1_PSI), [0.720145, 0.921151, 1.05], atol=1e-5
    )
    # One-hot omega on policy i with tau_i = 1: learner i is on-policy, every ratio exactly 1.
    for i in range(3):
        psi = {"eta": np.array([[1.0, 1.0, 1.0]]), "omega": np.eye(3)[i][None]}
        np.testing.assert_allclose(clipped_ratios(T1_LOGITS[i], psi), [1.0, 1.0, 1.0], atol=1e-5)


def test_t15_policy_gradient_and_t8_dueling_head():
    """Â = 2 (r = 2, gamma = 0, V = 0, on-policy), A = [1, 2, 0], a = 0: the gradient of
    beta L_pi is −5 Â (1[b = a] − pi_b); Q = V + A − E_pi A with V = 0.5."""
    logits = np.array([[[1.0, 2.0, 0.0]]] * 2)
    log_mu = np.log(softmax(logits[0, 0]))[[0]][None]
    _, _, grad_a, _ = gradients(
        ONLY["pi"],
        logits,
        np.zeros((2, 1)),
        np.zeros((2, 1), int),
        np.repeat(log_mu, 2, 0),
        [[2.0]],
        [[0.0]],
    )
    np.testing.assert_allclose(grad_a[0, 0], [-7.552715, 6.652410, 0.900306], atol=1e-5)
    q = []
    for a in range(3):
        _, stats, _, _ = gradients(
            HP, logits, np.full((2, 1), 0.5), np.full((2, 1), a), np.zeros((2, 1)), [[0.0]], [[0.0]]
        )
        q.append(float(stats["value/q_taken"]))
    np.testing.assert_allclose(q, [-0.075210, 0.924790, -1.075210], atol=1e-5)


def numpy_policy_loss(hp, adv, v, a, log_mu, r, d, mask):
    """The loss from the sums (App. B.2 V-trace, B.3 Retrace as printed: tests/oracles.py's; the
    loss forms of docs/papers/lbc.md#departures-from-the-paper). Shapes [T+1, B, ...]."""
    pi = softmax(adv)
    q = v[..., None] + adv - (pi * adv).sum(-1, keepdims=True)
    ratio = np.take_along_axis(pi, a[..., None], -1)[..., 0] / np.exp(log_mu)
    log_rhos = np.log(ratio[:-1])
    rho_bar, c_bar = hp.clip_rho_threshold, hp.clip_c_threshold
    q_a = np.take_along_axis(q, a[..., None], -1)[..., 0]
    # V-trace: v_s = V_s + sum_t gamma^(t−s) (prod_{s<=i<t} c_i) rho_t delta_t, and its advantage.
    vs, pg = oracles.vtrace_sum(log_rhos, d, r, v[:-1], v[-1], rho_bar, rho_bar, c_bar)
    # Retrace: Q_s + sum_t gamma^(t−s) (prod_{s<i<=t} c_i) (r_t + gamma Q_{t+1}(a) − Q_t(a)).
    G = oracles.retrace_sum(q, pi, a, log_rhos, r, d, "sampled", 1.0, c_bar)
    log_pi = np.log(np.take_along_axis(pi, a[..., None], -1)[..., 0])[:-1]
    mean = lambda x: (x * mask).sum() / mask.sum()
    return (
        hp.v_loss_scale * mean(0.5 * (vs - v[:-1]) ** 2)
        + hp.q_loss_scale * mean(0.5 * (G - q_a[:-1]) ** 2)
        + hp.pi_loss_scale * mean(-pg * log_pi)
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_loss_equals_the_paper_s_sums(seed):
    rng = np.random.default_rng(seed)
    T, B, A = 5, 3, 4
    adv = rng.normal(size=(T + 1, B, A)).astype(np.float32)
    v = rng.normal(size=(T + 1, B)).astype(np.float32)
    a = rng.integers(0, A, (T + 1, B))
    log_mu = np.log(rng.uniform(0.1, 0.9, (T + 1, B))).astype(np.float32)
    r = rng.normal(size=(T, B)).astype(np.float32)
    d = (0.997 * (rng.uniform(size=(T, B)) > 0.2)).astype(np.float32)
    mask = np.ones((T, B), np.float32)
    mask[3:, 1] = 0.0
    loss, _, _, _ = gradients(HP, adv, v, a, log_mu, r, d, mask)
    expected = numpy_policy_loss(
        HP, *(x.astype(np.float64) for x in (adv, v)), a, log_mu, r, d, mask
    )
    assert float(loss) == pytest.approx(expected, rel=1e-4)

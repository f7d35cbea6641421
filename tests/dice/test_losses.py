"""DiCE's loss (dice/losses.py, common/burn_in/critics.py) against numpy sums written from the
paper: V-trace Eq. (4), Retrace Eq. (2) in both forms, the tau-free policy gradient Eq. (8), the
xi/alpha/beta assembly of Table 5 with masks (docs/papers/dice.md#worked-test-numbers, Tests 3,
9 and 10), and the limits."""

import numpy as np
import pytest
import tensorflow as tf

from common.burn_in import critics
from common.equations import instruments
from dice import losses
from tests import oracles

GAMMA = 0.997
HP = losses.LossHyperparameters(
    v_loss_scale=1.0,
    q_loss_scale=10.0,
    pi_loss_scale=10.0,
    entropy_cost=0.0,
    entropy_of="played",
    clip_rho_threshold=1.05,
    clip_c_threshold=1.05,
    retrace_form="sampled",
    q_centering="policy_mean",
)


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def numpy_vtrace(hp, adv, v, eta, a, log_mu, r, d):
    """pi, log rho and Eq. (4)'s v_s and advantage (tests/oracles.py's V-trace). Shapes
    [T+1, B, ...]."""
    pi = softmax(eta[..., None] * adv)
    ratio = np.take_along_axis(pi, a[..., None], -1)[..., 0] / np.exp(log_mu)
    log_rhos = np.log(ratio[:-1])
    # Eq. (4): v_s = V_s + sum_t (prod_{i<t} d_i c_i) rho_t delta_t, and its advantage.
    rho_bar, c_bar = hp.clip_rho_threshold, hp.clip_c_threshold
    vs, adv_pg = oracles.vtrace_sum(log_rhos, d, r, v[:-1], v[-1], rho_bar, rho_bar, c_bar)
    return pi, log_rhos, vs, adv_pg


def numpy_dice(hp, adv, v, eta, a, log_mu, r, d, mask):
    """Algorithm 3's loss from the sums (4) and (2) (tests/oracles.py's V-trace and Retrace).
    Shapes [T+1, B, ...]."""
    pi, log_rhos, vs, adv_pg = numpy_vtrace(hp, adv, v, eta, a, log_mu, r, d)
    centre = (pi * adv).sum(-1, keepdims=True) if hp.q_centering == "policy_mean" else 0.0
    q = v[..., None] + adv - centre
    q_a = np.take_along_axis(q, a[..., None], -1)[..., 0]
    c_bar = hp.clip_c_threshold
    # Eq. (2): Q_ret = Q_s(a_s) + sum_k (prod d c_{s+1..}) delta^Q, in hp.retrace_form.
    G = oracles.retrace_sum(q, pi, a, log_rhos, r, d, hp.retrace_form, 1.0, c_bar)
    onehot = np.eye(adv.shape[-1])[a[:-1]]
    l_pi = -adv_pg * ((onehot - pi[:-1]) * adv[:-1]).sum(-1)
    l_v = 0.5 * (vs - v[:-1]) ** 2
    l_q = 0.5 * (G - q_a[:-1]) ** 2
    mean = lambda x: (x * mask).sum() / mask.sum()
    return hp.v_loss_scale * mean(l_v) + hp.q_loss_scale * mean(l_q) + hp.pi_loss_scale * mean(l_pi)


def random_inputs(seed, T=5, B=3, A=4):
    """float32 inputs (common.equations.returns computes in float32)."""
    return [x.astype(np.float32) if x.dtype == np.float64 else x for x in _inputs(seed, T, B, A)]


def _inputs(seed, T, B, A):
    rng = np.random.default_rng(seed)
    adv = rng.normal(size=(T + 1, B, A))
    v = rng.normal(size=(T + 1, B))
    eta = rng.choice([0.0, 0.5, 2.0, 7.0], size=(T + 1, B))
    a = rng.integers(0, A, size=(T + 1, B))
    # mu: a perturbation of pi, so the ratios straddle the 1.05 clip.
    mu_all = softmax(eta[..., None] * adv + rng.normal(scale=0.5, size=adv.shape))
    log_mu = np.log(np.take_along_axis(mu_all, a[..., None], -1)[..., 0])
    r = rng.normal(size=(T, B))
    d = GAMMA * (rng.random((T, B)) > 0.2)
    mask = np.ones((T, B))
    mask[-2:, 0] = 0.0  # a sequence padded at its end
    return adv, v, eta, a, log_mu, r, d, mask


def tf_loss(hp, adv, v, eta, a, log_mu, r, d, mask):
    args = [tf.constant(x, tf.float32) for x in (adv, v, eta)]
    total, stats = losses.dice_loss(
        hp,
        *args,
        tf.constant(a, tf.int32),
        tf.constant(log_mu, tf.float32),
        tf.constant(r, tf.float32),
        tf.constant(d, tf.float32),
        tf.constant(mask, tf.float32),
    )
    return float(total), stats


@pytest.mark.parametrize("retrace_form", ["sampled", "expected"])
@pytest.mark.parametrize("q_centering", ["policy_mean", "none"])
@pytest.mark.parametrize("seed", [0, 1])
def test_total_loss_equals_the_papers_sums(retrace_form, q_centering, seed):
    import dataclasses

    hp = dataclasses.replace(HP, retrace_form=retrace_form, q_centering=q_centering)
    inputs = random_inputs(seed)
    total, stats = tf_loss(hp, *inputs)
    assert total == pytest.approx(numpy_dice(hp, *inputs), rel=1e-5)
    # Table 5 assembly: 1 L_V + 10 L_Q + 10 L_pi.
    assert total == pytest.approx(
        float(stats["loss/v"]) + 10 * float(stats["loss/q"]) + 10 * float(stats["loss/pi"]),
        rel=1e-5,
    )


def test_the_instruments_are_v_trace_s_error_and_pi_s_distance_from_mu():
    inputs = random_inputs(3)
    adv, v, eta, a, log_mu, r, d, mask = inputs
    _, stats = tf_loss(HP, *inputs)
    _, log_rhos, vs, _ = numpy_vtrace(HP, adv, v, eta, a, log_mu, r, d)
    mean = lambda x: (x * mask).sum() / mask.sum()  # noqa: E731
    assert float(stats[instruments.VALUE_ERROR]) == pytest.approx(
        mean((vs - v[:-1]) ** 2), rel=1e-5
    )
    assert float(stats[instruments.ABS_LOG_RHO]) == pytest.approx(mean(np.abs(log_rhos)), rel=1e-5)


def test_masked_steps_change_nothing_and_get_no_gradient():
    adv, v, eta, a, log_mu, r, d, mask = random_inputs(3)
    before, _ = tf_loss(HP, adv, v, eta, a, log_mu, r, d, mask)
    # Garbage in the masked steps (t = T-2, T-1 of sequence 0) and in their rewards: padding
    # gets discount 0 from discounts_from_resets, so cut the bootstrap into it as the learner does.
    d2 = d.copy()
    d2[-3:, 0] = 0.0
    base, _ = tf_loss(HP, adv, v, eta, a, log_mu, r, d2, mask)
    adv2, v2, r2 = adv.copy(), v.copy(), r.copy()
    adv2[-3:, 0] += 100.0
    v2[-3:, 0] -= 50.0
    r2[-2:, 0] = 1e3
    after, _ = tf_loss(HP, adv2, v2, eta, a, log_mu, r2, d2, mask)
    assert after == pytest.approx(base, rel=1e-6)
    assert before != pytest.approx(base)  # the cut itself matters: the test can fail
    adv_t, v_t = tf.Variable(adv), tf.Variable(v)
    with tf.GradientTape() as tape:
        total, _ = losses.dice_loss(
            HP, adv_t, v_t, eta, tf.constant(a, tf.int32), log_mu, r, d2, mask
        )
    g_adv, g_v = tape.gradient(total, [adv_t, v_t])
    assert np.all(g_adv.numpy()[-3:-1, 0] == 0) and np.all(g_v.numpy()[-3:-1, 0] == 0)
    assert np.any(g_adv.numpy()[:-3, 0] != 0)


def test_policy_gradient_is_the_tau_free_one():
    # docs/papers/dice.md#worked-test-numbers (Test 3): d L_pi / d A = -Â (e_a - pi); finite at
    # eta = 0.
    adv, v, eta, a, log_mu, r, d, mask = random_inputs(5, T=1, B=2)
    eta[0] = [0.0, 2.0]
    mask = np.ones_like(mask)
    hp = losses.LossHyperparameters(
        v_loss_scale=0.0,
        q_loss_scale=0.0,
        pi_loss_scale=1.0,
        entropy_cost=0.0,
        entropy_of="played",
        clip_rho_threshold=1.05,
        clip_c_threshold=1.05,
        retrace_form="sampled",
        q_centering="policy_mean",
    )
    adv_t = tf.Variable(adv)
    with tf.GradientTape() as tape:
        total, _ = losses.dice_loss(hp, adv_t, v, eta, tf.constant(a, tf.int32), log_mu, r, d, mask)
    grad = tape.gradient(total, adv_t).numpy()[0]  # [B, A] at t = 0
    pi = softmax(eta[0][:, None] * adv[0])
    ratio = pi[np.arange(2), a[0]] / np.exp(log_mu[0])
    rho = np.minimum(ratio, 1.05)
    adv_pg = rho * (r[0] + d[0] * v[1] - v[0])  # T = 1: v_1 is the bootstrap V
    expected = -adv_pg[:, None] * (np.eye(4)[a[0]] - pi) / 2  # mean over B = 2 steps
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(pi[0], 0.25, rtol=1e-6)  # eta = 0: uniform, and a finite gradient


def test_entropy_ablation_subtracts_the_target_policy_entropy():
    import dataclasses

    inputs = random_inputs(7)
    base, stats = tf_loss(HP, *inputs)
    with_entropy, _ = tf_loss(dataclasses.replace(HP, entropy_cost=1.0), *inputs)
    adv, _, eta, *_, mask = inputs
    pi = softmax(eta[..., None] * adv)[:-1]
    entropy = -(pi * np.log(pi)).sum(-1)
    assert float(stats["policy/entropy"]) == pytest.approx((entropy * mask).sum() / mask.sum())
    assert with_entropy == pytest.approx(base - float(stats["policy/entropy"]), rel=1e-5)


def test_entropy_of_tau_one_subtracts_the_entropy_of_softmax_a_whatever_eta():
    """entropy_of=tau_one regularises H[softmax(A)]: the same term, and the same gradient on A,
    for any eta the steps were played with; the played policy's entropy moves with eta."""
    import dataclasses

    hp = dataclasses.replace(HP, entropy_cost=1.0, entropy_of="tau_one")
    adv, v, eta, a, log_mu, r, d, mask = random_inputs(7)
    pi = softmax(adv)[:-1]
    expected = ((-(pi * np.log(pi)).sum(-1)) * mask).sum() / mask.sum()
    played, grads = [], []
    for scale in (1.0, 8.0):
        base, _ = tf_loss(HP, adv, v, eta * scale, a, log_mu, r, d, mask)
        total, stats = tf_loss(hp, adv, v, eta * scale, a, log_mu, r, d, mask)
        assert float(stats["policy/entropy_tau_one"]) == pytest.approx(expected, rel=1e-5)
        assert total == pytest.approx(base - expected, rel=1e-5)
        played.append(float(stats["policy/entropy"]))
        adv_t = tf.Variable(adv)
        with tf.GradientTape() as tape:
            _, stats = losses.dice_loss(
                hp, adv_t, v, eta * scale, tf.constant(a), log_mu, r, d, mask
            )
        grads.append(tape.gradient(stats["policy/entropy_tau_one"], adv_t).numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)
    assert np.abs(grads[0]).max() > 1e-3  # the term does pull on A
    assert played[0] != pytest.approx(played[1], rel=1e-3)


def test_dueling_q_centerings():
    v = tf.constant([1.0])
    adv = tf.constant([[1.0, 2.0, 0.5, -1.0]])
    pi = tf.nn.softmax(adv)
    q = critics.dueling_q(v, adv, pi, "policy_mean")
    assert float(tf.reduce_sum(pi * q)) == pytest.approx(1.0)  # E_pi Q = V (GDI Eq. (9))
    np.testing.assert_allclose(critics.dueling_q(v, adv, None, "none"), [[2.0, 3.0, 1.5, 0.0]])
    np.testing.assert_allclose(
        critics.dueling_q(v, adv, None, "uniform_mean"), [[1.375, 2.375, 0.875, -0.625]]
    )
    with pytest.raises(ValueError, match="centering must be one of"):
        critics.dueling_q(v, adv, pi, "max")


@pytest.mark.parametrize("centering", ["policy_mean", "policy_mean_grad"])
def test_policy_mean_centrings_differ_only_in_the_gradient_through_pi(centering):
    # Q_a = V + A_a − sum_j pi_j A_j with pi = softmax(A). Stopped at pi: dQ_a/dA_k = 1[a = k] −
    # pi_k. Through pi too: d(sum_j pi_j A_j)/dA_k = pi_k + pi_k (A_k − sum_j pi_j A_j).
    a_np = np.array([1.0, 2.0, 0.5, -1.0])
    pi_np = softmax(a_np)
    centre = (pi_np * a_np).sum()
    adv = tf.constant(a_np[None])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(adv)
        q = critics.dueling_q(tf.constant([1.0], tf.float64), adv, tf.nn.softmax(adv), centering)
        taken = q[0, 2]
    np.testing.assert_allclose(q[0], 1.0 + a_np - centre)
    expected = np.eye(4)[2] - pi_np
    if centering == "policy_mean_grad":
        expected -= pi_np * (a_np - centre)
    np.testing.assert_allclose(tape.gradient(taken, adv)[0], expected, rtol=1e-12)


def test_spec_worked_vtrace_and_retrace_numbers():
    # docs/papers/dice.md#worked-test-numbers (Tests 9 and 10) through common.burn_in.critics:
    # r = [1, 0, 2], gamma 0.997, c-bar 1.05.
    q = np.array([[0.6, 0.1], [0.3, 0.5], [0.2, 0.4], [0.1, 0.3]])[:, None]
    pi = np.array([[0.7, 0.3], [0.4, 0.6], [0.5, 0.5], [0.2, 0.8]])[:, None]
    a = np.array([0, 1, 1, 0])[:, None]
    ratios = np.array([0.8, 1.2, 1.0])[:, None]
    r = np.array([1.0, 0.0, 2.0])[:, None]
    d = np.full((3, 1), GAMMA)
    for form, expected in (
        ("sampled", [3.166552, 2.093401, 2.099700]),
        ("expected", [3.148913, 2.152742, 2.259220]),
    ):
        # V-trace on V = [0.5, 0.4, 0.3, 0.2] (test 9) rides along.
        out = critics.vtrace_retrace(
            tf.constant([[0.5], [0.4], [0.3], [0.2]], tf.float32),
            tf.constant(q, tf.float32),
            tf.constant(pi, tf.float32),
            tf.constant(a),
            tf.constant(np.log(ratios), tf.float32),
            tf.constant(r, tf.float32),
            tf.constant(d, tf.float32),
            1.05,
            1.05,
            form,
        )
        np.testing.assert_allclose(out.q_targets.numpy()[:, 0], expected, atol=1e-6)
        np.testing.assert_allclose(out.vs.numpy()[:, 0], [2.720476, 2.282442, 2.199400], atol=1e-6)
        np.testing.assert_allclose(
            out.pg_advantages.numpy()[:, 0], [2.220476, 1.882442, 1.899400], atol=1e-6
        )


def test_gradients_stay_finite_where_the_target_policy_underflows():
    """eta = 50 and advantage gaps of 10 make softmax(eta A) exactly 0 in float32 for the other
    actions; the loss, its gradients and the statistics must stay finite (with and without the
    entropy ablation), or one such step turns every weight into NaN."""
    import dataclasses

    adv, v, eta, a, log_mu, r, d, mask = random_inputs(11)
    adv = adv * 10.0
    eta[:] = 50.0
    log_mu[:] = -200.0  # a stale behaviour that gave the taken action almost no mass
    for hp in (
        HP,
        dataclasses.replace(HP, entropy_cost=1.0),
        dataclasses.replace(HP, entropy_cost=1.0, entropy_of="tau_one"),
    ):
        adv_t, v_t = tf.Variable(adv), tf.Variable(v)
        with tf.GradientTape() as tape:
            total, stats = losses.dice_loss(
                hp, adv_t, v_t, eta, tf.constant(a, tf.int32), log_mu, r, d, mask
            )
        grads = tape.gradient(total, [adv_t, v_t])
        assert np.isfinite(float(total))
        assert all(np.isfinite(g.numpy()).all() for g in grads)
        assert all(np.isfinite(float(value)) for value in stats.values())

"""GDI's behaviour family and loss (gdi/losses.py on common.equations.policies /
common.burn_in.critics) against the worked numbers of docs/papers/gdi.md#worked-test-numbers (Tests
1, 2, 4, 5 and 6) and numpy sums written from the paper: Eq. (2), Eqs. (3)-(4), the tau-free and
log-mixture policy gradients, the xi/alpha/beta assembly of Table 6 for GDI-I3 and GDI-H3, and the
limits (eps in {0, 1} is Boltzmann, 1/tau_1 = 0 with a large 1/tau_2 is eps-greedy, H3's policy loss
of set i reaches theta_i only)."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from common.burn_in import critics
from common.equations import policies
from dice import losses as dice_losses
from gdi import acting
from gdi import losses
from tests import oracles

GAMMA = 0.997
HP = losses.LossHyperparameters(
    v_loss_scale=1.0,
    q_loss_scale=10.0,
    pi_loss_scale=10.0,
    clip_rho_threshold=1.05,
    clip_c_threshold=1.05,
    retrace_form="sampled",
    q_centering="policy_mean",
    pg_mode="tau_free",
)
I3, H3 = (0, 0), (0, 1)


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def behaviour_policy(a1, a2, eta1, eta2, eps):
    """Eq. (2) in numpy: eps Softmax(eta1 A1) + (1 − eps) Softmax(eta2 A2)."""
    return eps * softmax(eta1 * np.asarray(a1)) + (1 - eps) * softmax(eta2 * np.asarray(a2))


def tf_policy(a1, a2, eta1, eta2, eps):
    """The same through the code the actor and learner run (lambda_mixture, mixture_policy)."""
    params = {"eta1": np.array([eta1]), "eta2": np.array([eta2]), "epsilon": np.array([eps])}
    etas, weights = acting.behaviour_mixture(params)
    logits = tf.constant([[a1, a2]], tf.float32)
    return policies.mixture_policy(logits, etas, weights).numpy()[0]


# ----------------------------------------------------------------------------- Tests 1, 2


def test_t1_behaviour_mixture_numbers():
    a = [1.0, 2.0, 3.0]
    expected = [0.067010, 0.174276, 0.758713]
    np.testing.assert_allclose(behaviour_policy(a, a, 0.5, 2.0, 0.3), expected, atol=1e-6)
    np.testing.assert_allclose(tf_policy(a, a, 0.5, 2.0, 0.3), expected, atol=1e-6)
    shifted = [x + 7.5 for x in a]  # per-state constants leave pi unchanged
    np.testing.assert_allclose(tf_policy(shifted, shifted, 0.5, 2.0, 0.3), expected, atol=1e-6)
    # Fixed selection [1, 0, 1] (Table 6) is Softmax(A).
    np.testing.assert_allclose(tf_policy(a, a, 1.0, 0.0, 1.0), softmax(np.array(a)), atol=1e-6)
    np.testing.assert_allclose(tf_policy(a, a, 1.0, 0.0, 1.0), [0.090031, 0.244728, 0.665241], 1e-5)
    # 1/tau_1 = 0 and a large 1/tau_2: eps-greedy, eps/|A| + (1 − eps) 1[argmax].
    greedy = tf_policy(a, a, 0.0, 1e4, 0.3)
    np.testing.assert_allclose(greedy, [0.1, 0.1, 0.8], atol=1e-6)
    np.testing.assert_allclose(
        greedy, policies.epsilon_greedy(tf.constant(a), 0.3).numpy(), atol=1e-6
    )
    # 1/tau = 0: uniform, no NaN.
    uniform = tf_policy(a, a, 0.0, 0.0, 0.3)
    assert np.all(np.isfinite(uniform))
    np.testing.assert_allclose(uniform, 1 / 3, atol=1e-7)
    # H3: two advantage heads.
    h3 = tf_policy([0.5, -0.2, 0.1], [1.0, 3.0, -1.0], 1.0, 0.5, 0.25)
    np.testing.assert_allclose(h3, [0.298918, 0.556223, 0.144859], atol=1e-6)
    assert h3.sum() == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("eps", [0.0, 1.0])
def test_eps_zero_or_one_is_a_boltzmann_policy(eps):
    a1, a2 = [0.5, -0.2, 0.1], [1.0, 3.0, -1.0]
    boltzmann = softmax(np.array(a1) * 1.5) if eps == 1.0 else softmax(np.array(a2) * 0.7)
    np.testing.assert_allclose(tf_policy(a1, a2, 1.5, 0.7, eps), boltzmann, atol=1e-6)


def test_t2_dueling_centring_under_the_mixture():
    a = np.array([1.0, 2.0, 3.0])
    pi = behaviour_policy(a, a, 0.5, 2.0, 0.3)
    q = critics.dueling_q(
        tf.constant([0.7], tf.float64), tf.constant([a]), tf.constant([pi]), "policy_mean"
    )
    np.testing.assert_allclose(q.numpy()[0], [-0.991703, 0.008297, 1.008297], atol=1e-5)
    assert float(np.sum(pi * q.numpy()[0])) == pytest.approx(0.7, abs=1e-6)  # E_pi Q = V


# ----------------------------------------------------------------------------- Tests 4, 5


def test_t4_t5_vtrace_retrace_numbers():
    """docs/papers/gdi.md#worked-test-numbers (Tests 4 and 5): gamma 0.9, r = [1, 0, 2],
    pi/mu = [1.2, 0.5, 1.0]."""
    v = tf.constant([[0.5], [0.4], [0.3], [0.2]])
    q_taken = np.array([0.6, 0.3, 0.5, 0.4])
    # Q(x_t, .) with Q(x_t, a_t) as given and E_pi Q = V (the munos numbers): two actions.
    q = np.stack([q_taken, 2 * np.array([0.5, 0.4, 0.3, 0.2]) - q_taken], -1)[:, None]
    pi = np.full((4, 1, 2), 0.5)
    a = np.zeros((4, 1), np.int32)
    log_rhos = np.log([[1.2], [0.5], [1.0]]).astype(np.float32)
    r = tf.constant([[1.0], [0.0], [2.0]])
    d = tf.fill([3, 1], 0.9)
    args = (tf.constant(q, tf.float32), tf.constant(pi, tf.float32), a, log_rhos, r, d)
    sampled = critics.vtrace_retrace(v, *args, 1.05, 1.05, "sampled")
    np.testing.assert_allclose(sampled.vs.numpy()[:, 0], [2.141045, 1.181, 2.18], atol=1e-5)
    np.testing.assert_allclose(
        sampled.pg_advantages.numpy()[:, 0], [1.641045, 0.781, 1.88], atol=1e-5
    )
    np.testing.assert_allclose(sampled.q_targets.numpy()[:, 0], [2.0908, 2.124, 2.36], atol=1e-5)
    munos = critics.vtrace_retrace(v, *args, 1.05, 1.05, "expected")
    np.testing.assert_allclose(munos.q_targets.numpy()[:, 0], [2.0269, 1.782, 2.18], atol=1e-5)


# ----------------------------------------------------------------------------- Test 6


def surrogate_gradient(pg_mode, a1, a2, etas, eps, action, advantages=(1.0, 1.0)):
    """d L_pi / d (A1, A2) of one step through `gdi.losses.PG_LOSSES`."""
    logits = tf.Variable([[a1, a2]], dtype=tf.float32)
    etas = tf.constant([etas], tf.float32)
    weights = tf.constant([[eps, 1 - eps]], tf.float32)
    with tf.GradientTape() as tape:
        loss = losses.PG_LOSSES[pg_mode](
            logits, etas, weights, tf.constant([action]), tf.constant([advantages])
        )
    return -tape.gradient(loss, logits).numpy()[0]  # the ascent direction, [2, A]


def grad_log_softmax(a, eta, action):
    """d log Softmax(eta A)[action] / dA = eta (e_a − pi)."""
    return eta * (np.eye(len(a))[action] - softmax(eta * np.array(a)))


def test_t6_tau_free_gradient_is_sum_of_w_tau_grad_log_pi():
    a1, a2, eta1, eta2, eps, action = [0.3, -1.0, 0.8], [1.0, 0.2, -0.4], 2.0, 0.5, 0.35, 2
    pi1, pi2 = softmax(eta1 * np.array(a1)), softmax(eta2 * np.array(a2))
    mix = eps * pi1[action] + (1 - eps) * pi2[action]
    w1, w2 = eps * pi1[action] / mix, (1 - eps) * pi2[action] / mix
    grad = surrogate_gradient("tau_free", a1, a2, [eta1, eta2], eps, action)
    np.testing.assert_allclose(grad[0], w1 / eta1 * grad_log_softmax(a1, eta1, action), 1e-5)
    np.testing.assert_allclose(grad[1], w2 / eta2 * grad_log_softmax(a2, eta2, action), 1e-5)
    # log_mixture: sum_i w_i grad log pi_i, which is autodiff of log pi_lambda(a).
    grad = surrogate_gradient("log_mixture", a1, a2, [eta1, eta2], eps, action)
    np.testing.assert_allclose(grad[0], w1 * grad_log_softmax(a1, eta1, action), 1e-5)
    np.testing.assert_allclose(grad[1], w2 * grad_log_softmax(a2, eta2, action), 1e-5)


def test_t6_log_mixture_is_autodiff_through_the_mixture_in_i3():
    a, etas, eps, action = [0.3, -1.0, 0.8], [2.0, 0.5], 0.35, 1
    logits = tf.Variable([a], dtype=tf.float32)
    with tf.GradientTape() as tape:
        log_mu = policies.mixture_log_policy(
            tf.stack([logits, logits], 1), tf.constant([etas]), tf.constant([[eps, 1 - eps]])
        )[0, action]
    autodiff = tape.gradient(log_mu, logits).numpy()[0]
    grad = surrogate_gradient("log_mixture", a, a, etas, eps, action)
    np.testing.assert_allclose(grad.sum(0), autodiff, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("eps", [0.0, 1.0])
@pytest.mark.parametrize("eta", [0.5, 1.0, 4.0])
def test_t6_tau_free_equals_dice_when_eps_is_zero_or_one(eps, eta):
    a, action, advantage = [0.3, -1.0, 0.8], 0, 1.7
    # The active component plays Softmax(eta A); the other one's eta is arbitrary.
    etas = [eta, 3.0] if eps == 1.0 else [3.0, eta]
    grad = surrogate_gradient("tau_free", a, a, etas, eps, action, (advantage, advantage)).sum(0)
    logits = tf.Variable([a], dtype=tf.float32)
    with tf.GradientTape() as tape:
        dice = policies.tau_free_policy_gradient_loss(
            logits, tf.constant([eta]), tf.constant([action]), tf.constant([advantage])
        )
    np.testing.assert_allclose(grad, -tape.gradient(dice, logits).numpy()[0], rtol=1e-5)
    # = tau grad log Softmax(A / tau)[a] = e_a − pi (DiCE Eq. (8)).
    np.testing.assert_allclose(grad, advantage * grad_log_softmax(a, eta, action) / eta, 1e-5)


def test_t6_tau_free_is_finite_at_eta_zero():
    grad = surrogate_gradient("tau_free", [0.3, -1.0, 0.8], [0.0] * 3, [0.0, 0.0], 1.0, 2)
    np.testing.assert_allclose(grad[0], np.eye(3)[2] - 1 / 3, rtol=1e-6)
    assert np.all(np.isfinite(grad))


# ----------------------------------------------------------------------------- the whole loss


def numpy_gdi(hp, advs, values, components, eta, eps, a, log_mu, rewards, d, mask):
    """The loss from the sums (Eqs. (3)-(4) as tests/oracles.py's sums, App. B's policy
    gradient, Table 6's weights; the reduction of docs/papers/gdi.md#departures-from-the-paper).
    advs/values/rewards: per network."""
    A = advs[0].shape[-1]
    comps = [softmax(eta[..., n, None] * advs[components[n]]) for n in range(2)]
    pi = eps[..., None] * comps[0] + (1 - eps[..., None]) * comps[1]
    ratio = np.take_along_axis(pi, a[..., None], -1)[..., 0] / np.exp(log_mu)
    log_rhos = np.log(ratio[:-1])
    rho_bar, c_bar = hp.clip_rho_threshold, hp.clip_c_threshold
    mean = lambda x: (x * mask).sum() / mask.sum()
    total, pg_advantages = 0.0, []
    for adv, v, r in zip(advs, values, rewards):
        q = v[..., None] + adv - (pi * adv).sum(-1, keepdims=True)
        q_a = np.take_along_axis(q, a[..., None], -1)[..., 0]
        # Eq. (4) and Eq. (3) (or Munos et al.'s form) as explicit sums.
        vs, pg = oracles.vtrace_sum(log_rhos, d, r, v[:-1], v[-1], rho_bar, rho_bar, c_bar)
        G = oracles.retrace_sum(q, pi, a, log_rhos, r, d, hp.retrace_form, 1.0, c_bar)
        pg_advantages.append(pg)
        total += hp.v_loss_scale * mean(0.5 * (vs - v[:-1]) ** 2)
        total += hp.q_loss_scale * mean(0.5 * (G - q_a[:-1]) ** 2)
    onehot = np.eye(A)[a[:-1]]
    weights = [eps, 1 - eps]
    pi_loss = 0.0
    for n in range(2):
        resp = weights[n][:-1] * (comps[n][:-1] * onehot).sum(-1) / (pi[:-1] * onehot).sum(-1)
        adv = advs[components[n]][:-1]
        if hp.pg_mode == "tau_free":
            ell = ((onehot - comps[n][:-1]) * adv).sum(-1)
        else:
            ell = np.log((comps[n][:-1] * onehot).sum(-1))
        pi_loss = pi_loss - pg_advantages[components[n]] * resp * ell
    return total + hp.pi_loss_scale * mean(pi_loss)


def random_inputs(seed, networks, T=5, B=3, A=4):
    rng = np.random.default_rng(seed)
    advs = [rng.normal(size=(T + 1, B, A)) for _ in range(networks)]
    values = [rng.normal(size=(T + 1, B)) for _ in range(networks)]
    eta = rng.choice([0.0, 0.5, 2.0, 7.0], size=(T + 1, B, 2))
    eps = rng.choice([0.0, 0.3, 0.8, 1.0], size=(T + 1, B))
    a = rng.integers(0, A, size=(T + 1, B))
    comps = [softmax(eta[..., n, None] * advs[min(n, networks - 1)]) for n in range(2)]
    mu_all = softmax(
        np.log(eps[..., None] * comps[0] + (1 - eps[..., None]) * comps[1])
        + rng.normal(scale=0.5, size=(T + 1, B, A))
    )  # a perturbation of pi, so the ratios straddle the 1.05 clip
    log_mu = np.log(np.take_along_axis(mu_all, a[..., None], -1)[..., 0])
    rewards = [rng.normal(size=(T, B)) for _ in range(networks)]
    d = GAMMA * (rng.random((T, B)) > 0.2)
    mask = np.ones((T, B))
    mask[-2:, 0] = 0.0  # a sequence padded at its end
    f32 = lambda x: np.float32(x)
    return dict(
        advs=[f32(x) for x in advs],
        values=[f32(x) for x in values],
        eta=f32(eta),
        eps=f32(eps),
        a=a,
        log_mu=f32(log_mu),
        rewards=[f32(x) for x in rewards],
        d=f32(d),
        mask=f32(mask),
    )


def tf_loss(hp, components, x, advs=None, values=None):
    etas, weights = losses.lambda_mixture(
        {"eta1": x["eta"][..., 0], "eta2": x["eta"][..., 1], "epsilon": x["eps"]}, np.stack
    )
    return losses.gdi_loss(
        hp,
        advs if advs is not None else [tf.constant(v) for v in x["advs"]],
        values if values is not None else [tf.constant(v) for v in x["values"]],
        components,
        tf.constant(etas),
        tf.constant(weights),
        tf.constant(x["a"], tf.int32),
        tf.constant(x["log_mu"]),
        [tf.constant(r) for r in x["rewards"]],
        tf.constant(x["d"]),
        tf.constant(x["mask"]),
    )


@pytest.mark.parametrize("components", [I3, H3], ids=["i3", "h3"])
@pytest.mark.parametrize("retrace_form", ["sampled", "expected"])
@pytest.mark.parametrize("pg_mode", ["tau_free", "log_mixture"])
def test_total_loss_equals_the_papers_sums(components, retrace_form, pg_mode):
    hp = dataclasses.replace(HP, retrace_form=retrace_form, pg_mode=pg_mode)
    x = random_inputs(len(components) + len(retrace_form), networks=max(components) + 1)
    total, stats = tf_loss(hp, components, x)
    expected = numpy_gdi(
        hp,
        x["advs"],
        x["values"],
        components,
        x["eta"],
        x["eps"],
        x["a"],
        x["log_mu"],
        x["rewards"],
        x["d"],
        x["mask"],
    )
    assert float(total) == pytest.approx(expected, rel=1e-4)
    # Table 6 assembly: sum_i (1 L_V^i + 10 L_Q^i) + 10 L_pi.
    parts = sum(
        float(stats[f"loss/v_{i}"]) + 10 * float(stats[f"loss/q_{i}"])
        for i in range(1, max(components) + 2)
    )
    assert float(total) == pytest.approx(parts + 10 * float(stats["loss/pi"]), rel=1e-5)


def test_i3_with_eps_one_is_dices_loss():
    """GDI's Boltzmann Selection (§4.3, Table 20) is DiCE's behaviour family: with eps = 1 the
    I3 loss is DiCE's."""
    x = random_inputs(11, networks=1)
    x["eps"][:] = 1.0
    total, _ = tf_loss(HP, I3, x)
    dice_hp = dice_losses.LossHyperparameters(
        **{f.name: getattr(HP, f.name) for f in dataclasses.fields(HP) if f.name != "pg_mode"},
        entropy_cost=0.0,
        entropy_of="played",
    )
    dice_total, _ = dice_losses.dice_loss(
        dice_hp,
        x["advs"][0],
        x["values"][0],
        x["eta"][..., 0],
        tf.constant(x["a"], tf.int32),
        x["log_mu"],
        x["rewards"][0],
        x["d"],
        x["mask"],
    )
    assert float(total) == pytest.approx(float(dice_total), rel=1e-5)


def test_h3_policy_loss_of_set_i_reaches_only_theta_i():
    """Algorithm 3 ("respectively"): with set 2's advantage zero, the policy loss moves A_1 only;
    with set 1's zero, A_2 only. Tape gradients of the whole loss with the critics switched off."""
    hp = dataclasses.replace(HP, v_loss_scale=0.0, q_loss_scale=0.0)
    for pg_mode in ("tau_free", "log_mixture"):
        for silent in (0, 1):
            x = random_inputs(5, networks=2)
            x["eps"][:] = 0.4  # both components active
            # V_i = 0 and r_i = 0 give Â_i = 0: set i has no policy-gradient signal.
            x["values"][silent][:] = 0.0
            x["rewards"][silent][:] = 0.0
            advs = [tf.Variable(v) for v in x["advs"]]
            with tf.GradientTape() as tape:
                total, _ = tf_loss(dataclasses.replace(hp, pg_mode=pg_mode), H3, x, advs=advs)
            grads = tape.gradient(total, advs)
            assert grads[silent] is None or np.all(grads[silent].numpy() == 0), pg_mode
            assert np.any(grads[1 - silent].numpy() != 0), pg_mode

"""Tests for common/equations/distributional.py against Reactor §3.2 (the projection, the n-step
distributional backup and Distributional Retrace) and the worked numbers of
docs/papers/reactor.md#worked-test-numbers.

Ground truths are tests/oracles.py's, written in numpy (float64) straight from the paper's sums:
the four-case kernel h_{z_i}(x) of §3.2, the literal triple sum over n, a and j of §3.2's
Distributional Retrace target, and the explicit truncated sum of Eq. (3) for scalar Retrace.
Test sequences are dicts of numpy arrays: pi, q over frames x_0..x_T and r, gamma, a,
mu = mu(a_t|x_t) over transitions; `library_args` maps them to the library's arguments,
`scalar_retrace` to the scalar Retrace oracle's.
"""

import numpy as np
import pytest
import tensorflow as tf

from common.equations.distributional import (
    categorical_cross_entropy,
    categorical_projection,
    distributional_retrace_target,
    make_support,
)
from tests import oracles


def scalar_retrace(q_values, seq, lam):
    """Retrace (expected form, c_bar = 1: Reactor Eq. (3) and (4)) of Q values [T+1, A] along one
    sequence dict, through tests/oracles.py."""
    a = np.asarray(seq["a"])
    pi_taken = np.asarray(seq["pi"])[np.arange(len(a)), a]
    actions = np.append(a, 0)  # a_T: not used by the expected form
    log_rhos = np.log(pi_taken / np.asarray(seq["mu"]))
    return oracles.retrace_sum(
        q_values, seq["pi"], actions, log_rhos, seq["r"], seq["gamma"], "expected", lam, 1.0
    )


def library_args(seq):
    """The library's arguments for a batched sequence dict (pi, q over x_0..x_T; r, gamma, a, mu [T,
    B])."""
    a = np.asarray(seq["a"])
    pi_taken = np.take_along_axis(np.asarray(seq["pi"])[:-1], a[..., None], -1)[..., 0]
    f32 = lambda x: np.asarray(x, np.float32)
    return dict(
        q_probs=f32(seq["q"]),
        target_probs=f32(seq["pi"]),
        actions=np.concatenate([a, np.zeros_like(a[:1])]),  # a_T: any action, it is not used
        log_rhos=f32(np.log(pi_taken) - np.log(seq["mu"])),
        rewards=f32(seq["r"]),
        discounts=f32(seq["gamma"]),
    )


def tf_target(seq, z, lam=1.0, fn=distributional_retrace_target):
    return fn(**library_args(seq), support=np.asarray(z, np.float32), lambda_=lam).numpy()


def unbatched(seq, b):
    return {k: v[:, b] for k, v in seq.items()}


def random_sequence(rng, T=6, B=3, A=3, N=9, terminal_prob=0.2, q=None):
    pi = rng.dirichlet(0.7 * np.ones(A), size=(T + 1, B))
    mu_all = rng.dirichlet(np.ones(A), size=(T, B))
    a = np.array([[rng.choice(A, p=mu_all[t, b]) for b in range(B)] for t in range(T)])
    mu = np.take_along_axis(mu_all, a[..., None], -1)[..., 0]
    gamma = np.where(rng.uniform(size=(T, B)) < terminal_prob, 0.0, 0.9)
    if q is None:
        q = rng.dirichlet(np.ones(N), size=(T + 1, B, A))
    return dict(r=rng.uniform(-1.5, 1.5, (T, B)), gamma=gamma, a=a, mu=mu, pi=pi, q=q)


def ratios(seq):
    pi_taken = np.take_along_axis(seq["pi"][:-1], seq["a"][..., None], -1)[..., 0]
    return (pi_taken / seq["mu"])[1:]  # rho_s for s = 1..T-1 (rho_0 is never used)


# Test-3 / Test-6 data of docs/papers/reactor.md#worked-test-numbers: T = 3, |A| = 2, gamma = 0.9,
# 11 atoms on [-5, 5].
TEST3_PI = np.array([(0.6, 0.4), (0.5, 0.5), (0.4, 0.6), (0.3, 0.7)])
TEST3_Q = np.array([(0.7, 0.0), (1.0, 2.0), (0.5, -1.0), (3.0, 1.0)])
GRID11 = np.arange(-5.0, 6.0)


def dirac(value, z=GRID11):
    return (z == value).astype(float)


def spec_test6_sequence(pi=TEST3_PI):
    q = np.zeros((4, 2, 11))
    q[1, 0] = dirac(1)
    q[1, 1] = 0.5 * dirac(1) + 0.5 * dirac(3)
    q[2, 0] = 0.5 * dirac(0) + 0.5 * dirac(1)
    q[2, 1] = dirac(-1)
    q[3, 0] = dirac(3)
    q[3, 1] = dirac(1)
    seq = dict(r=[1.0, 0.0, 2.0], gamma=[0.9] * 3, a=[0, 1, 0], mu=[0.5, 0.25, 0.8], pi=pi, q=q)
    return {k: np.asarray(v)[:, None] for k, v in seq.items()}  # add the batch axis


# ----------------------------------------------------------------------------------- support


def test_make_support_reactor_defaults():
    # docs/papers/reactor.md#worked-test-numbers (Test 1(a)); the defaults are C51's 51 atoms on
    # [-10, 10], our choice (docs/papers/reactor.md#departures-from-the-paper).
    z = make_support().numpy()
    assert z.shape == (51,) and z.dtype == np.float32
    np.testing.assert_allclose(z[1] - z[0], 0.4, atol=1e-6)
    np.testing.assert_allclose(z[[0, 1, 25, 50]], [-10.0, -9.6, 0.0, 10.0], atol=1e-6)
    np.testing.assert_allclose(np.diff(z), 0.4, atol=2e-6)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_atoms=1), "num_atoms"),
        (dict(num_atoms=5.0), "num_atoms"),
        (dict(v_min=1.0, v_max=1.0), "v_min"),
    ],
)
def test_make_support_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_support(**kwargs)


# -------------------------------------------------------------------------------- projection


def test_projection_single_diracs_worked_numbers():
    # docs/papers/reactor.md#worked-test-numbers (Test 1(b)): N = 5 on [-2, 2].
    z = make_support(5, -2.0, 2.0)
    xs = np.array([[0.3], [-1.5], [1.0], [3.7], [-5.0]], np.float32)
    out = categorical_projection(xs, np.ones_like(xs), z).numpy()
    np.testing.assert_allclose(
        out,
        [
            [0, 0, 0.7, 0.3, 0],
            [0.5, 0.5, 0, 0, 0],
            [0, 0, 0, 1, 0],
            [0, 0, 0, 0, 1],
            [1, 0, 0, 0, 0],
        ],
        atol=1e-6,
    )


def test_projection_matches_literal_kernel_on_random_inputs():
    rng = np.random.default_rng(0)
    z = np.linspace(-2.0, 2.0, 9)  # dz = 0.5
    values = rng.uniform(-3.5, 3.5, (4, 5, 12))
    values[0, :, :9] = z  # exactly on every atom, both ends included
    values[1, :, :3] = [-2.0, 2.0, -7.0]
    probs = rng.normal(size=values.shape)  # signed: the projection is linear
    assert (values < -2).any() and (values > 2).any()
    out = categorical_projection(
        values.astype(np.float32), probs.astype(np.float32), z.astype(np.float32)
    )
    expected = np.array(
        [
            [oracles.categorical_projection(v, p, z) for v, p in zip(vr, pr)]
            for vr, pr in zip(values, probs)
        ]
    )
    np.testing.assert_allclose(out.numpy(), expected, atol=1e-5)


def test_projection_preserves_mass_and_mean_and_clamps():
    rng = np.random.default_rng(1)
    z = make_support(11, -5.0, 5.0)
    probs = rng.dirichlet(np.ones(7), size=20).astype(np.float32)
    inside = rng.uniform(-5.0, 5.0, (20, 7)).astype(np.float32)
    out = categorical_projection(inside, probs, z).numpy()
    np.testing.assert_allclose(out.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(out @ z.numpy(), (probs * inside).sum(-1), atol=1e-5)
    assert (out >= 0).all()
    # Below v_min everything lands on z_0, above v_max on z_{N-1}, whatever the distance.
    low = categorical_projection(inside - 11.0, probs, z).numpy()
    high = categorical_projection(
        inside + 10.0 + rng.uniform(0, 1e3, (20, 7)).astype(np.float32), probs, z
    ).numpy()
    np.testing.assert_allclose(low, np.eye(11)[np.zeros(20, int)], atol=1e-6)
    np.testing.assert_allclose(high, np.eye(11)[np.full(20, 10)], atol=1e-6)
    # Signed masses: total mass still preserved.
    signed = rng.normal(size=(20, 7)).astype(np.float32)
    np.testing.assert_allclose(
        categorical_projection(inside, signed, z).numpy().sum(-1), signed.sum(-1), atol=1e-5
    )


def test_projection_is_identity_on_the_support():
    z = make_support()
    probs = np.random.default_rng(2).normal(size=(3, 51)).astype(np.float32)
    out = categorical_projection(tf.broadcast_to(z, probs.shape), probs, z)
    np.testing.assert_allclose(
        out.numpy(), probs, atol=1e-5
    )  # float32 rounding of 51 atoms on [-10, 10]


def test_projection_compiles_and_its_jacobian_is_the_kernel():
    # The projection is linear in the masses: d out_n / d probs_m = h_{z_n}(values_m), the
    # kernel the dense form builds; the two-atom scatter must give the same, compiled or not.
    rng = np.random.default_rng(3)
    z = make_support(11, -5.0, 5.0)
    values = rng.uniform(-6.0, 6.0, (3, 7)).astype(np.float32)
    values[0, :3] = [-5.0, 0.0, 5.0]  # on atoms, both ends included
    probs = tf.constant(rng.normal(size=(3, 7)).astype(np.float32))
    eager = categorical_projection(values, probs, z)
    compiled = tf.function(categorical_projection, jit_compile=True)(values, probs, z)
    np.testing.assert_allclose(compiled.numpy(), eager.numpy(), atol=1e-6)
    with tf.GradientTape() as tape:
        tape.watch(probs)
        out = categorical_projection(values, probs, z)
    jacobian = tape.batch_jacobian(out, probs).numpy()  # [3, N, M]
    kernel = np.array(
        [[oracles.categorical_projection([v], [1.0], z.numpy()) for v in row] for row in values]
    )  # [3, M, N]
    np.testing.assert_allclose(jacobian, kernel.transpose(0, 2, 1), atol=1e-6)


def test_projection_rejects_bad_support_and_shapes():
    with pytest.raises(ValueError, match="uniformly spaced"):
        categorical_projection([[0.0]], [[1.0]], [0.0, 1.0, 3.0])
    with pytest.raises(ValueError, match="increasing"):
        categorical_projection([[0.0]], [[1.0]], [1.0, 0.0, -1.0])
    with pytest.raises(ValueError, match="at least 2 atoms"):
        categorical_projection([[0.0]], [[1.0]], [0.0])
    with pytest.raises(ValueError, match="same shape"):
        categorical_projection(np.zeros((2, 3)), np.zeros((2, 4)), [0.0, 1.0])


def test_n_step_backup_worked_numbers():
    # docs/papers/reactor.md#worked-test-numbers (Test 2): gamma = 0.5, rewards (1, 0.5), n = 2,
    # q(x_{t+2}, a) uniform 0.2.
    z = make_support(5, -2.0, 2.0)
    backup_atoms = 1.0 + 0.5 * 0.5 + 0.25 * z  # G = 1.25, z^n = [0.75, 1.0, 1.25, 1.5, 1.75]
    out = categorical_projection(backup_atoms, tf.fill([5], 0.2), z).numpy()
    np.testing.assert_allclose(out, [0, 0, 0.05, 0.65, 0.30], atol=1e-6)
    np.testing.assert_allclose(out @ z.numpy(), 1.25 + 0.25 * 0.0, atol=1e-6)
    # The same backup through Distributional Retrace: pi deterministic on a_1 makes c_1 = 1 and
    # alpha_{1,.} = 0, leaving only the 2-step backup with the expected bootstrap (as in Test 4(b)).
    rng = np.random.default_rng(3)
    q = np.concatenate([rng.dirichlet(np.ones(5), size=(2, 1, 2)), np.full((1, 1, 2, 5), 0.2)])
    pi = np.array([[[0.5, 0.5]], [[1.0, 0.0]], [[0.3, 0.7]]])
    seq = dict(r=[[1.0], [0.5]], gamma=[[0.5], [0.5]], a=[[1], [0]], mu=[[0.4], [0.5]], pi=pi, q=q)
    np.testing.assert_allclose(tf_target(seq, z.numpy())[0, 0], [0, 0, 0.05, 0.65, 0.30], atol=1e-6)


# ---------------------------------------------------------------------- distributional Retrace


def test_numpy_ground_truths_reproduce_spec_numbers():
    # Guards the test's own ground truths: Test 3, Test 4(a) and Test 6 (t = 0) of
    # docs/papers/reactor.md#worked-test-numbers.
    s = unbatched(spec_test6_sequence(), 0)
    args = (s["r"], s["gamma"], s["a"], s["mu"], TEST3_PI)
    np.testing.assert_allclose(
        scalar_retrace(TEST3_Q, s, lam=1.0), [1.4167, 0.963, 3.44], atol=1e-6
    )
    np.testing.assert_allclose(scalar_retrace(TEST3_Q, s, lam=0.0), [2.35, -0.36, 3.44], atol=1e-6)
    np.testing.assert_allclose(
        oracles.distributional_retrace_sum(*args, s["q"], GRID11, lam=1.0)[0],
        [0, 0, 0, 0, 0, 0.486, 0.0795, 0.1845, 0.15285, -0.0239, 0.12105],
        atol=1e-9,
    )


def test_retrace_target_worked_numbers():
    # docs/papers/reactor.md#worked-test-numbers (Test 6; Test-3 data, 11 atoms on [-5, 5]).
    seq = spec_test6_sequence()
    target = tf_target(seq, GRID11)[:, 0]
    np.testing.assert_allclose(
        target[0], [0, 0, 0, 0, 0, 0.486, 0.0795, 0.1845, 0.15285, -0.0239, 0.12105], atol=1e-6
    )
    np.testing.assert_allclose(
        target[1], [0, 0, 0, 0, 0.54, 0.005, -0.045, 0.1365, 0.2135, 0.1155, 0.0345], atol=1e-6
    )
    np.testing.assert_allclose(
        target[2], 0.07 * dirac(2) + 0.63 * dirac(3) + 0.09 * dirac(4) + 0.21 * dirac(5), atol=1e-6
    )
    np.testing.assert_allclose(target.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(
        target @ GRID11, [1.4167, 0.963, 3.44], atol=1e-5
    )  # = Test 3's scalar Retrace
    # lambda = 0, t = 0: sum_a pi(a|x_1) Proj(r_0 + gamma Z(x_1, a)); Test 4(a) means (2.35, -0.36,
    # 3.44).
    target0 = tf_target(seq, GRID11, lam=0.0)[:, 0]
    np.testing.assert_allclose(
        target0[0], [0, 0, 0, 0, 0, 0, 0.075, 0.675, 0.075, 0.175, 0], atol=1e-6
    )
    np.testing.assert_allclose(target0 @ GRID11, [2.35, -0.36, 3.44], atol=1e-5)
    # Priority with a uniform prediction: sum_i |q*_i - 1/11| at t = 0.
    np.testing.assert_allclose(np.abs(target[0] - 1 / 11).sum(), 1.161527, atol=1e-5)
    # The exact form, not the "project every step" recursion (whose t = 0 mean is 1.39045).
    recursive = oracles.projected_recursion(
        *(unbatched(seq, 0)[k] for k in ("r", "gamma", "a", "mu", "pi", "q")), GRID11, 1.0
    )
    np.testing.assert_allclose(recursive[0] @ GRID11, 1.39045, atol=1e-5)
    assert abs(target[0] @ GRID11 - 1.39045) > 0.02


def test_retrace_target_matches_numpy_mixture_on_random_inputs():
    rng = np.random.default_rng(4)
    z = np.linspace(-2.0, 2.0, 9)  # narrow: many backups clip at the support ends
    seq = random_sequence(rng)
    assert (ratios(seq) < 1).any() and (ratios(seq) > 1).any()
    assert (seq["gamma"][:-1] == 0).any()  # an episode ends inside the sequence
    for lam in (1.0, 0.7):
        got = tf_target(seq, z, lam)
        expected = np.stack(
            [
                oracles.distributional_retrace_sum(
                    *(unbatched(seq, b)[k] for k in ("r", "gamma", "a", "mu", "pi", "q")), z, lam
                )
                for b in range(seq["r"].shape[1])
            ],
            axis=1,
        )
        np.testing.assert_allclose(got, expected, atol=2e-5)
        assert (got < -1e-3).any()  # negative target masses are kept, not clipped
        np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_retrace_target_mean_is_scalar_retrace_when_nothing_clips(seed):
    # docs/papers/reactor.md#worked-test-numbers (Test 6, property test): Sigma q* = 1 and
    # mean(q*) = Retrace on the means.
    rng = np.random.default_rng(seed)
    # |r| <= 4.5 and gamma <= 0.9 keep every backup within 0.9 * 60 + 4.5 < 60: nothing clips.
    wide, narrow = np.linspace(-60.0, 60.0, 17), np.linspace(-1.0, 1.0, 5)
    for one_atom in (False, True):  # general distributions, and Diracs on random atoms
        q = None
        if one_atom:
            q = np.eye(17)[rng.integers(0, 17, size=(7, 3, 4))]
        seq = random_sequence(rng, A=4, N=17, q=q)
        seq["r"] = 3.0 * seq["r"]
        target = tf_target(seq, wide)
        q_means = seq["q"] @ wide  # [T+1, B, A]
        for b in range(3):
            s = unbatched(seq, b)
            scalar = scalar_retrace(q_means[:, b], s, lam=1.0)
            np.testing.assert_allclose(target[:, b] @ wide, scalar, atol=1e-4, rtol=1e-5)
        np.testing.assert_allclose(target.sum(-1), 1.0, atol=1e-5)
    seq = random_sequence(rng, A=4, N=5)
    np.testing.assert_allclose(tf_target(seq, narrow).sum(-1), 1.0, atol=1e-5)


def test_lambda_zero_is_the_projected_one_step_expected_backup():
    # All c = 0 => q*_t = sum_a pi(a|x_{t+1}) Proj(r_t + gamma_t Z(x_{t+1}, a)) (the lambda = 0
    # case of Test 6, docs/papers/reactor.md#worked-test-numbers).
    rng = np.random.default_rng(8)
    z = np.linspace(-2.0, 2.0, 9)
    seq = random_sequence(rng)
    got = tf_target(seq, z, lam=0.0)
    T, B = seq["r"].shape
    for t in range(T):
        for b in range(B):
            masses = seq["pi"][t + 1, b] @ seq["q"][t + 1, b]
            expected = oracles.categorical_projection(
                seq["r"][t, b] + seq["gamma"][t, b] * z, masses, z
            )
            np.testing.assert_allclose(got[t, b], expected, atol=1e-5)


def test_deterministic_pi_on_taken_actions_gives_pure_n_step_backup():
    # docs/papers/reactor.md#worked-test-numbers (Test 4(b)), distributional form: c = 1 and the
    # intermediate distributions cancel.
    pi = TEST3_PI.copy()
    pi[1], pi[2] = (0.0, 1.0), (1.0, 0.0)
    seq = spec_test6_sequence(pi)
    target = tf_target(seq, GRID11)[0, 0]
    np.testing.assert_allclose(target @ GRID11, 3.7864, atol=1e-5)  # 1 + 0.81 * 2 + 0.729 * 1.6
    expected = oracles.categorical_projection(2.62 + 0.729 * GRID11, pi[3] @ seq["q"][3, 0], GRID11)
    np.testing.assert_allclose(target, expected, atol=1e-6)
    rng = np.random.default_rng(9)
    seq["q"][1:3] = rng.dirichlet(np.ones(11), size=(2, 1, 2))  # change q(x_1, .) and q(x_2, .)
    np.testing.assert_allclose(tf_target(seq, GRID11)[0, 0], target, atol=1e-6)


def test_alpha_is_non_negative_in_expectation_over_mu():
    # docs/papers/reactor.md#worked-test-numbers (Test 5) through the target:
    # pi(.|x_1) = (0.7, 0.2, 0.1), mu(.|x_1) = (0.2, 0.5, 0.3). q(x_1, a) is a Dirac on atom a and
    # q(x_2, .) on atom 4, with r = 0, gamma = 1, so atoms 0..2 of q*_0 are exactly alpha_{1,.} for
    # the sampled a_1. The batch holds a_1 = 0, 1, 2.
    pi_1, mu_1 = np.array([0.7, 0.2, 0.1]), np.array([0.2, 0.5, 0.3])
    q = np.zeros((3, 3, 3, 5))
    q[1, :, :, :3] = np.eye(3)
    q[2, :, :, 4] = 1.0
    seq = dict(
        r=np.zeros((2, 3)),
        gamma=np.ones((2, 3)),
        a=np.array([[0, 0, 0], [0, 1, 2]]),
        mu=np.array([[1.0] * 3, mu_1]),
        pi=np.broadcast_to(pi_1, (3, 3, 3)),
        q=q,
    )
    target = tf_target(seq, np.arange(5.0))[0]  # [a_1, atom]
    np.testing.assert_allclose(
        target[0, :3], [-0.3, 0.2, 0.1], atol=1e-6
    )  # a single sample is signed
    expected_over_mu = mu_1 @ target
    np.testing.assert_allclose(
        expected_over_mu[:3], pi_1 - np.minimum(mu_1, pi_1), atol=1e-6
    )  # (0.5, 0, 0)
    np.testing.assert_allclose(expected_over_mu[:3], [0.5, 0.0, 0.0], atol=1e-6)
    assert (expected_over_mu >= -1e-7).all()
    np.testing.assert_allclose(expected_over_mu.sum(), 1.0, atol=1e-6)


def test_terminal_step_target_is_the_projected_reward():
    # A terminal step (gamma_k = 0) cuts everything after step k, so q*_k = Proj(delta_{r_k}).
    rng = np.random.default_rng(10)
    z = np.linspace(-2.0, 2.0, 9)
    seq = random_sequence(rng, terminal_prob=0.0)
    seq["gamma"][2] = 0.0
    got = tf_target(seq, z)
    for b in range(3):
        np.testing.assert_allclose(
            got[2, b], oracles.categorical_projection([seq["r"][2, b]], [1.0], z), atol=1e-6
        )
    seq["q"][3:] = rng.dirichlet(np.ones(9), size=seq["q"][3:].shape[:-1])
    seq["r"][3:] = rng.uniform(-1, 1, seq["r"][3:].shape)
    np.testing.assert_allclose(
        tf_target(seq, z)[:3], got[:3], atol=1e-6
    )  # what follows the end is ignored


def test_retrace_target_rejects_bad_input():
    seq = spec_test6_sequence()
    with pytest.raises(ValueError, match="lambda_"):
        tf_target(seq, GRID11, lam=1.5)
    with pytest.raises(ValueError, match="atoms"):
        tf_target(seq, GRID11[:-1])
    bad = dict(seq, r=seq["r"][:, 0])
    with pytest.raises(ValueError, match="rewards must have rank 2"):
        tf_target(bad, GRID11)
    args = library_args(seq)
    with pytest.raises(
        ValueError, match="target_probs must have leading shape"
    ):  # batch 2 against 1
        distributional_retrace_target(
            **dict(args, target_probs=np.repeat(args["target_probs"], 2, 1)), support=GRID11
        )
    with pytest.raises(
        ValueError, match="q_probs must have leading shape"
    ):  # [T] rows instead of [T+1]
        distributional_retrace_target(**dict(args, q_probs=args["q_probs"][1:]), support=GRID11)
    with pytest.raises(ValueError, match="actions must be an integer"):
        distributional_retrace_target(
            **dict(args, actions=args["actions"].astype(np.float32)), support=GRID11
        )


# --------------------------------------------------------------------------------------- loss


def test_cross_entropy_worked_numbers_with_signed_target():
    # docs/papers/reactor.md#worked-test-numbers (Test 7): logits 0 (q uniform 1/11),
    # q* = Test 6 at t = 0.
    q_star = tf.constant(tf_target(spec_test6_sequence(), GRID11)[0, 0])
    logits = tf.Variable(tf.zeros(11))
    with tf.GradientTape() as tape:
        loss = categorical_cross_entropy(q_star, logits)
    grad = tape.gradient(loss, logits).numpy()
    np.testing.assert_allclose(loss.numpy(), np.log(11.0), atol=1e-6)
    np.testing.assert_allclose(
        grad, [0.09091] * 5 + [-0.39509, 0.01141, -0.09359, -0.06194, 0.11481, -0.03014], atol=1e-5
    )
    assert np.isfinite(grad).all()
    # Central finite differences of the library loss, at a non-trivial point.
    point = np.random.default_rng(11).normal(size=11)
    eps = 1e-2
    fd = [
        (
            categorical_cross_entropy(q_star, point + eps * e)
            - categorical_cross_entropy(q_star, point - eps * e)
        ).numpy()
        / (2 * eps)
        for e in np.eye(11)
    ]
    logits.assign(point.astype(np.float32))
    with tf.GradientTape() as tape:
        loss = categorical_cross_entropy(q_star, logits)
    np.testing.assert_allclose(tape.gradient(loss, logits).numpy(), fd, atol=1e-4)
    np.testing.assert_allclose(
        fd, tf.nn.softmax(point).numpy() - q_star.numpy(), atol=1e-4
    )  # Eq. (12)


def test_gradients_reach_only_the_predicted_logits():
    rng = np.random.default_rng(12)
    seq = random_sequence(rng)
    args = library_args(seq)
    inputs = {k: tf.Variable(v) for k, v in args.items() if k != "actions"}
    logits = tf.Variable(rng.normal(size=(6, 3, 9)).astype(np.float32))
    support = np.linspace(-2.0, 2.0, 9).astype(np.float32)
    with tf.GradientTape(persistent=True) as tape:
        target = distributional_retrace_target(**inputs, actions=args["actions"], support=support)
        loss = tf.reduce_sum(categorical_cross_entropy(target, logits))
        target_var = tf.Variable(target)
        loss_of_var = tf.reduce_sum(categorical_cross_entropy(target_var, logits))
    for name, var in inputs.items():
        assert tape.gradient(loss, var) is None, name
        assert tape.gradient(target, var) is None, name
    assert tape.gradient(loss_of_var, target_var) is None
    expected = tf.nn.softmax(logits) * tf.reduce_sum(target, -1, keepdims=True) - target  # Eq. (12)
    np.testing.assert_allclose(tape.gradient(loss, logits).numpy(), expected.numpy(), atol=1e-5)


def test_jit_compiled_equals_eager():
    rng = np.random.default_rng(13)
    z = np.linspace(-2.0, 2.0, 9).astype(np.float32)
    seq = random_sequence(rng)
    compiled = tf.function(distributional_retrace_target, jit_compile=True)
    for lam in (1.0, 0.5):
        np.testing.assert_allclose(
            tf_target(seq, z, lam, fn=compiled), tf_target(seq, z, lam), atol=1e-6
        )
    values = rng.uniform(-3, 3, (5, 4, 9)).astype(np.float32)
    probs = rng.normal(size=(5, 4, 9)).astype(np.float32)
    np.testing.assert_allclose(
        tf.function(categorical_projection, jit_compile=True)(values, probs, z).numpy(),
        categorical_projection(values, probs, z).numpy(),
        atol=1e-6,
    )
    target, logits = tf_target(seq, z), rng.normal(size=(6, 3, 9)).astype(np.float32)
    np.testing.assert_allclose(
        tf.function(categorical_cross_entropy, jit_compile=True)(target, logits).numpy(),
        categorical_cross_entropy(target, logits).numpy(),
        atol=1e-5,
    )

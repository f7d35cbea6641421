"""Tests for common/equations/returns.py.

Ground truths are the slow numpy loops of tests/oracles.py, written from the papers' sums (IMPALA
Eq. (1) and (2), Reactor Eq. (3) and its n-step mixture, DiCE Eq. (2), the n-step and
lambda-return sums), never from the backward recursions the library uses. Hand-worked numbers
name their test number in docs/papers/<paper>.md#worked-test-numbers. TF runs in float32, so
comparisons use atol = rtol = 1e-5.
"""

import zlib

import numpy as np
import pytest
import tensorflow as tf

from common.settings import config
from common.equations import returns
from tests import oracles

TOL = dict(atol=1e-5, rtol=1e-5)


def random_unroll(seed, shape, num_actions=None):
    """Random inputs whose ratios cross every clip level used below and whose discounts hold
    episode ends (zeros) in the middle of the unroll."""
    rng = np.random.default_rng(seed)
    T = shape[0]
    data = dict(
        log_rhos=rng.normal(0.0, 2.0, shape),
        discounts=np.where(rng.random(shape) < 0.2, 0.0, 0.99),
        rewards=rng.normal(size=shape),
        values=rng.normal(size=shape),
        bootstrap=rng.normal(size=shape[1:]),
    )
    if T >= 3:
        data["discounts"][T // 2].flat[0] = 0.0
    if num_actions is not None:
        data["q_values"] = rng.normal(size=(T + 1,) + shape[1:] + (num_actions,))
        logits = rng.normal(0.0, 2.0, (T + 1,) + shape[1:] + (num_actions,))
        data["target_probs"] = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        data["actions"] = rng.integers(0, num_actions, (T + 1,) + shape[1:])
    return data


def _seed(*params):
    """A different but reproducible seed for each parametrisation."""
    return zlib.crc32(repr(params).encode())


SHAPES = [(1, 1), (7, 5), (20, 3), (5, 2, 3)]


def _assert_ratios_cross(log_rhos, *thresholds):
    """Guards the random tests' claim that they exercise both sides of every clip level."""
    ratios = np.exp(log_rhos)
    for threshold in thresholds:
        if threshold is not None and ratios.size >= 15:
            assert (ratios < threshold).any() and (ratios > threshold).any()


# --------------------------------------------------------------------------------------------
# V-trace
# --------------------------------------------------------------------------------------------

# The common fixture of docs/papers/impala.md#worked-test-numbers: T = 3, gamma = 0.9.
IMPALA_FIXTURE = dict(
    discounts=[0.9, 0.9, 0.9], rewards=[1.0, 2.0, 3.0], values=[0.5, 1.0, 1.5], bootstrap_value=2.0
)
IMPALA_OFF_POLICY = np.log([2.0, 0.5, 1.5])  # docs/papers/impala.md#worked-test-numbers (Test 2)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "rho_bar, pg_rho_bar, c_bar",
    [(1.0, 1.0, 1.0), (2.0, 1.5, 1.0), (10.0, 10.0, 0.5), (1.05, 1.05, 1.05), (None, None, None)],
)
@pytest.mark.parametrize("lam", [1.0, 0.7])
def test_vtrace_equals_eq1_sum(shape, rho_bar, pg_rho_bar, c_bar, lam):
    # docs/papers/impala.md#worked-test-numbers (Test 4, and the (inf, inf) "no truncation" case
    # of Test 6).
    d = random_unroll(_seed(shape, rho_bar, pg_rho_bar, c_bar, lam), shape)
    _assert_ratios_cross(d["log_rhos"], rho_bar, pg_rho_bar, c_bar)
    expected_vs, expected_adv = oracles.vtrace_sum(
        d["log_rhos"],
        d["discounts"],
        d["rewards"],
        d["values"],
        d["bootstrap"],
        rho_bar,
        pg_rho_bar,
        c_bar,
        lam,
    )
    vs, adv = returns.vtrace(
        d["log_rhos"],
        d["discounts"],
        d["rewards"],
        d["values"],
        d["bootstrap"],
        clip_rho_threshold=rho_bar,
        clip_pg_rho_threshold=pg_rho_bar,
        clip_c_threshold=c_bar,
        lambda_=lam,
    )
    assert vs.shape == shape and vs.dtype == tf.float32
    np.testing.assert_allclose(vs, expected_vs, **TOL)
    np.testing.assert_allclose(adv, expected_adv, **TOL)


@pytest.mark.parametrize("rho_bar, c_bar", [(1.05, 1.05), (1.0, 0.5), (1e9, 1e9)])
def test_vtrace_fixed_point_is_the_value_of_pi_tilde(rho_bar, c_bar):
    """docs/papers/dice.md#worked-test-numbers (Test 11), IMPALA Theorem 1, through
    `returns.vtrace`: on a random 3-state, 2-action MDP, the expected 3-step V-trace operator (our
    targets averaged over every action and state path under mu) iterated from 0 converges to V of
    pi~ = min(rho_bar mu, pi) / sum(...) (for huge clips, V of pi)."""
    rng = np.random.default_rng(0)
    S, A, T, gamma = 3, 2, 3, 0.9
    P = rng.dirichlet(np.ones(S), size=(S, A))  # P[s, a, s']
    R = rng.normal(size=(S, A))
    pi, mu = rng.dirichlet(np.ones(A), size=S), rng.dirichlet(np.ones(A), size=S)
    # Closed form of DiCE's Test 11 first: pi = (0.9, 0.1), mu = (0.5, 0.5), rho_bar 1.05.
    clipped = np.minimum(1.05 * np.array([0.5, 0.5]), [0.9, 0.1])
    np.testing.assert_allclose(clipped / clipped.sum(), [0.84, 0.16])
    tilde = np.minimum(rho_bar * mu, pi)
    tilde /= tilde.sum(1, keepdims=True)
    P_t = np.einsum("sa,sat->st", tilde, P)
    v_tilde = np.linalg.solve(np.eye(S) - gamma * P_t, np.einsum("sa,sa->s", tilde, R))
    # Every path (s_0, a_0, s_1, a_1, s_2, a_2, s_3) with its probability under mu.
    paths, weights = [], []
    for s0 in range(S):
        for rest in np.ndindex(*([A, S] * T)):
            states = [s0, *rest[1::2]]
            actions = list(rest[0::2])
            w = 1.0
            for t in range(T):
                w *= mu[states[t], actions[t]] * P[states[t], actions[t], states[t + 1]]
            paths.append((states, actions))
            weights.append(w)
    states = np.array([p[0] for p in paths]).T  # [T+1, N]
    actions = np.array([p[1] for p in paths]).T  # [T, N]
    weights = np.array(weights)
    log_rhos = np.log(pi[states[:-1], actions] / mu[states[:-1], actions])
    rewards = R[states[:-1], actions]
    v = np.zeros(S)
    for _ in range(300):
        targets = returns.vtrace(
            log_rhos,
            np.full(rewards.shape, gamma),
            rewards,
            v[states[:-1]],
            v[states[-1]],
            clip_rho_threshold=rho_bar,
            clip_pg_rho_threshold=rho_bar,
            clip_c_threshold=c_bar,
        ).vs.numpy()[0]
        v = np.array([np.sum((weights * targets)[states[0] == s]) for s in range(S)])
    np.testing.assert_allclose(v, v_tilde, atol=2e-4)
    if rho_bar > 1e6:  # untruncated: the value of pi itself
        P_pi = np.einsum("sa,sat->st", pi, P)
        v_pi = np.linalg.solve(np.eye(S) - gamma * P_pi, np.einsum("sa,sa->s", pi, R))
        np.testing.assert_allclose(v, v_pi, atol=2e-4)


@pytest.mark.parametrize("rho_bar, c_bar", [(1.0, 1.0), (5.0, 2.0)])
def test_vtrace_impala_t1_on_policy(rho_bar, c_bar):
    # docs/papers/impala.md#worked-test-numbers (Test 1): Eq. (2), also with clip levels above 1.
    vs, adv = returns.vtrace(
        [0.0, 0.0, 0.0],
        **IMPALA_FIXTURE,
        clip_rho_threshold=rho_bar,
        clip_pg_rho_threshold=rho_bar,
        clip_c_threshold=c_bar,
    )
    np.testing.assert_allclose(vs, [6.688, 6.32, 4.8], **TOL)
    np.testing.assert_allclose(adv, [6.188, 5.32, 3.3], **TOL)


def test_vtrace_impala_t2_off_policy():
    # docs/papers/impala.md#worked-test-numbers (Test 2): rho = c = [1, 0.5, 1].
    vs, adv = returns.vtrace(IMPALA_OFF_POLICY, **IMPALA_FIXTURE)
    np.testing.assert_allclose(vs, [4.294, 3.66, 4.8], **TOL)
    np.testing.assert_allclose(adv, [3.794, 2.66, 3.3], **TOL)


def test_vtrace_impala_t3_rho_bar_differs_from_c_bar():
    # docs/papers/impala.md#worked-test-numbers (Test 3): rho_bar = 2, c_bar = 1; swapping the roles
    # changes these numbers.
    vs, adv = returns.vtrace(
        IMPALA_OFF_POLICY,
        **IMPALA_FIXTURE,
        clip_rho_threshold=2.0,
        clip_pg_rho_threshold=2.0,
        clip_c_threshold=1.0,
    )
    np.testing.assert_allclose(vs, [6.36225, 4.4025, 6.45], **TOL)
    np.testing.assert_allclose(adv, [8.9245, 3.4025, 4.95], **TOL)


def test_vtrace_impala_t5_episode_end_cuts_the_trace():
    # docs/papers/impala.md#worked-test-numbers (Test 5): discounts [0.9, 0, 0.9].
    inputs = dict(IMPALA_FIXTURE, discounts=[0.9, 0.0, 0.9])
    vs, adv = returns.vtrace(IMPALA_OFF_POLICY, **inputs)
    np.testing.assert_allclose(vs, [2.35, 1.5, 4.8], **TOL)
    np.testing.assert_allclose(adv, [1.85, 0.5, 3.3], **TOL)
    # What lies after the episode end cannot reach the steps before it: bit-identical.
    perturbed = dict(inputs, rewards=[1.0, 2.0, -7.0], values=[0.5, 1.0, 9.0], bootstrap_value=-3.0)
    vs2, adv2 = returns.vtrace(IMPALA_OFF_POLICY, **perturbed)
    np.testing.assert_array_equal(vs2[:2], vs[:2])
    np.testing.assert_array_equal(adv2[:2], adv[:2])
    assert not np.allclose(vs2[2], vs[2])


def test_vtrace_impala_t6_limits():
    # docs/papers/impala.md#worked-test-numbers (Test 6): c_bar = 0 is one-step V-trace,
    # vs = V + delta.
    vs, adv = returns.vtrace(IMPALA_OFF_POLICY, **IMPALA_FIXTURE, clip_c_threshold=0.0)
    np.testing.assert_allclose(vs, [1.9, 2.175, 4.8], **TOL)
    np.testing.assert_allclose(adv, [2.4575, 2.66, 3.3], **TOL)
    # Test 6: lambda = 0.5 on-policy is the bootstrapped lambda-return (Remark 2).
    vs, _ = returns.vtrace([0.0, 0.0, 0.0], **IMPALA_FIXTURE, lambda_=0.5)
    np.testing.assert_allclose(vs, [3.62575, 4.835, 4.8], **TOL)


VTRACE_SPEC_CASES = {
    # docs/papers/dice.md#worked-test-numbers (Test 9): gamma = 0.997, ratios [0.8, 1.2, 1.0],
    # rho_bar = c_bar = 1.05.
    "dice_9": dict(
        ratios=[0.8, 1.2, 1.0],
        discount=0.997,
        rewards=[1, 0, 2],
        values=[0.5, 0.4, 0.3],
        bootstrap_value=0.2,
        vs=[2.720476, 2.282442, 2.199400],
        adv=[2.220476, 1.882442, 1.899400],
    ),
    # docs/papers/gdi.md#worked-test-numbers (Test 4).
    "gdi_T4": dict(
        ratios=[1.2, 0.5, 1.0],
        discount=0.9,
        rewards=[1, 0, 2],
        values=[0.5, 0.4, 0.3],
        bootstrap_value=0.2,
        vs=[2.141045, 1.181, 2.18],
        adv=[1.641045, 0.781, 1.88],
    ),
    # docs/papers/lbc.md#worked-test-numbers (Test 5): ratios pi/mu = [0.5/0.4, 0.9/0.3, 0.2/0.5,
    # 0.6/0.6].
    "lbc_T5": dict(
        ratios=[0.5 / 0.4, 0.9 / 0.3, 0.2 / 0.5, 0.6 / 0.6],
        discount=0.99,
        rewards=[1, 0, -1, 2],
        values=[0.5, 0.4, 0.3, 0.2],
        bootstrap_value=0.1,
        vs=[1.664653, 0.615347, 0.611204, 2.099000],
        adv=[1.164653, 0.215347, 0.311204, 1.899000],
    ),
}


@pytest.mark.parametrize("case", VTRACE_SPEC_CASES)
def test_vtrace_spec_numbers_with_clip_1_05(case):
    c = VTRACE_SPEC_CASES[case]
    vs, adv = returns.vtrace(
        np.log(c["ratios"]),
        [c["discount"]] * len(c["rewards"]),
        c["rewards"],
        c["values"],
        c["bootstrap_value"],
        clip_rho_threshold=1.05,
        clip_pg_rho_threshold=1.05,
        clip_c_threshold=1.05,
    )
    np.testing.assert_allclose(vs, c["vs"], **TOL)
    np.testing.assert_allclose(adv, c["adv"], **TOL)


def test_vtrace_spec_on_policy_and_terminal_numbers():
    # docs/papers/dice.md#worked-test-numbers (Test 9): on-policy v_0 is the 3-step return 3.186223.
    vs, _ = returns.vtrace([0.0] * 3, [0.997] * 3, [1, 0, 2], [0.5, 0.4, 0.3], 0.2)
    np.testing.assert_allclose(vs[0], 3.186223, **TOL)
    # docs/papers/gdi.md#worked-test-numbers (Test 4): with all ratios 1, vs is the n-step return.
    vs, _ = returns.vtrace([0.0] * 3, [0.9] * 3, [1, 0, 2], [0.5, 0.4, 0.3], 0.2)
    np.testing.assert_allclose(vs, [2.7658, 1.962, 2.18], **TOL)
    # docs/papers/lbc.md#worked-test-numbers (Test 5): on-policy, and a terminal after t = 1.
    lbc = dict(rewards=[1, 0, -1, 2], values=[0.5, 0.4, 0.3, 0.2], bootstrap_value=0.1)
    vs, _ = returns.vtrace([0.0] * 4, [0.99] * 4, **lbc)
    np.testing.assert_allclose(vs, [2.056558, 1.067230, 1.078010, 2.099000], **TOL)
    ratios = np.log([0.5 / 0.4, 0.9 / 0.3, 0.2 / 0.5, 1.0])
    clips = dict(clip_rho_threshold=1.05, clip_pg_rho_threshold=1.05, clip_c_threshold=1.05)
    vs, _ = returns.vtrace(ratios, [0.99, 0.0, 0.99, 0.99], **lbc, **clips)
    np.testing.assert_allclose(vs, [1.004210, -0.020000, 0.611204, 2.099000], **TOL)


@pytest.mark.parametrize("shape", SHAPES)
def test_on_policy_vtrace_is_the_n_step_return(shape):
    # IMPALA Eq. (2): pi = mu and c_bar >= 1 give the n-step Bellman target of the remaining tail.
    d = random_unroll(1, shape)
    vs, adv = returns.vtrace(
        np.zeros(shape),
        d["discounts"],
        d["rewards"],
        d["values"],
        d["bootstrap"],
        clip_rho_threshold=2.0,
        clip_pg_rho_threshold=2.0,
        clip_c_threshold=1.0,
    )
    values_tp1 = oracles.next_step(d["values"], d["bootstrap"])
    expected = oracles.n_step_sum(d["rewards"], d["discounts"], values_tp1, shape[0])
    np.testing.assert_allclose(vs, expected, **TOL)
    # The advantage is q_s - V(x_s) with q_s = r_s + gamma_s v_{s+1}.
    q = d["rewards"] + d["discounts"] * oracles.next_step(vs.numpy(), d["bootstrap"])
    np.testing.assert_allclose(adv, q - d["values"], **TOL)


@pytest.mark.parametrize("lam", [0.0, 0.3, 0.9])
def test_on_policy_vtrace_with_lambda_is_the_lambda_return(lam):
    # IMPALA Remark 2.
    d = random_unroll(2, (9, 4))
    vs, _ = returns.vtrace(
        np.zeros((9, 4)), d["discounts"], d["rewards"], d["values"], d["bootstrap"], lambda_=lam
    )
    expected = oracles.lambda_return_sum(
        d["rewards"], d["discounts"], d["values"], d["bootstrap"], lam
    )
    np.testing.assert_allclose(vs, expected, **TOL)


# --------------------------------------------------------------------------------------------
# Retrace
# --------------------------------------------------------------------------------------------


RETRACE_ARGS = ("q_values", "target_probs", "actions", "log_rhos", "rewards", "discounts")


def _retrace(d, **kwargs):
    return returns.retrace(*[d[k] for k in RETRACE_ARGS], **kwargs).numpy()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("form", returns.RETRACE_FORMS)
@pytest.mark.parametrize("c_bar, lam", [(1.0, 1.0), (1.05, 1.0), (0.5, 0.8), (None, 1.0)])
def test_retrace_equals_eq3_sum(shape, form, c_bar, lam):
    d = random_unroll(_seed(shape, form, c_bar, lam), shape, num_actions=3)
    _assert_ratios_cross(d["log_rhos"], c_bar)
    args = [d[k] for k in RETRACE_ARGS]
    targets = _retrace(d, form=form, lambda_=lam, clip_c_threshold=c_bar)
    assert targets.shape == shape
    np.testing.assert_allclose(targets, oracles.retrace_sum(*args, form, lam, c_bar), **TOL)
    if form == "expected":
        # Reactor §3.2: the same target as a (signed) mixture of n-step backups.
        np.testing.assert_allclose(targets, oracles.retrace_mixture(*args, lam, c_bar), **TOL)


# Test 3 data of docs/papers/reactor.md#worked-test-numbers: T = 3, |A| = 2, gamma = 0.9.
REACTOR_TEST3 = dict(
    q_values=np.array([[0.7, 0.0], [1.0, 2.0], [0.5, -1.0], [3.0, 1.0]])[:, None],
    target_probs=np.array([[0.6, 0.4], [0.5, 0.5], [0.4, 0.6], [0.3, 0.7]])[:, None],
    actions=np.array([0, 1, 0, 0])[:, None],  # a_3 is not used by the expected form
    behaviour_taken=np.array([0.5, 0.25, 0.8])[:, None],
    rewards=np.array([1.0, 0.0, 2.0])[:, None],
    discounts=np.full((3, 1), 0.9),
)


def _reactor_retrace(data, **kwargs):
    pi_taken = np.take_along_axis(data["target_probs"][:-1], data["actions"][:-1, :, None], -1)
    log_rhos = np.log(pi_taken[..., 0] / data["behaviour_taken"])
    d = dict(data, log_rhos=log_rhos)
    return _retrace(d, form="expected", **kwargs)[:, 0]


def test_retrace_reactor_test3():
    # docs/papers/reactor.md#worked-test-numbers (Test 3): rho_1 = 2 -> c_1 = 1,
    # rho_2 = 0.5 -> c_2 = 0.5.
    np.testing.assert_allclose(_reactor_retrace(REACTOR_TEST3), [1.4167, 0.963, 3.44], **TOL)


def test_retrace_reactor_test4_limits():
    # docs/papers/reactor.md#worked-test-numbers (Test 4(a)): lambda = 0 is one-step
    # expected SARSA.
    targets = _reactor_retrace(REACTOR_TEST3, lambda_=0.0)
    np.testing.assert_allclose(targets, [2.35, -0.36, 3.44], **TOL)
    # (b) pi deterministic on the taken actions: c = 1 and the intermediate Q values cancel.
    probs = REACTOR_TEST3["target_probs"].copy()
    probs[1, 0], probs[2, 0] = [0.0, 1.0], [1.0, 0.0]
    data = dict(REACTOR_TEST3, target_probs=probs)
    np.testing.assert_allclose(_reactor_retrace(data)[0], 3.7864, **TOL)
    q = data["q_values"].copy()
    q[1, 0], q[2, 0] = [10.0, -7.0], [4.0, 4.0]
    np.testing.assert_allclose(_reactor_retrace(dict(data, q_values=q))[0], 3.7864, **TOL)


# Test 10 data of docs/papers/dice.md#worked-test-numbers: gamma = 0.997, c_bar = 1.05.
DICE_TEST10 = dict(
    q_values=np.array([[0.6, 0.1], [0.3, 0.5], [0.2, 0.4], [0.1, 0.3]])[:, None],
    target_probs=np.array([[0.7, 0.3], [0.4, 0.6], [0.5, 0.5], [0.2, 0.8]])[:, None],
    actions=np.array([0, 1, 1, 0])[:, None],
    log_rhos=np.log([0.8, 1.2, 1.0])[:, None],
    rewards=np.array([1.0, 0.0, 2.0])[:, None],
    discounts=np.full((3, 1), 0.997),
)


@pytest.mark.parametrize(
    "form, expected",
    [("sampled", [3.166552, 2.093401, 2.099700]), ("expected", [3.148913, 2.152742, 2.259220])],
)
def test_retrace_dice_test10(form, expected):
    # docs/papers/dice.md#worked-test-numbers (Test 10): the paper's (sampled) form of DiCE Eq. (2)
    # and the Munos (expected) form.
    targets = _retrace(DICE_TEST10, form=form, clip_c_threshold=1.05)[:, 0]
    np.testing.assert_allclose(targets, expected, **TOL)


def _tables(q_taken, next_expected):
    """Two-action tables with a_t = 0 and pi uniform, so that Q(x_t, a_t) = q_taken[t] and
    E_pi Q(x_{t+1}, .) = next_expected[t]: the form in which GDI's Test 5 and LBC's Test 7
    (docs/papers/<paper>.md#worked-test-numbers) give their data."""
    expected = np.concatenate([[0.0], next_expected])
    q_values = np.stack([q_taken, 2.0 * expected - np.asarray(q_taken)], axis=-1)[:, None]
    return dict(
        q_values=q_values,
        target_probs=np.full_like(q_values, 0.5),
        actions=np.zeros((len(q_taken), 1), dtype=np.int32),
    )


RETRACE_SPEC_CASES = {
    # docs/papers/gdi.md#worked-test-numbers (Test 5): Q(s_t, a_t) = [0.6, 0.3, 0.5],
    # Q(s_3, a_3) = 0.4, E_pi Q(s_{t+1}, .) = [0.4, 0.3, 0.2]; the on-policy line is the 3-step
    # SARSA return by hand.
    "gdi_T5": dict(
        ratios=[1.2, 0.5, 1.0],
        discount=0.9,
        rewards=[1, 0, 2],
        q_taken=[0.6, 0.3, 0.5, 0.4],
        next_expected=[0.4, 0.3, 0.2],
        sampled=[2.0908, 2.124, 2.36],
        expected=[2.0269, 1.782, 2.18],
        on_policy_sampled=[1 + 0.9 * 0 + 0.81 * 2 + 0.729 * 0.4, 0 + 0.9 * 2 + 0.81 * 0.4, 2.36],
    ),
    # docs/papers/lbc.md#worked-test-numbers (Test 7).
    "lbc_T7": dict(
        ratios=[0.5 / 0.4, 0.9 / 0.3, 0.2 / 0.5, 0.6 / 0.6],
        discount=0.99,
        rewards=[1, 0, -1, 2],
        q_taken=[0.6, 0.2, 0.1, 0.5, 0.3],
        next_expected=[0.4, 0.3, 0.2, 0.1],
        sampled=[1.576291, 0.563916, 1.274030, 2.297000],
        expected=[1.777164, 0.566680, 0.781010, 2.099000],
        on_policy_sampled=[2.248677, 1.261290, 1.274030, 2.297000],
    ),
}


@pytest.mark.parametrize("case", RETRACE_SPEC_CASES)
def test_retrace_gdi_lbc_numbers(case):
    c = RETRACE_SPEC_CASES[case]
    T = len(c["rewards"])
    d = dict(
        _tables(c["q_taken"], c["next_expected"]),
        log_rhos=np.log(c["ratios"])[:, None],
        rewards=np.array(c["rewards"], dtype=float)[:, None],
        discounts=np.full((T, 1), c["discount"]),
    )
    for form in returns.RETRACE_FORMS:
        targets = _retrace(d, form=form, clip_c_threshold=1.05)[:, 0]
        np.testing.assert_allclose(targets, c[form], **TOL)
    # On-policy (c = 1), the paper's form is the n-step SARSA return bootstrapped on Q(x_T, a_T).
    on_policy = dict(d, log_rhos=np.zeros((T, 1)))
    targets = _retrace(on_policy, form="sampled", clip_c_threshold=1.05)[:, 0]
    np.testing.assert_allclose(targets, c["on_policy_sampled"], **TOL)
    # GDI's Test 5: c = 0 gives the SARSA target r_t + gamma Q(x_{t+1}, a_{t+1}).
    targets = _retrace(d, form="sampled", clip_c_threshold=0.0)[:, 0]
    sarsa = np.array(c["rewards"]) + c["discount"] * np.array(c["q_taken"][1:])
    np.testing.assert_allclose(targets, sarsa, **TOL)


@pytest.mark.parametrize("form", returns.RETRACE_FORMS)
@pytest.mark.parametrize("cut", [dict(clip_c_threshold=0.0), dict(lambda_=0.0)])
def test_retrace_without_traces_is_the_one_step_target(form, cut):
    d = random_unroll(3, (6, 4), num_actions=3)
    q_taken = np.take_along_axis(d["q_values"], d["actions"][..., None], -1)[..., 0]
    if form == "expected":
        next_values = np.sum(d["target_probs"] * d["q_values"], -1)[1:]
    else:
        next_values = q_taken[1:]
    expected = d["rewards"] + d["discounts"] * next_values
    np.testing.assert_allclose(_retrace(d, form=form, **cut), expected, **TOL)


@pytest.mark.parametrize("shape", SHAPES)
def test_on_policy_sampled_retrace_is_the_n_step_sarsa_return(shape):
    d = dict(random_unroll(4, shape, num_actions=3), log_rhos=np.zeros(shape))
    q_taken = np.take_along_axis(d["q_values"], d["actions"][..., None], -1)[..., 0]
    expected = oracles.n_step_sum(d["rewards"], d["discounts"], q_taken[1:], shape[0])
    np.testing.assert_allclose(_retrace(d, form="sampled", clip_c_threshold=1.0), expected, **TOL)


@pytest.mark.parametrize("form", returns.RETRACE_FORMS)
def test_retrace_discount_zero_cuts_the_trace(form):
    d = random_unroll(5, (6, 4), num_actions=3)
    d["discounts"][2] = 0.0
    d["log_rhos"] = np.zeros((6, 4))  # c = 1: without the cut everything would propagate
    targets = _retrace(d, form=form)
    rng = np.random.default_rng(0)
    later = dict(d, rewards=d["rewards"].copy(), q_values=d["q_values"].copy())
    later["rewards"][3:] = rng.normal(size=(3, 4))
    later["q_values"][3:] = rng.normal(size=(4, 4, 3))
    perturbed = _retrace(later, form=form)
    np.testing.assert_array_equal(perturbed[:3], targets[:3])
    assert not np.allclose(perturbed[3:], targets[3:])


def test_retrace_expected_ignores_the_bootstrap_action_and_sampled_the_probs():
    d = random_unroll(6, (5, 2), num_actions=3)
    other_action = dict(d, actions=d["actions"].copy())
    other_action["actions"][-1] = (d["actions"][-1] + 1) % 3
    expected = _retrace(d, form="expected")
    np.testing.assert_array_equal(_retrace(other_action, form="expected"), expected)
    sampled = _retrace(d, form="sampled")
    without_probs = _retrace(dict(d, target_probs=None), form="sampled")
    np.testing.assert_array_equal(without_probs, sampled)
    assert not np.allclose(_retrace(other_action, form="sampled"), sampled)


# --------------------------------------------------------------------------------------------
# n-step and lambda-returns
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("n", [1, 2, 3, 7, 25])
def test_n_step_returns_equal_the_sum(shape, n):
    d = random_unroll(7, shape)
    bootstrap_values = oracles.next_step(d["values"], d["bootstrap"])
    result = returns.n_step_returns(d["rewards"], d["discounts"], bootstrap_values, n)
    expected = oracles.n_step_sum(d["rewards"], d["discounts"], bootstrap_values, n)
    np.testing.assert_allclose(result, expected, **TOL)


def test_n_step_returns_hand_numbers():
    # The Test 1 fixture of docs/papers/impala.md#worked-test-numbers, bootstrap values
    # V(x_{t+1}) = [1.0, 1.5, 2.0].
    args = ([1.0, 2.0, 3.0], [0.9, 0.9, 0.9], [1.0, 1.5, 2.0])
    # n >= T: Test 1's sum_{t>=s} gamma^(t-s) r_t + gamma^(3-s) 2.0.
    np.testing.assert_allclose(returns.n_step_returns(*args, n=3), [6.688, 6.32, 4.8], **TOL)
    np.testing.assert_allclose(returns.n_step_returns(*args, n=9), [6.688, 6.32, 4.8], **TOL)
    # n = 2 by hand: 1 + 0.9*2 + 0.81*1.5, 2 + 0.9*3 + 0.81*2.0, 3 + 0.9*2.0.
    np.testing.assert_allclose(returns.n_step_returns(*args, n=2), [4.015, 6.32, 4.8], **TOL)
    # n = 1: r_t + gamma V(x_{t+1}).
    np.testing.assert_allclose(returns.n_step_returns(*args, n=1), [1.9, 3.35, 4.8], **TOL)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("lam", [0.0, 0.3, 0.8, 1.0])
def test_lambda_returns_equal_the_mixture_of_n_step_returns(shape, lam):
    d = random_unroll(8, shape)
    result = returns.lambda_returns(d["rewards"], d["discounts"], d["values"], d["bootstrap"], lam)
    expected = oracles.lambda_return_sum(
        d["rewards"], d["discounts"], d["values"], d["bootstrap"], lam
    )
    np.testing.assert_allclose(result, expected, **TOL)


def test_lambda_returns_limits_and_hand_numbers():
    d = random_unroll(9, (8, 3))
    args = (d["rewards"], d["discounts"], d["values"], d["bootstrap"])
    values_tp1 = oracles.next_step(d["values"], d["bootstrap"])
    # lambda = 0: one-step TD targets.
    np.testing.assert_allclose(
        returns.lambda_returns(*args, 0.0), d["rewards"] + d["discounts"] * values_tp1, **TOL
    )
    # lambda = 1: the return bootstrapped on V(x_T) alone.
    np.testing.assert_allclose(
        returns.lambda_returns(*args, 1.0),
        returns.n_step_returns(d["rewards"], d["discounts"], values_tp1, 8),
        **TOL,
    )
    # docs/papers/impala.md#worked-test-numbers (Test 6): lambda = 0.5 on the Test 1 fixture gives
    # [3.62575, 4.835, 4.8].
    result = returns.lambda_returns([1.0, 2.0, 3.0], [0.9] * 3, [0.5, 1.0, 1.5], 2.0, 0.5)
    np.testing.assert_allclose(result, [3.62575, 4.835, 4.8], **TOL)


# --------------------------------------------------------------------------------------------
# log importance ratios from logits
# --------------------------------------------------------------------------------------------


def test_log_rhos_from_logits():
    rng = np.random.default_rng(10)
    target, behaviour = rng.normal(0, 3, (2, 6, 4, 5))
    target[0, 0] += 500.0  # large logits must stay finite
    actions = rng.integers(0, 5, (6, 4))

    def log_softmax(x):
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    log_ratios = log_softmax(target) - log_softmax(behaviour)
    expected = np.take_along_axis(log_ratios, actions[..., None], -1)[..., 0]
    result = returns.log_rhos_from_logits(target, behaviour, actions)
    np.testing.assert_allclose(result, expected, **TOL)
    # docs/papers/impala.md#worked-test-numbers (Test 2): pi/mu = 2 from probabilities (0.5, 0.5)
    # vs (0.25, 0.75).
    ratio = returns.log_rhos_from_logits([[0.0, 0.0]], np.log([[0.25, 0.75]]), [0])
    np.testing.assert_allclose(ratio, np.log([2.0]), **TOL)


# --------------------------------------------------------------------------------------------
# XLA, gradients, bad input
# --------------------------------------------------------------------------------------------


def _calls(d):
    """(name, function of float32 tensors) for each public function on the inputs d."""
    r, disc, v, b = d["rewards"], d["discounts"], d["values"], d["bootstrap"]
    return {
        "vtrace": (
            lambda lr, r, disc, v, b: returns.vtrace(
                lr, disc, r, v, b, clip_rho_threshold=2.0, clip_c_threshold=0.5
            ),
            (d["log_rhos"], r, disc, v, b),
        ),
        "retrace_expected": (
            lambda q, p, lr, r, disc: returns.retrace(
                q, p, d["actions"], lr, r, disc, form="expected", lambda_=0.9
            ),
            (d["q_values"], d["target_probs"], d["log_rhos"], r, disc),
        ),
        "retrace_sampled": (
            lambda q, lr, r, disc: returns.retrace(
                q, None, d["actions"], lr, r, disc, form="sampled", clip_c_threshold=1.05
            ),
            (d["q_values"], d["log_rhos"], r, disc),
        ),
        "n_step_returns": (
            lambda r, disc, v: returns.n_step_returns(r, disc, v, n=3),
            (r, disc, v),
        ),
        "lambda_returns": (
            lambda r, disc, v, b: returns.lambda_returns(r, disc, v, b, lambda_=0.7),
            (r, disc, v, b),
        ),
        "log_rhos_from_logits": (
            lambda p, q: returns.log_rhos_from_logits(p, q, d["actions"][:-1]),
            (d["q_values"][:-1], d["target_probs"][:-1]),
        ),
    }


CALL_NAMES = list(_calls(random_unroll(0, (2, 1), num_actions=3)))


@pytest.mark.parametrize("name", CALL_NAMES)
def test_xla_compiled_equals_eager(name):
    d = random_unroll(11, (12, 4), num_actions=3)
    fn, inputs = _calls(d)[name]
    inputs = [tf.constant(x, tf.float32) for x in inputs]
    eager = tf.nest.flatten(fn(*inputs))
    compiled = tf.nest.flatten(tf.function(fn, jit_compile=True)(*inputs))
    for e, c in zip(eager, compiled):
        np.testing.assert_allclose(c, e, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("name", CALL_NAMES)
def test_unknown_unroll_length_in_graph_mode(name):
    # A graph traced for any T and B (shape [None, None, ...]) gives the eager numbers.
    d = random_unroll(14, (9, 2), num_actions=3)
    fn, inputs = _calls(d)[name]
    inputs = [tf.constant(x, tf.float32) for x in inputs]
    specs = [tf.TensorSpec([None] * x.shape.rank, tf.float32) for x in inputs]
    graph = tf.function(fn, input_signature=specs)
    for e, g in zip(tf.nest.flatten(fn(*inputs)), tf.nest.flatten(graph(*inputs))):
        np.testing.assert_allclose(g, e, **TOL)


@pytest.mark.parametrize("name", CALL_NAMES)
def test_outputs_carry_no_gradient(name):
    d = random_unroll(12, (5, 2), num_actions=3)
    fn, inputs = _calls(d)[name]
    inputs = [tf.constant(x, tf.float32) for x in inputs]
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        total = sum(tf.reduce_sum(out) for out in tf.nest.flatten(fn(*inputs)))
    assert all(g is None for g in tape.gradient(total, inputs))


def test_value_and_q_losses_differentiate_only_the_online_estimates():
    # IMPALA §4.2's value update: d/dV of 1/2 (v_s - V)^2 with v_s held constant is V - v_s.
    d = random_unroll(13, (5, 2), num_actions=3)
    values = tf.constant(d["values"], tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(values)
        vs, _ = returns.vtrace(d["log_rhos"], d["discounts"], d["rewards"], values, d["bootstrap"])
        loss = 0.5 * tf.reduce_sum((vs - values) ** 2)
    np.testing.assert_allclose(tape.gradient(loss, values), values - vs, **TOL)
    # Q loss 1/2 (Q_ret - Q(x_t, a_t))^2 reaches only Q(x_t, a_t) of the taken actions, t < T.
    q_values = tf.constant(d["q_values"], tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(q_values)
        targets = returns.retrace(
            q_values, d["target_probs"], d["actions"], d["log_rhos"], d["rewards"], d["discounts"]
        )
        q_taken = tf.gather(q_values[:-1], d["actions"][:-1], batch_dims=2)
        loss = 0.5 * tf.reduce_sum((targets - q_taken) ** 2)
    expected = np.eye(3)[d["actions"][:-1]] * (q_taken - targets).numpy()[..., None]
    grad = tape.gradient(loss, q_values).numpy()
    np.testing.assert_allclose(grad[:-1], expected, **TOL)
    np.testing.assert_array_equal(grad[-1], 0.0)


def _vtrace_inputs(**overrides):
    return dict(
        dict(log_rhos=np.zeros(3), **IMPALA_FIXTURE, clip_rho_threshold=1.0, lambda_=1.0),
        **overrides,
    )


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(clip_rho_threshold=-1.0), "clip_rho_threshold"),
        (dict(clip_c_threshold=float("nan")), "clip_c_threshold"),
        (dict(clip_pg_rho_threshold=-0.5), "clip_pg_rho_threshold"),
        (dict(lambda_=1.5), "lambda_"),
        (dict(values=[0.5, 1.0]), "values"),
        (dict(bootstrap_value=[2.0, 2.0]), "bootstrap_value"),
    ],
)
def test_vtrace_bad_input(overrides, message):
    with pytest.raises(ValueError, match=message):
        returns.vtrace(**_vtrace_inputs(**overrides))


def test_retrace_bad_input():
    d = DICE_TEST10
    args = [d[k] for k in RETRACE_ARGS]
    allowed = r"form must be one of \('expected', 'sampled'\), got 'munos'"
    with pytest.raises(ValueError, match=allowed):
        returns.retrace(*args, form="munos")
    with pytest.raises(ValueError, match="target_probs"):
        returns.retrace(args[0], None, *args[2:], form="expected")
    with pytest.raises(ValueError, match="q_values"):
        returns.retrace(args[0][:-1], args[1][:-1], args[2][:-1], *args[3:])  # no bootstrap row
    with pytest.raises(ValueError, match="lambda_"):
        returns.retrace(*args, lambda_=-0.1)
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        returns.n_step_returns(d["rewards"], d["discounts"], d["rewards"], n=0)


def test_every_retrace_form_the_configs_accept_is_a_target_returns_computes():
    """Configs check --retrace_form against `common.settings.config.RETRACE_FORMS` without importing
    TensorFlow; each name they accept must select its own target in `returns.retrace` (DiCE's
    Test 10 numbers for that form: a name without them fails here), and a name they reject,
    `returns.retrace` rejects too."""
    from dice import config as dice_config
    from gdi import config as gdi_config
    from lbc import config as lbc_config
    from reactor import config as reactor_config

    papers = (
        dice_config.DiceConfig,
        gdi_config.GdiConfig,
        lbc_config.LbcConfig,
        reactor_config.ReactorConfig,
    )
    # docs/papers/dice.md#worked-test-numbers (Test 10).
    test10 = {"sampled": [3.166552, 2.093401, 2.099700], "expected": [3.148913, 2.152742, 2.259220]}
    targets = {}
    for form in config.RETRACE_FORMS:
        for paper in papers:
            assert paper(retrace_form=form).validate().retrace_form == form
        targets[form] = _retrace(DICE_TEST10, form=form, clip_c_threshold=1.05)[:, 0]
        np.testing.assert_allclose(targets[form], test10[form], **TOL)
    assert not np.allclose(targets["sampled"], targets["expected"])
    for paper in papers:
        with pytest.raises(ValueError, match="--retrace_form='munos' is not one of"):
            paper(retrace_form="munos").validate()
    with pytest.raises(ValueError, match="form must be one of"):
        _retrace(DICE_TEST10, form="munos")

"""Tests for common/equations/sequences.py: numpy ground truths, the padded item layout of
BurnInSequenceWriter, limiting cases, gradient flow through the burn-in and XLA equality."""

import numpy as np
import pytest
import tensorflow as tf

from common.models import networks
from common.equations import sequences
from common.equations import transforms


def _np(x):
    return np.asarray(x.numpy() if tf.is_tensor(x) else x)


# ----------------------------------------------------------------------------- discounts


def test_discounts_from_resets():
    # Moved from tests/impala/test_learning.py.
    resets = tf.constant([[True, False], [False, False], [True, False], [False, True]])
    np.testing.assert_allclose(
        sequences.discounts_from_resets(resets, 0.99).numpy(),
        [[0.99, 0.99], [0.0, 0.99], [0.99, 0.0]],
    )


def np_discounts(resets, gamma, mask=None):
    """gamma_t = gamma_t (1 - reset_{t+1}) [mask_t mask_{t+1}], one step at a time."""
    T = resets.shape[0] - 1
    gamma = np.broadcast_to(gamma, (T, resets.shape[1]) + np.shape(gamma)[2:])
    out = np.zeros(gamma.shape)
    for t in range(T):
        for b in range(resets.shape[1]):
            keep = not resets[t + 1, b]
            if mask is not None:
                keep = keep and mask[t, b] > 0 and mask[t + 1, b] > 0
            out[t, b] = gamma[t, b] if keep else 0.0
    return out


RNG = np.random.default_rng(0)
RESETS = RNG.random((7, 4)) < 0.3
MASK = (RNG.random((7, 4)) < 0.8).astype(np.float32)


@pytest.mark.parametrize(
    "gamma",
    [
        0.997,  # scalar
        np.array([0.9, 0.99, 0.997, 0.5]),  # per env [B]
        RNG.uniform(0.5, 1.0, (6, 4)),  # per step [T, B]
        RNG.uniform(0.5, 1.0, (6, 1)),  # per step, shared by the envs
    ],
)
@pytest.mark.parametrize("with_mask", [False, True])
def test_discounts_match_numpy(gamma, with_mask):
    mask = MASK if with_mask else None
    got = sequences.discounts_from_resets(RESETS, gamma, mask)
    np.testing.assert_allclose(_np(got), np_discounts(RESETS, gamma, mask), rtol=1e-6)
    assert got.shape == (6, 4)


def test_discounts_per_value_head():
    # LBC: gamma_1..3 = 0.997, 0.999, 0.99 (LBC Table 3), as trailing axes or as a structure.
    gammas = np.array([0.997, 0.999, 0.99])
    stacked = sequences.discounts_from_resets(RESETS, tf.constant(gammas)[None, None, :], MASK)
    assert stacked.shape == (6, 4, 3) and stacked.dtype == tf.float64
    for k, gamma in enumerate(gammas):
        np.testing.assert_allclose(_np(stacked)[..., k], np_discounts(RESETS, gamma, MASK))
    as_dict = sequences.discounts_from_resets(RESETS, {"rs1": 0.997, "rs2": 0.999}, MASK)
    np.testing.assert_allclose(_np(as_dict["rs2"]), np_discounts(RESETS, 0.999, MASK), rtol=1e-6)
    as_tuple = sequences.discounts_from_resets(RESETS, (0.997, 0.99))
    np.testing.assert_allclose(_np(as_tuple[1]), np_discounts(RESETS, 0.99), rtol=1e-6)


def test_discounts_on_a_padded_item():
    # One env, burn-in 2, length 4, + 1 bootstrap (BurnInSequenceWriter's layout): the episode's
    # first item (all-padding burn-in), 3 real steps, then the episode terminated: padding.
    mask = np.array([[0], [0], [1], [1], [1], [0], [0]], np.float32)
    resets = np.array([[0], [0], [1], [0], [0], [0], [0]], bool)  # padding: reset False
    got = _np(sequences.discounts_from_resets(resets, 0.9, mask))[:, 0]
    # Steps 2 and 3 bootstrap into real steps; step 4, the last real one, must not bootstrap into
    # the padding at 5; padding steps get 0.
    np.testing.assert_allclose(got, [0.0, 0.0, 0.9, 0.9, 0.0, 0.0])
    # Without the mask, step 4 would bootstrap into the all-zero padding step.
    assert _np(sequences.discounts_from_resets(resets, 0.9))[4, 0] == pytest.approx(0.9)


def test_discounts_dtype_and_compiled():
    assert sequences.discounts_from_resets(RESETS, 0.99).dtype == tf.float32
    gamma64 = tf.constant(0.99, tf.float64)
    assert sequences.discounts_from_resets(RESETS, gamma64).dtype == tf.float64
    fn = tf.function(lambda r, g, m: sequences.discounts_from_resets(r, g, m), jit_compile=True)
    gamma = tf.constant(RNG.uniform(0.5, 1.0, (6, 4)), tf.float32)
    np.testing.assert_allclose(
        _np(fn(tf.constant(RESETS), gamma, tf.constant(MASK))),
        _np(sequences.discounts_from_resets(RESETS, gamma, MASK)),
    )


# ----------------------------------------------------------------------------- truncation


def test_bootstrapped_rewards_one_head():
    rewards = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    values = np.array([[0.0, 4.0], [2.0, 0.0]], np.float32)  # truncated at (0, 1) and (1, 0)
    got = _np(sequences.bootstrapped_rewards(rewards, values, 0.99))
    np.testing.assert_allclose(got, [[1.0, -2.0 + 3.96], [0.5 + 1.98, 3.0]], rtol=1e-6)


def test_shaping_applies_to_the_reward_not_to_the_bootstrap():
    rewards = tf.constant([[1.0]])
    values = tf.constant([[5.0]])
    got = sequences.bootstrapped_rewards(rewards, values, 0.9, lambda r: 2.0 * r)
    assert _np(got)[0, 0] == pytest.approx(2.0 + 0.9 * 5.0)  # not 2 * (1 + 4.5) = 11


SHAPINGS = (transforms.asymmetric_log_shaping, None, lambda r: 0.3 * r)


def np_heads(rewards, values, gammas):
    shaped = [
        np.log(np.abs(rewards) + 1.0) * np.where(rewards >= 0, 2.0, -1.0),
        rewards,
        0.3 * rewards,
    ]
    return np.stack([shaped[k] + gammas[k] * values[..., k] for k in range(3)], -1)


def test_bootstrapped_rewards_per_head_forms_agree_with_numpy():
    rng = np.random.default_rng(1)
    rewards = rng.normal(size=(5, 3)) * 4
    truncated = rng.random((5, 3)) < 0.4
    values = np.where(truncated[..., None], rng.normal(size=(5, 3, 3)), 0.0)
    gammas = np.array([0.997, 0.999, 0.99])
    want = np_heads(rewards, values, gammas)
    stacked = sequences.bootstrapped_rewards(rewards, values, gammas, SHAPINGS)
    np.testing.assert_allclose(_np(stacked), want, rtol=1e-6)
    as_tuple = sequences.bootstrapped_rewards(
        rewards, tuple(values[..., k] for k in range(3)), tuple(gammas), SHAPINGS
    )
    as_dict = sequences.bootstrapped_rewards(
        rewards,
        {str(k): values[..., k] for k in range(3)},
        {str(k): gammas[k] for k in range(3)},
        {str(k): SHAPINGS[k] for k in range(3)},
    )
    for k in range(3):
        np.testing.assert_allclose(_np(as_tuple[k]), want[..., k], rtol=1e-6)
        np.testing.assert_allclose(_np(as_dict[str(k)]), want[..., k], rtol=1e-6)
    # One shaping and one gamma shared by all heads; steps that were not truncated keep f(r).
    shared = _np(sequences.bootstrapped_rewards(rewards, values, 0.9, SHAPINGS[0]))
    np.testing.assert_allclose(
        shared, want[..., :1] - gammas[0] * values[..., :1] + 0.9 * values, rtol=1e-6
    )
    np.testing.assert_allclose(shared[~truncated][:, 2], want[..., 0][~truncated], rtol=1e-6)


def test_bootstrapped_rewards_compiled_equals_eager():
    rng = np.random.default_rng(6)
    rewards = tf.constant(rng.normal(size=(5, 3)) * 4, tf.float32)
    values = tf.constant(rng.normal(size=(5, 3, 3)), tf.float32)
    gammas = tf.constant([0.997, 0.999, 0.99])
    fn = tf.function(
        lambda r, v, g: sequences.bootstrapped_rewards(r, v, g, SHAPINGS), jit_compile=True
    )
    np.testing.assert_allclose(
        _np(fn(rewards, values, gammas)),
        _np(sequences.bootstrapped_rewards(rewards, values, gammas, SHAPINGS)),
        rtol=1e-6,
        atol=1e-6,
    )


def test_bootstrapped_rewards_bad_forms():
    with pytest.raises(ValueError, match="3 reward shapings for 2 heads"):
        sequences.bootstrapped_rewards(np.zeros((2, 1)), np.zeros((2, 1, 2)), 0.9, SHAPINGS)
    with pytest.raises(ValueError, match="discount must be one value"):
        sequences.bootstrapped_rewards(np.zeros((2, 1)), (np.zeros((2, 1)),) * 2, (0.9,) * 3)
    with pytest.raises(ValueError, match="one value head"):
        sequences.bootstrapped_rewards(np.zeros((2, 1)), np.zeros((2, 1)), 0.9, SHAPINGS)


# ----------------------------------------------------------------------------- masked reductions


def np_masked_mean(x, mask, axis):
    mask = np.broadcast_to(mask.reshape(mask.shape + (1,) * (x.ndim - mask.ndim)), x.shape)
    total = np.sum(np.where(mask != 0, x * mask, 0.0), axis=axis)
    count = np.sum(mask, axis=axis)
    return np.where(count != 0, total / np.where(count != 0, count, 1.0), 0.0), total


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1), -1])
def test_masked_mean_and_sum_match_numpy(axis):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(6, 4, 3))
    mask = (rng.random((6, 4)) < 0.6).astype(np.float64)
    mask[:, 0] = 0.0  # a column with no valid step
    want_mean, want_sum = np_masked_mean(x, mask, axis)
    np.testing.assert_allclose(_np(sequences.masked_mean(x, mask, axis)), want_mean, rtol=1e-12)
    np.testing.assert_allclose(_np(sequences.masked_sum(x, mask, axis)), want_sum, rtol=1e-12)
    # A weighted mask is a weighted mean.
    weights = rng.random((6, 4))
    np.testing.assert_allclose(
        _np(sequences.masked_mean(x, weights, axis)),
        np_masked_mean(x, weights, axis)[0],
        rtol=1e-12,
    )


def test_all_ones_mask_is_the_plain_mean():
    x = np.random.default_rng(3).normal(size=(5, 2))
    assert _np(sequences.masked_mean(x, np.ones((5, 2)))) == pytest.approx(x.mean(), rel=1e-12)
    np.testing.assert_allclose(
        _np(sequences.masked_mean(x, np.ones((5, 2), bool), axis=0)), x.mean(0), rtol=1e-12
    )


def test_all_zero_mask_gives_zero_and_zero_gradient():
    x = tf.Variable(np.random.default_rng(4).normal(size=(3, 2)))
    with tf.GradientTape() as tape:
        mean = sequences.masked_mean(x, tf.zeros((3, 2), tf.float64))
    assert _np(mean) == 0.0
    np.testing.assert_array_equal(_np(tape.gradient(mean, x)), np.zeros((3, 2)))


def test_masked_entries_do_not_leak_inf_or_nan():
    x = tf.Variable([[1.0, np.inf], [3.0, np.nan]])
    mask = tf.constant([[1.0, 0.0], [1.0, 0.0]])
    with tf.GradientTape() as tape:
        mean = sequences.masked_mean(x, mask)
    assert _np(mean) == pytest.approx(2.0)
    assert _np(sequences.masked_sum(x, mask)) == pytest.approx(4.0)
    np.testing.assert_array_equal(_np(tape.gradient(mean, x)), [[0.5, 0.0], [0.5, 0.0]])


def test_masked_mean_compiled_equals_eager():
    rng = np.random.default_rng(5)
    x = tf.constant(rng.normal(size=(6, 4)), tf.float32)
    mask = tf.constant(rng.random((6, 4)) < 0.5, tf.float32)
    fn = tf.function(
        lambda a, m: (
            sequences.masked_mean(a, m),
            sequences.masked_mean(a, 0 * m),
            sequences.masked_sum(a, m, axis=0),
        ),
        jit_compile=True,
    )
    for got, want in zip(
        fn(x, mask), (sequences.masked_mean(x, mask), 0.0, sequences.masked_sum(x, mask, axis=0))
    ):
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-6)


# ----------------------------------------------------------------------------- burn-in

T, B, OBS, A, UNITS = 7, 4, 3, 3, 5


def make_net(use_lstm=True):
    tf.keras.utils.set_random_seed(7)
    net = networks.ActorCriticNet(
        A, torso="mlp", use_lstm=use_lstm, lstm_units=UNITS, prev_reward_clip=None
    )
    net.create_variables((OBS,), tf.float32)
    return net


def make_inputs(seed=0):
    rng = np.random.default_rng(seed)
    obs = tf.constant(rng.normal(size=(T, B, OBS)), tf.float32)
    prev_action = tf.constant(rng.integers(0, A, (T, B)), tf.int32)
    prev_reward = tf.constant(rng.normal(size=(T, B)), tf.float32)
    reset = tf.constant(rng.random((T, B)) < 0.15)
    state = tuple(tf.constant(rng.normal(size=(B, UNITS)), tf.float32) for _ in range(2))
    return [obs, prev_action, prev_reward, reset], state


def step_by_step(net, inputs, state, start, stop):
    """Runs `net.step` over steps start..stop-1; returns the outputs (None for no step) and the
    state after them."""
    logits, values = [], []
    for t in range(start, stop):
        (lg, v), state = net.step(*[x[t] for x in inputs], state)
        logits.append(lg)
        values.append(v)
    if not logits:
        return None, state
    return (np.stack(logits), np.stack(values)), state


def assert_close(got, want, **kw):
    for g, w in zip(tf.nest.flatten(got), tf.nest.flatten(want)):
        np.testing.assert_allclose(_np(g), _np(w), **{"rtol": 1e-5, "atol": 1e-6, **kw})


def test_zero_burn_in_is_a_plain_unroll():
    net = make_net()
    inputs, state = make_inputs()
    assert_close(
        sequences.burn_in_unroll(net.unroll, inputs, state, 0),
        net.unroll(*inputs, state),
        rtol=0,
        atol=0,
    )


@pytest.mark.parametrize("burn_in", [1, 3, 6])
def test_burn_in_equals_stepping_the_network(burn_in):
    net = make_net()
    inputs, state = make_inputs(burn_in)
    outputs, final = sequences.burn_in_unroll(net.unroll, inputs, state, burn_in)
    _, burnt_in = step_by_step(net, inputs, state, 0, burn_in)
    want_outputs, want_final = step_by_step(net, inputs, burnt_in, burn_in, T)
    assert_close(outputs, want_outputs)
    assert_close(final, want_final)
    assert outputs[0].shape == (T - burn_in, B, A)


def test_feed_forward_network_skips_the_burn_in():
    net = make_net(use_lstm=False)
    inputs, _ = make_inputs()
    outputs, final = sequences.burn_in_unroll(net.unroll, inputs, (), 3)
    assert final == ()
    assert_close(outputs, net.unroll(*[x[3:] for x in inputs], ())[0], rtol=0, atol=0)


def loss_on(outputs):
    logits, values = outputs
    return tf.reduce_sum(tf.square(values)) + tf.reduce_sum(tf.sin(logits))


def test_no_gradient_flows_through_the_burn_in():
    net = make_net()
    inputs, state = make_inputs(1)
    burn_in = 4
    obs = tf.Variable(inputs[0])
    stored = tuple(tf.Variable(s) for s in state)
    variables = net.trainable_variables
    with tf.GradientTape(persistent=True) as tape:
        outputs, _ = sequences.burn_in_unroll(net.unroll, [obs] + inputs[1:], stored, burn_in)
        loss = loss_on(outputs)
        # The same network without the stop: gradients do flow through the burn-in.
        full_loss = loss_on(
            tf.nest.map_structure(lambda x: x[burn_in:], net.unroll(obs, *inputs[1:], stored)[0])
        )
    assert _np(loss) == pytest.approx(_np(full_loss), rel=1e-5)  # same forward pass

    # Burn-in inputs and the stored state get no gradient; the trained steps' inputs do.
    grad_obs = _np(tape.gradient(loss, obs))
    np.testing.assert_array_equal(grad_obs[:burn_in], 0.0)
    assert np.abs(grad_obs[burn_in:]).min() > 0
    assert all(g is None for g in tape.gradient(loss, stored))
    assert np.abs(_np(tape.gradient(full_loss, obs))[:burn_in]).max() > 1e-4
    assert all(np.abs(_np(g)).max() > 1e-4 for g in tape.gradient(full_loss, stored))

    # The weights' gradient is that of the trained part from a constant state.
    _, burnt_in = net.unroll(*[x[:burn_in] for x in inputs], state)
    with tf.GradientTape() as constant_tape:
        constant_loss = loss_on(
            net.unroll(
                *[x[burn_in:] for x in inputs], tuple(tf.constant(_np(s)) for s in burnt_in)
            )[0]
        )
    want = constant_tape.gradient(constant_loss, variables)
    got = tape.gradient(loss, variables)
    through = tape.gradient(full_loss, variables)
    assert_close(got, want)
    # ... and the LSTM kernel's gradient differs from the one through the burn-in.
    lstm_kernels = [
        i for i, v in enumerate(variables) if v is net.core.kernel or v is net.core.recurrent_kernel
    ]
    assert len(lstm_kernels) == 2
    for i in lstm_kernels:
        assert np.abs(_np(got[i]) - _np(through[i])).max() > 1e-4


def padded_batch(seed, padding):
    """Inputs whose env b starts with padding[b] padding steps (zeros, reset False, mask 0);
    the first real step does not start an episode, so only holding the state can keep it."""
    inputs, state = make_inputs(seed)
    mask = np.ones((T, B), np.float32)
    for b, n in enumerate(padding):
        mask[:n, b] = 0.0
    keep = tf.constant(mask)
    padded = [
        tf.cast(tf.cast(x, tf.float32) * (keep if x.shape.rank == 2 else keep[..., None]), x.dtype)
        for x in inputs
    ]
    reset = _np(inputs[3]).copy()
    for b, n in enumerate(padding):
        reset[: n + 1, b] = False
    padded[3] = tf.constant(reset)
    return padded, state, mask


def reference_after_padding(net, inputs, state, padding, burn_in):
    """Per env: step the network over its real burn-in steps only, then over the trained part."""
    want_outputs = []
    for b, n in enumerate(padding):
        env_inputs = [x[:, b : b + 1] for x in inputs]
        env_state = tuple(s[b : b + 1] for s in state)
        _, env_state = step_by_step(net, env_inputs, env_state, min(n, burn_in), burn_in)
        want_outputs.append(step_by_step(net, env_inputs, env_state, burn_in, T)[0])
    return tuple(np.concatenate([o[i] for o in want_outputs], axis=1) for i in range(2))


@pytest.mark.parametrize(
    "padding",
    [
        (3, 0, 3, 0),  # every burn-in all padding or all real: one unroll of the burn-in
        (3, 1, 0, 2),  # partial padding: the burn-in is unrolled one step at a time
    ],
)
def test_padding_holds_the_stored_state(padding):
    net = make_net()
    burn_in = 3
    inputs, state, mask = padded_batch(2, padding)
    outputs, _ = sequences.burn_in_unroll(net.unroll, inputs, state, burn_in, mask)
    assert_close(outputs, reference_after_padding(net, inputs, state, padding, burn_in))
    # An all-padding burn-in: the trained part starts exactly from the stored state.
    b = padding.index(3)
    from_stored = net.unroll(
        *[x[burn_in:, b : b + 1] for x in inputs], tuple(s[b : b + 1] for s in state)
    )[0]
    assert_close(tuple(o[:, b : b + 1] for o in outputs), from_stored)
    # Without the mask the padding would have moved the state.
    unmasked, _ = sequences.burn_in_unroll(net.unroll, inputs, state, burn_in)
    assert np.abs(_np(unmasked[1])[:, b] - _np(outputs[1])[:, b]).max() > 1e-4


def test_first_item_of_an_episode_enters_with_the_zero_stored_state():
    # A game's first item: all-padding burn-in and a zero stored state (our sequence layout,
    # docs/papers/dice.md#departures-from-the-paper); the first real step is the
    # episode's first step (reset True).
    net = make_net()
    burn_in = 3
    inputs, _, mask = padded_batch(3, (3, 3, 3, 3))
    reset = np.zeros((T, B), bool)
    reset[burn_in] = True
    inputs[3] = tf.constant(reset)
    zero = net.initial_state(B)
    outputs, final = sequences.burn_in_unroll(net.unroll, inputs, zero, burn_in, mask)
    want_outputs, want_final = net.unroll(*[x[burn_in:] for x in inputs], zero)
    assert_close(outputs, want_outputs, rtol=0, atol=0)
    assert_close(final, want_final, rtol=0, atol=0)


def test_burn_in_compiled_equals_eager_with_gradients():
    net = make_net()
    burn_in = 3
    results = []
    for padding in [(3, 0, 3, 0), (3, 1, 0, 2)]:
        inputs, state, mask = padded_batch(4, padding)

        def loss_and_grads(inputs, state, mask):
            with tf.GradientTape() as tape:
                outputs, final = sequences.burn_in_unroll(net.unroll, inputs, state, burn_in, mask)
                logits, values = outputs
                loss = sequences.masked_mean(
                    values**2 + tf.reduce_sum(tf.sin(logits), -1), mask[burn_in:]
                )
            return loss, final, tape.gradient(loss, net.trainable_variables)

        eager = loss_and_grads(inputs, state, tf.constant(mask))
        compiled = tf.function(loss_and_grads, jit_compile=True)(inputs, state, tf.constant(mask))
        assert_close(compiled, eager, rtol=1e-4, atol=1e-6)
        results.append(eager[0])
    assert all(np.isfinite(_np(r)) for r in results)


def test_bad_burn_in():
    net = make_net()
    inputs, state = make_inputs()
    with pytest.raises(ValueError, match="burn_in must be >= 0"):
        sequences.burn_in_unroll(net.unroll, inputs, state, -1)

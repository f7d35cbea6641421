"""Tests for common/equations/schedules.py: the papers' schedule values (worked numbers in
docs/papers/<paper>.md#worked-test-numbers), numpy ground truths, the AdamW update against its
equations over several steps (and against Keras), clipping and XLA equality."""

import functools

import numpy as np
import pytest
import tensorflow as tf

from common.models import networks
from common.equations import schedules


def _np(x):
    return np.asarray(x.numpy() if tf.is_tensor(x) else x)


# ----------------------------------------------------------------------------- schedules


def test_linear_anneal_spec_T15():
    # Moved from tests/impala/test_learning.py. docs/papers/impala.md#worked-test-numbers
    # (Test 15): lr0 = 6e-4 over 200M frames.
    lr = lambda f: float(schedules.linear_anneal(f, 6e-4, 200_000_000))
    np.testing.assert_allclose(
        [lr(0), lr(50e6), lr(100e6), lr(200e6), lr(300e6)],
        [6e-4, 4.5e-4, 3e-4, 0.0, 0.0],
        atol=1e-10,
    )


# DiCE's last learner update at 200M frames, the horizon of Table 5's "anneal linearly to 0"
# (the horizon is our choice: docs/papers/dice.md#departures-from-the-paper).
DICE_TOTAL = 19_531


@pytest.mark.parametrize(
    "step, want",
    [
        (0, 0.0),  # docs/papers/dice.md#worked-test-numbers (Test 15)
        (2000, 2.5e-4),  # mid warm-up
        (4000, 5e-4),  # end of warm-up
        (11_765.5, 2.5e-4),  # mid decay
        (10_000, 3.0684e-4),  # docs/papers/gdi.md#worked-test-numbers (Test 15)
        (DICE_TOTAL, 0.0),  # end
        (30_000, 0.0),  # past the end
    ],
)
def test_warmup_linear_decay_spec_values(step, want):
    got = float(schedules.warmup_linear_decay(step, 5e-4, 4000, DICE_TOTAL))
    assert got == pytest.approx(want, abs=1e-8)


def test_warmup_linear_decay_matches_numpy_interpolation():
    steps = np.concatenate([np.linspace(0, 25_000, 501), [3999, 4001, DICE_TOTAL - 1]])
    want = np.interp(steps, [0, 4000, DICE_TOTAL], [0.0, 5.3e-4, 0.0])  # LBC Table 3 peak
    got = _np(
        schedules.warmup_linear_decay(
            tf.constant(steps), 5.3e-4, 4000, DICE_TOTAL, dtype=tf.float64
        )
    )
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-20)
    # Integer steps (a learner step counter) give the same values.
    ints = tf.constant(np.arange(0, 25_000, 97), tf.int64)
    np.testing.assert_allclose(
        _np(schedules.warmup_linear_decay(ints, 5.3e-4, 4000, DICE_TOTAL)),
        np.interp(np.arange(0, 25_000, 97), [0, 4000, DICE_TOTAL], [0.0, 5.3e-4, 0.0]),
        rtol=1e-6,
        atol=1e-12,
    )


def test_no_warmup_is_the_linear_anneal_and_the_weight_decay_schedule():
    steps = np.array([0, 1, 5000, 9765.5, DICE_TOTAL, 40_000])
    wd = _np(schedules.warmup_linear_decay(steps, 0.01, 0, DICE_TOTAL, dtype=tf.float64))
    np.testing.assert_allclose(wd, 0.01 * np.maximum(0.0, 1 - steps / DICE_TOTAL), rtol=1e-12)
    # docs/papers/dice.md#worked-test-numbers (Test 15): wd(t).
    assert wd[0] == 0.01 and wd[3] == pytest.approx(0.005)
    np.testing.assert_array_equal(
        _np(schedules.linear_anneal(steps, 0.01, DICE_TOTAL)),
        _np(schedules.warmup_linear_decay(steps, 0.01, 0, DICE_TOTAL)),
    )


def test_large_frame_counts_keep_their_precision():
    # LBC: 1e9 frames (LBC §5.2); one frame before the end is 6e-4 / 1e9 in float64.
    got = schedules.linear_anneal(tf.constant(10**9 - 1, tf.int64), 6e-4, 10**9, tf.float64)
    assert float(got) == pytest.approx(6e-13, rel=1e-6)


def test_schedules_compiled_equal_eager():
    fn = tf.function(
        lambda s: (
            schedules.warmup_linear_decay(s, 5e-4, 4000, DICE_TOTAL),
            schedules.linear_anneal(s, 6e-4, DICE_TOTAL),
        ),
        jit_compile=True,
    )
    for step in (0, 1999, 4000, 12_345, DICE_TOTAL, 50_000):
        compiled = fn(tf.constant(step, tf.int64))
        eager = (
            schedules.warmup_linear_decay(step, 5e-4, 4000, DICE_TOTAL),
            schedules.linear_anneal(step, 6e-4, DICE_TOTAL),
        )
        np.testing.assert_allclose(_np(compiled), _np(eager), rtol=1e-7)


@pytest.mark.parametrize("warmup, total", [(-1, 10), (10, 10), (11, 10), (0, 0)])
def test_bad_schedule_arguments(warmup, total):
    with pytest.raises(ValueError, match="warmup_steps < total_steps"):
        schedules.warmup_linear_decay(0, 1.0, warmup, total)


# ----------------------------------------------------------------------------- AdamW


def np_adamw(weights, grads, decays, lr_fn, wd_fn, beta_1, beta_2, eps, clip_norm=None):
    """DiCE Table 5's AdamW as we read it (docs/papers/dice.md#departures-from-the-paper), step by
    step: clip all gradients by their global norm, then for each weight
    m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2, m^ = m/(1-b1^t), v^ = v/(1-b2^t),
    w = w - lr_k (m^/(sqrt(v^)+eps) + wd_k w [decayed weights only]), t = k + 1."""
    weights = [np.array(w, np.float64) for w in weights]
    m = [np.zeros_like(w) for w in weights]
    v = [np.zeros_like(w) for w in weights]
    norms = []
    for k, step_grads in enumerate(grads):
        norm = np.sqrt(sum(np.sum(g**2) for g in step_grads))
        norms.append(norm)
        scale = min(1.0, clip_norm / norm) if clip_norm is not None else 1.0
        t = k + 1
        for i, g in enumerate(step_grads):
            g = g * scale
            m[i] = beta_1 * m[i] + (1 - beta_1) * g
            v[i] = beta_2 * v[i] + (1 - beta_2) * g * g
            m_hat = m[i] / (1 - beta_1**t)
            v_hat = v[i] / (1 - beta_2**t)
            update = m_hat / (np.sqrt(v_hat) + eps)
            if decays[i]:
                update = update + wd_fn(k) * weights[i]
            weights[i] = weights[i] - lr_fn(k) * update
    return weights, norms


def random_problem(seed, steps=6):
    rng = np.random.default_rng(seed)
    weights = [rng.normal(size=(3, 2)), rng.normal(size=(2,)), rng.normal(size=(2, 2, 1))]
    grads = [
        [rng.normal(size=w.shape) * scale for w in weights]
        for scale in rng.choice([0.01, 1.0, 40.0], size=steps)
    ]  # norms on both sides of 50
    return weights, grads


def run_adamw(optimizer, weights, grads, dtype=tf.float64):
    variables = [tf.Variable(w, dtype=dtype) for w in weights]
    optimizer.build(variables)
    stats = [optimizer.apply([tf.constant(g, dtype) for g in step], variables) for step in grads]
    return variables, stats


def test_adamw_matches_numpy_with_schedules_and_clipping():
    # Table 5 coefficients; short schedules so that the warm-up and the decay both show.
    lr_fn = functools.partial(
        schedules.warmup_linear_decay,
        peak_value=0.1,
        warmup_steps=2,
        total_steps=8,
        dtype=tf.float64,
    )
    wd_fn = functools.partial(
        schedules.warmup_linear_decay,
        peak_value=0.3,
        warmup_steps=0,
        total_steps=8,
        dtype=tf.float64,
    )
    weights, grads = random_problem(0)
    optimizer = schedules.AdamW(lr_fn, wd_fn, beta_1=0.9, beta_2=0.98, epsilon=1e-6, clip_norm=50.0)
    variables, stats = run_adamw(optimizer, weights, grads)
    want, norms = np_adamw(
        weights,
        grads,
        [True, False, True],
        lambda k: float(lr_fn(k)),
        lambda k: float(wd_fn(k)),
        0.9,
        0.98,
        1e-6,
        clip_norm=50.0,
    )
    assert max(norms) > 50 and min(norms) < 50  # the clip is active on some steps only
    for var, expected in zip(variables, want):
        np.testing.assert_allclose(var.numpy(), expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose([float(s["optimizer/grad_norm"]) for s in stats], norms, rtol=1e-12)
    np.testing.assert_allclose(
        [float(s["optimizer/learning_rate"]) for s in stats],
        [0.0, 0.05, 0.1, 0.0833333, 0.0666667, 0.05],
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        [float(s["optimizer/weight_decay"]) for s in stats],
        0.3 * (1 - np.arange(6) / 8),
        rtol=1e-12,
    )
    assert int(optimizer.iterations.numpy()) == 6


def test_adamw_first_update_with_warmup_from_zero_changes_nothing():
    weights, grads = random_problem(1, steps=1)
    optimizer = schedules.AdamW(
        functools.partial(
            schedules.warmup_linear_decay,
            peak_value=5e-4,
            warmup_steps=4000,
            total_steps=DICE_TOTAL,
        ),
        0.01,
    )
    variables, _ = run_adamw(optimizer, weights, grads)
    for var, w in zip(variables, weights):
        np.testing.assert_array_equal(var.numpy(), w)


def test_adamw_weight_decay_is_lr_times_wd_times_w():
    # With a zero gradient the Adam term is 0: w <- w (1 - lr wd) on kernels, unchanged biases.
    weights = [np.full((2, 2), 3.0), np.full((2,), 3.0)]
    optimizer = schedules.AdamW(0.1, 0.2, clip_norm=None)
    variables, _ = run_adamw(optimizer, weights, [[np.zeros((2, 2)), np.zeros(2)]] * 2)
    np.testing.assert_allclose(variables[0].numpy(), 3.0 * (1 - 0.02) ** 2, rtol=1e-12)
    np.testing.assert_array_equal(variables[1].numpy(), 3.0)


def test_adamw_equals_keras_adamw_as_epsilon_vanishes():
    # Keras 2.15 AdamW with constant rates: the same decoupled decay (times lr) and Adam update;
    # only its epsilon placement differs (schedules.AdamW docstring), invisible at eps = 1e-14.
    # (Keras rounds its betas and lr through float32, hence rtol 1e-5; a decay not multiplied by
    # lr would be off by ~wd = 10% per step.)
    weights, grads = random_problem(2)
    ours, _ = run_adamw(
        schedules.AdamW(
            0.05, 0.1, beta_1=0.9, beta_2=0.98, epsilon=1e-14, clip_norm=None, decays=lambda v: True
        ),
        weights,
        grads,
    )
    keras = tf.keras.optimizers.AdamW(
        0.05, weight_decay=0.1, beta_1=0.9, beta_2=0.98, epsilon=1e-14
    )
    theirs = [tf.Variable(w) for w in weights]
    for step in grads:
        keras.apply_gradients(zip([tf.constant(g) for g in step], theirs))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5)
    # With Table 5's eps = 1e-6 and tiny gradients, the placements differ visibly.
    small = [[g * 1e-6 for g in step] for step in grads]
    ours, _ = run_adamw(schedules.AdamW(0.05, 0.0, clip_norm=None), weights, small)
    keras = tf.keras.optimizers.AdamW(0.05, weight_decay=0.0, beta_1=0.9, beta_2=0.98, epsilon=1e-6)
    theirs = [tf.Variable(w) for w in weights]
    for step in small:
        keras.apply_gradients(zip([tf.constant(g) for g in step], theirs))
    assert not np.allclose(ours[0].numpy(), theirs[0].numpy(), rtol=1e-6)


def test_adamw_clipping_bounds_the_applied_gradient():
    # docs/papers/dice.md#worked-test-numbers (Test 15): after clipping the global norm is <= 50.
    # The first moment after one step is (1 - beta_1) times the clipped gradient.
    weights, grads = random_problem(3, steps=1)
    grads = [[g * 1000.0 for g in grads[0]]]
    optimizer = schedules.AdamW(1e-3, 0.0)
    _, stats = run_adamw(optimizer, weights, grads)
    applied = np.sqrt(sum(np.sum((m.numpy() / 0.1) ** 2) for m in optimizer.first_moments))
    assert float(stats[0]["optimizer/grad_norm"]) > 1000
    assert applied == pytest.approx(50.0, rel=1e-9)
    # Without clipping the full gradient goes in.
    optimizer = schedules.AdamW(1e-3, 0.0, clip_norm=None)
    run_adamw(optimizer, weights, grads)
    unclipped = np.sqrt(sum(np.sum((m.numpy() / 0.1) ** 2) for m in optimizer.first_moments))
    assert unclipped == pytest.approx(float(stats[0]["optimizer/grad_norm"]), rel=1e-9)


def test_adamw_compiled_equals_eager():
    weights, grads = random_problem(4)
    lr_fn = functools.partial(
        schedules.warmup_linear_decay, peak_value=0.1, warmup_steps=3, total_steps=10
    )
    results = []
    for jit in (False, True):
        optimizer = schedules.AdamW(
            lr_fn, functools.partial(schedules.linear_anneal, initial_value=0.01, total_steps=10)
        )
        variables = [tf.Variable(w, dtype=tf.float32) for w in weights]
        optimizer.build(variables)
        apply = tf.function(lambda g: optimizer.apply(g, variables), jit_compile=jit)
        for step in grads:
            apply([tf.constant(g, tf.float32) for g in step])
        results.append([v.numpy() for v in variables])
    for eager, compiled in zip(*results):
        np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=1e-7)


def test_adamw_skips_variables_without_gradient():
    weights, grads = random_problem(5, steps=2)
    optimizer = schedules.AdamW(0.1, 0.5)
    variables = [tf.Variable(w) for w in weights]
    optimizer.build(variables)
    for step in grads:
        optimizer.apply([tf.constant(step[0]), None, tf.constant(step[2])], variables)
    np.testing.assert_array_equal(variables[1].numpy(), weights[1])
    assert not np.allclose(variables[0].numpy(), weights[0])


def test_adamw_decays_kernels_not_biases_of_the_lstm_network():
    # All kernels decay, biases (LSTM biases included) do not: our reading of DiCE Table 5's AdamW
    # (docs/papers/dice.md#departures-from-the-paper).
    net = networks.ActorCriticNet(4, torso="mlp", lstm_units=8)
    net.create_variables((3,), tf.float32)
    optimizer = schedules.AdamW(1e-3, 0.01)
    optimizer.build(net.trainable_variables)
    decayed = {v.name for v, d in zip(net.trainable_variables, optimizer._decay_mask) if d}
    assert any("recurrent_kernel" in name for name in decayed)
    assert all(
        v.shape.rank == 1 for v, d in zip(net.trainable_variables, optimizer._decay_mask) if not d
    )
    assert not any("bias" in name for name in decayed)
    assert sum(optimizer._decay_mask) == 6  # 2 torso + LSTM kernel and recurrent + 2 heads


def test_adamw_state_round_trips_through_a_checkpoint(tmp_path):
    # The optimiser is checkpointed; resuming continues the schedules and moments
    # (docs/architecture.md#the-learner-learner-side).
    weights, grads = random_problem(6, steps=4)
    lr_fn = functools.partial(
        schedules.warmup_linear_decay,
        peak_value=0.1,
        warmup_steps=2,
        total_steps=10,
        dtype=tf.float64,
    )
    straight, _ = run_adamw(schedules.AdamW(lr_fn, 0.01), weights, grads)
    first = schedules.AdamW(lr_fn, 0.01)
    variables, _ = run_adamw(first, weights, grads[:2])
    path = tf.train.Checkpoint(optimizer=first, weights=variables).save(str(tmp_path / "ckpt"))
    resumed = schedules.AdamW(lr_fn, 0.01)
    restored = [tf.Variable(np.zeros_like(w)) for w in weights]
    resumed.build(restored)
    tf.train.Checkpoint(optimizer=resumed, weights=restored).restore(path).assert_consumed()
    assert int(resumed.iterations.numpy()) == 2
    for step in grads[2:]:
        resumed.apply([tf.constant(g) for g in step], restored)
    for a, b in zip(restored, straight):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_adamw_must_be_built_and_clip_norm_positive():
    with pytest.raises(ValueError, match="call build"):
        schedules.AdamW(0.1).apply([tf.constant(1.0)], [tf.Variable(1.0)])
    with pytest.raises(ValueError, match="clip_norm must be > 0"):
        schedules.AdamW(0.1, clip_norm=0.0)

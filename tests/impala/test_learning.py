"""IMPALA optimiser (TF1 RMSProp) and the compiled train step.

The learning-rate anneal and discounts_from_resets moved to common/ with their tests
(tests/common/equations/test_schedules.py, tests/common/equations/test_sequences.py)."""

import numpy as np
import pytest
import tensorflow as tf

from common.equations import sequences
from impala import config as config_lib
from impala import learning


def np_rmsprop_tf1(w, grads, lr, decay, momentum, epsilon, ms0):
    """TF1 RMSPropOptimizer (training/rmsprop.py docstring), ms starting at ms0."""
    ms, mom = np.full_like(w, ms0), np.zeros_like(w)
    for g in grads:
        ms = decay * ms + (1 - decay) * g * g
        mom = momentum * mom + lr * g / np.sqrt(ms + epsilon)
        w = w - mom
    return w


GRADS = [np.array([0.5, -2.0, 3.0]), np.array([1.0, 0.1, -0.2]), np.array([-0.3, 0.4, 5.0])]


@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("ms0", [1.0, 0.0])
def test_rmsprop_matches_numpy(momentum, ms0):
    w0 = np.array([1.0, 2.0, -1.0])
    var = tf.Variable(w0)
    opt = learning.RMSProp(decay=0.99, momentum=momentum, epsilon=0.1, initial_mean_square=ms0)
    opt.build([var])
    for g in GRADS:
        opt.apply([tf.constant(g)], [var], tf.constant(0.01, tf.float64))
    want = np_rmsprop_tf1(w0, GRADS, 0.01, 0.99, momentum, 0.1, ms0)
    np.testing.assert_allclose(var.numpy(), want, rtol=1e-12)


def test_rmsprop_equals_tf1_and_keras_optimizers():
    w0 = np.array([1.0, 2.0, -1.0], np.float32)
    ours_tf1, ours_keras, ref_tf1, ref_keras = (tf.Variable(w0) for _ in range(4))
    opt_tf1 = learning.RMSProp(decay=0.99, momentum=0.5, epsilon=0.01)
    opt_keras = learning.RMSProp(decay=0.99, momentum=0.5, epsilon=0.01, initial_mean_square=0.0)
    opt_tf1.build([ours_tf1])
    opt_keras.build([ours_keras])
    v1 = tf.compat.v1.train.RMSPropOptimizer(0.01, decay=0.99, momentum=0.5, epsilon=0.01)
    keras = tf.keras.optimizers.RMSprop(0.01, rho=0.99, momentum=0.5, epsilon=0.01)
    for g in GRADS:
        g = tf.constant(g, tf.float32)
        opt_tf1.apply([g], [ours_tf1], 0.01)
        opt_keras.apply([g], [ours_keras], 0.01)
        v1.apply_gradients([(g, ref_tf1)])
        keras.apply_gradients([(g, ref_keras)])
    np.testing.assert_allclose(ours_tf1.numpy(), ref_tf1.numpy(), rtol=1e-6)
    np.testing.assert_allclose(ours_keras.numpy(), ref_keras.numpy(), rtol=1e-6)
    assert not np.allclose(ours_tf1.numpy(), ours_keras.numpy())  # ms0 matters


def test_optimizer_choice_from_config():
    c = config_lib.ImpalaConfig(rmsprop_epsilon=0.1, rmsprop_decay=0.9)
    opt = learning.make_optimizer(c)
    assert (opt.initial_mean_square, opt.epsilon, opt.decay, opt.momentum) == (1.0, 0.1, 0.9, 0.0)
    assert (
        learning.make_optimizer(
            config_lib.ImpalaConfig(optimizer="rmsprop_keras")
        ).initial_mean_square
        == 0.0
    )


def synthetic_batch(T=5, B=3, A=2, seed=0):
    rng = np.random.default_rng(seed)
    reset = rng.random((T + 1, B)) < 0.3
    # Some episode ends are time-limit truncations: the actor stored V(x_final) at step t.
    truncated = np.zeros((T + 1, B), bool)
    truncated[:-1] = reset[1:] & (rng.random((T, B)) < 0.5)
    assert truncated.any() and (reset[1:] & ~truncated[:-1]).any()
    return dict(
        observation=tf.constant(rng.normal(size=(T + 1, B, 4)), tf.float32),
        prev_action=tf.constant(rng.integers(0, A, (T + 1, B)), tf.int32),
        prev_reward=tf.constant(rng.normal(size=(T + 1, B)), tf.float32),
        reset=tf.constant(reset),
        action=tf.constant(rng.integers(0, A, (T + 1, B)), tf.int32),
        behaviour_logits=tf.constant(rng.normal(size=(T + 1, B, A)), tf.float32),
        reward=tf.constant(rng.normal(size=(T + 1, B)), tf.float32),
        truncation_value=tf.constant(
            np.where(truncated, rng.normal(size=(T + 1, B)), 0), tf.float32
        ),
    )


def make_step(jit_compile, **overrides):
    from common.models import networks

    tf.keras.utils.set_random_seed(1)
    config = config_lib.default_config(
        "CartPole", jit_compile=jit_compile, max_grad_norm=0.5, total_frames=1000, **overrides
    )
    net = networks.ActorCriticNet(2, torso="mlp", use_lstm=False)
    net.create_variables((4,), tf.float32)
    optimizer = learning.make_optimizer(config)
    return net, optimizer, learning.make_train_step(net, optimizer, config), config


def test_train_step_is_one_clipped_rmsprop_step_on_the_loss():
    from impala import losses

    net, _, step, config = make_step(jit_compile=False)
    batch = synthetic_batch()
    before = [v.numpy() for v in net.trainable_variables]
    # The expected update, computed by hand: gradient of the §4.2 loss, clipped to norm 0.5, one
    # TF1 RMSProp step (ms0 = 1) with lr annealed at 250 of 1000 frames.
    with tf.GradientTape() as tape:
        (logits, values), _ = net.unroll(
            batch["observation"], batch["prev_action"], batch["prev_reward"], batch["reset"], ()
        )
        loss, _ = losses.impala_loss(
            losses.LossHyperparameters.from_config(config),
            logits[:-1],
            values[:-1],
            values[-1],
            batch["behaviour_logits"][:-1],
            batch["action"][:-1],
            # The truncation bootstrap: docs/architecture.md#the-per-step-record.
            batch["reward"][:-1] + 0.99 * batch["truncation_value"][:-1],
            sequences.discounts_from_resets(batch["reset"], 0.99),
        )
    grads = tape.gradient(loss, net.trainable_variables)
    norm = np.sqrt(sum(np.sum(g.numpy() ** 2) for g in grads))
    assert norm > 0.5  # the clip is active
    lr = config.learning_rate * 0.75
    want = [
        np_rmsprop_tf1(w, [g.numpy() * 0.5 / norm], lr, 0.99, 0.0, config.rmsprop_epsilon, 1.0)
        for w, g in zip(before, grads)
    ]
    stats = step(batch, tf.constant(250, tf.int64))
    for var, expected in zip(net.trainable_variables, want):
        np.testing.assert_allclose(var.numpy(), expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(stats["optimizer/learning_rate"].numpy(), lr, rtol=1e-6)
    np.testing.assert_allclose(stats["optimizer/grad_norm"].numpy(), norm, rtol=1e-4)
    np.testing.assert_allclose(stats["loss/total"].numpy(), loss.numpy(), rtol=1e-5)


def test_compiled_train_step_equals_eager():
    batch = synthetic_batch(seed=4)
    results = []
    for jit in (False, True):
        net, _, step, _ = make_step(jit_compile=jit)
        for frames in (0, 100):
            step(batch, tf.constant(frames, tf.int64))
        results.append([v.numpy() for v in net.trainable_variables])
    for eager, compiled in zip(*results):
        np.testing.assert_allclose(compiled, eager, rtol=1e-4, atol=1e-6)

"""`common.burn_in_learning.make_train_step`'s micro-batches run one after the other, and their
weighted gradients add up to the whole batch's.

The slices of a batch share no data, so nothing but an explicit edge keeps TensorFlow from
running their forward passes together and holding every slice's activations (it did: GDI-I3's
Atari learner peaked at 12.2 GiB with four slices, 4.9 GiB once they were ordered; README, GDI).
The test runs the compiled step and records when each slice's forward pass starts and when its
gradient reaches the weights. The exact-gradient side is also tested per agent (tests/dice and
tests/gdi test_learning)."""

import time

import numpy as np
import tensorflow as tf

from common import burn_in_learning, replay, schedules
from common.config import BurnInLearnerSettings

BURN_IN, LENGTH, BATCH = 1, 4, 6  # LENGTH: steps of an item, burn-in and bootstrap included
BETA_1 = 0.9


def config_for(parts: int) -> BurnInLearnerSettings:
    """The burn-in learner's settings of a one-repeat step in `parts` slices (the schedules'
    frames are the CartPole frames of a batch; a constant lr never reads them)."""
    return BurnInLearnerSettings(
        env="CartPole",
        batch_size=BATCH,
        burn_in=BURN_IN,
        sequence_length=LENGTH - BURN_IN - 1,
        times_sampled=1,
        reuse_mode="repeat",
        learner_microbatches=parts,
        jit_compile=False,  # the step runs numpy callbacks below
    ).validate()


def make_batch(seed=0) -> dict:
    rng = np.random.default_rng(seed)
    mask = np.ones([LENGTH, BATCH], np.float32)
    mask[2:, 1] = 0.0  # sequences padded at their ends: the slices' shares of real steps differ
    mask[3:, 4] = 0.0
    return {
        "x": tf.constant(rng.normal(size=(LENGTH, BATCH, 3)), tf.float32),
        replay.MASK: tf.constant(mask),
    }


def logged(events: list, event, x: tf.Tensor) -> tf.Tensor:
    """x, passed through a numpy callback that appends `event` to `events` when it runs. Not
    stateful, so that tf.function adds no ordering of its own between the callbacks."""

    def log(value):
        if event[0] == "backward":
            time.sleep(0.05)  # an unordered next slice would start meanwhile
        events.append(event)
        return value

    out = tf.numpy_function(log, [x], tf.float32, stateful=False)
    out.set_shape(x.shape)
    return out


def run_step(parts: int, events: list | None = None):
    """One compiled step over `make_batch()` in `parts` slices of a linear model whose loss is
    the masked mean of (x w)^2 over the trained steps; returns the loss and the gradient the
    optimizer received (its first moment after one update is (1 - beta_1) g). With `events`,
    records ("forward", k) when slice k's forward pass starts and ("backward", k) when its
    gradient flows back through its output."""
    weights = tf.Variable([[0.5], [-1.0], [2.0]])
    traced = []

    def loss_fn(part):
        k = len(traced)  # the slices are traced in order
        traced.append(k)
        x = part["x"][BURN_IN:-1]
        if events is not None:
            x = logged(events, ("forward", k), x)

        @tf.custom_gradient
        def output(y):
            return tf.identity(y), lambda dy: logged(events, ("backward", k), dy)

        y = tf.squeeze(x @ weights, -1)
        if events is not None:
            y = output(y)
        mask = part[replay.MASK][BURN_IN:-1]
        loss = tf.reduce_sum(tf.square(y) * mask) / tf.maximum(tf.reduce_sum(mask), 1.0)
        return loss, {"loss": loss}

    optimizer = schedules.AdamW(1e-3, beta_1=BETA_1, clip_norm=None)
    step = burn_in_learning.make_train_step(loss_fn, [weights], optimizer, config_for(parts))
    stats = step(make_batch(), tf.constant(0, tf.int64))
    assert traced == list(range(parts))  # one trace
    gradient = optimizer.first_moments[0].numpy() / (1.0 - BETA_1)
    return float(stats["loss"]), gradient


def test_each_slice_runs_after_the_previous_slices_gradients():
    events = []
    run_step(3, events)
    assert events == [
        ("forward", 0),
        ("backward", 0),
        ("forward", 1),
        ("backward", 1),
        ("forward", 2),
        ("backward", 2),
    ]


def test_slices_add_up_to_the_whole_batch_gradient():
    batch = make_batch()
    x = batch["x"].numpy()[BURN_IN:-1]
    mask = batch[replay.MASK].numpy()[BURN_IN:-1]
    y = x @ np.array([0.5, -1.0, 2.0])
    # d/dw of sum m (x w)^2 / sum m.
    expected = 2 * np.einsum("tb,tb,tbi->i", mask, y, x)[:, None] / mask.sum()
    whole_loss, whole = run_step(1)
    np.testing.assert_allclose(whole_loss, (mask * y**2).sum() / mask.sum(), rtol=1e-5)
    np.testing.assert_allclose(whole, expected, rtol=1e-5)
    for parts in (2, 3):
        loss, gradient = run_step(parts)
        np.testing.assert_allclose(loss, whole_loss, rtol=1e-5)
        np.testing.assert_allclose(gradient, expected, rtol=1e-5)

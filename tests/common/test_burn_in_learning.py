"""`common.burn_in_learning.make_train_step`'s micro-batches run one after the other.

The slices of a batch share no data, so nothing but an explicit edge keeps TensorFlow from
running their forward passes together and holding every slice's activations (it did: GDI-I3's
Atari learner peaked at 12.2 GiB with four slices, 4.9 GiB once they were ordered; README, GDI).
The exact-gradient side is tested per agent (tests/dice and tests/gdi test_learning)."""

import types

import numpy as np
import tensorflow as tf

from common import burn_in_learning, replay, schedules

BURN_IN, LENGTH, BATCH = 1, 4, 6


def trace_slices(parts: int) -> list[tf.Operation]:
    """The train step's graph for `parts` slices; returns the first op of each slice's forward
    pass, in the order the slices were built."""
    weights = tf.Variable(tf.ones([3, 1]))
    config = types.SimpleNamespace(
        times_sampled=1,
        reuse_mode="repeat",
        learner_microbatches=parts,
        burn_in=BURN_IN,
        jit_compile=False,
        frames_per_learner_step=LENGTH * BATCH,  # the schedules' unit (never read: a constant lr)
    )

    def loss_fn(part):
        x = tf.identity(part["x"], name="slice_input")
        loss = tf.reduce_mean(tf.square(tf.squeeze(x @ weights, -1)) * part[replay.MASK])
        return loss, {"loss": loss}

    step = burn_in_learning.make_train_step(loss_fn, [weights], schedules.AdamW(1e-3), config)
    rng = np.random.default_rng(0)
    batch = {
        "x": tf.constant(rng.normal(size=(LENGTH, BATCH, 3)), tf.float32),
        replay.MASK: tf.ones([LENGTH, BATCH]),
    }
    graph = step.get_concrete_function(batch, tf.constant(0, tf.int64)).graph
    return [op for op in graph.get_operations() if op.name.startswith("slice_input")]


def depends_on(op: tf.Operation, name_part: str) -> bool:
    """Whether `op` waits (by data or control edges, transitively) for an op whose name
    contains `name_part`."""
    seen, stack = set(), [op]
    while stack:
        current = stack.pop()
        for parent in [t.op for t in current.inputs] + list(current.control_inputs):
            if parent.name not in seen:
                seen.add(parent.name)
                if name_part in parent.name:
                    return True
                stack.append(parent)
    return False


def test_each_slice_waits_for_the_previous_slices_gradients():
    # Slice k's forward pass is matmul_k (the first is "matmul"); its gradient ops live under
    # gradient_tape/matmul_k/.
    first, second, third = trace_slices(3)
    assert not depends_on(first, "gradient_tape/")
    assert depends_on(second, "gradient_tape/matmul/")
    assert depends_on(third, "gradient_tape/matmul_1/")


def test_one_slice_has_no_ordering_edge():
    (whole,) = trace_slices(1)
    assert not whole.control_inputs

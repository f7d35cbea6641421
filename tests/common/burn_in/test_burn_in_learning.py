"""`common.burn_in.burn_in_learning.make_train_step`'s micro-batches run one after the other, and
their weighted gradients add up to the whole batch's.

The slices of a batch share no data, so nothing but an explicit edge keeps TensorFlow from running
their forward passes together and holding every slice's activations (it did: GDI-I3's Atari learner
peaked at 12.2 GiB with four slices, 4.9 GiB once they were ordered; docs/guides/gdi.md). The test
runs the compiled step and records when each slice's forward pass starts and when its gradient
reaches the weights. The exact-gradient side is also tested per agent (tests/dice and
tests/gdi test_learning)."""

import time

import numpy as np
import pytest
import tensorflow as tf

from common.burn_in import burn_in_learning
from common.models import networks
from common.replay import replay
from common.equations import schedules, sequences
from common.settings.burn_in_settings import BurnInLearnerSettings

BURN_IN, LENGTH, BATCH = 1, 4, 6  # LENGTH: steps of an item, burn-in and bootstrap included
BETA_1 = 0.9


def config_for(
    parts: int, trim_padding: bool = True, length: int = LENGTH
) -> BurnInLearnerSettings:
    """The burn-in learner's settings of a one-repeat step in `parts` slices (the schedules'
    frames are the CartPole frames of a batch; a constant lr never reads them)."""
    return BurnInLearnerSettings(
        env="CartPole",
        batch_size=BATCH,
        burn_in=BURN_IN,
        sequence_length=length - BURN_IN - 1,
        times_sampled=1,
        reuse_mode="repeat",
        learner_microbatches=parts,
        trim_padding=trim_padding,
        jit_compile=False,  # the step runs numpy callbacks below
    ).validate()


def make_batch(seed=0, length: int = LENGTH) -> dict:
    """Items of `length` steps; with the default length, items 1 and 4 end early; longer items
    hold one real trained step but for the last, which is real throughout."""
    rng = np.random.default_rng(seed)
    mask = np.ones([length, BATCH], np.float32)
    if length == LENGTH:
        mask[2:, 1] = 0.0  # sequences padded at their ends: the slices' shares of real steps differ
        mask[3:, 4] = 0.0
    else:
        mask[BURN_IN + 1 :, :-1] = 0.0
    return {
        "x": tf.constant(rng.normal(size=(length, BATCH, 3)) * mask[..., None], tf.float32),
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


def run_step(
    parts: int, events: list | None = None, trim_padding: bool = True, length: int = LENGTH
):
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
    config = config_for(parts, trim_padding, length)
    step = burn_in_learning.make_train_step(loss_fn, [weights], optimizer, config)
    stats = step(make_batch(length=length), tf.constant(0, tf.int64))
    # One trace per slice; with the cut, three (the slice in two halves, or whole).
    assert traced == list(range(parts * (3 if trim_padding else 1)))
    gradient = optimizer.first_moments[0].numpy() / (1.0 - BETA_1)
    return float(stats["loss"]), gradient


def test_each_slice_runs_after_the_previous_slices_gradients():
    events = []
    run_step(3, events, trim_padding=False)
    assert events == [
        ("forward", 0),
        ("backward", 0),
        ("forward", 1),
        ("backward", 1),
        ("forward", 2),
        ("backward", 2),
    ]
    # With the cut, a slice runs whole or in two halves (traces 3i, 3i + 1, 3i + 2 of slice i),
    # and still only once the previous slice's gradients exist.
    events = []
    run_step(3, events)
    slices = [k // 3 for _, k in events]
    assert slices == sorted(slices) and set(slices) == {0, 1, 2}
    for _, k in events:
        assert events.index(("forward", k)) < events.index(("backward", k))


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


def test_halves_add_up_to_the_whole_batch_gradient():
    """Five one-step games and one long one: the slice is cut in two (two forward passes), and
    the halves' weighted gradients are the whole batch's."""
    length = 41
    batch = make_batch(length=length)
    x = batch["x"].numpy()[BURN_IN:-1]
    mask = batch[replay.MASK].numpy()[BURN_IN:-1]
    y = x @ np.array([0.5, -1.0, 2.0])
    expected = 2 * np.einsum("tb,tb,tbi->i", mask, y, x)[:, None] / mask.sum()
    events = []
    loss, gradient = run_step(1, events, length=length)
    assert sorted(events) == [("backward", 0), ("backward", 1), ("forward", 0), ("forward", 1)]
    np.testing.assert_allclose(loss, (mask * y**2).sum() / mask.sum(), rtol=1e-5)
    np.testing.assert_allclose(gradient, expected, rtol=1e-5)
    whole_loss, whole = run_step(1, trim_padding=False, length=length)
    np.testing.assert_allclose(whole, expected, rtol=1e-5)


def test_sorted_slices_are_cut_after_their_own_last_real_step():
    """With the padding cut, the items go into slices in the order of their real trained
    positions, and a slice loses the positions after its own items' last real one (plus one
    bootstrap position): every item lands in one slice, its kept positions unchanged."""
    burn_in, length, batch_size = 2, 6, 6
    real_trained = np.array([6, 1, 3, 0, 2, 5])  # real trained positions of each item
    mask = np.zeros([burn_in + length + 1, batch_size], np.float32)
    mask[:burn_in, ::2] = 1.0  # a real burn-in for items 0, 2 and 4
    for item, real in enumerate(real_trained):
        mask[burn_in : burn_in + real, item] = 1.0
    mask[-1, 0] = 1.0  # item 0's game goes on: its bootstrap step is real
    x = (np.random.default_rng(1).normal(size=mask.shape) * mask).astype(np.float32)
    batch = {
        "x": tf.constant(x),
        replay.MASK: tf.constant(mask),
        "core_state": (tf.constant(np.arange(batch_size, dtype=np.float32)),),
        "learner_step": tf.constant(3, tf.int64),
    }
    slices = burn_in_learning.split_batch(batch, 3, sort_burn_in=burn_in)
    items = [slice_["core_state"][0].numpy().astype(int) for slice_ in slices]
    assert [real_trained[i].tolist() for i in items] == [[0, 1], [2, 3], [5, 6]]
    for slice_, rows in zip(slices, items):
        cut = burn_in_learning.cut_padding(slice_, burn_in)
        kept = burn_in + max(1, real_trained[rows].max()) + 1
        assert cut[replay.MASK].shape[0] == kept
        np.testing.assert_array_equal(cut["x"], x[:kept, rows])
        np.testing.assert_array_equal(cut[replay.MASK], mask[:kept, rows])
        assert int(cut["learner_step"]) == 3
    # Without the cut: slices in the batch's order, whole.
    whole = burn_in_learning.split_batch(batch, 2)
    assert [s["core_state"][0].numpy().tolist() for s in whole] == [[0, 1, 2], [3, 4, 5]]
    assert all(s[replay.MASK].shape[0] == burn_in + length + 1 for s in whole)


def test_a_slice_is_cut_in_two_where_that_saves_most():
    """`split_point` on worked numbers, cost = positions x (12 + items) per part: seven 1-step
    games and one 80-step game cut after the seventh (2 x 19 + 81 x 13 = 1,091 against 81 x 20
    = 1,620 whole); equal games are not cut (0); two groups of four cut between them."""

    def point(lengths):
        return int(burn_in_learning.split_point(tf.constant(lengths, tf.int32)))

    assert point([1] * 7 + [80]) == 7
    assert point([80] * 8) == 0
    assert point([0] * 8) == 0
    # 10 x (12 + 4) + 61 x (12 + 4) = 1,136 against 61 x 20 = 1,220 whole.
    assert point([9] * 4 + [60] * 4) == 4
    # 50 x 16 + 61 x 16 = 1,776 against 61 x 20 = 1,220: not cut.
    assert point([49] * 4 + [60] * 4) == 0


@pytest.mark.parametrize("layout", ["mixed", "no_real_burn_in", "padding_then_real"])
def test_the_burn_in_runs_only_where_it_is_real_and_ends_in_the_same_states(layout):
    """`warmed_up_states` (the burn-in run on the items whose burn-in holds a real step) and
    `unroll_trained` equal R2D2's burn-in and unroll on every item
    (`sequences.burn_in_unroll`), for two networks: items with a real burn-in, items whose
    burn-in is all padding (they keep the stored state), and one whose burn-in starts with
    padding (the step-by-step path)."""
    burn_in, length, batch_size, actions = 3, 4, 5, 3
    steps = burn_in + length + 1
    rng = np.random.default_rng(7)
    nets = [networks.ActorCriticNet(actions, torso="mlp", lstm_units=8) for _ in range(2)]
    for net in nets:
        net.create_variables((4,), tf.float32)
    mask = np.ones([steps, batch_size], np.float32)
    reset = np.zeros([steps, batch_size], bool)
    padded_burn_in = {"mixed": [1, 3], "no_real_burn_in": range(batch_size)}.get(layout, [1])
    for item in padded_burn_in:  # an episode's first item
        mask[:burn_in, item] = 0.0
        reset[burn_in, item] = True
    if layout == "padding_then_real":
        mask[0, 2] = 0.0
        reset[1, 2] = True
    mask[burn_in + 2 :, 4] = 0.0  # a game that ends inside the item
    batch = {
        "observation": tf.constant(rng.normal(size=[steps, batch_size, 4]) * mask[..., None]),
        "prev_action": tf.constant(rng.integers(0, actions, [steps, batch_size]), tf.int32),
        "prev_reward": tf.constant(rng.normal(size=[steps, batch_size]) * mask, tf.float32),
        "reset": tf.constant(reset),
        replay.MASK: tf.constant(mask),
        "core_state": [
            tuple(tf.constant(rng.normal(size=[batch_size, 8]), tf.float32) for _ in range(2))
            for _ in nets
        ],
    }
    batch["observation"] = tf.cast(batch["observation"], tf.float32)
    inputs = [batch[name] for name in burn_in_learning.UNROLL_INPUTS]
    states = burn_in_learning.warmed_up_states(nets, batch, burn_in)
    outputs = burn_in_learning.unroll_trained(nets, batch, burn_in)
    for net, stored, state, output in zip(nets, batch["core_state"], states, outputs):
        expected_outputs, _ = sequences.burn_in_unroll(net.unroll, inputs, stored, burn_in, mask)
        expected = sequences.burn_in_state(
            net.unroll, [x[:burn_in] for x in inputs], stored, mask[:burn_in]
        )
        for got, want, kept in zip(state, expected, stored):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(
                tf.gather(got, padded_burn_in), tf.gather(kept, padded_burn_in)
            )
        for got, want in zip(output, expected_outputs):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

"""The R2D2-style learner DiCE, GDI and LBC share (DiCE App. B, Algorithm 3; GDI App. F,
Algorithms 2-3; LBC App. F, Algorithm 2): sample-k items in, AdamW step out.

A paper supplies its loss on the trained part of the items; this module supplies the rest:
- `unroll_trained`: burn-in from the stored LSTM state without gradient (`warmed_up_states`, on
  the items whose burn-in holds a real step), then the trained steps with gradient, for each
  network of the agent (R2D2's, `common.equations.sequences.burn_in_unroll`);
- `trained_steps`: the per-step fields of the trained part (burn-in dropped);
- `sample_k_replay`: its replay pattern;
- `make_optimizer`: AdamW with linear warm-up then linear decay of the learning rate, weight
  decay annealed linearly to 0, global-norm clip (DiCE Table 5, GDI Table 6, LBC Table 3), both
  schedules ending at the run's frame budget (the horizon and the decay's form are ours:
  docs/papers/dice.md#departures-from-the-paper);
- `make_train_step`: one compiled step; `repeats` > 1 is the other reading of "sample reuse"
  (several optimiser steps on each batch, `reuse_mode=repeat`;
  docs/papers/dice.md#departures-from-the-paper). It computes the gradient in slices of the
  batch (`split_batch`) and, with `trim_padding`, each slice whole or in two parts by length
  (`split_point`), each cut after its own last real step (`cut_padding`): short games do not
  pay for the padding a long game in the batch needs.

The config is the paper's, a `common.settings.burn_in_settings.BurnInLearnerSettings`: its replay,
AdamW and `jit_compile` fields, and the `gradient_updates` and `frames_per_learner_step` it derives.
"""

import functools
from typing import Callable, Protocol, Sequence

import tensorflow as tf

from common.runtime import acting
from common.settings import burn_in_settings
from common.models import networks as networks_lib
from common.models import recurrent
from common.replay import patterns
from common.replay import replay
from common.equations import schedules
from common.equations import sequences

UNROLL_INPUTS = ("observation", "prev_action", "prev_reward", "reset")
# The batch's fields that are not time-major steps: batch-major per item, and the step's count.
PER_ITEM = (acting.CORE_STATE, "info")
NOT_STEPS = (*PER_ITEM, "learner_step")


def sample_k_replay(config: burn_in_settings.BurnInLearnerSettings) -> patterns.SampleK:
    """The replay of the burn-in learner ("we train each sample twice": DiCE §4.1, GDI §4.1, LBC
    App. H.1; uniform sampling is ours, docs/papers/dice.md#departures-from-the-paper): each
    item of burn-in + sequence + 1 steps sampled `times_sampled` times ("sample reuse"), or once
    when each batch is trained on `times_sampled` times instead (reuse_mode=repeat)."""
    pattern = patterns.SampleK(
        length=config.sequence_length,
        capacity=config.replay_capacity,
        burn_in=config.burn_in,
        times_sampled=config.times_sampled if config.reuse_mode == "replay" else 1,
        min_size=config.batch_size,
        trim_padding=config.trim_padding,
    )
    pattern.validate()
    return pattern


def make_optimizer(config: burn_in_settings.BurnInLearnerSettings) -> schedules.AdamW:
    total = config.gradient_updates
    return schedules.AdamW(
        learning_rate=functools.partial(
            schedules.warmup_linear_decay,
            peak_value=config.learning_rate,
            warmup_steps=config.warmup_steps,
            total_steps=total,
        ),
        weight_decay=functools.partial(
            schedules.linear_anneal, initial_value=config.weight_decay, total_steps=total
        ),
        beta_1=config.adam_beta1,
        beta_2=config.adam_beta2,
        epsilon=config.adam_epsilon,
        clip_norm=config.max_grad_norm or None,
    )


def unroll_trained(
    networks: Sequence, batch: dict, burn_in: int, return_features: bool = False
) -> list:
    """Each network's outputs on the trained steps, `[(advantages [T+1, B, A], values
    [T+1, B]), ...]`, from its core state after the burn-in (`warmed_up_states`).
    `return_features` adds each network's torso embeddings [T+1, B, D] (auxiliary tasks,
    `common.burn_in.dynamics`).

    The torso runs once per distinct torso (`common.models.networks.torso_outputs`: GDI-H3's shared
    torso serves both networks), on the burn-in and on the trained steps apart: only the trained
    steps' pass is on the gradient's path. The networks' LSTM cores step together
    (`common.models.recurrent.unroll_together`)."""
    states = warmed_up_states(networks, batch, burn_in)
    features = networks_lib.torso_outputs(networks, batch[UNROLL_INPUTS[0]][burn_in:], True)
    prev_action, prev_reward, reset = (batch[name][burn_in:] for name in UNROLL_INPUTS[1:])
    outputs, _ = recurrent.unroll_together(
        networks, features, prev_action, prev_reward, reset, states, return_features=return_features
    )
    return outputs


def warmed_up_states(networks: Sequence, batch: dict, burn_in: int) -> list:
    """Each network's core state entering the first trained step, without gradient (R2D2's
    burn-in, `common.equations.sequences.burn_in_unroll`): the state stored at the item's first step
    (one entry per network in `batch["core_state"]`, `common.burn_in.advantage_policy`) run through
    the burn-in steps, the padding among them holding it.

    Only the items whose burn-in holds a real step go through the torso and the cores; the
    others keep their stored state, which is what padding alone gives (an episode's first item
    has an all-padding burn-in). A batch of games shorter than an item runs no burn-in at all."""
    stored = list(batch[acting.CORE_STATE])
    if burn_in == 0 or not tf.nest.flatten(stored):
        return stored
    real = tf.cast(batch[replay.MASK][:burn_in], tf.float32) > 0  # [burn_in, B]
    rows = tf.where(tf.reduce_any(real, axis=0))[:, 0]

    def warm_up() -> list:
        def taken(x):
            return tf.gather(x[:burn_in], rows, axis=1)

        features = networks_lib.torso_outputs(networks, taken(batch[UNROLL_INPUTS[0]]), True)
        other_inputs = [taken(batch[name]) for name in UNROLL_INPUTS[1:]]

        def unroll(features, prev_action, prev_reward, reset, states):
            return recurrent.unroll_together(
                networks, features, prev_action, prev_reward, reset, states
            )

        start = tf.nest.map_structure(lambda s: tf.gather(s, rows), stored)
        warm = sequences.burn_in_state(
            unroll, [features, *other_inputs], start, tf.gather(real, rows, axis=1)
        )
        return tf.nest.map_structure(
            lambda s, w: tf.tensor_scatter_nd_update(s, rows[:, None], w), stored, warm
        )

    states = tf.cond(tf.size(rows) > 0, warm_up, lambda: stored)
    return tf.nest.map_structure(tf.stop_gradient, states)


def trained_steps(batch: dict, burn_in: int) -> dict:
    """The item's per-step fields from the first trained step on ([T+1, B, ...]); nested
    fields (the behaviour parameters) are sliced too."""
    steps = {k: v for k, v in batch.items() if k not in NOT_STEPS}
    return tf.nest.map_structure(lambda x: x[burn_in:], steps)


# choice: a step of an unroll, forward and backward, costs about as much as 12 more items do on the
# 2-core AVX2 CPU of docs/guides/minatar.md (DiCE's LSTM over 81 steps: 83 ms for 8 items, 313 ms
# for 64): what `split_point` weighs a part's positions against its items with.
STEP_COST_IN_ITEMS = 12.0


def _taken(batch: dict, rows: tf.Tensor) -> dict:
    """The items `rows` of a batch (axis 1 of the time-major step fields, axis 0 of the core
    state and the sample info)."""
    part = {}
    for key, value in batch.items():
        if key == "learner_step":
            part[key] = value
        elif key in PER_ITEM:
            part[key] = tf.nest.map_structure(lambda x: tf.gather(x, rows), value)
        else:
            part[key] = tf.nest.map_structure(lambda x: tf.gather(x, rows, axis=1), value)
    return part


def split_batch(batch: dict, parts: int, sort_burn_in: int | None = None) -> list[dict]:
    """`parts` equal slices of a batch along its batch axis; with `sort_burn_in` (the items'
    burn-in) the items are first ordered by `replay.last_real_trained_position`, so that each
    slice holds games of similar lengths, shortest first."""
    size = tf.shape(batch[replay.MASK])[1] // parts
    order = tf.range(tf.shape(batch[replay.MASK])[1])
    if sort_burn_in is not None:
        order = tf.argsort(replay.last_real_trained_position(batch[replay.MASK], sort_burn_in))
    return [_taken(batch, order[i * size : (i + 1) * size]) for i in range(parts)]


def cut_padding(part: dict, burn_in: int) -> dict:
    """`part` cut after its items' last real trained position and one bootstrap position
    (`replay.trim_trailing_padding`, at any length): what is cut is padding after every real
    step of its items, so its losses are unchanged."""
    steps = {key: value for key, value in part.items() if key not in NOT_STEPS}
    length = tf.shape(part[replay.MASK])[0] - burn_in - 1
    return dict(part, **replay.trim_trailing_padding(steps, burn_in, length, quantum=1))


def split_point(lengths: tf.Tensor) -> tf.Tensor:
    """Where to cut items sorted by their trained positions (`lengths` [n], ascending) in two
    parts, each unrolled up to its longest item: the s in [0, n] that minimises the estimated
    cost (positions of a part) x (`STEP_COST_IN_ITEMS` + its items) of [:s] and [s:] (0 or n:
    do not cut)."""
    n = tf.shape(lengths)[0]
    positions = tf.cast(tf.maximum(lengths, 1) + 1, tf.float32)  # trained + bootstrap
    items = tf.cast(tf.range(n + 1), tf.float32)
    short = tf.concat([[0.0], positions], 0) * (STEP_COST_IN_ITEMS + items)
    long = positions[-1] * (STEP_COST_IN_ITEMS + tf.cast(n, tf.float32) - items)
    long *= tf.cast(items < tf.cast(n, tf.float32), tf.float32)
    return tf.argmin(short + long, output_type=tf.int32)


class Optimizer(Protocol):
    """What `make_train_step` needs of an optimiser: `common.equations.schedules.AdamW`, or one
    made of several (LBC's `lbc.learning.PopulationOptimizer`)."""

    def build(self, variables: Sequence[tf.Variable]) -> None: ...

    def apply(
        self,
        gradients: Sequence[tf.Tensor | None],
        variables: Sequence[tf.Variable],
        schedule_step: tf.Tensor | None = None,
    ) -> dict[str, tf.Tensor]: ...


def make_train_step(
    loss_fn: Callable[[dict], tuple],
    variables: Sequence[tf.Variable],
    optimizer: Optimizer,
    config: burn_in_settings.BurnInLearnerSettings,
) -> Callable[[dict, tf.Tensor], dict]:
    """`step(batch, frames) -> stats` (one tf.function): `loss_fn(batch) -> (loss, stats)`,
    gradients of `variables`, one AdamW update (`times_sampled` of them with
    `reuse_mode="repeat"`).

    The schedules' horizon is `config.gradient_updates`, the updates of a run whose items are all
    full; the schedules are read at the frames consumed so far in those updates' worth
    (`frames` / new frames per update, plus the repeat's index), which is the update count when
    items are full. Items padded at episode ends consume fewer frames (`common.runtime.learning`),
    so the run takes more updates, and the schedules still end at its last one, at the frame budget.

    `config.learner_microbatches` = k > 1 computes the gradient k sequences-slices at a time and
    adds them up, each weighted by its share of the batch's trained real steps: `loss_fn`
    averages over the real trained steps of what it is given (masked means), so the weighted
    sum is exactly the whole batch's gradient (and stats), in about 1/k of the activation
    memory. With `config.trim_padding` (and no XLA, which needs static shapes) the slices hold
    items sorted by length, and each is computed whole or in two parts by the same weighting,
    each part cut after its own last real step.
    """
    optimizer.build(variables)
    repeats = config.times_sampled if config.reuse_mode == "repeat" else 1
    parts = config.learner_microbatches
    # XLA compiles static shapes only: under it the batch-wide cut of the dataset is the only one.
    cut_in_step = config.trim_padding and not config.jit_compile

    def weighted_gradients(part: dict, total: tf.Tensor):
        """The gradient and stats of `part`, weighted by its share of the batch's real trained
        steps (`total`)."""
        weight = tf.reduce_sum(tf.cast(part[replay.MASK][config.burn_in : -1], tf.float32))
        weight /= total
        with tf.GradientTape() as tape:
            loss, stats = loss_fn(part)
        grads = [g * weight for g in tape.gradient(loss, variables)]
        return grads, {k: v * weight for k, v in stats.items()}

    def added(a: tuple, b: tuple) -> tuple:
        return [x + y for x, y in zip(a[0], b[0])], {k: a[1][k] + v for k, v in b[1].items()}

    def trimmed_gradients(part: dict, total: tf.Tensor):
        """`part` (sorted by length) cut in two where that saves most (`split_point`), each half
        cut after its own last real step (`cut_padding`), or whole and cut where splitting saves
        nothing: a batch of short games does not unroll the positions only its longest need."""
        burn_in = config.burn_in
        lengths = replay.last_real_trained_position(part[replay.MASK], burn_in)
        cut = split_point(lengths)
        size = tf.shape(lengths)[0]

        def halves():
            rows = tf.range(size)
            short, long = (_taken(part, r) for r in (rows[:cut], rows[cut:]))
            return added(
                weighted_gradients(cut_padding(short, burn_in), total),
                weighted_gradients(cut_padding(long, burn_in), total),
            )

        return tf.cond(
            (cut > 0) & (cut < size),
            halves,
            lambda: weighted_gradients(cut_padding(part, burn_in), total),
        )

    def gradients(batch: dict):
        if parts == 1 and not cut_in_step:
            with tf.GradientTape() as tape:
                loss, stats = loss_fn(batch)
            return tape.gradient(loss, variables), stats
        trained = tf.cast(batch[replay.MASK][config.burn_in : -1], tf.float32)
        total = tf.maximum(tf.reduce_sum(trained), 1.0)
        summed: tuple | None = None
        sort_burn_in = config.burn_in if cut_in_step else None
        for part in split_batch(batch, parts, sort_burn_in):
            # The slices share no data, so without this edge the graph may run their forward
            # passes at once and hold every slice's activations: no memory would be saved. Each
            # slice starts once the previous slice's gradients exist.
            with tf.control_dependencies(summed[0] if summed else []):
                if cut_in_step:
                    result = trimmed_gradients(part, total)
                else:
                    result = weighted_gradients(part, total)
            summed = result if summed is None else added(summed, result)
        return summed

    frames_per_update = config.frames_per_learner_step / repeats

    def step(batch: dict, frames: tf.Tensor) -> dict:
        progress = tf.cast(frames, tf.float64) / frames_per_update
        for repeat in range(repeats):
            grads, stats = gradients(batch)
            optimizer_stats = optimizer.apply(grads, variables, schedule_step=progress + repeat)
        return dict(stats, **optimizer_stats)

    # The cut in the step takes any batch length: one trace serves the dataset's cut batches.
    return tf.function(
        step, jit_compile=config.jit_compile, reduce_retracing=cut_in_step, autograph=False
    )

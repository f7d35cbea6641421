"""Sequence helpers shared by the learners: discounts, truncation bootstraps, masks, burn-in.

Pure TensorFlow functions on time-major tensors `[T, B, ...]` (docs/architecture.md#conventions).
A learner batch is either an IMPALA unroll (`T + 1` steps from the queue table, the last only a
bootstrap observation) or an R2D2-style item of DiCE / GDI / LBC (`burn_in + length + 1` steps,
DiCE Table 5's burn-in, seq-length and bootstrap):
burn-in padding at the start of an episode's first item, the real steps, then zero padding with
`mask` 0 after the episode's last real step (`common.replay.writers.BurnInSequenceWriter`).

- `discounts_from_resets`: gamma_t = gamma (1 − reset_{t+1}), cut where the sequence is padding;
  a scalar, per-step or per-env gamma, or one gamma per value head (LBC's gamma_i, Table 3).
- `bootstrapped_rewards`: a time-limit truncation bootstraps (docs/architecture.md#conventions): the
  reward of the truncated step becomes f_k(r_t) + gamma_k V_k(x_final) for every value head k.
- `masked_mean`, `masked_sum`: loss reductions over the valid steps only (DiCE, GDI and LBC print
  only the loss weights; the mean over real steps is ours:
  docs/papers/dice.md#departures-from-the-paper).
- `burn_in_unroll`: R2D2's burn-in from the stored recurrent state without gradient, then the
  trained unroll (DiCE §4.1: "We store the recurrent state during inference and make it the
  start point of the burn-in phase").
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import tensorflow as tf

Nest = Any  # a tensor, or a tuple / list / dict of them
RewardShaping = Callable[[tf.Tensor], tf.Tensor]


# ----------------------------------------------------------------------------- discounts


def _as_float(x, dtype_hint=tf.float32) -> tf.Tensor:
    x = tf.convert_to_tensor(x, dtype_hint=dtype_hint)
    return x if x.dtype.is_floating else tf.cast(x, dtype_hint)


def _discount_times(cut: tf.Tensor, discount) -> tf.Tensor:
    """discount · cut, where `cut` is [T, B] and discount is one head's gamma (see the caller)."""
    discount = _as_float(discount)
    cut = tf.cast(cut, discount.dtype)
    if discount.shape.rank is not None and discount.shape.rank > 2:
        cut = tf.reshape(
            cut, tf.concat([tf.shape(cut), tf.ones([discount.shape.rank - 2], tf.int32)], 0)
        )
    return discount * cut


def discounts_from_resets(resets: tf.Tensor, discount: Nest, mask: tf.Tensor | None = None) -> Nest:
    """gamma_t = gamma_t · (1 − reset_{t+1}) · mask_t · mask_{t+1} for t = 0..T−1.

    The actor marks the first step of every episode with `reset` (docs/architecture.md#conventions;
    IMPALA's Eq. (1) is written for an infinite horizon): step t ended
    an episode iff step t+1 is a first step, and x_{t+1} then belongs to the next episode, so there
    is no bootstrap from it. With a `mask` (1 real, 0 padding; `BurnInSequenceWriter`), a step next
    to padding does not bootstrap either: after the last real step of a terminated episode comes
    padding (reset False, all-zero fields), and mask_{t+1} = 0 cuts the bootstrap there; a padded
    step itself (mask_t = 0) gets 0 too, so nothing of the padding reaches a real step's target and
    padded targets stay finite. (A truncated episode bootstraps only through `bootstrapped_rewards`
    or through a real final step the actor appended.)

    Args:
      resets: [T+1, B] bool (or 0/1): True where an episode starts.
      discount: gamma, one of
        - a scalar (Python number or tensor);
        - a tensor broadcastable to [T, B] by numpy rules: per env [B], per step [T, B];
        - a tensor of rank > 2 whose first two axes are [T or 1, B or 1]: its trailing axes are
          value heads, e.g. `tf.constant(gammas)[None, None, :]` gives [T, B, K];
        - a tuple / list / dict of the above, one per value head (LBC's gamma_1..3, Table 3):
          the result has the same structure.
      mask: optional [T+1, B] float or bool, 1 for real steps and 0 for padding.

    Returns:
      [T, B] (or [T, B, K...], or the structure of `discount`) per-step discounts, float (the
      discount's float dtype; float32 for Python numbers).
    """
    resets = tf.convert_to_tensor(resets)
    cut = 1.0 - tf.cast(resets[1:], tf.float32)  # 0/1: exact in every float dtype
    if mask is not None:
        real = tf.cast(tf.cast(mask, tf.float32) > 0, tf.float32)
        cut = cut * real[:-1] * real[1:]
    return tf.nest.map_structure(lambda gamma: _discount_times(cut, gamma), discount)


# ----------------------------------------------------------------------------- truncation


def _per_head(structure: Nest, value: Any, name: str) -> Nest:
    """`value` if it has the structure of the heads, else `value` repeated for every head."""
    if tf.nest.is_nested(value):
        try:
            tf.nest.assert_same_structure(structure, value)
        except (ValueError, TypeError) as error:
            raise ValueError(
                f"{name} must be one value for every head or have the structure of "
                f"truncation_values"
            ) from error
        return value
    return tf.nest.map_structure(lambda _: value, structure)


def _shaped(rewards: tf.Tensor, shaping: RewardShaping | None) -> tf.Tensor:
    return rewards if shaping is None else tf.cast(shaping(rewards), rewards.dtype)


def bootstrapped_rewards(
    rewards: tf.Tensor,
    truncation_values: Nest,
    discount: Nest,
    reward_shaping: (
        RewardShaping | Sequence[RewardShaping | None] | Mapping[Any, RewardShaping | None] | None
    ) = None,
) -> Nest:
    """f_k(r_t) + gamma_k · V_k(x_final) for every value head k (docs/architecture.md#conventions).

    Where step t hit the time limit, the actor stores the value of the final observation,
    V_k(x_final), in `truncation_values` (0 elsewhere; `common.runtime.acting`), and the discount of
    step t is 0 like a termination (the next stored step starts a new episode). Folding
    gamma_k V_k(x_final) into the reward makes the target at t the one-step bootstrap
    r_t + gamma_k V_k(x_final): a truncation bootstraps instead of terminating. Each head applies
    its own reward shaping f_k to r_t first (e.g. GDI-H3 and LBC train one head per shaping,
    GDI Table 6, LBC Table 3); the shaping never touches the bootstrap value, which is already in
    the head's (shaped) units.

    Forms (one head: f(r) + gamma V):
      - `truncation_values` [T, B]: one head; `discount` a scalar or broadcastable to [T, B];
        `reward_shaping` None or one callable. Returns [T, B].
      - `truncation_values` [T, B, K]: K heads on the last axis; `discount` broadcastable to
        [T, B, K] (e.g. [K] gammas); `reward_shaping` None, one callable for all heads, or a
        sequence of K callables (None entries for unshaped heads). Returns [T, B, K].
      - a tuple / list / dict of [T, B] tensors, one per head; `discount` and `reward_shaping`
        are one value for all heads or the same structure. Returns that structure.

    Args:
      rewards: [T, B] environment rewards (the same raw rewards for every head).
      truncation_values: V_k(x_final) where a step was truncated, 0 elsewhere (forms above).
      discount: gamma per head (forms above).
      reward_shaping: f_k per head (forms above); None is the identity.
    """
    rewards = _as_float(rewards)
    if tf.nest.is_nested(truncation_values):
        discounts = _per_head(truncation_values, discount, "discount")
        shapings = _per_head(truncation_values, reward_shaping, "reward_shaping")
        return tf.nest.map_structure(
            lambda values, gamma, shaping: bootstrapped_rewards(rewards, values, gamma, shaping),
            truncation_values,
            discounts,
            shapings,
        )
    values = tf.cast(tf.convert_to_tensor(truncation_values), rewards.dtype)
    gamma = tf.cast(_as_float(discount), rewards.dtype)
    if values.shape.rank == rewards.shape.rank:
        if isinstance(reward_shaping, (Sequence, Mapping)):
            raise ValueError("one value head: pass one reward_shaping callable (or None)")
        return _shaped(rewards, reward_shaping) + gamma * values
    if values.shape.rank != rewards.shape.rank + 1:
        raise ValueError(
            f"truncation_values must be [T, B] or [T, B, K], got shape {values.shape} "
            f"for rewards of shape {rewards.shape}"
        )
    if isinstance(reward_shaping, Sequence):
        if len(reward_shaping) != values.shape[-1]:
            raise ValueError(f"{len(reward_shaping)} reward shapings for {values.shape[-1]} heads")
        shaped = tf.stack([_shaped(rewards, f) for f in reward_shaping], axis=-1)
    elif isinstance(reward_shaping, Mapping):
        raise ValueError("heads on the last axis: pass one reward_shaping callable or a list")
    else:
        shaped = _shaped(rewards, reward_shaping)[..., None]
    return shaped + gamma * values


# ----------------------------------------------------------------------------- masked reductions


def _broadcast_mask(x: tf.Tensor, mask) -> tf.Tensor:
    """The mask as x's dtype, with trailing axes added up to x's rank, broadcast to x's shape."""
    mask = tf.cast(tf.convert_to_tensor(mask), x.dtype)
    if mask.shape.rank is not None and x.shape.rank is not None and mask.shape.rank < x.shape.rank:
        mask = tf.reshape(
            mask,
            tf.concat([tf.shape(mask), tf.ones([x.shape.rank - mask.shape.rank], tf.int32)], 0),
        )
    return tf.broadcast_to(mask, tf.shape(x))


def masked_sum(x: tf.Tensor, mask: tf.Tensor, axis: int | Sequence[int] | None = None) -> tf.Tensor:
    """sum_i mask_i · x_i over `axis` (all axes when None).

    `mask` (float weights, usually 0/1, or bool) is x's shape or its leading axes (e.g. a [T, B]
    step mask for [T, B, K] values). Entries with mask 0 are selected away, not multiplied by 0, so
    an inf or NaN there does not reach the sum.
    """
    x = tf.convert_to_tensor(x)
    mask = _broadcast_mask(x, mask)
    return tf.reduce_sum(tf.where(mask != 0, x * mask, tf.zeros_like(x)), axis=axis)


def masked_mean(
    x: tf.Tensor, mask: tf.Tensor, axis: int | Sequence[int] | None = None
) -> tf.Tensor:
    """sum_i mask_i x_i / sum_i mask_i over `axis`: the mean over the valid entries.

    The loss reduction of DiCE / GDI / LBC (the mean over real steps, our choice:
    docs/papers/dice.md#departures-from-the-paper). Where
    the mask sums to 0 the result is 0, with a zero gradient (no NaN), so a batch of padding only
    contributes nothing. With an all-ones mask it is `tf.reduce_mean`. `mask` as in `masked_sum`.
    """
    x = tf.convert_to_tensor(x)
    mask = _broadcast_mask(x, mask)
    total = tf.reduce_sum(tf.where(mask != 0, x * mask, tf.zeros_like(x)), axis=axis)
    return tf.math.divide_no_nan(total, tf.reduce_sum(mask, axis=axis))


# ----------------------------------------------------------------------------- burn-in

UnrollFn = Callable[..., tuple[Nest, Nest]]


def _time_slice(inputs: Sequence[Nest], start: int, stop: int | None) -> list:
    return [tf.nest.map_structure(lambda x: x[start:stop], x) for x in inputs]


def _hold(keep: tf.Tensor, new_state: Nest, old_state: Nest) -> Nest:
    """new where `keep` [B] is True, old elsewhere, for every [B, ...] leaf; old's structure."""

    def select(new, old):
        shape = tf.concat([tf.shape(keep), tf.ones([tf.rank(old) - 1], tf.int32)], 0)
        return tf.where(tf.reshape(keep, shape), tf.cast(new, old.dtype), old)

    new_leaves, old_leaves = tf.nest.flatten(new_state), tf.nest.flatten(old_state)
    if len(new_leaves) != len(old_leaves):
        raise ValueError(
            f"unroll_fn returned a state with {len(new_leaves)} tensors, "
            f"the initial state has {len(old_leaves)}"
        )
    return tf.nest.pack_sequence_as(
        old_state, [select(new, old) for new, old in zip(new_leaves, old_leaves)]
    )


def burn_in_state(
    unroll_fn: UnrollFn, inputs: Sequence[Nest], state: Nest, mask: tf.Tensor | None
) -> Nest:
    """The state after the burn-in steps `inputs` ([burn_in, B, ...]) from `state`, held on the
    steps where `mask` is 0 (no stop_gradient here; `burn_in_unroll` says how)."""
    if mask is None:
        return unroll_fn(*inputs, state)[1]
    real = tf.cast(mask, tf.float32) > 0  # [L, B]

    def whole_burn_in():
        # Every env's burn-in is all real or all padding (the default layout, period = length >=
        # burn_in): one unroll, then the stored state where the burn-in is only padding.
        _, final = unroll_fn(*inputs, state)
        return _hold(tf.reduce_any(real, axis=0), final, state)

    def step_by_step():
        # Padding and real steps mixed in one env's burn-in: unroll one step at a time and keep
        # the state where the step is padding.
        def body(carry, elems):
            step_inputs, step_real = elems
            _, new = unroll_fn(
                *[tf.nest.map_structure(lambda x: x[None], x) for x in step_inputs], carry
            )
            return _hold(step_real, new, carry)

        states = tf.scan(body, (list(inputs), real), initializer=state)
        return tf.nest.map_structure(lambda s: s[-1], states)

    all_or_nothing = tf.reduce_all(tf.reduce_all(real, axis=0) | tf.reduce_all(~real, axis=0))
    return tf.cond(all_or_nothing, whole_burn_in, step_by_step)


def burn_in_unroll(
    unroll_fn: UnrollFn,
    inputs: Sequence[Nest],
    initial_state: Nest,
    burn_in: int,
    mask: tf.Tensor | None = None,
) -> tuple[Nest, Nest]:
    """R2D2 burn-in (DiCE §4.1, Table 5): warm the core up without gradient, then
    unroll the trained part with gradient.

    1. Unroll steps 0..burn_in−1 from `initial_state` (the state the actor stored at the item's
       first step) and stop the gradient of the resulting state: nothing of the burn-in, neither
       its inputs nor the network's weights through it nor the stored state, is trained.
    2. Unroll steps burn_in..T−1 from that state, with gradient.

    `unroll_fn(*step_inputs, state) -> (outputs, final_state)` runs a recurrent network over a
    time-major sequence: `common.models.networks.ActorCriticNet.unroll` with
    `inputs = (obs, prev_action, prev_reward, reset)`. Each element of `inputs` is a tensor (or a
    nest of tensors) with leading axes [T, B]; the state is a nest of [B, ...] tensors (() for a
    feed-forward network, for which the burn-in is skipped: it cannot change anything).

    Padding (`mask` [T, B], 0 for padding): an episode's first item has an all-padding burn-in and a
    zero stored state (docs/papers/dice.md#departures-from-the-paper, sequence layout), and with
    `period < burn_in` a burn-in can start with some padding. Padding steps hold the state: the
    state entering the first real step is exactly the stored state, whatever the padding's fields
    and `reset` flags. When every env's burn-in is all real or all padding (the default layout) this
    costs one unroll of the burn-in; otherwise the burn-in is unrolled one step at a time (a
    `tf.cond` picks; both compile under XLA). The trained part is one unroll: padding there only
    follows the real steps (`BurnInSequenceWriter`) and is masked out of the losses, so it changes
    masked outputs and `final_state` only.

    Args:
      unroll_fn: the network's unroll, as above.
      inputs: sequence of per-step inputs, each [T, B, ...] (or a nest of such).
      initial_state: the stored state at step 0.
      burn_in: number of burn-in steps (Python int, 0 <= burn_in < T); 0 is a plain unroll.
      mask: optional [T, B] (float 1/0 or bool) real-step mask; only its burn-in part is used.

    Returns:
      (outputs of steps burn_in..T−1, final state after step T−1).
    """
    if burn_in < 0:
        raise ValueError(f"burn_in must be >= 0, got {burn_in}")
    inputs = list(inputs)
    state = initial_state
    if burn_in > 0 and tf.nest.flatten(state):
        burn_in_mask = None if mask is None else tf.convert_to_tensor(mask)[:burn_in]
        state = burn_in_state(unroll_fn, _time_slice(inputs, 0, burn_in), state, burn_in_mask)
    state = tf.nest.map_structure(tf.stop_gradient, state)
    return unroll_fn(*_time_slice(inputs, burn_in, None), state)

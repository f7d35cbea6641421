"""Categorical return distributions: support, projection, distributional Retrace, cross-entropy.

Implements Reactor (Gruslys et al., 2018) §3.2 and Eq. (12):

- `make_support`: the fixed uniform grid z_i = v_min + i * dz of Eq. (5).
- `categorical_projection`: the linear-interpolation kernel h_{z_i}(x) (Eq. G), i.e. the C51
  projection of a categorical distribution with atoms at arbitrary values onto the grid.
- `distributional_retrace_target`: the Distributional Retrace target q* (Eq. F), a signed mixture
  of separately projected n-step backups with the Retrace weights alpha_{n,a} (Eq. D).
- `categorical_cross_entropy`: the loss whose gradient is Eq. (12).

All functions are pure TensorFlow, float32, and compile under `tf.function(jit_compile=True)`.
Sequences are time-major `[T, B, ...]`; the atom axis is always last.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def make_support(num_atoms: int = 51, v_min: float = -10.0, v_max: float = 10.0) -> tf.Tensor:
    """Returns the uniform grid z_i = v_min + i (v_max - v_min) / (N - 1), i = 0..N-1 (Eq. (5)),
    `[N]`.

    Defaults: the Reactor paper does not state N, v_min, v_max; we use C51's N = 51 on [-10, 10]
    (rewards are clipped to [-1, 1]; docs/papers/reactor.md#departures-from-the-paper).
    """
    if not isinstance(num_atoms, (int, np.integer)) or num_atoms < 2:
        raise ValueError(f"num_atoms must be an integer >= 2, got {num_atoms!r}")
    if not v_min < v_max:
        raise ValueError(f"v_min must be < v_max, got v_min={v_min!r}, v_max={v_max!r}")
    # Built in float64 so each atom is the float32 nearest to its exact grid value (z_25 = 0
    # exactly).
    atoms = v_min + np.arange(num_atoms) * ((v_max - v_min) / (num_atoms - 1))
    return tf.constant(atoms, dtype=tf.float32)


def categorical_projection(values: tf.Tensor, probs: tf.Tensor, support: tf.Tensor) -> tf.Tensor:
    """Projects sum_j probs_j * delta(values_j) onto the grid `support` (Reactor §3.2's kernel h).

    Output atom i receives sum_j probs_j * h_{z_i}(values_j), where h is the triangular kernel
        h_{z_i}(x) = max(0, 1 - |clip(x, v_min, v_max) - z_i| / dz),
    which is the paper's four-case kernel for a uniform grid: a value between two atoms is split
    between them in proportion to its distance to the other one, a value exactly on an atom puts
    all its mass there, and values outside [v_min, v_max] go to the end atom.

    The projection is linear in `probs`, so signed "probabilities" (Distributional Retrace
    mixtures) are projected as they are; total mass is preserved, and so is the mean of
    distributions that lie inside [v_min, v_max].

    Args:
      values: `[..., M]` atom locations of the distribution to project (e.g. r + gamma * z_j).
      probs: `[..., M]` the mass at each of those locations (may be negative).
      support: `[N]` strictly increasing, uniformly spaced grid (see `make_support`).

    Returns:
      `[..., N]` float32 masses on the grid.
    """
    values = tf.cast(values, tf.float32)
    probs = tf.cast(probs, tf.float32)
    support = _checked_support(support)
    if not values.shape.is_compatible_with(probs.shape):
        raise ValueError(
            f"values and probs must have the same shape [..., M], got {values.shape} and {probs.shape}"
        )
    num_atoms = tf.shape(support)[0]
    last_index = tf.cast(num_atoms - 1, tf.float32)
    # dz from the whole range: a single float32 gap such as z_1 - z_0 carries the rounding of both
    # atoms and would shift far atoms by up to 1e-4 of a gap.
    delta_z = (support[-1] - support[0]) / last_index
    # Position in units of dz from v_min, clipped to the grid: clipping the position (rather than
    # the value) keeps the end atoms exact, so no mass leaks past them through rounding.
    position = tf.clip_by_value((values - support[0]) / delta_z, 0.0, last_index)
    # The kernel is non-zero on two atoms at most: floor(position), weight 1 - frac, and the atom
    # above, weight frac. Summing those two shares by index is the same sum as the dense
    # [..., M, N] kernel, without building it (for distributional Retrace that kernel is
    # T x T x B x N x N floats, most of Reactor's learner step). At the last atom frac is 0, so
    # the clamped upper index adds nothing.
    shape = tf.broadcast_dynamic_shape(tf.shape(values), tf.shape(probs))
    position = tf.reshape(tf.broadcast_to(position, shape), [-1, shape[-1]])  # [rows, M]
    probs = tf.reshape(tf.broadcast_to(probs, shape), [-1, shape[-1]])
    lower = tf.floor(position)
    frac = position - lower
    lower = tf.cast(lower, tf.int32)
    upper = tf.minimum(lower + 1, num_atoms - 1)
    row_start = tf.range(tf.shape(position)[0])[:, None] * num_atoms  # each row's N outputs
    masses = _sum_by_index(
        tf.reshape(tf.concat([probs * (1.0 - frac), probs * frac], axis=-1), [-1]),
        tf.reshape(tf.concat([row_start + lower, row_start + upper], axis=-1), [-1]),
        tf.shape(position)[0] * num_atoms,
    )
    return tf.reshape(masses, tf.concat([shape[:-1], [num_atoms]], axis=0))


def _sum_by_index(values, indices, size):
    """out[k] = sum of values[i] over indices[i] = k, [size] (values, indices [M]).

    A weighted bincount: one pass over the values, 2.4x faster on CPU than
    `tf.math.unsorted_segment_sum` on Reactor's 418K shares (the same sums in the same order).
    TensorFlow has no gradient for it: d out[k] / d values[i] = 1 where indices[i] = k. Only
    `values` goes through `tf.custom_gradient`, so that XLA still sees `size` as a constant."""

    @tf.custom_gradient
    def scatter(values):
        # The raw op: `tf.math.bincount` derives its length from the data, which XLA rejects.
        out = tf.raw_ops.DenseBincount(input=indices, size=size, weights=values)
        return out, lambda upstream: tf.gather(upstream, indices)

    return scatter(values)


def distributional_retrace_target(
    q_probs: tf.Tensor,
    target_probs: tf.Tensor,
    actions: tf.Tensor,
    log_rhos: tf.Tensor,
    rewards: tf.Tensor,
    discounts: tf.Tensor,
    support: tf.Tensor,
    lambda_: float = 1.0,  # Reactor §4.1: lambda = 1 in the 57-game runs
) -> tf.Tensor:
    """Distributional Retrace target q*(x_t, a_t) for t = 0..T-1 (Reactor §3.2).

        q*_i(x_t, a_t) = sum_{n>=1} sum_a alpha_{n,a} sum_j q_j(x_{t+n}, a) h_{z_i}(z^n_j),
        z^n_j          = sum_{k<n} Gamma_{t,k} r_{t+k} + Gamma_{t,n} z_j,   Gamma_{t,k} = prod_{m<k}
        gamma_{t+m}, alpha_{n,a}    = (c_{t+1} ... c_{t+n-1}) (pi(a|x_{t+n}) - 1[a = a_{t+n}]
        c_{t+n}), c_s            = lambda * min(1, pi(a_s|x_s) / mu(a_s|x_s))              (Eq. 4).

    The sequence is truncated at x_T by setting c_T := 0 (Eq. (3) truncated at T), so the alpha sum
    to 1 and every row of the target has total mass 1. Each n-step backup is projected separately
    (exact form; not the recursive "project every step" variant, a different algorithm that
    re-projects projected distributions). Because the projection is linear in the masses, the
    actions are mixed first and each (t, n) is projected once: T x T x B x N backup atoms, each
    shared between two grid atoms (209K for Reactor's T = 32, B = 4, N = 51). Negative masses are
    kept: their expectation over mu is a proper distribution (§3.2). Episode ends: `discounts` is
    0 on a terminal transition, so all later backups collapse onto the accumulated return; no
    other masking is needed.

    The paper prints q_j(x_{t+n}, a_{t+n}) inside the sum; this uses q_j(x_{t+n}, a), the reading
    under which the target's mean is the Retrace target (docs/papers/reactor.md#errata; Test 6 in
    docs/papers/reactor.md#worked-test-numbers).

    The arguments are those of `common.equations.returns.retrace` (form="expected") with
    distributions in place of Q-values, so the mean of this target equals `retrace` on q_probs @
    support when no backup leaves [v_min, v_max].

    Args:
      q_probs: `[T+1, B, A, N]` q(x_t, .), the target network's return distributions; row 0 is
        not used (the target replaces q(x_0, a_0) rather than bootstrapping from it).
      target_probs: `[T+1, B, A]` pi(.|x_t), the policy the traces evaluate (Reactor: the target
        network's, the one unrolled over frames 2-33, §3.4); row 0 is not used.
      actions: `[T+1, B]` integer actions a_t ~ mu; a_0 and a_T are not used.
      log_rhos: `[T, B]` log pi(a_t|x_t) - log mu(a_t|x_t), with mu stored in replay; log_rhos[0]
        is not used.
      rewards: `[T, B]` r_t.
      discounts: `[T, B]` gamma_t = gamma * (1 - done_t) of the transition x_t -> x_{t+1}.
      support: `[N]` the uniform grid (see `make_support`).
      lambda_: the Retrace lambda in [0, 1].

    Returns:
      `[T, B, N]` float32 target q*, wrapped in `tf.stop_gradient`.
    """
    if isinstance(lambda_, (int, float)) and not 0.0 <= lambda_ <= 1.0:
        raise ValueError(f"lambda_ must lie in [0, 1], got {lambda_!r}")
    q_probs = _checked_float(q_probs, "q_probs", rank=4)
    target_probs = _checked_float(target_probs, "target_probs", rank=3)
    log_rhos = _checked_float(log_rhos, "log_rhos", rank=2)
    rewards = _checked_float(rewards, "rewards", rank=2)
    discounts = _checked_float(discounts, "discounts", rank=2)
    actions = tf.convert_to_tensor(actions)
    if not actions.dtype.is_integer or actions.shape.rank != 2:
        raise ValueError(
            f"actions must be an integer tensor [T+1, B], got {actions.dtype.name} {actions.shape}"
        )
    support = _checked_support(support)
    for name, shape in [("log_rhos", log_rhos.shape), ("discounts", discounts.shape)]:
        if not shape.is_compatible_with(rewards.shape):
            raise ValueError(
                f"{name} must have the shape [T, B] of rewards {rewards.shape}, got {shape}"
            )
    num_frames = None if rewards.shape[0] is None else rewards.shape[0] + 1
    frames_shape = tf.TensorShape([num_frames]) + rewards.shape[1:]  # [T+1, B]
    for name, shape in [
        ("actions", actions.shape),
        ("target_probs", target_probs.shape[:2]),
        ("q_probs", q_probs.shape[:2]),
    ]:
        if not shape.is_compatible_with(frames_shape):
            raise ValueError(
                f"{name} must have leading shape [T+1, B] = {frames_shape} "
                f"(rewards are [T, B] = {rewards.shape}), got {shape}"
            )
    if not q_probs.shape[2:3].is_compatible_with(target_probs.shape[2:]):
        raise ValueError(
            f"q_probs {q_probs.shape} and target_probs {target_probs.shape} disagree on the actions"
        )
    if not q_probs.shape[-1:].is_compatible_with(support.shape):
        raise ValueError(f"q_probs has {q_probs.shape[-1]} atoms, support has {support.shape[0]}")

    # Row m below describes the next state x_{m+1}, m = 0..T-1.
    traces = lambda_ * tf.minimum(1.0, tf.exp(log_rhos))  # c_t (Eq. 4); c_0 is never used
    next_traces = tf.concat([traces[1:], tf.zeros_like(traces[:1])], axis=0)  # c_{m+1}, c_T := 0
    next_taken = tf.one_hot(actions[1:], tf.shape(target_probs)[-1])
    # sum_a (pi(a|x_{m+1}) - 1[a = a_{m+1}] c_{m+1}) q(x_{m+1}, a): alpha without its trace prefix.
    expected_next = tf.einsum("tba,tban->tbn", target_probs[1:], q_probs[1:])
    taken_next = tf.einsum("tba,tban->tbn", next_taken, q_probs[1:])
    mixed_next = expected_next - next_traces[..., None] * taken_next  # [T(m), B, N]

    # Pairs (t, m) with m = t + n - 1 >= t: the n-step backup from x_t bootstrapping at x_{m+1}.
    steps = tf.range(tf.shape(rewards)[0])
    later = (steps[None, :] >= steps[:, None])[:, :, None]  # [T(t), T(m), 1]

    def from_start(x):  # [T, B] -> [T(t), T(m), B]: x_m for m >= t, 1 (neutral in products) before.
        return tf.where(later, x[None], 1.0)

    discount_before = tf.math.cumprod(
        from_start(discounts), axis=1, exclusive=True
    )  # Gamma_{t,n-1}
    n_step_returns = tf.cumsum(tf.where(later, discount_before * rewards[None], 0.0), axis=1)
    bootstrap_discounts = discount_before * discounts[None]  # Gamma_{t,n}
    trace_products = tf.math.cumprod(
        from_start(next_traces), axis=1, exclusive=True
    )  # c_{t+1}..c_{t+n-1}

    backup_atoms = n_step_returns[..., None] + bootstrap_discounts[..., None] * support  # z^n_j
    backup_masses = tf.where(later, trace_products, 0.0)[..., None] * mixed_next[None]
    target = tf.reduce_sum(categorical_projection(backup_atoms, backup_masses, support), axis=1)
    return tf.stop_gradient(target)


def categorical_cross_entropy(target_distribution: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    """Per-element loss L = -sum_i stop_gradient(q*_i) log softmax(logits)_i (Reactor §3.2).

    Its gradient is Eq. (12), -sum_i q*_i grad log q_i, i.e. softmax(logits) - q* w.r.t. the
    logits when q* sums to 1. Cross-entropy rather than KL: the signed target q* has no log, and
    the q* log q* term has no gradient anyway. Negative target masses are used as they are.

    Args:
      target_distribution: `[..., N]` target masses q* (may be negative); gradients are stopped.
      logits: `[..., N]` logits of the predicted distribution q(x_t, a_t). Callers that hold
        normalised probabilities may pass log(probs).

    Returns:
      `[...]` unreduced loss; the caller applies IS weights and the reduction (Reactor: mean over
      steps and sequences, docs/papers/reactor.md#departures-from-the-paper).
    """
    target_distribution = tf.stop_gradient(tf.cast(target_distribution, tf.float32))
    logits = tf.cast(logits, tf.float32)
    if not target_distribution.shape.is_compatible_with(logits.shape):
        raise ValueError(
            f"target_distribution {target_distribution.shape} and logits {logits.shape} "
            "must have the same shape [..., N]"
        )
    return -tf.reduce_sum(target_distribution * tf.nn.log_softmax(logits), axis=-1)


def _checked_float(x, name: str, rank: int) -> tf.Tensor:
    x = tf.cast(x, tf.float32)
    if x.shape.rank is not None and x.shape.rank != rank:
        raise ValueError(f"{name} must have rank {rank}, got shape {x.shape}")
    return x


def _checked_support(support) -> tf.Tensor:
    support = _checked_float(support, "support", rank=1)
    if support.shape[0] is not None and support.shape[0] < 2:
        raise ValueError(f"support needs at least 2 atoms, got {support.shape[0]}")
    static = tf.get_static_value(support)
    if static is not None:
        gaps = np.diff(static)
        if not (np.all(gaps > 0) and np.allclose(gaps, gaps[0], rtol=1e-4)):
            raise ValueError(
                f"support must be strictly increasing and uniformly spaced, got {static}"
            )
    return support

"""The LSTM core of the agents' networks: one step with its reset mask, a sequence unrolled with a
hand-written gradient (`lstm_unroll`), and several networks' cores unrolled together.

The core is Keras' LSTM cell's equations on a projected input, with the state zeroed where an
episode starts (`keep` = 0); `ActorCriticNet` (`common.models.networks`) and the papers' networks
call it.
"""

from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf


def lstm_step(
    projected: tf.Tensor, keep: tf.Tensor, h: tf.Tensor, c: tf.Tensor, recurrent_kernel: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """One step of Keras' LSTMCell (gates i, f, c, o; sigmoid and tanh) from its projected inputs
    x W + b, `projected` [..., B, 4U]; `keep` [..., B, 1] is 0 where the state is zeroed first
    (an episode starts). Any leading axes batch several LSTMs at once (Reactor's two share one
    matmul a step). Returns (h, c).

    The unrolls of this project are op-bound on a CPU: with x W + b of all steps computed in one
    matmul outside the recurrence, a step is one matmul and a few elementwise ops."""
    return _lstm_step_and_gates(projected, keep, h, c, recurrent_kernel)[:2]


def _lstm_step_and_gates(projected, keep, h, c, recurrent_kernel):
    """`lstm_step`, and the gates' pre-activations z [..., B, 4U] (its gradient reads them)."""
    h, c = h * keep, c * keep
    z = projected + tf.matmul(h, recurrent_kernel)
    i, f, g, o = tf.split(z, 4, axis=-1)
    c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
    return tf.sigmoid(o) * tf.tanh(c), c, z


def cell(
    projected: tf.Tensor, keep: tf.Tensor, state: Sequence[tf.Tensor], recurrent_kernel: tf.Tensor
) -> tuple[tf.Tensor, tuple[tf.Tensor, tf.Tensor]]:
    """`lstm_step` in the dtype of `projected` from a float32 (h, c); returns (h, float32 (h,
    c))."""
    h, c = (tf.cast(s, projected.dtype) for s in state)
    h, c = lstm_step(projected, keep, h, c, recurrent_kernel)
    return h, (tf.cast(h, tf.float32), tf.cast(c, tf.float32))


def _gate_derivatives(zs, cs, c_kept, keep_all):
    """The gradient's per-step factors, for all steps at once (`lstm_unroll`)."""
    i, f, g, o = tf.split(zs, 4, axis=-1)
    i, f, g, o = tf.sigmoid(i), tf.sigmoid(f), tf.tanh(g), tf.sigmoid(o)
    tanh_c = tf.tanh(cs)
    # dz_t = [dc_t, dc_t, dc_t, dh_t] * gate_factors_t: z's four blocks, i, f, g, o
    gate_factors = tf.concat(
        [g * i * (1.0 - i), c_kept * f * (1.0 - f), i * (1.0 - g * g), tanh_c * o * (1.0 - o)],
        -1,
    )
    dc_dh = o * (1.0 - tanh_c * tanh_c)  # what dh_t adds to dc_t, per unit of dh_t
    forget_kept = f * keep_all  # dc_{t-1} per unit of dc_t
    return gate_factors, dc_dh, forget_kept


@tf.custom_gradient
def lstm_unroll(
    projected: tf.Tensor, keep: tf.Tensor, h: tf.Tensor, c: tf.Tensor, recurrent_kernel: tf.Tensor
) -> tuple[tuple[tf.Tensor, tf.Tensor], Callable]:
    """T steps of `lstm_step`: `projected` [T, ..., B, 4U] (x W + b of every step), `keep`
    [T, B, 1] (0 where an episode starts), the state (h, c) [..., B, U] before the first step and
    `recurrent_kernel` [..., U, 4U], all in one dtype. Returns (h, c) after every step, each
    [T, ..., B, U]. Reactor's learner unrolls with it.

    Its gradient is written out rather than left to the scan's autodiff, for unrolls that are
    op-bound (Reactor's: 4 sequences, two LSTMs of 128): the backward recurrence carries only
    (dh, dc) and emits each step's gate gradient dz in eight small ops, and the rest (the
    activations' derivatives, the recurrent kernel's gradient as one matmul over all steps) is
    computed for all steps at once outside it; autodiff of the scan runs about three times the
    ops a step, a recurrent-kernel matmul among them. Reactor's train step: 1.15x
    (docs/guides/minatar.md, "The LSTM's gradient by hand")."""

    def step(carry, elems):
        return _lstm_step_and_gates(*elems, *carry[:2], recurrent_kernel)

    hs, cs, zs = tf.scan(step, (projected, keep), initializer=(h, c, projected[0]))

    def gradient(dhs, dcs):
        keep_all = keep  # [T, 1.., B, 1], broadcasting against the state's leading axes
        for _ in range(len(projected.shape) - len(keep.shape)):
            keep_all = tf.expand_dims(keep_all, 1)
        c_kept = tf.concat([c[None], cs[:-1]], 0) * keep_all  # c_{t-1}, zeroed at resets
        h_kept = tf.concat([h[None], hs[:-1]], 0) * keep_all
        gate_factors, dc_dh, forget_kept = _gate_derivatives(zs, cs, c_kept, keep_all)
        transposed = tf.linalg.matrix_transpose(recurrent_kernel)
        dcs = tf.zeros_like(cs) if dcs is None else dcs

        def back(carry, elems):
            dh_out, dc_out, dc_dh_t, factors, forget_t, keep_t = elems
            dh = dh_out + carry[0]
            dc = carry[1] + dc_out + dh * dc_dh_t
            dz = tf.concat([dc, dc, dc, dh], -1) * factors
            return tf.matmul(dz, transposed) * keep_t, dc * forget_t, dz

        dh_before, dc_before, dzs = tf.scan(
            back,
            (dhs, dcs, dc_dh, gate_factors, forget_kept, keep_all),
            initializer=(tf.zeros_like(h), tf.zeros_like(c), tf.zeros_like(zs[0])),
            reverse=True,
        )
        d_kernel = tf.einsum("t...bu,t...bv->...uv", h_kept, dzs)
        return dzs, None, dh_before[0], dc_before[0], d_kernel

    return (hs, cs), gradient


def scan_cores(
    networks: Sequence, projected: Sequence, reset: tf.Tensor, states: Sequence
) -> tuple:
    """The LSTM cores of `networks` (one size and compute dtype) over T steps, stepped together:
    one batched matmul a step for all of them. `projected` holds each core's projected inputs
    [T, B, 4U], `states` each (h, c) at the start. Returns (outputs [T, N, B, U], each core's
    final (h, c)).

    The gradient is the scan's own: the burn-in papers' unrolls (64 items of 80-120 steps, 256
    units) are compute-bound, and `lstm_unroll`'s gradient, written for op-bound unrolls, ran
    their train step at 0.93x (docs/guides/minatar.md, "The LSTM's gradient by hand")."""
    dtype = networks[0].core.compute_dtype
    recurrent = tf.stack([tf.cast(net.core.recurrent_kernel, dtype) for net in networks])
    keep = 1.0 - tf.cast(reset, dtype)[..., None]  # [T, B, 1]

    def scan_step(carry, elems):
        return cell(*elems, carry[1], recurrent)

    start = tuple(tf.stack([tf.convert_to_tensor(s[i]) for s in states]) for i in range(2))
    outputs, (hs, cs) = tf.scan(
        scan_step,
        (tf.stack(list(projected), axis=1), keep),
        initializer=(tf.zeros_like(start[0], dtype), start),
    )
    return outputs, [(hs[-1, i], cs[-1, i]) for i in range(len(networks))]


def unroll_together(
    networks: Sequence,
    features: Sequence,
    prev_action: tf.Tensor,
    prev_reward: tf.Tensor,
    reset: tf.Tensor,
    states: Sequence,
    return_features: bool = False,
) -> tuple[list, list]:
    """Each network's `unroll` on its torso `features` [T, B, D] from its state, with their LSTM
    cores stepped together when they can be (same size and compute dtype, no language channel):
    the step of an unroll is op-bound on a CPU, so N cores in one batched matmul a step cost
    little more than one. Returns (each network's outputs, each network's final state), as N
    calls of `unroll` would."""
    first = networks[0]
    stackable = all(
        net.use_lstm
        and net.instruction_encoder is None
        and net.lstm_units == first.lstm_units
        and net.core.compute_dtype == first.core.compute_dtype
        for net in networks
    )
    if len(networks) == 1 or not stackable:
        unrolled = [
            net.unroll(None, prev_action, prev_reward, reset, state, None, return_features, f)
            for net, f, state in zip(networks, features, states)
        ]
        return [u[0] for u in unrolled], [u[1] for u in unrolled]
    projected = [
        net._projected(net._core_inputs(f, prev_action, prev_reward, reset, None))
        for net, f in zip(networks, features)
    ]
    hidden, final_states = scan_cores(networks, projected, reset, states)
    outputs = [
        net._outputs(hidden[:, i], f, return_features)
        for i, (net, f) in enumerate(zip(networks, features))
    ]
    return outputs, final_states

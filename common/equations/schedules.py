"""Learning-rate and weight-decay schedules, and the AdamW step that follows them.

Schedules are pure functions of a step count (learner updates for DiCE / GDI / LBC, environment
frames for IMPALA): they take a Python number or a tensor, run inside `tf.function` (XLA included)
and return a scalar tensor. They compute in float64, so a frame count of 10^9 loses nothing, and
cast the result to `dtype`.

- `linear_anneal`: v0 · max(0, 1 − step / total), IMPALA's "anneal linearly to 0" (Table G.1).
- `warmup_linear_decay`: 0 → peak linearly over `warmup_steps`, then linearly to 0 at `total_steps`
  (DiCE Table 5, GDI Table 6, LBC Table 3: warm-up 4000, then "Anneal linearly to 0"; the horizon is
  ours, docs/papers/dice.md#departures-from-the-paper). With `warmup_steps = 0` it is
  `linear_anneal`; the weight decay of DiCE / GDI / LBC (0.01 annealed linearly to 0) is that case.

`AdamW` is the optimiser of DiCE Table 5, GDI Table 6 and LBC Table 3 ("Adam weight decay", β1 0.9,
β2 0.98, ε 1e-6, global-norm clip 50), with both the learning rate and the weight-decay rate given
as schedules of its own update count. See its docstring for the exact update and why it is a small
`tf.Module` rather than Keras' `AdamW`.
"""

from __future__ import annotations

from typing import Callable, Sequence, Union

import tensorflow as tf

from common.equations import instruments

Schedule = Callable[[tf.Tensor], tf.Tensor]  # step -> value
ScheduleOrValue = Union[float, Schedule]


def _check_steps(warmup_steps, total_steps) -> None:
    if not 0 <= warmup_steps < total_steps:
        raise ValueError(
            f"need 0 <= warmup_steps < total_steps, got warmup_steps={warmup_steps}, "
            f"total_steps={total_steps}"
        )


def warmup_linear_decay(
    step: tf.Tensor | float,
    peak_value: float,
    warmup_steps: int,
    total_steps: int,
    dtype: tf.DType = tf.float32,
) -> tf.Tensor:
    """Linear warm-up from 0, then linear decay to 0 (DiCE Table 5, GDI Table 6).

        v(t) = peak · t / W                      for 0 <= t < W
        v(t) = peak · (T − t) / (T − W)          for W <= t <= T
        v(t) = 0                                 for t >= T

    with W = `warmup_steps` and T = `total_steps`. W = 0 means no warm-up: v(t) = peak (1 − t/T).
    Checks from DiCE Test 15 in docs/papers/dice.md#worked-test-numbers (peak 5e-4, W 4000,
    T 19,531): v(0) = 0, v(2000) = 2.5e-4,
    v(4000) = 5e-4, v(11,765.5) = 2.5e-4, v(T) = 0.

    Args:
      step: the step count t (Python number or tensor, any real dtype; negative counts as 0).
      peak_value: the value at the end of the warm-up (the initial value when W = 0).
      warmup_steps: W >= 0.
      total_steps: T > W, the step where the value reaches 0.
      dtype: of the result.
    """
    _check_steps(warmup_steps, total_steps)
    t = tf.maximum(tf.cast(step, tf.float64), 0.0)
    decay = tf.nn.relu((total_steps - t) / float(total_steps - warmup_steps))
    if warmup_steps > 0:
        fraction = tf.where(t < warmup_steps, t / float(warmup_steps), decay)
    else:
        fraction = decay
    return tf.cast(peak_value * fraction, dtype)


def linear_anneal(
    step: tf.Tensor | float, initial_value: float, total_steps: int, dtype: tf.DType = tf.float32
) -> tf.Tensor:
    """v(t) = v0 · max(0, 1 − t / T): "anneal linearly to 0" (IMPALA Table G.1).

    IMPALA counts t in environment frames (action repeats included, as its Table 1 counts
    frames). It is `warmup_linear_decay` with no warm-up.
    """
    return warmup_linear_decay(step, initial_value, 0, total_steps, dtype)


def is_kernel(variable: tf.Variable) -> bool:
    """True for weight matrices and convolution kernels (rank >= 2), False for biases (rank 1).

    Our choice for DiCE / GDI / LBC's "Adam Weight Decay"
    (docs/papers/dice.md#departures-from-the-paper): weight decay applies to all kernels (dense,
    convolution, the LSTM's kernel and recurrent kernel), not to biases (LSTM biases included).
    """
    return variable.shape.rank is not None and variable.shape.rank >= 2


def _evaluate(value: ScheduleOrValue, step: tf.Tensor):
    """The schedule's value at `step`, or the constant (a Python float stays one, so a float64
    variable gets it at full precision)."""
    return value(step) if callable(value) else value


def _as(x, dtype: tf.DType) -> tf.Tensor:
    """x as `dtype`; Python floats go straight to dtype (tf.cast would round them via float32)."""
    return tf.cast(tf.convert_to_tensor(x, dtype_hint=dtype), dtype)


class AdamW(tf.Module):
    """Adam with decoupled weight decay (Loshchilov & Hutter), lr and decay from schedules.

    One call of `apply` at update count k (k = 0 for the first update; t = k + 1) does, for each
    variable w with gradient g (after optional global-norm clipping of all gradients together):

        m  <- β1 m + (1 − β1) g             v  <- β2 v + (1 − β2) g²
        m̂  =  m / (1 − β1^t)                v̂  =  v / (1 − β2^t)
        w  <- w − lr_k · ( m̂ / (√v̂ + ε) + wd_k · w )

    with lr_k = learning_rate(k), wd_k = weight_decay(k), and the decay term only for variables
    that `decays(w)` selects (kernels by default). This is our reading of DiCE Table 5's "Adam
    Weight Decay" (also GDI Table 6, LBC Table 3): Keras AdamW semantics,
    θ ← θ − lr·(m̂/(√v̂+ε) + wd·θ), the decoupled decay multiplied by the learning rate
    (docs/papers/dice.md#departures-from-the-paper); the decay uses w before this step's Adam
    update.

    Differences from Keras 2.15 `tf.keras.optimizers.AdamW`, and why this is a `tf.Module`:
    - Keras takes `weight_decay` as a Python float, so it cannot follow a schedule inside a compiled
      step; here both rates are evaluated from the optimiser's own `iterations` counter.
    - Keras puts ε outside the bias correction (`lr √(1−β2^t)/(1−β1^t) · m / (√v + ε)`, i.e. ε is
      divided by √(1−β2^t) relative to the formula above); this class uses m̂/(√v̂+ε) as above. The
      two agree as ε → 0 (tests check both the numpy ground truth and Keras with a tiny ε).
    - Slots are created eagerly by `build`, so `apply` compiles under XLA (as impala's RMSProp).

    Args:
      learning_rate: a float or a schedule `step -> lr` (e.g. `warmup_linear_decay` with
        peak 5e-4, warm-up 4000 for DiCE / GDI; 5.3e-4 for LBC).
      weight_decay: a float or a schedule `step -> wd` (0.01 annealed linearly to 0).
      beta_1, beta_2, epsilon: Adam's coefficients.
      clip_norm: if set, the gradients are rescaled together so that their global norm is at most
        `clip_norm` before the update (`tf.clip_by_global_norm`); None disables clipping.
      decays: predicate choosing the variables that get weight decay.
    """

    def __init__(
        self,
        learning_rate: ScheduleOrValue,
        # choice: no decay unless asked; DiCE / GDI / LBC pass 0.01 annealed to 0 (Table 5)
        weight_decay: ScheduleOrValue = 0.0,
        beta_1: float = 0.9,  # DiCE Table 5 (= GDI Table 6, LBC Table 3)
        beta_2: float = 0.98,  # DiCE Table 5
        epsilon: float = 1e-6,  # DiCE Table 5
        clip_norm: float | None = 50.0,  # DiCE Table 5: "AdamW Clip Norm 50.0"
        decays: Callable[[tf.Variable], bool] = is_kernel,  # choice: kernels only (see is_kernel)
        name: str = "adamw",
    ) -> None:
        super().__init__(name=name)
        if clip_norm is not None and not clip_norm > 0:
            raise ValueError(f"clip_norm must be > 0 or None, got {clip_norm}")
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.clip_norm = clip_norm
        self.decays = decays
        self.iterations = tf.Variable(0, dtype=tf.int64, trainable=False, name="iterations")
        self.first_moments: list[tf.Variable] = []
        self.second_moments: list[tf.Variable] = []
        self._decay_mask: list[bool] = []

    def build(self, variables: Sequence[tf.Variable]) -> None:
        """Creates the moment slots eagerly (once), so the update can run under XLA."""
        if self.first_moments:
            return
        for var in variables:
            name = var.name.split(":")[0]
            self.first_moments.append(
                tf.Variable(tf.zeros_like(var), trainable=False, name=f"{name}/m")
            )
            self.second_moments.append(
                tf.Variable(tf.zeros_like(var), trainable=False, name=f"{name}/v")
            )
            self._decay_mask.append(bool(self.decays(var)))

    def apply(
        self,
        gradients: Sequence[tf.Tensor | None],
        variables: Sequence[tf.Variable],
        schedule_step: tf.Tensor | None = None,
    ) -> dict[str, tf.Tensor]:
        """One update of every variable with its gradient (`build` must have run).

        A variable whose gradient is None is left alone (no moment update, no decay), as Keras
        does. The schedules are read at `schedule_step` when given (a learner whose updates
        consume a varying number of frames passes its progress in updates' worth of frames),
        else at the update count; the bias correction always counts updates. Returns the scalars
        `optimizer/learning_rate`, `optimizer/weight_decay` (the values used) and the clip's and
        the step's instruments (`common.equations.instruments`).
        """
        if len(self.first_moments) != len(variables):
            raise ValueError(
                f"optimizer built for {len(self.first_moments)} variables, "
                f"got {len(variables)}; call build(variables) first"
            )
        step = self.iterations.read_value()
        at = step if schedule_step is None else schedule_step
        learning_rate = _evaluate(self.learning_rate, at)
        weight_decay = _evaluate(self.weight_decay, at)
        gradients, clip_stats = instruments.clip_by_global_norm(gradients, self.clip_norm)
        before = instruments.snapshot(variables)
        t = tf.cast(step + 1, tf.float64)
        for grad, var, m, v, decays in zip(
            gradients, variables, self.first_moments, self.second_moments, self._decay_mask
        ):
            if grad is None:
                continue
            dtype = var.dtype
            beta_1 = tf.constant(self.beta_1, dtype)
            beta_2 = tf.constant(self.beta_2, dtype)
            lr = _as(learning_rate, dtype)
            m.assign(beta_1 * m + (1.0 - beta_1) * grad)
            v.assign(beta_2 * v + (1.0 - beta_2) * tf.square(grad))
            m_hat = m / tf.cast(1.0 - tf.pow(tf.constant(self.beta_1, tf.float64), t), dtype)
            v_hat = v / tf.cast(1.0 - tf.pow(tf.constant(self.beta_2, tf.float64), t), dtype)
            update = m_hat / (tf.sqrt(v_hat) + tf.constant(self.epsilon, dtype))
            if decays:
                update += _as(weight_decay, dtype) * var
            var.assign_sub(lr * update)
        self.iterations.assign_add(1)
        as_stat = lambda x: tf.convert_to_tensor(x, dtype_hint=tf.float32)
        return {
            "optimizer/learning_rate": as_stat(learning_rate),
            "optimizer/weight_decay": as_stat(weight_decay),
            **clip_stats,
            **instruments.mean_step(before, variables),
        }

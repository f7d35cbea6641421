"""Multi-step return targets: V-trace, Retrace (two forms), n-step returns and lambda-returns.

Pure TensorFlow functions shared by the paper packages. Conventions
(docs/architecture.md#conventions):

- Time-major: per-step tensors are ``[T, B, ...]``; a bootstrap value is ``[B, ...]``.
- ``discounts[t] = gamma * (1 - done_t)``: a zero discount ends the episode after step t, which cuts
  both the bootstrap and the trace. A time limit is not an episode end: it keeps its discount.
- All float inputs are converted to float32.
- Every target, importance ratio and trace coefficient leaves these functions under
  ``tf.stop_gradient``: the losses differentiate the online outputs only.
- The backward recursions are ``tf.scan`` loops, so every function compiles under
  ``tf.function(jit_compile=True)``.
"""

from typing import NamedTuple, TypeAlias

import tensorflow as tf

from common.settings import config

TensorLike: TypeAlias = tf.types.experimental.TensorLike

# "expected": Munos et al. (2016), Reactor Eq. (3): the TD error bootstraps on E_pi Q(x_{t+1}, .).
# "sampled": as printed in DiCE Eq. (2), GDI Eq. (3) and LBC App. B.3: on Q(x_{t+1}, a_{t+1}).
# Defined in common.settings.config, which configs import without TensorFlow.
RETRACE_FORMS = config.RETRACE_FORMS


class VTraceReturns(NamedTuple):
    vs: tf.Tensor  # [T, B] V-trace targets v_s, IMPALA Eq. (1).
    pg_advantages: tf.Tensor  # [T, B] rho_s (r_s + gamma_s v_{s+1} - V(x_s)), IMPALA §4.2.


def vtrace(
    log_rhos: TensorLike,
    discounts: TensorLike,
    rewards: TensorLike,
    values: TensorLike,
    bootstrap_value: TensorLike,
    clip_rho_threshold: float | None = 1.0,  # IMPALA §5.2.2: rho_bar = 1 worked best
    clip_pg_rho_threshold: float | None = 1.0,  # IMPALA §4.2 uses the same rho_bar
    clip_c_threshold: float | None = 1.0,  # IMPALA §5.2.2: c_bar = 1
    lambda_: float = 1.0,  # IMPALA Remark 2; its experiments use no lambda
) -> VTraceReturns:
    """V-trace targets and policy-gradient advantages (IMPALA Eq. (1), Remarks 1-2, §4.2).

    With rho_t = min(rho_bar, pi_t/mu_t), c_i = lambda min(c_bar, pi_i/mu_i) and
    delta_t = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t)), Eq. (1) reads

        v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} gamma_i c_i) delta_t,

    i.e. every position gets the target of its remaining tail (the first an n-step target, the last
    a one-step target). It is computed with the recursion of Remark 1,
    v_s - V(x_s) = delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1})), where v_T = V(x_T) is the
    bootstrap value. The advantage is min(pg_rho_bar, pi_s/mu_s) (r_s + gamma_s v_{s+1} - V(x_s)).

    Args:
      log_rhos: [T, B] log pi(a_t|x_t) - log mu(a_t|x_t) of the actions taken.
      discounts: [T, B] per-step discounts gamma_t.
      rewards: [T, B] rewards r_t.
      values: [T, B] V(x_t) for t = 0..T-1.
      bootstrap_value: [B] V(x_T).
      clip_rho_threshold: rho_bar in delta_t; None for no clipping.
      clip_pg_rho_threshold: the clip of the policy-gradient weight; None for no clipping.
      clip_c_threshold: c_bar in the trace coefficients; None for no clipping. The contraction
        argument of IMPALA Theorem 1 assumes rho_bar >= c_bar.
      lambda_: the Remark 2 factor in c_i, in [0, 1].

    Returns:
      VTraceReturns(vs, pg_advantages), both [T, B] and without gradient.
    """
    for name, threshold in (
        ("clip_rho_threshold", clip_rho_threshold),
        ("clip_pg_rho_threshold", clip_pg_rho_threshold),
        ("clip_c_threshold", clip_c_threshold),
    ):
        _check_threshold(name, threshold)
    _check_lambda(lambda_)
    log_rhos, discounts, rewards, values, bootstrap_value = _to_float(
        log_rhos, discounts, rewards, values, bootstrap_value
    )
    _check_same_shape(
        log_rhos=log_rhos.shape,
        discounts=discounts.shape,
        rewards=rewards.shape,
        values=values.shape,
    )
    _check_same_shape(bootstrap_value=bootstrap_value.shape, **{"values[0]": values.shape[1:]})

    rhos = tf.exp(log_rhos)
    clipped_rhos = _clip(rhos, clip_rho_threshold)
    cs = lambda_ * _clip(rhos, clip_c_threshold)
    values_tp1 = tf.concat([values[1:], bootstrap_value[None]], axis=0)
    deltas = clipped_rhos * (rewards + discounts * values_tp1 - values)
    vs_minus_values = _reverse_linear_recursion(
        deltas, discounts * cs, final=tf.zeros_like(bootstrap_value)
    )
    vs = values + vs_minus_values
    # q_s = r_s + gamma_s v_{s+1} uses the target of the next state (IMPALA Eq. (4)).
    vs_tp1 = tf.concat([vs[1:], bootstrap_value[None]], axis=0)
    pg_advantages = _clip(rhos, clip_pg_rho_threshold) * (rewards + discounts * vs_tp1 - values)
    return VTraceReturns(vs=tf.stop_gradient(vs), pg_advantages=tf.stop_gradient(pg_advantages))


def log_rhos_from_logits(
    target_logits: TensorLike, behaviour_logits: TensorLike, actions: TensorLike
) -> tf.Tensor:
    """log pi(a_t|x_t) - log mu(a_t|x_t) from unnormalised logits (IMPALA §4.1).

    Args:
      target_logits: [T, B, A] logits of the target policy pi.
      behaviour_logits: [T, B, A] logits of the behaviour policy mu.
      actions: [T, B] integer actions taken.

    Returns:
      [T, B] log importance ratios, without gradient.
    """
    target_logits, behaviour_logits = _to_float(target_logits, behaviour_logits)
    actions = tf.convert_to_tensor(actions)
    _check_same_shape(target_logits=target_logits.shape, behaviour_logits=behaviour_logits.shape)
    _check_same_shape(
        **{"target_logits[..., 0]": target_logits.shape[:-1], "actions": actions.shape}
    )
    # The cross-entropy against the taken action is -log softmax(logits)[action].
    log_pi = -tf.nn.sparse_softmax_cross_entropy_with_logits(labels=actions, logits=target_logits)
    log_mu = -tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=actions, logits=behaviour_logits
    )
    return tf.stop_gradient(log_pi - log_mu)


def retrace(
    q_values: TensorLike,
    target_probs: TensorLike | None,
    actions: TensorLike,
    log_rhos: TensorLike,
    rewards: TensorLike,
    discounts: TensorLike,
    form: str = "expected",
    lambda_: float = 1.0,  # Reactor Eq. (4); DiCE, GDI and LBC have no lambda
    clip_c_threshold: float | None = 1.0,  # Reactor Eq. (4): min(1, rho); DiCE/GDI/LBC pass 1.05
) -> tf.Tensor:
    """Retrace targets Q_ret(x_t, a_t) for t = 0..T-1 (Reactor Eqs. (3)-(4), DiCE Eq. (2)).

    With c_s = lambda min(c_bar, pi(a_s|x_s)/mu(a_s|x_s)) and the TD error
    delta_s = r_s + gamma_s B_{s+1} - Q(x_s, a_s), the target is the truncated sum

        Q_ret(x_t, a_t) = Q(x_t, a_t) + sum_{s=t}^{T-1} (prod_{m=t}^{s-1} gamma_m c_{m+1}) delta_s,

    where B_{s+1} = sum_a pi(a|x_{s+1}) Q(x_{s+1}, a) for form="expected" (Munos et al. 2016,
    Reactor Eq. (3)) and B_{s+1} = Q(x_{s+1}, a_{s+1}) for form="sampled" (the form printed in
    DiCE Eq. (2), GDI Eq. (3) and LBC App. B.3). The trace of step t starts at c_{t+1}: the action
    a_t is given, so it needs no correction. The sum stops at the end of the unroll, so the last
    step bootstraps on B_T alone (Reactor's Eq. (3) truncated there, i.e. c_T := 0). It is computed
    backwards: Q_ret_t = r_t + gamma_t (B_{t+1} + c_{t+1} (Q_ret_{t+1} - Q(x_{t+1}, a_{t+1}))).

    Args:
      q_values: [T+1, B, A] Q(x_t, .) for t = 0..T; row T is the bootstrap state.
      target_probs: [T+1, B, A] pi(.|x_t), used by form="expected" only (row 0 is not used);
        None is allowed for form="sampled".
      actions: [T+1, B] integer actions a_t; a_T is used by form="sampled" only.
      log_rhos: [T, B] log pi(a_t|x_t) - log mu(a_t|x_t); log_rhos[0] does not enter the targets.
      rewards: [T, B] rewards r_t.
      discounts: [T, B] per-step discounts gamma_t.
      form: "expected" or "sampled", see above.
      lambda_: the Retrace lambda in c_s, in [0, 1].
      clip_c_threshold: c_bar; None for no clipping.

    Returns:
      [T, B] targets, without gradient.
    """
    if form not in RETRACE_FORMS:
        raise ValueError(f"form must be one of {RETRACE_FORMS}, got {form!r}")
    if form == "expected" and target_probs is None:
        raise ValueError('form="expected" needs target_probs (pi(.|x_t) for t = 0..T)')
    _check_threshold("clip_c_threshold", clip_c_threshold)
    _check_lambda(lambda_)
    q_values, log_rhos, rewards, discounts = _to_float(q_values, log_rhos, rewards, discounts)
    actions = tf.convert_to_tensor(actions)
    _check_same_shape(log_rhos=log_rhos.shape, rewards=rewards.shape, discounts=discounts.shape)
    _check_same_shape(**{"q_values[..., 0]": q_values.shape[:-1], "actions": actions.shape})
    # One more step than the rewards: the last is the bootstrap state x_T.
    steps = q_values.shape[0]
    without_bootstrap = tf.TensorShape([None if steps is None else steps - 1])
    without_bootstrap += q_values.shape[1:-1]
    _check_same_shape(**{"q_values[:-1, ..., 0]": without_bootstrap, "rewards": rewards.shape})

    q_taken = tf.gather(q_values, actions, batch_dims=actions.shape.rank)  # Q(x_t, a_t), [T+1, B]
    if form == "expected":
        (target_probs,) = _to_float(target_probs)
        _check_same_shape(q_values=q_values.shape, target_probs=target_probs.shape)
        next_values = tf.reduce_sum(target_probs[1:] * q_values[1:], axis=-1)
    else:
        next_values = q_taken[1:]
    cs = lambda_ * _clip(tf.exp(log_rhos), clip_c_threshold)
    # Step t decays the next step's correction by gamma_t c_{t+1}. The last step has no next
    # correction (Q_ret_T - Q(x_T, a_T) := 0), so its decay value is never used.
    next_cs = tf.concat([cs[1:], tf.zeros_like(cs[:1])], axis=0)
    deltas = rewards + discounts * next_values - q_taken[:-1]
    corrections = _reverse_linear_recursion(
        deltas, discounts * next_cs, final=tf.zeros_like(deltas[0])
    )
    return tf.stop_gradient(q_taken[:-1] + corrections)


def n_step_returns(
    rewards: TensorLike, discounts: TensorLike, bootstrap_values: TensorLike, n: int
) -> tf.Tensor:
    """n-step bootstrapped returns, truncated at the end of the unroll (IMPALA Eq. (2)).

    bootstrap_values[t] is the value estimate of the state x_{t+1} reached by step t (V(x_{t+1}),
    E_pi Q(x_{t+1}, .), Q(x_{t+1}, a_{t+1}), ...). With m = min(n, T - t) steps left in the unroll,

        G_t = sum_{k=0}^{m-1} (prod_{j=0}^{k-1} gamma_{t+j}) r_{t+k}
              + (prod_{j=0}^{m-1} gamma_{t+j}) bootstrap_values[t+m-1],

    so a step near the end of the unroll uses the steps it has left and bootstraps from the last
    value: the last step always gets the one-step target
    r_{T-1} + gamma_{T-1} bootstrap_values[T-1].

    Args:
      rewards: [T, B] rewards r_t.
      discounts: [T, B] per-step discounts gamma_t.
      bootstrap_values: [T, B] value of the state after each step.
      n: number of steps, an int >= 1.

    Returns:
      [T, B] returns, without gradient.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    rewards, discounts, bootstrap_values = _to_float(rewards, discounts, bootstrap_values)
    _check_same_shape(
        rewards=rewards.shape, discounts=discounts.shape, bootstrap_values=bootstrap_values.shape
    )
    returns = rewards + discounts * bootstrap_values  # the one-step returns
    # Each pass adds a step: G^(k)_t = r_t + gamma_t G^(k-1)_{t+1}, where the last position keeps
    # its one-step return. Beyond T - 1 passes nothing changes.
    num_passes = n - 1 if rewards.shape[0] is None else min(n - 1, rewards.shape[0] - 1)
    for _ in range(num_passes):
        returns = rewards + discounts * tf.concat([returns[1:], bootstrap_values[-1:]], axis=0)
    return tf.stop_gradient(returns)


def lambda_returns(
    rewards: TensorLike,
    discounts: TensorLike,
    values: TensorLike,
    bootstrap_value: TensorLike,
    lambda_: float,
) -> tf.Tensor:
    """Bootstrapped lambda-returns over the unroll (IMPALA Remark 2).

    G_t = r_t + gamma_t ((1 - lambda) V(x_{t+1}) + lambda G_{t+1}), with G_T = V(x_T) the bootstrap
    value. Equivalently, with G_t^(k) the k-step return bootstrapped on V(x_{t+k}) (the
    `n_step_returns` of the same unroll), the truncated lambda-return

        G_t = sum_{k=1}^{T-t-1} (1 - lambda) lambda^(k-1) G_t^(k) + lambda^(T-t-1) G_t^(T-t):

    the weight of the longer returns all goes to the one that bootstraps from V(x_T). lambda = 0
    gives the one-step targets r_t + gamma_t V(x_{t+1}); lambda = 1 the returns bootstrapped on
    V(x_T) alone. It equals on-policy V-trace with the same lambda.

    Args:
      rewards: [T, B] rewards r_t.
      discounts: [T, B] per-step discounts gamma_t.
      values: [T, B] V(x_t) for t = 0..T-1 (values[0] does not enter the returns).
      bootstrap_value: [B] V(x_T).
      lambda_: in [0, 1].

    Returns:
      [T, B] returns, without gradient.
    """
    _check_lambda(lambda_)
    rewards, discounts, values, bootstrap_value = _to_float(
        rewards, discounts, values, bootstrap_value
    )
    _check_same_shape(rewards=rewards.shape, discounts=discounts.shape, values=values.shape)
    _check_same_shape(bootstrap_value=bootstrap_value.shape, **{"values[0]": values.shape[1:]})
    values_tp1 = tf.concat([values[1:], bootstrap_value[None]], axis=0)
    returns = _reverse_linear_recursion(
        rewards + discounts * (1.0 - lambda_) * values_tp1,
        discounts * lambda_,
        final=bootstrap_value,
    )
    return tf.stop_gradient(returns)


def _reverse_linear_recursion(
    increments: tf.Tensor, decays: tf.Tensor, final: tf.Tensor
) -> tf.Tensor:
    """x_t = increments_t + decays_t x_{t+1} for t = T-1..0, with x_T = final.

    Returns x_0..x_{T-1}, time-major.
    """
    return tf.scan(
        lambda x_next, step: step[0] + step[1] * x_next,
        (increments, decays),
        initializer=final,
        reverse=True,
    )


def _clip(ratios: tf.Tensor, threshold: float | None) -> tf.Tensor:
    return ratios if threshold is None else tf.minimum(ratios, threshold)


def _to_float(*xs: TensorLike) -> tuple[tf.Tensor, ...]:
    return tuple(tf.convert_to_tensor(x, dtype=tf.float32) for x in xs)


def _check_threshold(name: str, threshold: float | None) -> None:
    if threshold is not None and not threshold >= 0:
        raise ValueError(f"{name} must be None (no clipping) or a number >= 0, got {threshold!r}")


def _check_lambda(lambda_: float) -> None:
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError(f"lambda_ must lie in [0, 1], got {lambda_!r}")


def _check_same_shape(**shapes: tf.TensorShape) -> None:
    first = next(iter(shapes.values()))
    if not all(shape.is_compatible_with(first) for shape in shapes.values()):
        listing = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise ValueError(f"expected equal shapes, got {listing}")

"""The IMPALA actor-critic loss (§4.2) and the off-policy corrections of the §5.2.2 ablation.

One learner step minimises (§4.2's three updates written as one loss, with the (AC-*) labels of
docs/papers/impala.md#equations-in-code; summed over batch and time, Table D.1 note):

    A_s = stop_grad(w_s (q_s - V(x_s)))                       policy-gradient advantage
    L_pi = - sum_{b,s} A_s log pi(a_s|x_s)                    (AC-pi)
    L_V  =   sum_{b,s} 1/2 (stop_grad(v_s) - V(x_s))^2         (AC-V)
    L_H  = - sum_{b,s} H(pi(.|x_s))                           (AC-H)
    L    = L_pi + baseline_cost L_V + entropy_cost L_H

The correction decides the value target v_s, the weight w_s and the log-probability (§5.2.2):

| correction     | v_s                       | w_s                     | log-probability     |
|----------------|---------------------------|-------------------------|---------------------|
| vtrace         | V-trace, Eq. (1)          | min(rho_bar, pi/mu)     | log pi(a)           |
| no_correction  | V-trace with pi/mu := 1   | 1                       | log pi(a)           |
| eps_correction | V-trace with pi/mu := 1   | 1                       | log(pi(a) + eps)    |
| one_step_is    | V-trace with pi/mu := 1   | min(rho_bar, pi/mu)     | log pi(a)           |

q_s = r_s + gamma_s v_{s+1} (Eq. (4)) or, for `pg_q_estimate="baseline"` (App. E.3),
q_s = r_s + gamma_s V(x_{s+1}); the last step bootstraps on V(x_T) either way.
"""

from typing import NamedTuple

import tensorflow as tf

from common.equations import instruments
from common.equations import policies
from common.equations import returns
from common.equations import sequences
from impala import config as config_lib


class LossHyperparameters(NamedTuple):
    """The loss-related fields of ImpalaConfig (a NamedTuple so tf.function sees constants)."""

    baseline_cost: float = 0.5  # Table G.1
    entropy_cost: float = 0.01  # Table G.1
    correction: str = "vtrace"  # §4
    clip_rho_threshold: float = 1.0  # §5.2.2
    clip_pg_rho_threshold: float = 1.0  # §5.2.2
    clip_c_threshold: float = 1.0  # §5.2.2
    vtrace_lambda: float = 1.0  # Remark 2; 1 is Eq. (1)
    correction_epsilon: float = 1e-6  # §5.2.2
    pg_q_estimate: str = "vtrace"  # Eq. (4)

    @classmethod
    def from_config(cls, config: config_lib.ImpalaConfig) -> "LossHyperparameters":
        return cls(**{name: getattr(config, name) for name in cls._fields})


def policy_gradient_loss(
    logits: tf.Tensor,
    actions: tf.Tensor,
    advantages: tf.Tensor,
    epsilon: float | None = None,
    mask: tf.Tensor | None = None,
) -> tf.Tensor:
    """L_pi = -sum A_s log pi(a_s|x_s) (AC-pi); with `epsilon`, log(pi(a_s|x_s) + eps) (§5.2.2).

    The per-step surrogate -sg(A_s) log pi(a_s|x_s) is
    `common.equations.policies.policy_gradient_loss`; IMPALA sums it over batch and time (Table D.1
    note). The eps_correction variant feeds it log(pi + eps) instead of log pi.
    """
    if epsilon is None:
        log_probs = tf.nn.log_softmax(logits)
    else:
        log_probs = tf.math.log(tf.nn.softmax(logits) + epsilon)
    return _sum(policies.policy_gradient_loss(log_probs, actions, advantages), mask)


def baseline_loss(vs: tf.Tensor, values: tf.Tensor, mask: tf.Tensor | None = None) -> tf.Tensor:
    """L_V = sum 1/2 (v_s - V(x_s))^2 with v_s constant (AC-V); the 1/2 is our reading
    (docs/papers/impala.md#departures-from-the-paper)."""
    return 0.5 * _sum(tf.square(tf.stop_gradient(vs) - values), mask)


def entropy_loss(logits: tf.Tensor, mask: tf.Tensor | None = None) -> tf.Tensor:
    """L_H = -sum_s H(pi(.|x_s)) = sum_s sum_a pi log pi (AC-H): minimising it raises entropy.

    H per step is `common.equations.policies.entropy`; IMPALA sums over batch and time.
    """
    return -_sum(policies.entropy(logits=logits), mask)


def _sum(per_step: tf.Tensor, mask: tf.Tensor | None) -> tf.Tensor:
    """IMPALA's sum over batch and time, of the real steps only when `mask` is given (padded
    replay items, `common.replay.patterns.SampleK`)."""
    return tf.reduce_sum(per_step) if mask is None else sequences.masked_sum(per_step, mask)


def off_policy_targets(
    hparams: LossHyperparameters,
    log_rhos: tf.Tensor,
    discounts: tf.Tensor,
    rewards: tf.Tensor,
    values: tf.Tensor,
    bootstrap_value: tf.Tensor,
) -> returns.VTraceReturns:
    """(v_s, A_s) of the chosen correction (§5.2.2; table in the module docstring).

    All inputs are time-major [T, B] ([B] for the bootstrap value); outputs carry no gradient.
    """
    if hparams.correction not in config_lib.CORRECTIONS:
        raise ValueError(
            f"correction={hparams.correction!r} is not one of {', '.join(config_lib.CORRECTIONS)}"
        )
    if hparams.pg_q_estimate not in config_lib.PG_Q_ESTIMATES:
        raise ValueError(
            f"pg_q_estimate={hparams.pg_q_estimate!r} is not one of "
            f"{', '.join(config_lib.PG_Q_ESTIMATES)}"
        )
    corrected = hparams.correction == "vtrace"
    # Without correction, V-trace with every ratio set to 1 is the on-policy n-step target, Eq. (2).
    vs, pg_advantages = returns.vtrace(
        log_rhos if corrected else tf.zeros_like(log_rhos),
        discounts,
        rewards,
        values,
        bootstrap_value,
        clip_rho_threshold=hparams.clip_rho_threshold,
        clip_pg_rho_threshold=hparams.clip_pg_rho_threshold,
        clip_c_threshold=hparams.clip_c_threshold,
        lambda_=hparams.vtrace_lambda,
    )
    weights = tf.minimum(hparams.clip_pg_rho_threshold, tf.exp(log_rhos))
    if hparams.pg_q_estimate == "baseline":  # App. E.3: q_s = r_s + gamma_s V(x_{s+1}).
        values_tp1 = tf.concat([values[1:], bootstrap_value[None]], axis=0)
        q_minus_v = rewards + discounts * values_tp1 - values
        if hparams.correction in ("vtrace", "one_step_is"):
            q_minus_v *= weights
        pg_advantages = q_minus_v
    elif hparams.correction == "one_step_is":  # §5.2.2: "multiply the advantage ... by the weight"
        pg_advantages *= weights
    return returns.VTraceReturns(
        vs=tf.stop_gradient(vs), pg_advantages=tf.stop_gradient(pg_advantages)
    )


class LossOutputs(NamedTuple):
    total_loss: tf.Tensor
    stats: dict[str, tf.Tensor]


def impala_loss(
    hparams: LossHyperparameters,
    target_logits: tf.Tensor,
    values: tf.Tensor,
    bootstrap_value: tf.Tensor,
    behaviour_logits: tf.Tensor,
    actions: tf.Tensor,
    rewards: tf.Tensor,
    discounts: tf.Tensor,
    mask: tf.Tensor | None = None,
) -> LossOutputs:
    """L = L_pi + baseline_cost L_V + entropy_cost L_H of one batch (§4.2; module docstring).

    Args:
      hparams: coefficients and the correction.
      target_logits: [T, B, A] learner logits of pi at x_0..x_{T-1}.
      values: [T, B] learner V(x_0..x_{T-1}).
      bootstrap_value: [B] learner V(x_T).
      behaviour_logits: [T, B, A] the actors' logits of mu.
      actions: [T, B] actions taken by mu.
      rewards: [T, B] (clipped) rewards.
      discounts: [T, B] gamma * (1 - done_t).
      mask: optional [T, B], 1 for real steps, 0 for padding (left out of every sum; the
        discounts must already cut the returns there,
        `common.equations.sequences.discounts_from_resets`).

    Returns:
      The summed loss and diagnostic scalars (loss terms, importance-ratio statistics).
    """
    log_rhos = returns.log_rhos_from_logits(target_logits, behaviour_logits, actions)
    vs, pg_advantages = off_policy_targets(
        hparams, log_rhos, discounts, rewards, values, bootstrap_value
    )
    epsilon = hparams.correction_epsilon if hparams.correction == "eps_correction" else None
    pg = policy_gradient_loss(target_logits, actions, pg_advantages, epsilon, mask)
    baseline = baseline_loss(vs, values, mask)
    entropy = entropy_loss(target_logits, mask)
    total = pg + hparams.baseline_cost * baseline + hparams.entropy_cost * entropy
    rhos = tf.exp(log_rhos)
    steps = tf.cast(tf.size(rewards), tf.float32) if mask is None else tf.reduce_sum(mask)
    steps = tf.maximum(steps, 1.0)
    stats = {
        "loss/total": total,
        "loss/policy_gradient": pg,
        "loss/baseline": baseline,
        "loss/entropy": entropy,
        instruments.ENTROPY: -entropy / steps,
        "importance/rho_mean": tf.reduce_mean(rhos),
        "importance/rho_min": tf.reduce_min(rhos),
        "importance/rho_max": tf.reduce_max(rhos),
        "importance/rho_clipped_fraction": tf.reduce_mean(
            tf.cast(rhos > hparams.clip_rho_threshold, tf.float32)
        ),
        # How far pi has moved from mu on the batch's actions, on either side of 1 alike (the
        # replay study's measure of staleness, docs/results/ablations_minatar/summary.md).
        instruments.ABS_LOG_RHO: tf.reduce_mean(tf.abs(log_rhos)),
        instruments.VALUE_ERROR: _sum(tf.square(vs - values), mask) / steps,
        "values/vs_mean": tf.reduce_mean(vs),
        "values/value_mean": tf.reduce_mean(values),
        "values/advantage_abs_mean": tf.reduce_mean(tf.abs(pg_advantages)),
    }
    return LossOutputs(total, stats)

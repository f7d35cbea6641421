"""Reactor's loss for one batch of sequences (§3.1-3.3), from the network's outputs; pure
functions of tensors on `common.equations.distributional`, `common.equations.returns`,
`common.equations.policies`.

- Critic: Distributional Retrace, cross-entropy to the signed target q* (§3.2, Eq. 12), or for
  Reactor ND ½ (Q_ret - Q(x_t, a_t))² on the classical Retrace target (footnote 5).
- Actor: beta-LOO (Eq. 10) with R = the Retrace return (§3.2) and the online critic's Q as
  baseline, or ACER's TISLR for the ablation; minus the entropy cost (App. 6.5).
- Each sequence's loss, critic and actor, is multiplied by its importance weight (§3.3), then
  averaged over steps and sequences.
- The ND loss, where R and Q come from, which losses the weight scales and the mean are our
  choices: docs/papers/reactor.md#departures-from-the-paper.
- The priority of each sequence: the mean over its steps of the total variation
  sum_i |q*_i - q_i(x_t, a_t)| (footnote 3: no ½), or of |Q_ret - Q(x_t, a_t)| for ND (§3.3).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, NamedTuple

import tensorflow as tf

from common.equations import distributional
from common.equations import instruments
from common.equations import policies
from common.equations import returns

if TYPE_CHECKING:
    from reactor import networks


@dataclasses.dataclass(frozen=True)
class LossHyperparameters:
    distributional: bool
    retrace_lambda: float
    clip_c_threshold: float
    retrace_form: str
    policy_gradient: str
    beta_loo_c: float
    tislr_c: float
    entropy_cost: float

    @classmethod
    def from_config(cls, config: Any) -> "LossHyperparameters":
        return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(cls)})


class LossOutputs(NamedTuple):
    loss: tf.Tensor  # scalar, IS-weighted mean over steps and sequences
    priorities: tf.Tensor  # [B] new priority of each sequence (before floor and mixing)
    stats: dict


def _taken(x: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
    """x[t, b, a_t] for x [T, B, A, ...]."""
    return tf.gather(x, actions, batch_dims=2)


def critic(
    hparams: LossHyperparameters,
    online_q: tf.Tensor,
    target_q: tf.Tensor,
    trace_probs: tf.Tensor,
    actions: tf.Tensor,
    log_rhos: tf.Tensor,
    rewards: tf.Tensor,
    discounts: tf.Tensor,
    support: tf.Tensor | None,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(per-step critic loss [T, B], per-step priority [T, B], Retrace return R [T, B]).

    online_q: [T, B, A, N] bin logits (ND: [T, B, A] values) of the online net on x_0..x_{T-1};
    target_q: [T+1, B, A, N] (ND: [T+1, B, A]) of the target net, row 0 unused; trace_probs
    [T+1, B, A] pi of the traces (row 0 unused); actions [T+1, B]; log_rhos, rewards, discounts
    [T, B].
    """
    taken = actions[:-1]
    if hparams.distributional:
        target_probs = tf.nn.softmax(target_q, axis=-1)
        q_star = distributional.distributional_retrace_target(
            target_probs,
            trace_probs,
            actions,
            log_rhos,
            rewards,
            discounts,
            support,
            hparams.retrace_lambda,
        )
        taken_logits = _taken(online_q, taken)
        loss = distributional.categorical_cross_entropy(q_star, taken_logits)
        priority = tf.reduce_sum(tf.abs(q_star - tf.nn.softmax(taken_logits)), axis=-1)
        target_values = tf.reduce_sum(target_probs * support, axis=-1)
    else:
        target_values = target_q
    # R for the policy gradient: the (unprojected) Retrace return on the target means
    # (our reading of §3.2's R); for ND it is also the critic's target.
    retrace_return = returns.retrace(
        target_values,
        trace_probs,
        actions,
        log_rhos,
        rewards,
        discounts,
        hparams.retrace_form,
        hparams.retrace_lambda,
        hparams.clip_c_threshold,
    )
    if not hparams.distributional:
        error = retrace_return - _taken(online_q, taken)
        loss = 0.5 * tf.square(error)
        priority = tf.abs(error)
    return loss, tf.stop_gradient(priority), retrace_return


def actor(
    hparams: LossHyperparameters,
    policy_probs: tf.Tensor,
    q_values: tf.Tensor,
    actions: tf.Tensor,
    retrace_return: tf.Tensor,
    mu: tf.Tensor,
) -> tuple[tf.Tensor, tf.Tensor]:
    """(per-step policy loss [T, B], entropy [T, B]): beta-LOO or TISLR minus eta H(pi).

    policy_probs [T, B, A] online pi (eps-mixed), q_values [T, B, A] online critic (no gradient),
    actions [T, B], retrace_return [T, B], mu [T, B, A] the stored behaviour distribution.
    """
    if hparams.policy_gradient == "beta_loo":
        pg = policies.beta_loo_policy_gradient_loss(
            policy_probs,
            actions,
            retrace_return,
            q_values,
            tf.gather(mu, actions, batch_dims=2),
            hparams.beta_loo_c,
        )
    else:
        pg = policies.tislr_policy_gradient_loss(
            policy_probs, actions, retrace_return, q_values, mu, hparams.tislr_c
        )
    entropy = policies.entropy(probs=policy_probs)
    return pg - hparams.entropy_cost * entropy, entropy


def reactor_loss(
    hparams: LossHyperparameters,
    online: networks.ReactorOutputs,
    target: networks.ReactorOutputs,
    trace_probs: tf.Tensor,
    actions: tf.Tensor,
    behaviour_probs: tf.Tensor,
    rewards: tf.Tensor,
    discounts: tf.Tensor,
    importance_weights: tf.Tensor,
    support: tf.Tensor | None,
) -> LossOutputs:
    """The whole loss: critic, actor, importance weights and priorities (module docstring).

    online: `networks.ReactorOutputs` [T, B, ...] on x_0..x_{T-1}; target: [T+1, B, ...] on
    x_0..x_T (row 0 unused); trace_probs [T+1, B, A]; actions [T+1, B]; behaviour_probs
    [T, B, A] mu; rewards, discounts [T, B]; importance_weights [B]; support [N].
    """
    taken = actions[:-1]
    mu_taken = tf.gather(behaviour_probs, taken, batch_dims=2)
    log_rhos = tf.math.log(tf.gather(trace_probs[:-1], taken, batch_dims=2)) - tf.math.log(mu_taken)
    critic_loss, priority, retrace_return = critic(
        hparams,
        online.q,
        tf.stop_gradient(target.q),
        tf.stop_gradient(trace_probs),
        actions,
        tf.stop_gradient(log_rhos),
        rewards,
        discounts,
        support,
    )
    if hparams.distributional:
        q_values = tf.reduce_sum(tf.nn.softmax(online.q, axis=-1) * support, axis=-1)
    else:
        q_values = online.q
    policy_loss, entropy = actor(
        hparams,
        online.policy_probs,
        tf.stop_gradient(q_values),
        taken,
        retrace_return,
        behaviour_probs,
    )
    q_taken = _taken(q_values, taken)
    weights = tf.stop_gradient(tf.cast(importance_weights, tf.float32))[None, :]
    critic_mean = tf.reduce_mean(weights * critic_loss)
    policy_mean = tf.reduce_mean(weights * policy_loss)
    stats = {
        "loss/total": critic_mean + policy_mean,
        "loss/critic": critic_mean,
        "loss/policy": policy_mean,
        instruments.ENTROPY: tf.reduce_mean(entropy),
        "critic/retrace_return": tf.reduce_mean(retrace_return),
        "critic/q_taken": tf.reduce_mean(q_taken),
        instruments.VALUE_ERROR: tf.reduce_mean(tf.square(retrace_return - q_taken)),
        instruments.ABS_LOG_RHO: tf.reduce_mean(
            tf.abs(tf.math.log(_taken(online.policy_probs, taken)) - tf.math.log(mu_taken))
        ),
    }
    return LossOutputs(critic_mean + policy_mean, tf.reduce_mean(priority, axis=0), stats)

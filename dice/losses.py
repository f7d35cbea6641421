"""DiCE's loss (dice.md §2.5 steps 3-8): V-trace for V, Retrace for Q, the tau-free policy
gradient (Eq. (8)), no entropy term unless the `entropy` ablation asks for one.

Pure function of tensors; the train step (`dice.learning`) unrolls the network and passes the
trained part of each sequence here.
"""

import dataclasses

import tensorflow as tf

from common import critics
from common import policies
from common import sequences
from dice import config as config_lib


@dataclasses.dataclass(frozen=True)
class LossHyperparameters:
    v_loss_scale: float  # xi
    q_loss_scale: float  # alpha
    pi_loss_scale: float  # beta
    entropy_cost: float
    clip_rho_threshold: float
    clip_c_threshold: float
    retrace_form: str
    q_centering: str

    @classmethod
    def from_config(cls, config: config_lib.DiceConfig) -> "LossHyperparameters":
        return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(cls)})


def dice_loss(
    hparams: LossHyperparameters,
    advantages,
    values,
    etas,
    actions,
    behaviour_log_probs,
    rewards,
    discounts,
    mask,
) -> tuple[tf.Tensor, dict]:
    """The total loss xi L_V + alpha L_Q + beta L_pi (− entropy_cost H) and its parts.

    Args:
      advantages: [T+1, B, A] A(x_t, .) with gradient; row T is the bootstrap state.
      values: [T+1, B] V(x_t) with gradient.
      etas: [T+1, B] each step's own inverse temperature (dice.md A19).
      actions: [T+1, B] a_t.
      behaviour_log_probs: [T+1, B] log mu(a_t|x_t) the actor stored.
      rewards: [T, B] shaped rewards with truncations bootstrapped.
      discounts: [T, B] gamma_t (0 across episode ends and next to padding).
      mask: [T, B] 1 for real steps, 0 for padding; each loss is its mean over the real steps
        (dice.md A5).
    """
    log_pi = policies.inverse_temperature_log_softmax(advantages, etas)  # [T+1, B, A]
    target_probs = tf.exp(log_pi)
    taken_log_pi = tf.gather(log_pi, actions, batch_dims=2)
    log_rhos = tf.stop_gradient(taken_log_pi - behaviour_log_probs)[:-1]
    q_values = critics.dueling_q(values, advantages, target_probs, hparams.q_centering)
    critic = critics.vtrace_retrace(
        values,
        q_values,
        target_probs,
        actions,
        log_rhos,
        rewards,
        discounts,
        hparams.clip_rho_threshold,
        hparams.clip_c_threshold,
        hparams.retrace_form,
    )
    pi_loss = policies.tau_free_policy_gradient_loss(
        advantages[:-1], etas[:-1], actions[:-1], critic.pg_advantages
    )
    v_loss = sequences.masked_mean(critic.v_loss, mask)
    q_loss = sequences.masked_mean(critic.q_loss, mask)
    pi_loss = sequences.masked_mean(pi_loss, mask)
    # H from the log-probabilities: at eta = 50, softmax(eta A) underflows to exact zeros, where
    # the gradient of p log p is infinite, and 0 * inf would poison every weight.
    entropy = sequences.masked_mean(-tf.reduce_sum(target_probs * log_pi, -1)[:-1], mask)
    total = (
        hparams.v_loss_scale * v_loss
        + hparams.q_loss_scale * q_loss
        + hparams.pi_loss_scale * pi_loss
    )
    if hparams.entropy_cost:
        # dice.md A12: the `entropy` ablation adds −coef · H[pi_tau] after the scalings.
        total -= hparams.entropy_cost * entropy
    return total, {
        "loss/total": total,
        "loss/v": v_loss,
        "loss/q": q_loss,
        "loss/pi": pi_loss,
        "policy/entropy": entropy,
        "policy/eta": sequences.masked_mean(etas[:-1], mask),
        # log rho, not rho: a step the stale policy took with a tiny mu has a ratio beyond float32.
        "policy/log_rho": sequences.masked_mean(log_rhos, mask),
        "policy/rho_clipped_fraction": sequences.masked_mean(
            tf.cast(log_rhos > tf.math.log(hparams.clip_rho_threshold), tf.float32), mask
        ),
        "value/v": sequences.masked_mean(values[:-1], mask),
        "value/q_taken": sequences.masked_mean(critic.q_taken, mask),
        "value/vtrace_target": sequences.masked_mean(critic.vs, mask),
    }

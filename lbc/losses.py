"""LBC's per-policy loss (lbc.md §2.6, App. B, Algorithm 2); the auxiliary tasks of §3 are
`common.dynamics`.

Network i learns from the shared replay, whose actions came from the mixture mu_psi (Eq. (10)):
its own target policy pi_i = softmax(A_i) at inverse temperature 1 (§5.1.2: Phi_{h_i} = A_i; the
difference from GDI-H3), importance ratios pi_i(a_t|x_t) / mu(a_t|x_t) against the stored mu,
V-trace for V_i, Retrace for Q_i = V_i + A_i − E_{pi_i} A_i, and the V-trace policy gradient,
weighted xi / alpha / beta = 1 / 5 / 5 (Table 3); no entropy term, no PPO clip (lbc.md §2.6).

Pure functions of tensors; `lbc.learning` unrolls the networks and calls them once per network.
"""

import dataclasses

import tensorflow as tf

from common import critics
from common import policies
from common import sequences
from lbc import config as config_lib


@dataclasses.dataclass(frozen=True)
class LossHyperparameters:
    v_loss_scale: float  # xi
    q_loss_scale: float  # alpha
    pi_loss_scale: float  # beta
    clip_rho_threshold: float
    clip_c_threshold: float
    retrace_form: str
    q_centering: str
    pg_advantage: str

    @classmethod
    def from_config(cls, config: config_lib.LbcConfig) -> "LossHyperparameters":
        return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(cls)})


def policy_loss(
    hparams: LossHyperparameters,
    advantages,
    values,
    actions,
    behaviour_log_probs,
    rewards,
    discounts,
    mask,
) -> tuple[tf.Tensor, dict]:
    """xi L_V + alpha L_Q + beta L_pi of one network of the population, and its parts.

    Args:
      advantages: [T+1, B, A] A_i(x_t, .) with gradient; row T is the bootstrap state.
      values: [T+1, B] V_i(x_t) with gradient.
      actions: [T+1, B] a_t, drawn from the mixture mu.
      behaviour_log_probs: [T+1, B] log mu(a_t|x_t) the actor stored (lbc.md §8 #21).
      rewards: [T, B] RS_i(r_t), truncations bootstrapped with V_i.
      discounts: [T, B] gamma_i (0 across episode ends and next to padding).
      mask: [T, B] 1 for real steps; each loss is its mean over them (lbc.md §8 #14).
    """
    log_pi = tf.nn.log_softmax(advantages)  # pi_i = softmax(A_i): inverse temperature 1
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
    rhos = tf.exp(log_rhos)
    if hparams.pg_advantage == "vtrace":
        pg_advantages = critic.pg_advantages  # rho_t (r_t + gamma_t v_{t+1} − V(x_t))
    else:  # lbc.md §2.6 --pg_advantage=retrace: rho_t (Q̂_t − V(x_t))
        clipped = tf.minimum(rhos, hparams.clip_rho_threshold)
        pg_advantages = clipped * (critic.q_targets - tf.stop_gradient(values[:-1]))
    pi_loss = policies.policy_gradient_loss(log_pi[:-1], actions[:-1], pg_advantages)
    v_loss = sequences.masked_mean(critic.v_loss, mask)
    q_loss = sequences.masked_mean(critic.q_loss, mask)
    pi_loss = sequences.masked_mean(pi_loss, mask)
    total = (
        hparams.v_loss_scale * v_loss
        + hparams.q_loss_scale * q_loss
        + hparams.pi_loss_scale * pi_loss
    )
    return total, {
        "loss/v": v_loss,
        "loss/q": q_loss,
        "loss/pi": pi_loss,
        "policy/entropy": sequences.masked_mean(policies.entropy(probs=target_probs[:-1]), mask),
        "policy/rho": sequences.masked_mean(rhos, mask),
        "policy/rho_clipped_fraction": sequences.masked_mean(
            tf.cast(rhos > hparams.clip_rho_threshold, tf.float32), mask
        ),
        "value/v": sequences.masked_mean(values[:-1], mask),
        "value/q_taken": sequences.masked_mean(critic.q_taken, mask),
        "value/vtrace_target": sequences.masked_mean(critic.vs, mask),
    }

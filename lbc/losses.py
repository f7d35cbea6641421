"""LBC's per-policy loss (§5.1.2, App. B, Algorithm 2); the auxiliary tasks of Table 3 are
`common.burn_in.dynamics`.

Network i learns from the shared replay, whose actions came from the mixture mu_psi (Eq. (10)):
its own target policy pi_i = softmax(A_i) at inverse temperature 1 (§5.1.2: Phi_{h_i} = A_i; the
difference from GDI-H3), importance ratios pi_i(a_t|x_t) / mu(a_t|x_t) against the stored mu,
V-trace for V_i, Retrace for Q_i = V_i + A_i − E_{pi_i} A_i, and the V-trace policy gradient,
weighted xi / alpha / beta = 1 / 5 / 5 (Table 3); no entropy term, no PPO clip (the loss rows
of docs/papers/lbc.md#departures-from-the-paper).

Pure functions of tensors; `lbc.learning` unrolls the networks and calls them once per network.
"""

import dataclasses

import tensorflow as tf

from common.burn_in import critics
from common.equations import policies
from common.equations import sequences


@dataclasses.dataclass(frozen=True)
class LossHyperparameters(critics.CriticHyperparameters):
    pg_advantage: str  # "vtrace" or "retrace": the estimate of App. B.1's Phi_t


def policy_loss(
    hparams: LossHyperparameters,
    advantages: tf.Tensor,
    values: tf.Tensor,
    actions: tf.Tensor,
    behaviour_log_probs: tf.Tensor,
    rewards: tf.Tensor,
    discounts: tf.Tensor,
    mask: tf.Tensor,
) -> tuple[tf.Tensor, dict]:
    """xi L_V + alpha L_Q + beta L_pi of one network of the population, and its parts.

    Args:
      advantages: [T+1, B, A] A_i(x_t, .) with gradient; row T is the bootstrap state.
      values: [T+1, B] V_i(x_t) with gradient.
      actions: [T+1, B] a_t, drawn from the mixture mu.
      behaviour_log_probs: [T+1, B] log mu(a_t|x_t) the actor stored (our choice, see
        docs/papers/lbc.md#departures-from-the-paper).
      rewards: [T, B] RS_i(r_t), truncations bootstrapped with V_i.
      discounts: [T, B] gamma_i (0 across episode ends and next to padding).
      mask: [T, B] 1 for real steps; each loss is its mean over them (our choice, see
        docs/papers/lbc.md#departures-from-the-paper).
    """
    log_pi = tf.nn.log_softmax(advantages)  # pi_i = softmax(A_i): inverse temperature 1
    log_rhos = critics.log_ratios(log_pi, actions, behaviour_log_probs)
    critic, critic_loss, stats = critics.network_losses(
        hparams, values, advantages, tf.exp(log_pi), actions, log_rhos, rewards, discounts, mask
    )
    if hparams.pg_advantage == "vtrace":
        pg_advantages = critic.pg_advantages  # rho_t (r_t + gamma_t v_{t+1} − V(x_t))
    else:  # --pg_advantage=retrace: rho_t (Q̂_t − V(x_t))
        clipped = tf.minimum(tf.exp(log_rhos), hparams.clip_rho_threshold)
        pg_advantages = clipped * (critic.q_targets - tf.stop_gradient(values[:-1]))
    pi_loss = policies.policy_gradient_loss(log_pi[:-1], actions[:-1], pg_advantages)
    pi_loss = sequences.masked_mean(pi_loss, mask)
    total = critic_loss + hparams.pi_loss_scale * pi_loss
    return total, {
        **stats,
        **critics.ratio_stats(log_rhos, mask, hparams.clip_rho_threshold),
        "loss/pi": pi_loss,
        "policy/entropy": critics.target_entropy(log_pi, mask),
    }

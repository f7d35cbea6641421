"""DiCE's loss (Algorithm 3): V-trace for V (Eqs. (4), (5)), Retrace for Q (Eqs. (2), (3)), the
tau-free policy gradient (Eq. (8)), no entropy term unless the `entropy` ablation asks for one;
docs/papers/dice.md#equations-in-code maps each to its test.

Pure function of tensors; the train step (`dice.learning`) unrolls the network and passes the
trained part of each sequence here.
"""

import dataclasses

import tensorflow as tf

from common.burn_in import critics
from common.equations import policies
from common.equations import sequences


@dataclasses.dataclass(frozen=True)
class LossHyperparameters(critics.CriticHyperparameters):
    entropy_cost: float  # the `entropy` ablation (§4.3): 1; Table 5: 0
    entropy_of: str  # whose entropy: "played", softmax(eta_t A); "tau_one", softmax(A)


def dice_loss(
    hparams: LossHyperparameters,
    advantages: tf.Tensor,
    values: tf.Tensor,
    etas: tf.Tensor,
    actions: tf.Tensor,
    behaviour_log_probs: tf.Tensor,
    rewards: tf.Tensor,
    discounts: tf.Tensor,
    mask: tf.Tensor,
) -> tuple[tf.Tensor, dict]:
    """The total loss xi L_V + alpha L_Q + beta L_pi (− entropy_cost H) and its parts.

    Args:
      advantages: [T+1, B, A] A(x_t, .) with gradient; row T is the bootstrap state.
      values: [T+1, B] V(x_t) with gradient.
      etas: [T+1, B] each step's own inverse temperature, the one it was played with (Eq. (8)
        pairs pi_tau with mu_tau).
      actions: [T+1, B] a_t.
      behaviour_log_probs: [T+1, B] log mu(a_t|x_t) the actor stored.
      rewards: [T, B] shaped rewards with truncations bootstrapped.
      discounts: [T, B] gamma_t (0 across episode ends and next to padding).
      mask: [T, B] 1 for real steps, 0 for padding; each loss is its mean over the real steps
        (a choice: docs/papers/dice.md#departures-from-the-paper).
    """
    log_pi = policies.inverse_temperature_log_softmax(advantages, etas)  # [T+1, B, A]
    log_rhos = critics.log_ratios(log_pi, actions, behaviour_log_probs)
    critic, critic_loss, stats = critics.network_losses(
        hparams, values, advantages, tf.exp(log_pi), actions, log_rhos, rewards, discounts, mask
    )
    pi_loss = policies.tau_free_policy_gradient_loss(
        advantages[:-1], etas[:-1], actions[:-1], critic.pg_advantages
    )
    pi_loss = sequences.masked_mean(pi_loss, mask)
    entropy = critics.target_entropy(log_pi, mask)
    total = critic_loss + hparams.pi_loss_scale * pi_loss
    extra = {}
    if hparams.entropy_cost:
        # §4.3's `entropy` ablation: −coef · H[pi] after the scalings, pi = pi_tau or, with
        # entropy_of=tau_one, softmax(A) (docs/papers/dice.md#departures-from-the-paper).
        if hparams.entropy_of == "tau_one":
            regularised = critics.target_entropy(tf.nn.log_softmax(advantages), mask)
            extra["policy/entropy_tau_one"] = regularised
        else:
            regularised = entropy
        total -= hparams.entropy_cost * regularised
    return total, {
        **stats,
        **extra,
        **critics.ratio_stats(log_rhos, mask, hparams.clip_rho_threshold),
        "loss/total": total,
        "loss/pi": pi_loss,
        "policy/entropy": entropy,
        "policy/eta": sequences.masked_mean(etas[:-1], mask),
    }

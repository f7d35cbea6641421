"""GDI's RL operator T (App. B, App. K.1, Table 6): per network i, V-trace for V_i, Retrace for
Q_i = A_i − E_pi[A_i] + V_i, and the policy gradient of the shared target policy pi_lambda; no
entropy term. The auxiliary dynamics losses are added by `gdi.learning` (they need the torso).

    target  pi_lambda = eps Softmax(eta1 A_1) + (1 − eps) Softmax(eta2 A_2)  under the learner's
            theta with each step's own lambda (§4.1: "The learning policy is also
            pi_theta_lambda"), the same for both sets in H3
    rho_t   = min(pi_lambda(a_t|x_t) / mu(a_t|x_t), rho_bar), likewise c_t    (Table 6: 1.05)
    L       = sum_i [xi L_V^i + alpha L_Q^i] + beta L_pi                      (Table 6: 1, 10, 10)
    L_pi    = mean_t −sum_n sg(Â_{t,i(n)}) sg(w_n(a_t)) ℓ_{t,n}

where component n reads network i(n) (I3: both network 1; H3: n), w_n are the responsibilities
eps pi_1(a) / pi_lambda(a) and (1 − eps) pi_2(a) / pi_lambda(a), and Â_{t,i} is network i's
V-trace policy-gradient advantage in its own reward shaping. `pg_mode` chooses ℓ
(docs/papers/gdi.md#options-and-readings-that-are-not-departures):
- "log_mixture" (default, App. B's ∇ log pi): ℓ = log pi_n(a_t), whose weighted sum has the
  gradient of log pi_lambda(a_t) (sum_n w_n ∇ log pi_n); in I3 this is autodiff through the
  mixture, and in H3 it is that gradient split by component, so set i's loss reaches theta_i
  only (Algorithm 3, "respectively");
- "tau_free" (option): ℓ = A_n(a_t) − sum_b sg(pi_n(b)) A_n(b), whose gradient is
  tau_n ∇ log pi_n(a_t); DiCE's Eq. (8) when eps ∈ {0, 1}, finite at eta = 0.

Pure functions of tensors, as `dice.losses`; each mean is over the real steps (masks).
"""

import dataclasses
from typing import Any, Callable, Mapping, Sequence

import tensorflow as tf

from common.burn_in import critics
from common.equations import policies
from common.equations import sequences


@dataclasses.dataclass(frozen=True)
class LossHyperparameters(critics.CriticHyperparameters):
    pg_mode: str  # PG_LOSSES


def lambda_mixture(behaviour: Mapping[str, Any], stack: Callable = tf.stack) -> tuple[Any, Any]:
    """Eq. (2)'s (etas [..., 2], weights [..., 2]) from lambda {"eta1", "eta2", "epsilon"}:
    inverse temperatures (1/tau_1, 1/tau_2) and weights (eps, 1 − eps). `stack` is tf.stack or
    np.stack (the actor's numpy parameters)."""
    epsilon = behaviour["epsilon"]
    etas = stack([behaviour["eta1"], behaviour["eta2"]], -1)
    return etas, stack([epsilon, 1.0 - epsilon], -1)


def log_mixture_policy_gradient_loss(
    component_logits: tf.Tensor,
    etas: tf.Tensor,
    weights: tf.Tensor,
    actions: tf.Tensor,
    advantages: tf.Tensor,
) -> tf.Tensor:
    """−sum_n sg(Â_n) sg(w_n(a)) log pi_n(a) (`pg_mode="log_mixture"`, module docstring); same
    arguments as `common.equations.policies.mixture_tau_free_policy_gradient_loss`."""
    log_components = policies.inverse_temperature_log_softmax(component_logits, etas)
    one_hot = tf.one_hot(actions, log_components.shape[-1], dtype=log_components.dtype)
    taken = tf.reduce_sum(log_components * one_hot[..., None, :], -1)  # [..., N]
    responsibilities = policies.mixture_responsibilities(component_logits, etas, weights, actions)
    weighted = tf.stop_gradient(responsibilities * advantages)
    return -tf.reduce_sum(weighted * taken, -1)


PG_LOSSES = {
    "tau_free": policies.mixture_tau_free_policy_gradient_loss,
    "log_mixture": log_mixture_policy_gradient_loss,
}


def gdi_loss(
    hparams: LossHyperparameters,
    advantages: Sequence[tf.Tensor],
    values: Sequence[tf.Tensor],
    components: Sequence[int],
    etas: tf.Tensor,
    weights: tf.Tensor,
    actions: tf.Tensor,
    behaviour_log_probs: tf.Tensor,
    rewards: Sequence[tf.Tensor],
    discounts: tf.Tensor,
    mask: tf.Tensor,
) -> tuple[tf.Tensor, dict]:
    """The RL part of the loss (module docstring) and its statistics.

    Args:
      advantages: per network, [T+1, B, A] A_i(x_t, .) with gradient; row T is the bootstrap.
      values: per network, [T+1, B] V_i(x_t) with gradient.
      components: the network of each mixture component (`gdi.networks.component_networks`).
      etas, weights: [T+1, B, 2] each step's lambda as `lambda_mixture` gives it.
      actions: [T+1, B] a_t; behaviour_log_probs: [T+1, B] log mu(a_t|x_t) the actor stored.
      rewards: per network, [T, B] rewards in its shaping, truncations bootstrapped.
      discounts: [T, B] gamma_t (0 across episode ends and next to padding).
      mask: [T, B] 1 for real steps.
    """
    component_logits = tf.stack([advantages[i] for i in components], -2)  # [T+1, B, 2, A]
    log_pi = policies.mixture_log_policy(component_logits, etas, weights)
    target_probs = tf.exp(log_pi)
    log_rhos = critics.log_ratios(log_pi, actions, behaviour_log_probs)
    total, stats = 0.0, {}
    critic_outputs = []
    for i, (advantage, value, reward) in enumerate(zip(advantages, values, rewards), start=1):
        critic, critic_loss, critic_stats = critics.network_losses(
            hparams,
            value,
            advantage,
            target_probs,
            actions,
            log_rhos,
            reward,
            discounts,
            mask,
            suffix=f"_{i}",
        )
        critic_outputs.append(critic)
        total += critic_loss
        stats.update(critic_stats)
    pg_advantages = tf.stack([critic_outputs[i].pg_advantages for i in components], -1)
    pi_loss = PG_LOSSES[hparams.pg_mode](
        component_logits[:-1], etas[:-1], weights[:-1], actions[:-1], pg_advantages
    )
    pi_loss = sequences.masked_mean(pi_loss, mask)
    total += hparams.pi_loss_scale * pi_loss
    stats.update(
        {
            **critics.ratio_stats(log_rhos, mask, hparams.clip_rho_threshold),
            "loss/pi": pi_loss,
            "policy/entropy": critics.target_entropy(log_pi, mask),
            "policy/eta1": sequences.masked_mean(etas[:-1, :, 0], mask),
            "policy/eta2": sequences.masked_mean(etas[:-1, :, 1], mask),
            "policy/epsilon": sequences.masked_mean(weights[:-1, :, 0], mask),
        }
    )
    return total, stats

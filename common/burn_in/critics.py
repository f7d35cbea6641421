"""The dueling V/A critic of DiCE, GDI and LBC: Q from V and A, V-trace for V, Retrace for Q.

One network's heads give V(x_t) and A(x_t, .). With a target policy pi (DiCE: softmax(eta A)),
the learner (DiCE App. B, Algorithm 3; GDI Algorithms 2-3 and LBC Algorithm 2, per network)
computes

    Q(x_t, .)  = V(x_t) + A(x_t, .) − centre_t              (Q_CENTERINGS, GDI Eq. (9))
    rho_t, c_t = min(pi(a_t|x_t) / mu(a_t|x_t), rho_bar / c_bar)
    v_s        = V-trace targets of V (Eq. (4)), Â_t = rho_t (r_t + gamma_t v_{t+1} − V(x_t))
    G_t        = Retrace targets of Q(x_t, a_t) (DiCE Eq. (2), GDI Eq. (3); `form` sampled or
                 expected)
    L_V = ½ (v_t − V(x_t))²,  L_Q = ½ (G_t − Q(x_t, a_t))²    (targets under stop-gradient)

Each loss is returned per step [T, B]; the paper's module masks and weights them.
"""

import dataclasses
from typing import Any, NamedTuple, Self

import tensorflow as tf

from common.equations import instruments
from common.equations import returns
from common.equations import sequences
from common.settings.config import Q_CENTERINGS

# Q_CENTERINGS: "policy_mean": Q = V + A − sum_k sg(pi(k)) A(k), so that E_pi Q = V (GDI Eq. (9)),
# the Q loss reaching A only through the A(k) terms; "policy_mean_grad": the same
# value with the gradient through pi as well (when pi is a function of A, as every target policy
# here is, the centre is differentiated whole, as the dueling network's mean is); "none":
# Q = V + A (DiCE's text, literally); "uniform_mean": Q = V + A − mean_k A(k) (the dueling
# network's choice).


def dueling_q(
    values: tf.Tensor,
    advantages: tf.Tensor,
    target_probs: tf.Tensor,
    centering: str = "policy_mean",
) -> tf.Tensor:
    """Q(x, .) [..., A] from V [...] and A [..., A] (module docstring); `target_probs` pi(.|x)
    [..., A] is used by the two policy means only, under stop-gradient for "policy_mean"."""
    if centering not in Q_CENTERINGS:
        raise ValueError(f"centering must be one of {Q_CENTERINGS}, got {centering!r}")
    advantages = tf.convert_to_tensor(advantages)
    if centering == "policy_mean":
        centre = tf.reduce_sum(tf.stop_gradient(target_probs) * advantages, -1, keepdims=True)
    elif centering == "policy_mean_grad":
        centre = tf.reduce_sum(target_probs * advantages, -1, keepdims=True)
    elif centering == "uniform_mean":
        centre = tf.reduce_mean(advantages, -1, keepdims=True)
    else:
        centre = 0.0
    return values[..., None] + advantages - centre


class CriticOutputs(NamedTuple):
    v_loss: tf.Tensor  # [T, B] ½ (v_t − V(x_t))²
    q_loss: tf.Tensor  # [T, B] ½ (G_t − Q(x_t, a_t))²
    pg_advantages: tf.Tensor  # [T, B] Â_t, without gradient
    vs: tf.Tensor  # [T, B] V-trace targets, without gradient
    q_targets: tf.Tensor  # [T, B] Retrace targets, without gradient
    q_taken: tf.Tensor  # [T, B] Q(x_t, a_t)


def vtrace_retrace(
    values: tf.Tensor,
    q_values: tf.Tensor,
    target_probs: tf.Tensor,
    actions: tf.Tensor,
    log_rhos: tf.Tensor,
    rewards: tf.Tensor,
    discounts: tf.Tensor,
    clip_rho_threshold: float,
    clip_c_threshold: float,
    retrace_form: str,
) -> CriticOutputs:
    """V-trace for V and Retrace for Q over one unroll (module docstring).

    Args:
      values: [T+1, B] V(x_t); row T is the bootstrap state.
      q_values: [T+1, B, A] Q(x_t, .) (`dueling_q`).
      target_probs: [T+1, B, A] pi(.|x_t) (the "expected" Retrace form reads rows 1..T).
      actions: [T+1, B] a_t (the "sampled" form reads a_T).
      log_rhos: [T, B] log pi(a_t|x_t) − log mu(a_t|x_t).
      rewards: [T, B] (shaped, truncations bootstrapped); discounts: [T, B] gamma_t.
      clip_rho_threshold, clip_c_threshold: rho_bar (also of Â) and c_bar.
      retrace_form: "sampled" (DiCE Eq. (2) as printed) or "expected" (Munos et al.).
    """
    vtrace = returns.vtrace(
        log_rhos,
        discounts,
        rewards,
        tf.stop_gradient(values[:-1]),
        tf.stop_gradient(values[-1]),
        clip_rho_threshold=clip_rho_threshold,
        clip_pg_rho_threshold=clip_rho_threshold,
        clip_c_threshold=clip_c_threshold,
    )
    q_targets = returns.retrace(
        tf.stop_gradient(q_values),
        tf.stop_gradient(target_probs),
        actions,
        log_rhos,
        rewards,
        discounts,
        form=retrace_form,
        clip_c_threshold=clip_c_threshold,
    )
    q_taken = tf.gather(q_values[:-1], actions[:-1], batch_dims=2)
    return CriticOutputs(
        v_loss=0.5 * tf.square(vtrace.vs - values[:-1]),
        q_loss=0.5 * tf.square(q_targets - q_taken),
        pg_advantages=vtrace.pg_advantages,
        vs=vtrace.vs,
        q_targets=q_targets,
        q_taken=q_taken,
    )


@dataclasses.dataclass(frozen=True)
class CriticHyperparameters:
    """The loss weights and trace settings DiCE, GDI and LBC share (a paper's loss adds its own
    fields by subclassing); `from_config` reads the fields of the same names."""

    v_loss_scale: float  # xi
    q_loss_scale: float  # alpha
    pi_loss_scale: float  # beta
    clip_rho_threshold: float
    clip_c_threshold: float
    retrace_form: str
    q_centering: str

    @classmethod
    def from_config(cls, config: Any) -> Self:
        return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(cls)})


def log_ratios(log_pi: tf.Tensor, actions: tf.Tensor, behaviour_log_probs: tf.Tensor) -> tf.Tensor:
    """[T, B] log pi(a_t|x_t) − log mu(a_t|x_t) under stop-gradient, from the target policy's
    log-probabilities [T+1, B, A] and the log mu the actor stored [T+1, B]."""
    taken = tf.gather(log_pi, actions, batch_dims=2)
    return tf.stop_gradient(taken - behaviour_log_probs)[:-1]


def network_losses(
    hparams: CriticHyperparameters,
    values: tf.Tensor,
    advantages: tf.Tensor,
    target_probs: tf.Tensor,
    actions: tf.Tensor,
    log_rhos: tf.Tensor,
    rewards: tf.Tensor,
    discounts: tf.Tensor,
    mask: tf.Tensor,
    suffix: str = "",
) -> tuple[CriticOutputs, tf.Tensor, dict]:
    """One network's critic: (outputs, xi L_V + alpha L_Q as masked means, its statistics
    named `loss/v<suffix>`, `loss/q<suffix>`, `value/*<suffix>`)."""
    q_values = dueling_q(values, advantages, target_probs, hparams.q_centering)
    outputs = vtrace_retrace(
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
    v_loss = sequences.masked_mean(outputs.v_loss, mask)
    q_loss = sequences.masked_mean(outputs.q_loss, mask)
    stats = {
        f"loss/v{suffix}": v_loss,
        f"loss/q{suffix}": q_loss,
        f"value/v{suffix}": sequences.masked_mean(values[:-1], mask),
        f"value/q_taken{suffix}": sequences.masked_mean(outputs.q_taken, mask),
        f"value/vtrace_target{suffix}": sequences.masked_mean(outputs.vs, mask),
        f"{instruments.VALUE_ERROR}{suffix}": sequences.masked_mean(
            tf.square(outputs.vs - values[:-1]), mask
        ),
    }
    return outputs, hparams.v_loss_scale * v_loss + hparams.q_loss_scale * q_loss, stats


def target_entropy(log_pi: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Masked mean of H[pi] over the trained steps, from log-probabilities [T+1, B, A]: where
    pi(a) underflows to 0 (eta 50 times a large advantage gap), p log p has an infinite
    gradient that would turn every weight into NaN through even a zero coefficient."""
    return sequences.masked_mean(-tf.reduce_sum(tf.exp(log_pi) * log_pi, -1)[:-1], mask)


def ratio_stats(log_rhos: tf.Tensor, mask: tf.Tensor, clip_rho_threshold: float) -> dict:
    """Mean log ratio (a stale behaviour can give ratios beyond float32) and the share of steps
    whose ratio rho-bar clips."""
    clipped = tf.cast(log_rhos > tf.math.log(clip_rho_threshold), tf.float32)
    return {
        "policy/log_rho": sequences.masked_mean(log_rhos, mask),
        "policy/rho_clipped_fraction": sequences.masked_mean(clipped, mask),
        instruments.ABS_LOG_RHO: sequences.masked_mean(tf.abs(log_rhos), mask),
    }

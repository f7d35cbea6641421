"""Policies and policy-gradient surrogate losses shared by the five papers.

Conventions (docs/architecture.md#conventions):
- Shapes: the action axis is last, `[..., A]` (time-major `[T, B, A]` in the learner); mixtures put the
  component axis just before it, `[..., N, A]`. `actions` are integers of shape `[...]`.
- Temperatures enter as the inverse temperature `eta = 1/tau`; `eta = 0` is the uniform policy. No
  function divides by tau. DiCE and GDI write softmax(A/tau); LBC's tau already multiplies
  (LBC §4.1), so LBC passes its tau_i as `eta`.
- Losses are per step (shape `[...]`, no reduction: each paper's loss reduces them) and are
  surrogates: their gradient is the paper's estimator with a minus sign, so minimising them ascends
  the objective. Everything that is not differentiated in the paper's estimator (advantages, returns,
  critic values, behaviour probabilities, importance weights, mixture responsibilities) is wrapped in
  `tf.stop_gradient` here, so callers cannot forget.

Categorical sampling, entropy and KL use `tensorflow_probability`: `categorical(...)` builds the
distribution, `sample_actions` and `entropy` are shorthands, and a KL is
`tfd.kl_divergence(categorical(probs=p), categorical(logits=q_logits))`.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

tfd = tfp.distributions

# Reactor §4.1: "beta-LOO with beta = 1" produced Tables 1-2 (c = 1 gives beta = min(1, 1/mu) = 1).
BETA_LOO_C = 1.0
# TISLR's truncation c is not given by Reactor (§3.1); ACER's c = 10
# (docs/papers/reactor.md#departures-from-the-paper).
TISLR_C = 10.0


# ----------------------------------------------------------------------------- input checks


def _static_value(x):
    """The value of x when it is known without running a graph (Python, NumPy, eager), else None."""
    return tf.get_static_value(x) if tf.is_tensor(x) else np.asarray(x)


def _check_in_range(name: str, x, low: float | np.floating, high: float | np.floating) -> None:
    value = _static_value(x)
    if value is not None and not np.all((value >= low) & (value <= high)):
        raise ValueError(f"{name} must lie in [{low}, {high}], got {name}={value!r}")


def _check_weights(weights) -> None:
    _check_in_range("weights", weights, 0.0, 1.0)
    value = _static_value(weights)
    if value is not None and not np.allclose(np.sum(value, axis=-1), 1.0, atol=1e-5):
        raise ValueError(f"mixture weights must sum to 1 over the last axis, got weights={value!r}")


def _check_actions(actions, num_actions: int) -> None:
    if not actions.dtype.is_integer:
        raise TypeError(f"actions must be integers, got dtype {actions.dtype.name}")
    _check_in_range("actions", actions, 0, num_actions - 1)


def _as(x, dtype: tf.DType) -> tf.Tensor:
    """x as a tensor of `dtype`; Python floats go straight to dtype (tf.cast would round via float32)."""
    return tf.cast(tf.convert_to_tensor(x, dtype_hint=dtype), dtype)


def _select(x: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
    """x[..., a]: the entry of the taken action (one-hot product, differentiable and XLA-friendly)."""
    _check_actions(actions, x.shape[-1])
    return tf.reduce_sum(x * tf.one_hot(actions, x.shape[-1], dtype=x.dtype), axis=-1)


# ----------------------------------------------------------------------------- Boltzmann policies


def _scaled_logits(logits, eta) -> tf.Tensor:
    _check_in_range("eta", eta, 0.0, np.finfo(np.float64).max)  # finite and >= 0
    logits = tf.convert_to_tensor(logits)
    return logits * tf.expand_dims(_as(eta, logits.dtype), -1)


def inverse_temperature_softmax(logits: tf.Tensor, eta: tf.Tensor | float) -> tf.Tensor:
    """softmax(eta · logits): DiCE (U3) pi_tau = softmax(A/tau), GDI Eq. (10), LBC Eq. (9) f_tau.

    `eta` is a scalar or has the shape of `logits` without its action axis (e.g. a per-step `[T, B]`).
    eta = 0 gives the uniform policy whatever the logits; eta -> inf approaches the argmax.
    """
    return tf.nn.softmax(_scaled_logits(logits, eta))


def inverse_temperature_log_softmax(logits: tf.Tensor, eta: tf.Tensor | float) -> tf.Tensor:
    """log softmax(eta · logits), computed stably (logits times eta can reach ~50·|A|)."""
    return tf.nn.log_softmax(_scaled_logits(logits, eta))


# ----------------------------------------------------------------------------- mixtures


def _log_weights(weights, dtype) -> tf.Tensor:
    _check_weights(weights)
    return tf.math.log(_as(weights, dtype))


def mixture_log_policy(
    component_logits: tf.Tensor, etas: tf.Tensor, weights: tf.Tensor
) -> tf.Tensor:
    """log of sum_i w_i · softmax(eta_i · logits_i) over components i, computed as a log-sum-exp.

    The behaviour family of GDI Eq. (2)/(10)/(12), eps·Softmax(A1/tau1) + (1 − eps)·Softmax(A2/tau2),
    with weights (eps, 1 − eps), and of LBC Eq. (10), sum_i omega_i softmax_{tau_i}(A_i).

    Args:
      component_logits: `[..., N, A]`. GDI-I3 mixes one head at two temperatures: pass `A[..., None, :]`
        and it broadcasts against the N = 2 temperatures.
      etas: `[..., N]` inverse temperatures (>= 0).
      weights: `[..., N]` mixture weights (>= 0, summing to 1).
    Returns:
      `[..., A]` log-probabilities; a zero weight contributes exactly nothing.
    """
    log_components = inverse_temperature_log_softmax(component_logits, etas)
    return tf.reduce_logsumexp(
        _log_weights(weights, log_components.dtype)[..., None] + log_components, axis=-2
    )


def mixture_policy(component_logits: tf.Tensor, etas: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
    """sum_i w_i · softmax(eta_i · logits_i): the probabilities of `mixture_log_policy`."""
    return tf.exp(mixture_log_policy(component_logits, etas, weights))


def _responsibilities(log_components: tf.Tensor, weights, actions: tf.Tensor) -> tf.Tensor:
    log_joint = _log_weights(weights, log_components.dtype) + _select(
        log_components, actions[..., None]
    )
    return tf.nn.softmax(log_joint, axis=-1)


def mixture_responsibilities(
    component_logits: tf.Tensor, etas: tf.Tensor, weights: tf.Tensor, actions: tf.Tensor
) -> tf.Tensor:
    """Posterior weight of each component given the taken action (Bayes' rule), `[..., N]`.

    w_i(a) = w_i pi_i(a) / sum_j w_j pi_j(a), with pi_i = softmax(eta_i · logits_i).
    They sum to 1, and d log mu(a) = sum_i w_i(a) · d log pi_i(a) for the mixture mu.
    """
    log_components = inverse_temperature_log_softmax(component_logits, etas)
    return _responsibilities(log_components, weights, tf.convert_to_tensor(actions))


# ----------------------------------------------------------------------------- epsilon mixing


def mix_with_uniform(probs: tf.Tensor, epsilon: tf.Tensor | float) -> tf.Tensor:
    """(1 − eps)·pi + eps/|A|: Reactor's policy head (App. 6.4, eps = 0.01), so pi >= eps/|A|.

    `epsilon` is a scalar or has the shape of `probs` without its action axis (one per actor).
    """
    _check_in_range("epsilon", epsilon, 0.0, 1.0)
    probs = tf.convert_to_tensor(probs)
    epsilon = tf.expand_dims(_as(epsilon, probs.dtype), -1)
    return (1.0 - epsilon) * probs + epsilon / probs.shape[-1]


def epsilon_greedy(values: tf.Tensor, epsilon: tf.Tensor | float) -> tf.Tensor:
    """eps/|A| + (1 − eps)·1[a = argmax values]: GDI's eps-greedy ablation (Table 20).

    It is DiCE §4.2's eps·pi_{tau->inf} + (1 − eps)·pi_{tau->0+} when the argmax is unique; ties go to
    the lowest action index (tf.argmax), where the temperature limit would split the mass instead.
    """
    values = tf.convert_to_tensor(values)
    greedy = tf.one_hot(tf.argmax(values, axis=-1), values.shape[-1], dtype=values.dtype)
    return mix_with_uniform(greedy, epsilon)


# ----------------------------------------------------------------------------- policy gradients


def policy_gradient_loss(
    log_probs: tf.Tensor, actions: tf.Tensor, advantages: tf.Tensor
) -> tf.Tensor:
    """−sg(Â)·log pi(a|s): the likelihood-ratio surrogate (IMPALA §4.2, LBC App. B.1, GDI
    `log_mixture`).

    `log_probs` `[..., A]` are differentiated; `advantages` `[...]` are stop-gradient'ed.
    """
    log_probs = tf.convert_to_tensor(log_probs)
    advantages = tf.stop_gradient(_as(advantages, log_probs.dtype))
    return -advantages * _select(log_probs, tf.convert_to_tensor(actions))


def _centred_action_logit(logits: tf.Tensor, probs: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
    """A(a) − sum_b sg(pi(b))·A(b): a function of A whose gradient is exactly e_a − pi."""
    return _select(logits, actions) - tf.reduce_sum(tf.stop_gradient(probs) * logits, axis=-1)


def tau_free_policy_gradient_loss(
    logits: tf.Tensor, eta: tf.Tensor | float, actions: tf.Tensor, advantages: tf.Tensor
) -> tf.Tensor:
    """DiCE's objective-invariant policy gradient, Eq. (8) (§3.2).

    Loss_t = −sg(Â_t) · sum_k (1[k = a_t] − sg(pi_t(k))) · A(s_t, k), with pi_t = softmax(eta_t · A).

    Its gradient with respect to the logits A is −Â_t (e_{a_t} − pi_t), the paper's tau-scaled
    gradient tau·d log pi_tau(a_t) with a minus sign. Unlike −Â·tau·log pi_tau it stays finite at
    eta = 0 (tau = inf), where it is −Â (e_a − uniform).

    Stop-gradient: the advantages Â (which carry rho_t) and the policy weights pi_t. Gradients reach
    the logits A only.
    """
    logits = tf.convert_to_tensor(logits)
    probs = inverse_temperature_softmax(logits, eta)
    advantages = tf.stop_gradient(_as(advantages, logits.dtype))
    return -advantages * _centred_action_logit(logits, probs, tf.convert_to_tensor(actions))


def mixture_tau_free_policy_gradient_loss(
    component_logits: tf.Tensor,
    etas: tf.Tensor,
    weights: tf.Tensor,
    actions: tf.Tensor,
    advantages: tf.Tensor,
) -> tf.Tensor:
    """The tau-free surrogate for a mixture behaviour/target policy (GDI's `pg_mode="tau_free"`, an
    option of ours: docs/papers/gdi.md#departures-from-the-paper).

    Loss_t = −sum_i sg(Â_{t,i}) · sg(w_i(a_t)) · (A_i(s_t, a_t) − sum_b sg(pi_i(b)) A_i(s_t, b)),
    with pi_i = softmax(eta_i · A_i) and w_i(a) the responsibilities (`mixture_responsibilities`).

    Its gradient with respect to A_i is −Â_{t,i} w_i(a_t) (e_{a_t} − pi_i), i.e. the loss has gradient
    −sum_i Â_{t,i} w_i(a_t) tau_i d log pi_i(a_t) for eta_i > 0. With a shared advantage this is the
    gradient of log mu(a) (= sum_i w_i d log pi_i) with each component rescaled by its tau_i, as DiCE
    rescales its single softmax; it is finite at eta_i = 0. With one component (weight 1) it is
    `tau_free_policy_gradient_loss`.

    Args:
      component_logits, etas, weights: as in `mixture_log_policy`.
      actions: `[...]` taken actions.
      advantages: broadcastable to `[..., N]`: `Â[..., None]` for one advantage shared by all
        components (GDI-I3), or `tf.stack([Â1, Â2], -1)` for GDI-H3, whose network i learns from its
        own reward shaping; its gradient then reaches A_i only through component i.
    Returns:
      `[...]`, the sum over components. Stop-gradient: advantages, responsibilities and pi_i.
    """
    component_logits = tf.convert_to_tensor(component_logits)
    actions = tf.convert_to_tensor(actions)
    log_components = inverse_temperature_log_softmax(component_logits, etas)
    responsibilities = tf.stop_gradient(_responsibilities(log_components, weights, actions))
    centred = _centred_action_logit(component_logits, tf.exp(log_components), actions[..., None])
    advantages = tf.stop_gradient(_as(advantages, component_logits.dtype))
    return -tf.reduce_sum(advantages * responsibilities * centred, axis=-1)


# ----------------------------------------------------------------------------- Reactor (§3.1)


def beta_loo_coefficient(
    behaviour_action_probs: tf.Tensor, beta_loo_c: float = BETA_LOO_C
) -> tf.Tensor:
    """beta(a) = min(c, 1/mu(a)) for a constant c >= 1 (Reactor §3.1); c = 1 gives beta = 1 (LOO).

    c = inf gives beta = 1/mu(a), which makes beta-LOO unbiased for any critic (Eq. (11)).
    """
    if not beta_loo_c >= 1.0:
        raise ValueError(f"beta_loo_c must be >= 1 (Reactor §3.1), got beta_loo_c={beta_loo_c!r}")
    _check_in_range(
        "behaviour_action_probs", behaviour_action_probs, np.finfo(np.float64).tiny, 1.0
    )
    behaviour_action_probs = tf.convert_to_tensor(behaviour_action_probs)
    return tf.stop_gradient(
        tf.minimum(_as(beta_loo_c, behaviour_action_probs.dtype), 1.0 / behaviour_action_probs)
    )


def beta_loo_policy_gradient_loss(
    policy_probs: tf.Tensor,
    actions: tf.Tensor,
    returns: tf.Tensor,
    q_values: tf.Tensor,
    behaviour_action_probs: tf.Tensor,
    beta_loo_c: float = BETA_LOO_C,
) -> tf.Tensor:
    """Reactor's beta-LOO policy gradient, Eq. (10), as a surrogate loss (§3.1).

    G = beta (R(a) − Q(a)) d pi(a) + sum_b Q(b) d pi(b), with beta = min(c, 1/mu(a)), a ~ mu.
    Loss = −beta·sg(R − Q(a))·pi(a) − sum_b sg(Q(b))·pi(b), whose gradient is −G. Note d pi, not
    d log pi: the first term is not a likelihood ratio.

    Args:
      policy_probs: `[..., A]` pi (in Reactor after the eps = 0.01 uniform mixing); differentiated.
      actions: `[...]` the sampled actions a.
      returns: `[...]` R(a), e.g. the Retrace return; stop-gradient.
      q_values: `[..., A]` the critic's Q(x, .); stop-gradient.
      behaviour_action_probs: `[...]` mu(a|x); stop-gradient.
      beta_loo_c: c >= 1 in beta = min(c, 1/mu(a)).
    """
    policy_probs = tf.convert_to_tensor(policy_probs)
    actions = tf.convert_to_tensor(actions)
    q_values = tf.stop_gradient(_as(q_values, policy_probs.dtype))
    beta = beta_loo_coefficient(_as(behaviour_action_probs, policy_probs.dtype), beta_loo_c)
    correction = tf.stop_gradient(
        beta * (_as(returns, policy_probs.dtype) - _select(q_values, actions))
    )
    return -(
        correction * _select(policy_probs, actions)
        + tf.reduce_sum(q_values * policy_probs, axis=-1)
    )


def tislr_policy_gradient_loss(
    policy_probs: tf.Tensor,
    actions: tf.Tensor,
    returns: tf.Tensor,
    q_values: tf.Tensor,
    behaviour_probs: tf.Tensor,
    tislr_c: float = TISLR_C,
) -> tf.Tensor:
    """Truncated importance sampling with bias correction (ACER), Reactor's ablation baseline.

    G = min(c, rho(a)) (R(a) − V) d log pi(a) + sum_b (rho(b) − c)_+ mu(b) (Q(b) − V) d log pi(b),
    rho = pi/mu (Reactor §3.1), with V = sum_b pi(b) Q(b) (as ACER;
    docs/papers/reactor.md#departures-from-the-paper).
    (rho(b) − c)_+ mu(b) is evaluated as (pi(b) − c mu(b))_+, equal for mu(b) > 0 and finite for
    mu(b) = 0.

    Loss = −sg(min(c, rho(a))(R − V))·log pi(a)
           − sum_b sg((pi(b) − c mu(b))_+ (Q(b) − V))·log pi(b).
    Only log pi is differentiated: truncated weights, R, Q and V are stop-gradient. `policy_probs`
    must be positive (Reactor's eps-mixing makes pi >= eps/|A|).

    Args:
      behaviour_probs: `[..., A]` the full behaviour distribution mu(.|x) (needed by the correction).
      tislr_c: the truncation c > 0.
      Others as in `beta_loo_policy_gradient_loss`.
    """
    if not tislr_c > 0.0:
        raise ValueError(f"tislr_c must be > 0, got tislr_c={tislr_c!r}")
    policy_probs = tf.convert_to_tensor(policy_probs)
    actions = tf.convert_to_tensor(actions)
    dtype = policy_probs.dtype
    q_values = _as(q_values, dtype)
    behaviour_probs = _as(behaviour_probs, dtype)
    log_probs = tf.math.log(policy_probs)
    values = tf.reduce_sum(policy_probs * q_values, axis=-1)
    ratio = _select(policy_probs, actions) / _select(behaviour_probs, actions)
    sampled_weight = tf.minimum(ratio, tislr_c) * (_as(returns, dtype) - values)
    # (rho(b) - c)_+ mu(b) (Q(b) - V) for every action b.
    correction_weights = tf.nn.relu(policy_probs - tislr_c * behaviour_probs) * (
        q_values - values[..., None]
    )
    return -(
        tf.stop_gradient(sampled_weight) * _select(log_probs, actions)
        + tf.reduce_sum(tf.stop_gradient(correction_weights) * log_probs, axis=-1)
    )


# ----------------------------------------------------------------------------- distributions


def categorical(
    *, logits: tf.Tensor | None = None, probs: tf.Tensor | None = None
) -> tfp.distributions.Categorical:
    """A `tfd.Categorical` over the last axis from exactly one of logits (unnormalised) or probs."""
    if (logits is None) == (probs is None):
        raise ValueError("pass exactly one of logits= or probs=")
    return tfd.Categorical(logits=logits, probs=probs)


def sample_actions(
    *,
    logits: tf.Tensor | None = None,
    probs: tf.Tensor | None = None,
    seed: tf.Tensor | None = None,
) -> tf.Tensor:
    """Sample one int32 action per distribution, shape `[...]`.

    `seed` is a stateless seed (two integers, e.g. `tf.constant([step, actor_id])`): the same seed gives
    the same actions, eagerly and under `tf.function(jit_compile=True)`. `None` draws from the
    stateful global generator.
    """
    return categorical(logits=logits, probs=probs).sample(seed=seed)


def entropy(*, logits: tf.Tensor | None = None, probs: tf.Tensor | None = None) -> tf.Tensor:
    """H(pi) = −sum_a pi(a) log pi(a) in nats, `[...]`; zero-probability actions contribute 0."""
    return categorical(logits=logits, probs=probs).entropy()

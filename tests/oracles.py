"""numpy ground truths of the returns the papers define, for every test that checks one.

Each is written from the paper's sum, in float64 (inputs are converted), never from the backward
recursions the library uses, so that a test compares two different computations of the same
quantity. One implementation per quantity; where two computations of one quantity check each
other (a direct sum and a mixture of n-step backups, the exact distributional target and the
"project every step" recursion that differs from it), both are here, named for what they are.

Layout (time-major, any trailing batch axes, as `common.equations.returns`): per-step inputs `[T,
...]`, per-frame inputs `[T+1, ...]` (row T is the bootstrap frame x_T), actions axis last.

- `vtrace_sum`: V-trace targets and policy-gradient advantages, IMPALA Eq. (1) (DiCE Eq. (4),
  GDI Eq. (4), LBC App. B.2).
- `retrace_sum`: Retrace targets, expected form (Munos et al. 2016, Reactor Eq. (3)) or sampled
  form (DiCE Eq. (2), GDI Eq. (3), LBC App. B.3); `retrace_mixture`: the expected form as
  Reactor §3.2's mixture of n-step backups.
- `n_step_sum`, `lambda_return_sum`: the n-step return (IMPALA Eq. (2)) and the lambda-return
  (IMPALA Remark 2).
- Reactor §3.2's categorical projection (`projection_kernel`, `categorical_projection`) and
  Distributional Retrace (`distributional_retrace_sum`), one sequence at a time, with the
  recursion it is not (`projected_recursion`).
"""

import numpy as np


def _f64(*arrays):
    return [np.asarray(x, np.float64) for x in arrays]


def clip(ratios, threshold):
    """min(threshold, ratios); None for no clipping."""
    return ratios if threshold is None else np.minimum(threshold, ratios)


def next_step(per_step, bootstrap):
    """The per-step quantity of the next state: [x_1, ..., x_{T-1}, bootstrap]."""
    return np.concatenate([per_step[1:], np.asarray(bootstrap)[None]], axis=0)


# --------------------------------------------------------------------------------------- V-trace


def vtrace_sum(
    log_rhos, discounts, rewards, values, bootstrap, rho_bar, pg_rho_bar, c_bar, lam=1.0
):
    """(vs, advantages), each [T, ...]: IMPALA Eq. (1)

        v_s = V(x_s) + sum_{t>=s} (gamma_s..gamma_{t-1}) (c_s..c_{t-1}) rho_t delta_t,
        delta_t = r_t + gamma_t V(x_{t+1}) - V(x_t),

    with gamma^(t-s) read as the per-step discounts gamma_s..gamma_{t-1}, rho_t = min(rho_bar,
    pi/mu), c_t = lam min(c_bar, pi/mu) (Remark 2's lambda), V(x_T) = `bootstrap`, and the §4.2
    advantage min(pg_rho_bar, pi/mu)_s (r_s + gamma_s v_{s+1} - V(x_s)), v_T = V(x_T).
    Thresholds None for no clipping."""
    log_rhos, discounts, rewards, values, bootstrap = _f64(
        log_rhos, discounts, rewards, values, bootstrap
    )
    ratios = np.exp(log_rhos)
    rho, c = clip(ratios, rho_bar), lam * clip(ratios, c_bar)
    values_tp1 = next_step(values, bootstrap)
    vs = np.zeros_like(values)
    for s in range(len(rewards)):
        vs[s] = values[s]
        for t in range(s, len(rewards)):
            # gamma^(t-s) -> gamma_s..gamma_{t-1}, times c_s..c_{t-1}
            weight = np.prod(discounts[s:t], axis=0) * np.prod(c[s:t], axis=0)
            vs[s] += weight * rho[t] * (rewards[t] + discounts[t] * values_tp1[t] - values[t])
    advantages = clip(ratios, pg_rho_bar) * (
        rewards + discounts * next_step(vs, bootstrap) - values
    )
    return vs, advantages


# --------------------------------------------------------------------------------------- Retrace


def retrace_sum(q_values, target_probs, actions, log_rhos, rewards, discounts, form, lam, c_bar):
    """[T, ...] Retrace targets, Reactor Eq. (3) / DiCE Eq. (2) truncated at the end of the unroll:

        Q_ret_t = Q(x_t, a_t) + sum_{s>=t} (gamma_t..gamma_{s-1}) (c_{t+1}..c_s) delta_s,
        delta_s = r_s + gamma_s B_{s+1} - Q(x_s, a_s),

    with c_s = lam min(c_bar, pi/mu) (c_bar None: no clip) and B_{s+1} = E_pi Q(x_{s+1}, .)
    (form "expected": Munos et al. 2016, Reactor Eq. (3)) or Q(x_{s+1}, a_{s+1}) (form "sampled":
    DiCE Eq. (2), GDI Eq. (3), LBC App. B.3).

    q_values, target_probs [T+1, ..., A] (target_probs unused by "sampled"); actions [T+1, ...]
    (a_T unused by "expected"); log_rhos (row 0 unused), rewards, discounts [T, ...]."""
    q_values, log_rhos, rewards, discounts = _f64(q_values, log_rhos, rewards, discounts)
    actions = np.asarray(actions)
    q_taken = np.take_along_axis(q_values, actions[..., None], axis=-1)[..., 0]
    if form == "expected":
        next_values = np.sum(np.asarray(target_probs, np.float64) * q_values, axis=-1)[1:]
    else:
        next_values = q_taken[1:]
    c = lam * clip(np.exp(log_rhos), c_bar)
    targets = np.zeros_like(rewards)
    for t in range(len(rewards)):
        targets[t] = q_taken[t]
        for s in range(t, len(rewards)):
            weight = np.prod(discounts[t:s], axis=0) * np.prod(c[t + 1 : s + 1], axis=0)
            targets[t] += weight * (rewards[s] + discounts[s] * next_values[s] - q_taken[s])
    return targets


def retrace_mixture(q_values, target_probs, actions, log_rhos, rewards, discounts, lam, c_bar):
    """[T, ...] Reactor §3.2: Retrace (expected form) as the mixture of n-step backups
    sum_n sum_a alpha_{n,a} [G_{t,n} + Gamma_{t,n} Q(x_{t+n}, a)] with
    alpha_{n,a} = (c_{t+1}..c_{t+n-1}) (pi(a|x_{t+n}) - 1[a = a_{t+n}] c_{t+n}) and c_T := 0.
    Arguments as `retrace_sum`'s."""
    q_values, target_probs, log_rhos, rewards, discounts = _f64(
        q_values, target_probs, log_rhos, rewards, discounts
    )
    actions = np.asarray(actions)
    num_actions = q_values.shape[-1]
    c = lam * clip(np.exp(log_rhos), c_bar)
    T = len(rewards)
    targets = np.zeros_like(rewards)
    for t in range(T):
        trace = np.ones_like(rewards[0])  # c_{t+1} ... c_{t+n-1}
        partial_return, discount = np.zeros_like(rewards[0]), np.ones_like(rewards[0])
        for n in range(1, T - t + 1):
            s = t + n
            if n > 1:
                trace = trace * c[s - 1]
            partial_return = partial_return + discount * rewards[s - 1]
            discount = discount * discounts[s - 1]
            taken_trace = np.eye(num_actions)[actions[s]] * c[s][..., None] if s < T else 0.0
            alpha = trace[..., None] * (target_probs[s] - taken_trace)
            backups = partial_return[..., None] + discount[..., None] * q_values[s]
            targets[t] += np.sum(alpha * backups, axis=-1)
    return targets


# ------------------------------------------------------------------------ n-step, lambda-returns


def n_step_sum(rewards, discounts, bootstrap_values, n):
    """[T, ...] sum_{k<m} Gamma_{t,k} r_{t+k} + Gamma_{t,m} bootstrap_values[t+m-1], m = min(n,
    T-t) (IMPALA Eq. (2) truncated at the end of the unroll); Gamma_{t,k} =
    gamma_t..gamma_{t+k-1}."""
    rewards, discounts, bootstrap_values = _f64(rewards, discounts, bootstrap_values)
    T = len(rewards)
    out = np.zeros_like(rewards)
    for t in range(T):
        m = min(n, T - t)
        for k in range(m):
            out[t] += np.prod(discounts[t : t + k], axis=0) * rewards[t + k]
        out[t] += np.prod(discounts[t : t + m], axis=0) * bootstrap_values[t + m - 1]
    return out


def lambda_return_sum(rewards, discounts, values, bootstrap, lam):
    """[T, ...] sum_{k=1}^{T-t-1} (1-lam) lam^(k-1) G_t^(k) + lam^(T-t-1) G_t^(T-t) (IMPALA
    Remark 2), G_t^(k) the k-step return bootstrapped on V."""
    rewards, discounts, values, bootstrap = _f64(rewards, discounts, values, bootstrap)
    T = len(rewards)
    values_tp1 = next_step(values, bootstrap)
    k_step = [n_step_sum(rewards, discounts, values_tp1, k) for k in range(1, T + 1)]
    out = np.zeros_like(rewards)
    for t in range(T):
        for k in range(1, T - t):
            out[t] += (1 - lam) * lam ** (k - 1) * k_step[k - 1][t]
        out[t] += lam ** (T - t - 1) * k_step[T - t - 1][t]
    return out


# ------------------------------------------------------------------------ Distributional Retrace


def projection_kernel(i, x, z):
    """h_{z_i}(x), the four cases of the projection kernel as printed in Reactor §3.2."""
    last = len(z) - 1
    if (x <= z[0] and i == 0) or (x >= z[last] and i == last):
        return 1.0
    if i > 0 and z[i - 1] <= x <= z[i]:
        return (x - z[i - 1]) / (z[i] - z[i - 1])
    if i < last and z[i] <= x <= z[i + 1]:
        return (z[i + 1] - x) / (z[i + 1] - z[i])
    return 0.0


def categorical_projection(values, probs, z):
    """[N] sum_j probs_j h_{z_i}(values_j) for one distribution (1-D values, probs)."""
    values, probs, z = _f64(values, probs, z)
    return np.array(
        [sum(p * projection_kernel(i, x, z) for x, p in zip(values, probs)) for i in range(len(z))]
    )


def reactor_traces(pi, a, mu, lam):
    """[T+1] c_s = lam min(1, pi(a_s|x_s) / mu_s) for s = 0..T (Reactor Eq. (4)); c_0 unused,
    c_T := 0 (the end of the sequence). One sequence: pi [T+1, A]; a, mu [T]."""
    T = len(a)
    return np.array(
        [lam * min(1.0, pi[s, a[s]] / mu[s]) if 1 <= s < T else 0.0 for s in range(T + 1)]
    )


def distributional_retrace_sum(r, gamma, a, mu, pi, q, z, lam):
    """[T, N] Reactor §3.2's Distributional Retrace target literally (with the erratum
    a_{t+n} -> a of docs/papers/reactor.md#errata):
    q*_i(x_t) = sum_n sum_a alpha_{n,a} sum_j q_j(x_{t+n}, a) h_{z_i}(z^n_j),
    z^n_j = G_{t,n} + Gamma_{t,n} z_j, alpha as in `retrace_mixture` with c_s = lam min(1, pi/mu).

    One sequence: r, gamma, a (a_0..a_{T-1}), mu = mu(a_t|x_t) [T]; pi [T+1, A]; q [T+1, A, N]
    (the target distributions); z [N]."""
    r, gamma, mu, pi, q, z = _f64(r, gamma, mu, pi, q, z)
    T, A = len(r), pi.shape[1]
    c = reactor_traces(pi, a, mu, lam)
    out = np.zeros((T, len(z)))
    for t in range(T):
        for n in range(1, T - t + 1):
            s = t + n
            discount = [np.prod(gamma[t : t + k]) for k in range(n + 1)]  # Gamma_{t,k}
            n_step_return = sum(discount[k] * r[t + k] for k in range(n))
            for act in range(A):
                taken = 1.0 if s < T and act == a[s] else 0.0
                alpha = np.prod(c[t + 1 : s]) * (pi[s, act] - taken * c[s])
                for j in range(len(z)):
                    for i in range(len(z)):
                        out[t, i] += (
                            alpha
                            * q[s, act, j]
                            * projection_kernel(i, n_step_return + discount[n] * z[j], z)
                        )
    return out


def projected_recursion(r, gamma, a, mu, pi, q, z, lam):
    """[T, N] the "project every step" recursion
    q_t = Proj(r_t + gamma_t z; E_pi q(x_{t+1}) + c_{t+1} (q_{t+1} - q(x_{t+1}, a_{t+1}))),
    a different algorithm from §3.2's target (`distributional_retrace_sum`; Test 6 of
    docs/papers/reactor.md#worked-test-numbers). Arguments as `distributional_retrace_sum`'s."""
    r, gamma, mu, pi, q, z = _f64(r, gamma, mu, pi, q, z)
    T = len(r)
    c = reactor_traces(pi, a, mu, lam)
    out = np.zeros((T, len(z)))
    for t in reversed(range(T)):
        masses = pi[t + 1] @ q[t + 1]
        if t < T - 1:
            masses = masses + c[t + 1] * (out[t + 1] - q[t + 1, a[t + 1]])
        out[t] = categorical_projection(r[t] + gamma[t] * z, masses, z)
    return out

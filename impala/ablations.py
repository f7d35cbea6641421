"""Named IMPALA ablations: each maps to the config fields it overrides.

The four off-policy corrections compared in §5.2.2 / Table 2 (our readings in
docs/papers/impala.md#departures-from-the-paper), the
App. E.3 variant of the policy-gradient Q-estimate, Table 2's "with replay" variants
(`<correction>_replay`) and App. E.1's controlled policy lag (`<correction>_lag<k>`). Run them
side by side with, e.g.,
`python -m impala.main --ablations=vtrace,no_correction,eps_correction,one_step_is --seeds=3`
`python -m impala.main --ablations=vtrace_replay,no_correction_replay --seeds=3`
`python -m impala.main --ablations=vtrace,vtrace_lag4,vtrace_lag16,no_correction_lag16`.
"""

import typing

# The four off-policy corrections of §5.2.2 (Table 2); the replay and lag sweeps repeat them.
CORRECTIONS = ("vtrace", "no_correction", "eps_correction", "one_step_is")

ABLATIONS: dict[str, dict[str, typing.Any]] = {
    # §4: V-trace with rho_bar = c_bar = 1 (§5.2.2: "we clip each importance weight at 1").
    "vtrace": dict(
        correction="vtrace", clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0, clip_c_threshold=1.0
    ),
    # §5.2.2 item 1, "No off-policy correction": the on-policy n-step target, Eq. (2).
    "no_correction": dict(correction="no_correction"),
    # §5.2.2 item 2: no correction, log(pi(a) + 1e-6) in the policy gradient.
    "eps_correction": dict(correction="eps_correction", correction_epsilon=1e-6),
    # §5.2.2 item 3: uncorrected V target; the advantage is weighted by min(1, pi/mu).
    "one_step_is": dict(correction="one_step_is", clip_pg_rho_threshold=1.0),
    # App. E.3: q_s = r_s + gamma V(x_{s+1}) instead of r_s + gamma v_{s+1} (found worse).
    "vtrace_baseline_q": dict(correction="vtrace", pg_q_estimate="baseline"),
    # Table G.1's entropy cost, learning rate and RMSProp epsilon: the Atari settings in place of
    # the MinAtar protocol's (impala/config.py::MINATAR_OVERRIDES); on Atari, the defaults.
    "table_g1": dict(entropy_cost=0.01, learning_rate=6e-4, rmsprop_epsilon=0.01),
}

# Table 2 "with replay" (§5.2.2, Table D.3): each correction again, half of every batch drawn
# uniformly from a replay of the last 10,000 unrolls.
ABLATIONS.update(
    {f"{name}_replay": dict(ABLATIONS[name], replay="queue_with_replay") for name in CORRECTIONS}
)

# App. E.1 (Fig. E.1): each correction under a forced policy lag of k learner steps. choice: k in
# powers of two up to 16; the paper gives its lag values only in the figure
# (docs/papers/impala.md#experiments).
POLICY_LAGS = (1, 2, 4, 8, 16)
ABLATIONS.update(
    {
        f"{name}_lag{k}": dict(ABLATIONS[name], publish_lag=k)
        for name in CORRECTIONS
        for k in POLICY_LAGS
    }
)


# The orderings the paper claims among these variants, (better, worse, where), for the grid's
# probability of improvement (`python -m benchmarks.minatar`, docs/guides/minatar.md). §5.2.2, Table
# 2: "V-trace performs best on 3 out of 5 tasks, followed by 1-step importance sampling,
# ε-correction and No-correction" (1-step IS won the other two tasks); with replay V-trace is best
# on 4 of 5. The pairs are that order's neighbours and V-trace against each. Without replay the
# paper expects V-trace and 1-step IS close (Table 2's caption: "both ... perform similarly well";
# V-trace's third win is 43.8 to 43.7), so that pair is the weakest claim. And "V-trace is the only
# variant that consistently benefits from adding experience replay" (5 of 5 tasks). App. E.1: as the
# policy lag grows, "learning with V-trace is more robust compared to ε-correction and pure
# on-policy learning" (Fig. E.1's caption), tested at the sweep's largest lag.
ORDERINGS = tuple(
    (
        f"{better}{suffix}",
        f"{worse}{suffix}",
        f"§5.2.2, Table 2{' (with replay)' if suffix else ''}",
    )
    for suffix in ("", "_replay")
    for better, worse in [
        ("vtrace", "one_step_is"),
        ("vtrace", "eps_correction"),
        ("vtrace", "no_correction"),
        ("one_step_is", "eps_correction"),
        ("eps_correction", "no_correction"),
    ]
) + (
    ("vtrace_replay", "vtrace", "§5.2.2, Table 2 (V-trace gains from replay)"),
    (
        f"vtrace_lag{POLICY_LAGS[-1]}",
        f"no_correction_lag{POLICY_LAGS[-1]}",
        "App. E.1, Fig. E.1 (the largest lag)",
    ),
)


def overrides_for(name: str) -> dict[str, typing.Any]:
    """The config overrides of ablation `name`; ValueError lists the known names."""
    if name not in ABLATIONS:
        raise ValueError(f"--ablation={name!r} is not one of {', '.join(ABLATIONS)}")
    return dict(ABLATIONS[name])

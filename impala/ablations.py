"""Named IMPALA ablations: each maps to the config fields it overrides.

The four off-policy corrections compared in §5.2.2 / Table 2 (readings in impala.md A25), plus the
App. E.3 variant of the policy-gradient Q-estimate. Run them side by side with
`python -m impala.main --ablations=vtrace,no_correction,eps_correction,one_step_is --seeds=3`.
"""

import typing

ABLATIONS: dict[str, dict[str, typing.Any]] = {
    # §4: V-trace with rho_bar = c_bar = 1 (§5.2.2: "we clip each importance weight at 1").
    "vtrace": dict(correction="vtrace", clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0,
                   clip_c_threshold=1.0),
    # §5.2.2 item 1, "No off-policy correction": the on-policy n-step target, Eq. (2).
    "no_correction": dict(correction="no_correction"),
    # §5.2.2 item 2: no correction, log(pi(a) + 1e-6) in the policy gradient.
    "eps_correction": dict(correction="eps_correction", correction_epsilon=1e-6),
    # §5.2.2 item 3: uncorrected V target; the advantage is weighted by min(1, pi/mu).
    "one_step_is": dict(correction="one_step_is", clip_pg_rho_threshold=1.0),
    # App. E.3: q_s = r_s + gamma V(x_{s+1}) instead of r_s + gamma v_{s+1} (found worse).
    "vtrace_baseline_q": dict(correction="vtrace", pg_q_estimate="baseline"),
}


def overrides_for(name: str) -> dict[str, typing.Any]:
    """The config overrides of ablation `name`; ValueError lists the known names."""
    if name not in ABLATIONS:
        raise ValueError(f"--ablation={name!r} is not one of {', '.join(ABLATIONS)}")
    return dict(ABLATIONS[name])

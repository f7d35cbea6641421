"""Named Reactor variants: each maps to the config fields it overrides.

Fig. 3-left removes one component at a time (the text states only qualitative conclusions:
docs/papers/reactor.md#experiments); Tables 1-2 add Reactor ND; App. 6.5 compares lazy
initialisation with PER's max-priority insertion, and `lazy_global` estimates new keys' priority
from every sampled key rather than the unassigned ones; §3.1 recommends beta = min(c, 1/mu) with c >= 1 (the runs used c = 1);
§4.1 fixes lambda = 1.
Run them side by side with, e.g.,
`python -m reactor.main --env=CartPole --ablations=reactor,reactor_nd,no_prioritisation,tislr --seeds=3`.
"""

import typing

ABLATIONS: dict[str, dict[str, typing.Any]] = {
    # §4.1 / Tables 1-2: distributional Retrace, beta-LOO with beta = 1, lazy prioritisation.
    "reactor": dict(distributional=True, policy_gradient="beta_loo", prioritisation="lazy"),
    # §4.1 "Reactor ND": the classical Retrace critic (footnote 5).
    "reactor_nd": dict(distributional=False),
    # Fig. 3-left: prioritisation removed (uniform sampling).
    "no_prioritisation": dict(prioritisation="uniform"),
    # App. 6.5: "the simple maximum priority approach" of PER for new sequences.
    "max_priority": dict(prioritisation="max"),
    # New keys at the mean priority of all keys, not of the unassigned ones: further from the
    # paper's tree (benchmarks/reactor_priorities.py).
    "lazy_global": dict(prioritisation="lazy_global"),
    # Fig. 3-left: ACER's truncated importance sampling instead of beta-LOO (c = 10, ACER's).
    "tislr": dict(policy_gradient="tislr"),
}

# §3.1: beta = min(c, 1/mu(a)); c = 1 is the paper's runs, large c approaches the unbiased 1/mu.
# choice: c in {2, 5, 10}; the paper reports no sweep.
ABLATIONS.update({f"beta_loo_c{c}": dict(beta_loo_c=float(c)) for c in (2, 5, 10)})

# §4.1 uses lambda = 1; choice: 0 (one-step expected SARSA, Test 4 of
# docs/papers/reactor.md#worked-test-numbers) and 0.5.
ABLATIONS.update({"lambda0": dict(retrace_lambda=0.0), "lambda0_5": dict(retrace_lambda=0.5)})

# The orderings the paper claims among these variants, (better, worse, where), for the grid's
# probability of improvement (`python -m benchmarks.minatar`, docs/guides/minatar.md). §4 on Fig. 3
# (left): "each of the algorithmic improvements (Distributional retrace, beta-LOO and prioritized
# replay) contributed", "Beta-LOO clearly outperformed TISLR"; App. 6.5: lazy initial priorities
# "anecdotally" beat a maximum priority. The distributional pair is the weakest: §4 goes on that
# the two "performed similarly in terms of median human normalized scores" (Fig. 3's measure) and
# the distributional one "generalized better" from random human starts (Table 1, which the text
# calls Table 2: median 1.65 to 1.51), which MinAtar does not have.
ORDERINGS = (
    ("reactor", "no_prioritisation", "§4, Fig. 3 (left)"),
    ("reactor", "tislr", "§4, Fig. 3 (left)"),
    ("reactor", "reactor_nd", "§4, Fig. 3 (left), Table 1 (weak)"),
    ("reactor", "max_priority", "App. 6.5 (anecdotal)"),
)

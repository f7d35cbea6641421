"""Named DiCE variants: Table 3's baseline and Table 4's ablations (§4.3), each mapping to the
config fields it overrides. Run them side by side with
`python -m dice.main --env=Breakout --ablations=dice,baseline,entropy,random`.
"""

import typing

ABLATIONS: dict[str, dict[str, typing.Any]] = {
    # Table 4 "DiCE": Closed-form Diversity, Objective-invariant Exploration, Adaptive Trade-off.
    "dice": {},
    # Table 3 / §4.3 "baseline": tau = 1 for every episode, Omega never updated; evaluated with
    # the same tau (there is no region to pick).
    "baseline": dict(fixed_behaviour=True, fixed_eta=1.0, eval_policy="bandits"),
    # Table 4 "entropy" (§4.3): DiCE plus an entropy regulariser with coefficient 1; which entropy
    # and where it enters are ours (docs/papers/dice.md#departures-from-the-paper).
    "entropy": dict(entropy_cost=1.0),
    # The other reading of Table 4's "entropy": the regulariser on softmax(A), tau = 1, whose pull
    # on A does not grow with eta (docs/papers/dice.md#departures-from-the-paper).
    "entropy_tau_one": dict(entropy_cost=1.0, entropy_of="tau_one"),
    # Table 4 "random" (§4.3): "Update Omega by (tau, G)" removed; tau from the initial Omega, which
    # draws x = log(1 + 1/tau) (App. A) uniformly: our reading of the initial Omega
    # (docs/papers/dice.md#departures-from-the-paper); evaluated with the same Omega.
    "random": dict(bandit_selection="uniform_coordinate", eval_policy="bandits"),
    # Table 5's learning rate and batch: the Atari settings in place of the MinAtar protocol's
    # (dice/config.py::MINATAR_OVERRIDES); on Atari, the defaults.
    "table_5": dict(learning_rate=5e-4, batch_size=64),
}

# The orderings the paper claims among these variants, (better, worse, where), for the grid's
# probability of improvement (`python -m benchmarks.minatar`, docs/guides/minatar.md). §4.3 on Fig.
# 2: "random" is worst on both games (Adaptive Trade-off is critical). DiCE against "entropy" is
# left out: the paper finds no significant difference and draws no conclusion.
ORDERINGS = (
    ("dice", "random", "§4.3, Fig. 2"),
    ("entropy", "random", "§4.3, Fig. 2"),
    ("baseline", "random", "§4.3, Fig. 2"),
)

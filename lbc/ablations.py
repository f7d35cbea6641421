"""Named LBC variants: Table 12's ablations (§5.4, App. K) and App. K.3's run without the UCB
term, each mapping to the config fields it overrides; all keep Table 3's hyper-parameters (App.
K.1). Run them side by side with
`python -m lbc.main --env=ChopperCommand --ablations=lbc,reducing_h,reducing_h_psi,random_selection`
(Table 12) and `--ablations=lbc,without_ucb` (App. K.3).
"""

import typing

# Table 12 (§5.4): H = {h_1}, h_1 = (gamma_1, RS_1) of Table 3.
H1 = dict(discounts=(0.997,), reward_shapings=("value_rescaling",))

ABLATIONS: dict[str, dict[str, typing.Any]] = {
    # Table 12 "Main": three networks, psi = (tau_1..3, omega_1..3) from the bandit population.
    "lbc": {},
    # Table 12 "Reducing H": one network (h_1) under the 3-component mixture
    # sum_i omega_i softmax(tau_i A_1), psi unchanged.
    "reducing_h": dict(H1),
    # Table 12 "Reducing H and Psi": one network, mu = softmax(tau A_1), a one-dimensional psi.
    "reducing_h_psi": dict(H1, bandit_num_policies=1),
    # Table 12 "Random Selection": psi uniform over Psi each episode (tau_i uniform on the
    # main algorithm's range, omega normalised as in the main algorithm: our reading, the
    # Random Selection row of docs/papers/lbc.md#departures-from-the-paper), no bandit learning.
    "random_selection": dict(bandit_selection="uniform"),
    # App. K.3 (Fig. 7 (b)), "w/o UCB item": every bandit's UCB coefficient c = 0, so the arms are
    # ranked by their mean return alone and nothing else drives the behaviours apart.
    "without_ucb": dict(bandit_ucb_range=(0.0, 0.0)),
}

# The orderings the paper claims among these variants, (better, worse, where), for the grid's
# probability of improvement (`python -m benchmarks.minatar`, docs/guides/minatar.md). §5.4, Fig. 5:
# Main > Reducing H > Reducing H and Psi (the order of the behaviour spaces' sizes), and Random
# Selection "significantly" below Main. App. K.3 shows diversity without UCB, not returns.
ORDERINGS = (
    ("lbc", "reducing_h", "§5.4, Fig. 5"),
    ("reducing_h", "reducing_h_psi", "§5.4, Fig. 5"),
    ("lbc", "random_selection", "§5.4, Fig. 5"),
)

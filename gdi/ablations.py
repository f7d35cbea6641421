"""Named GDI variants: the two agents and Table 20's ablations (§4.3, App. K.1), each mapping to
the config fields it overrides. Run them side by side with
`python -m gdi.main --env=Seaquest --ablations=gdi_i3,gdi_h3,fix_selection,random_selection,boltzmann_selection,epsilon_greedy_selection`.
Everything not listed is Table 6's (Table 20: "everything else as in Table 6"). The two GDI-I1
variants keep GDI's bandits for the one parameter they learn (§4.3: "Both eps-greedy Selection and
Boltzmann Selection implement E by the same MAB as our baselines'"), so Boltzmann Selection is
DiCE's behaviour family with GDI's bandit, not DiCE's bandits vote. `gdi_h3_shared_torso` is not
a Table 20 row: it is GDI-H3 with our shared-torso option, to compare against `gdi_h3`. How we
read each row: docs/papers/gdi.md#table-20-ablations-how-we-read-them-gdiablationspy.
"""

import typing

ABLATIONS: dict[str, dict[str, typing.Any]] = {
    # Table 20 "GDI-I3": Lambda = {(eps, tau_1, tau_2)}, uniform P^(0), E = MAB, one network.
    "gdi_i3": dict(variant="i3"),
    # Table 20 "GDI-H3": the same Lambda and E, two networks on two reward shapings (Eq. (12)).
    "gdi_h3": dict(variant="h3"),
    # Our option (docs/papers/gdi.md#options-and-readings-that-are-not-departures): GDI-H3 with
    # one torso under its two LSTMs and head sets.
    "gdi_h3_shared_torso": dict(variant="h3", shared_torso=True),
    # GDI-H3 with Table 6's learning rate and batch: the Atari settings in place of the MinAtar
    # protocol's (gdi/config.py::MINATAR_OVERRIDES); on Atari, the same as `gdi_h3`.
    "gdi_h3_table_6": dict(variant="h3", learning_rate=5e-4, batch_size=64),
    # Table 20 "Fix Selection" (GDI-I0 w/o E): P = delta at [1/tau_1, 1/tau_2, eps] = [1, 0, 1]
    # (Table 6), i.e. pi = Softmax(A); evaluated with the same lambda.
    "fix_selection": dict(variant="i3", fixed_behaviour=True, eval_policy="bandits"),
    # Table 20 "Random Selection" (GDI-I3 w/o E): lambda uniform every episode, E = identity:
    # 1/tau_1, 1/tau_2 ~ U[0, 50], eps ~ U[0, 1] (Table 6's search ranges).
    "random_selection": dict(variant="i3", bandit_selection="uniform", eval_policy="bandits"),
    # Table 20 "Boltzmann Selection" (GDI-I1, DiCE's behaviour family): Lambda = {tau}, E = MAB;
    # pi = Softmax(A / tau_1) with eps held at 1 (--fixed_epsilon, Table 6's fixed value).
    "boltzmann_selection": dict(variant="i3", selected_params=("eta1",), fixed_epsilon=1.0),
    # Table 20 "eps-greedy Selection" (GDI-I1): Lambda = {eps}, E = MAB; pi = eps / |A| +
    # (1 − eps) 1[argmax A], Eq. (2) with 1/tau_1 = 0 and 1/tau_2 -> inf (our reading), here
    # 1/tau_2 = 1e4, the stand-in for the limit of docs/papers/gdi.md#worked-test-numbers
    # (Test 1): an argmax whenever the advantages differ by more than ~1e-3.
    "epsilon_greedy_selection": dict(
        variant="i3", selected_params=("epsilon",), fixed_eta1=0.0, fixed_eta2=1e4
    ),
}

# The orderings the paper claims among these variants, (better, worse, where), for the grid's
# probability of improvement (`python -m benchmarks.minatar`, docs/guides/minatar.md). §4.3: the
# operator E matters (GDI-I3 ahead of Fix and Random Selection) and so does the size of Lambda
# (GDI-I3 ahead of the one-parameter Boltzmann and eps-greedy Selections); Table 21's aggregates
# order GDI-H3 > GDI-I3 > Boltzmann > Fix.
ORDERINGS = (
    ("gdi_h3", "gdi_i3", "Table 21"),
    ("gdi_i3", "fix_selection", "§4.3, Tables 20-21"),
    ("gdi_i3", "random_selection", "§4.3, Fig. 18"),
    ("gdi_i3", "boltzmann_selection", "§4.3, Table 21"),
    ("gdi_i3", "epsilon_greedy_selection", "§4.3, Fig. 18"),
    ("boltzmann_selection", "fix_selection", "Table 21"),
)

"""Train GDI: `python -m gdi.main --variant=i3 --env=Pong` (GDI-I3) or `--variant=h3` (GDI-H3).

Every `gdi.config.GdiConfig` field is a flag (defaults: Tables 5-6; CartPole has its own
documented choices), and so is every run setting every paper shares
(`common.experiments.cli.RunSettings`: --logdir to resume, --role to split replay / learner / actors
over machines, --ablation and --ablations / --seeds for Table 20's variants of gdi/ablations.py, run
side by side:
`python -m gdi.main --env=Seaquest --ablations=gdi_i3,gdi_h3,fix_selection,random_selection,
boltzmann_selection,epsilon_greedy_selection`).

Each environment's game draws lambda = (1/tau_1, 1/tau_2, eps) from its actor's bandits (App. G)
and plays eps Softmax(A_1 / tau_1) + (1 − eps) Softmax(A_2 / tau_2) (Eq. (2)); the learner trains
each network's V with V-trace, Q with Retrace and A with the policy gradient of that mixture, plus
auxiliary dynamics tasks (App. B, Table 6, Algorithms 2-3), on burn-in sequences each sampled
twice (docs/papers/gdi.md#equations-in-code).
"""

from common.experiments import cli
from gdi import builder

if __name__ == "__main__":
    cli.main(builder.GdiBuilder)

"""Train LBC: `python -m lbc.main --env=Pong`.

Every `lbc.config.LbcConfig` field is a flag (defaults: Table 3; CartPole has its own documented
choices), and so is every run setting every paper shares (`common.experiments.cli.RunSettings`:
--logdir to resume, --role to split replay / learner / actors over machines, --ablation and
--ablations / --seeds for Table 12's variants in lbc/ablations.py, run side by side:
`python -m lbc.main --env=Pong --ablations=lbc,reducing_h,reducing_h_psi,random_selection`).

Each environment's game draws psi = (tau_1..3, omega_1..3) from its actor's bandit population
(Algorithm 1) and plays mu_psi = sum_i omega_i softmax(tau_i A_i) (Eq. (10)); the learner trains
each network's V with V-trace, Q with Retrace and pi_i = softmax(A_i) with the V-trace policy
gradient (App. B) on burn-in sequences each sampled twice (Table 3).
"""

from common.experiments import cli
from lbc import builder

if __name__ == "__main__":
    cli.main(builder.LbcBuilder)

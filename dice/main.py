"""Train DiCE: `python -m dice.main --env=Breakout`.

Every `dice.config.DiceConfig` field is a flag (defaults: Table 5; CartPole has its own
documented choices), and so is every run setting every paper shares
(`common.experiments.cli.RunSettings`: --logdir to resume, --role to split replay / learner / actors
over machines, --ablation and --ablations / --seeds for the named variants of dice/ablations.py, run
side by side:
`python -m dice.main --env=Breakout --ablations=dice,baseline,entropy,random`).

Each environment's game draws eta = 1/tau from its actor's bandits vote (§3.3, Algorithm 1) and
plays softmax(eta · A); the learner trains V with V-trace, Q with Retrace and A with the tau-free
policy gradient (Eq. (8)) on burn-in sequences each sampled twice (Table 5).
"""

from common.experiments import cli
from dice import builder

if __name__ == "__main__":
    cli.main(builder.DiceBuilder)

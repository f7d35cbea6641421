"""Train Reactor: `python -m reactor.main --env=Pong`.

Every `reactor.config.ReactorConfig` field is a flag (defaults: the paper where it says, cited
`# choice:` where it does not; CartPole has its own choices, `config.CARTPOLE_OVERRIDES`), and
so is every run setting every paper shares (`common.experiments.cli.RunSettings`: --logdir, which
resumes from its last checkpoint with the replay, --role, --replay_address, --ablation(s), --seeds).
Ablations of Fig. 3-left and §4.1: `reactor/ablations.py`, e.g.
`python -m reactor.main --env=CartPole --ablations=reactor,no_prioritisation,tislr --seeds=3`.
Flags are validated before TensorFlow or Reverb are imported (common/experiments/cli.py).
"""

from common.experiments import cli
from reactor import builder

if __name__ == "__main__":
    cli.main(builder.ReactorBuilder)

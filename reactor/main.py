"""Train Reactor: `python -m reactor.main --env=Pong`.

Every `reactor.config.ReactorConfig` field is a flag (defaults: the paper where it says, cited
`# choice:` where it does not; CartPole has its own choices, `config.CARTPOLE_OVERRIDES`), and
so is every run setting every paper shares (`common.cli.RunSettings`: --logdir, which resumes
from its last checkpoint with the replay, --role, --replay_address, --ablation(s), --seeds).
Ablations of Fig. 3-left and §4.1: `reactor/ablations.py`, e.g.
`python -m reactor.main --env=CartPole --ablations=reactor,no_prioritisation,tislr --seeds=3`.
Flags are validated before TensorFlow or Reverb are imported (common/cli.py).
"""

from common import cli
from reactor import ablations
from reactor import config as config_lib
from reactor import experiment


def describe(config: config_lib.ReactorConfig) -> str:
    critic = "distributional" if config.distributional else "ND"
    return (
        f"{config.num_actors} actors x {config.envs_per_actor} envs, {critic} Retrace, "
        f"{config.policy_gradient}, {config.prioritisation} replay, batch {config.batch_size}x"
        f"{config.sequence_length - 1}, {config.total_frames:,} frames"
    )


PAPER = cli.Paper(
    name="reactor",
    config_class=config_lib.ReactorConfig,
    build_experiment=experiment.build_experiment,
    ablations=ablations.ABLATIONS,
    default_ablation="reactor",
    env_defaults={
        "CartPole": config_lib.CARTPOLE_OVERRIDES,
        "MinAtar": config_lib.MINATAR_OVERRIDES,
    },
    cartpole=True,
    describe=describe,
)
cli.define_flags(PAPER)


if __name__ == "__main__":
    cli.main(PAPER)

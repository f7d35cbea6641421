"""Train IMPALA: `python -m impala.main --env=Pong`.

Every `impala.config.ImpalaConfig` field is a flag (defaults: Table G.1; CartPole has its own
documented choices), and so is every run setting every paper shares
(`common.experiments.cli.RunSettings`):

  --logdir             run directory (default runs/impala_<env>[_<ablation>]); the same logdir
                       resumes from its last checkpoint
  --role               local (default: Reverb + actors + learner + evaluator on this machine),
                       replay, learner or actor (the last two need --replay_address)
  --replay_address     host:port of the replay role; --replay_port picks the replay role's port
  --ablation           one named variant of impala/ablations.py
  --ablations, --seeds several variants and/or seeds: runs each as a subprocess through
                       common.experiments.ablation_runner and writes one table and plot under
                       --logdir

--env takes CartPole or any Atari game as people write it (Pong, pong, ALE/Pong-v5,
PongNoFrameskip-v4, MsPacman, ms_pacman). Flags are validated before TensorFlow or Reverb are
imported, so a mistake fails in a second, on one line (common/experiments/cli.py).
"""

from common.experiments import cli
from impala import builder

if __name__ == "__main__":
    cli.main(builder.ImpalaBuilder)

"""Train GDI: `python -m gdi.main --variant=i3 --env=Pong` (GDI-I3) or `--variant=h3` (GDI-H3).

Every `gdi.config.GdiConfig` field is a flag (defaults: Tables 5-6; CartPole has its own
documented choices), and so is every run setting every paper shares (`common.cli.RunSettings`:
--logdir to resume, --role to split replay / learner / actors over machines, --ablation and
--ablations / --seeds for Table 20's variants of gdi/ablations.py, run side by side:
`python -m gdi.main --env=Seaquest --ablations=gdi_i3,gdi_h3,fix_selection,random_selection,
boltzmann_selection,epsilon_greedy_selection`).

Each environment's game draws lambda = (1/tau_1, 1/tau_2, eps) from its actor's bandits (App. G)
and plays eps Softmax(A_1 / tau_1) + (1 − eps) Softmax(A_2 / tau_2) (Eq. (2)); the learner trains
each network's V with V-trace, Q with Retrace and A with the policy gradient of that mixture, plus
auxiliary dynamics tasks (App. B, Table 6, Algorithms 2-3), on burn-in sequences each sampled
twice (docs/papers/gdi.md#equations-in-code).
"""

import functools

from common import cli
from gdi import ablations
from gdi import config as config_lib


def build_agent(config: config_lib.GdiConfig):
    """GDI's pieces on the shared stack (common.agent)."""
    from common import advantage_policy
    from common import agent
    from common import burn_in_learning
    from gdi import acting
    from gdi import networks

    return agent.Agent(
        replay=burn_in_learning.sample_k_replay(config),
        make_policy=acting.make_policy(config),
        policy_extras=advantage_policy.policy_extras,
        make_learner=functools.partial(make_learner, config),
        core_state_spec=networks.core_state_spec(config),
        behaviour=acting.behaviour_spec(config),
        # A truncated game bootstraps each network in its own reward shaping's units.
        value_heads=len(config.reward_shapings),
    )


def make_learner(config: config_lib.GdiConfig, spec):
    """The learner process's parts (`gdi.learning.make_learner_parts`; imports TensorFlow, so
    only there: flags are checked before it loads)."""
    from gdi import learning

    return learning.make_learner_parts(config, spec)


def build_experiment(config: config_lib.GdiConfig, logdir: str, replay_port: int | None = None):
    """The launcher's description of a GDI run (imports TensorFlow). Evaluation environments
    (§4.1's "additional environments"; which lambda they play is our choice,
    docs/papers/gdi.md#departures-from-the-paper) never write to replay; they run bandit
    ensembles of their own that learn from the evaluation games (--eval_policy=bandits) or play
    the best played region of actor 0's saved bandits, never updated (--eval_policy=best_region);
    never an argmax."""
    from common import launch
    from gdi import acting

    return launch.experiment_from_config(
        config,
        build_agent(config),
        logdir,
        replay_port,
        protocol=acting.protocol(config),
        frames_per_learner_step=config.frames_per_learner_step,
        name=f"gdi-{config.variant} {config.env}",
    )


def describe(config: config_lib.GdiConfig) -> str:
    if config.fixed_behaviour:
        behaviour = f"lambda fixed at {config.fixed_params}"
    else:
        behaviour = (
            f"{', '.join(config.selected_params)} from {config.bandit_selection} "
            f"({config.controller_scope})"
        )
    return (
        f"GDI-{config.variant.upper()}, {config.num_actors} actors x {config.envs_per_actor} "
        f"envs, {len(config.reward_shapings)} x {config.network} net, {behaviour}, batch "
        f"{config.batch_size}x({config.burn_in}+{config.sequence_length}) x{config.times_sampled}"
        f", {config.total_frames:,} frames"
    )


PAPER = cli.Paper(
    name="gdi",
    config_class=config_lib.GdiConfig,
    build_experiment=build_experiment,
    ablations=ablations.ABLATIONS,
    default_ablation="gdi_i3",
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

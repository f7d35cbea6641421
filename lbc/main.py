"""Train LBC: `python -m lbc.main --env=Pong`.

Every `lbc.config.LbcConfig` field is a flag (defaults: Table 3; CartPole has its own documented
choices), and so is every run setting every paper shares (`common.cli.RunSettings`: --logdir to
resume, --role to split replay / learner / actors over machines, --ablation and --ablations /
--seeds for Table 12's variants in lbc/ablations.py, run side by side:
`python -m lbc.main --env=Pong --ablations=lbc,reducing_h,reducing_h_psi,random_selection`).

Each environment's game draws psi = (tau_1..3, omega_1..3) from its actor's bandit population
(Algorithm 1) and plays mu_psi = sum_i omega_i softmax(tau_i A_i) (Eq. (10)); the learner trains
each network's V with V-trace, Q with Retrace and pi_i = softmax(A_i) with the V-trace policy
gradient (App. B) on burn-in sequences each sampled twice (Table 3).
"""

import functools

from common import cli
from lbc import ablations
from lbc import config as config_lib


def build_agent(config: config_lib.LbcConfig):
    """LBC's pieces on the shared stack (common.agent)."""
    from common import advantage_policy
    from common import agent
    from common import burn_in_learning
    from lbc import acting
    from lbc import networks

    return agent.Agent(
        replay=burn_in_learning.sample_k_replay(config),
        make_policy=acting.make_policy(config),
        policy_extras=advantage_policy.policy_extras,
        make_learner=functools.partial(make_learner, config),
        core_state_spec=networks.core_state_spec(config),
        behaviour=acting.behaviour_spec(config),
        value_heads=config.num_networks,  # a truncation stores V_i(x_final) of every network
    )


def make_learner(config: config_lib.LbcConfig, spec):
    """The learner process's parts (`lbc.learning.make_learner_parts`; imports TensorFlow, so
    only there: flags are checked before it loads)."""
    from lbc import learning

    return learning.make_learner_parts(config, spec)


def build_experiment(config: config_lib.LbcConfig, logdir: str, replay_port: int | None = None):
    """The launcher's description of an LBC run (imports TensorFlow). §5.1.1: a separate
    evaluation process plays the bandits' behaviour (App. H.2: never an argmax), or with
    eval_policy=best_arm the arms they rate best; with eval_policy=training_episodes
    the training games' returns are the report (App. H.2; the evaluator's behaviour is our
    reading: docs/papers/lbc.md#departures-from-the-paper)."""
    from common import launch
    from lbc import acting

    return launch.experiment_from_config(
        config,
        build_agent(config),
        logdir,
        replay_port,
        protocol=acting.protocol(config),
        frames_per_learner_step=config.frames_per_learner_step,
        name=f"lbc {config.env}",
        evaluate=config.eval_policy != "training_episodes",
    )


def describe(config: config_lib.LbcConfig) -> str:
    return (
        f"{config.num_actors} actors x {config.envs_per_actor} envs, {config.num_networks} "
        f"{config.network} nets, {config.bandit_num_policies}-component mixture, psi from "
        f"{config.bandit_selection} ({config.controller_scope}), batch {config.batch_size}x"
        f"({config.burn_in}+{config.sequence_length}) x{config.times_sampled}, "
        f"{config.total_frames:,} frames"
    )


PAPER = cli.Paper(
    name="lbc",
    config_class=config_lib.LbcConfig,
    build_experiment=build_experiment,
    ablations=ablations.ABLATIONS,
    default_ablation="lbc",
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

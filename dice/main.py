"""Train DiCE: `python -m dice.main --env=Breakout`.

Every `dice.config.DiceConfig` field is a flag (defaults: Table 5; CartPole has its own
documented choices), and so is every run setting every paper shares (`common.cli.RunSettings`:
--logdir to resume, --role to split replay / learner / actors over machines, --ablation and
--ablations / --seeds for the named variants of dice/ablations.py, run side by side:
`python -m dice.main --env=Breakout --ablations=dice,baseline,entropy,random`).

Each environment's game draws eta = 1/tau from its actor's bandits vote (§3.3, Algorithm 1) and
plays softmax(eta · A); the learner trains V with V-trace, Q with Retrace and A with the tau-free
policy gradient (Eq. (8)) on burn-in sequences each sampled twice (Table 5).
"""

import functools

from common import cli
from dice import ablations
from dice import config as config_lib


def build_agent(config: config_lib.DiceConfig):
    """DiCE's pieces on the shared stack (common.agent)."""
    from common import advantage_policy
    from common import agent
    from common import burn_in_learning
    from dice import acting
    from dice import networks

    return agent.Agent(
        replay=burn_in_learning.sample_k_replay(config),
        make_policy=acting.make_policy(config),
        policy_extras=advantage_policy.policy_extras,
        make_learner=functools.partial(make_learner, config),
        core_state_spec=networks.core_state_spec(config),
        behaviour=acting.behaviour_spec(config),
    )


def make_learner(config: config_lib.DiceConfig, spec):
    """The learner process's parts (`dice.learning.make_learner_parts`; imports TensorFlow, so
    only there: flags are checked before it loads)."""
    from dice import learning

    return learning.make_learner_parts(config, spec)


def build_experiment(config: config_lib.DiceConfig, logdir: str, replay_port: int | None = None):
    """The launcher's description of a DiCE run (imports TensorFlow). The evaluator plays eta
    from the bandits of actor 0 (§3.3: sampled), or argmax A with --eval_policy=greedy."""
    from common import launch
    from dice import acting

    return launch.experiment_from_config(
        config,
        build_agent(config),
        logdir,
        replay_port,
        protocol=acting.protocol(config),
        frames_per_learner_step=config.frames_per_learner_step,
        name=f"dice {config.env}",
        greedy_evaluation=config.eval_policy == "greedy",
    )


def describe(config: config_lib.DiceConfig) -> str:
    behaviour = (
        f"eta fixed at {config.fixed_eta}"
        if config.fixed_behaviour
        else f"eta from {config.bandit_selection} ({config.controller_scope})"
    )
    return (
        f"{config.num_actors} actors x {config.envs_per_actor} envs, {config.network} net, "
        f"{behaviour}, batch {config.batch_size}x({config.burn_in}+{config.sequence_length}) "
        f"x{config.times_sampled}, {config.total_frames:,} frames"
    )


PAPER = cli.Paper(
    name="dice",
    config_class=config_lib.DiceConfig,
    build_experiment=build_experiment,
    ablations=ablations.ABLATIONS,
    default_ablation="dice",
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

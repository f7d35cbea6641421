"""DiCE on the shared stack: `DiceBuilder` (`common.experiments.builder.BurnInBuilder`),
which is the paper the command line runs. Imports TensorFlow only inside the methods that
build something."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from common.experiments import builder
from dice import ablations as ablations_lib
from dice import config as config_lib

if TYPE_CHECKING:
    from common.control.behaviour import BehaviourSpec
    from common.environments.protocols import AtariProtocol
    from common.runtime.acting import PolicyFactory
    from common.runtime.agent import EnvSpec
    from common.runtime.learning import LearnerParts


@dataclasses.dataclass(frozen=True)
class DiceBuilder(builder.BurnInBuilder[config_lib.DiceConfig]):
    """DiCE's pieces: burn-in sequences each sampled twice (Table 5), softmax(eta · A) with eta
    from each environment's bandits vote (§3.3, Algorithm 1), the tau-free learner (Eq. (8))."""

    name = "dice"
    config_class = config_lib.DiceConfig
    ablations = ablations_lib.ABLATIONS
    default_ablation = "dice"
    env_defaults = {
        "CartPole": config_lib.CARTPOLE_OVERRIDES,
        "MinAtar": config_lib.MINATAR_OVERRIDES,
    }
    cartpole = True

    config: config_lib.DiceConfig

    def policy_factory(self) -> PolicyFactory:
        from dice import acting

        return acting.make_policy(self.config)

    def make_learner(self, spec: EnvSpec) -> LearnerParts:
        """The learner process's parts (`dice.learning.make_learner_parts`)."""
        from dice import learning

        return learning.make_learner_parts(self.config, spec)

    def core_state_spec(self) -> Any:
        from dice import networks

        return networks.core_state_spec(self.config)

    def behaviour(self) -> BehaviourSpec | None:
        from dice import acting

        return acting.behaviour_spec(self.config)

    def protocol(self) -> AtariProtocol:
        from dice import acting

        return acting.protocol(self.config)

    def evaluation(self) -> builder.Evaluation:
        """The evaluator plays eta from the bandits of actor 0 (§3.3: sampled), or argmax A with
        --eval_policy=greedy."""
        return builder.Evaluation(greedy=self.config.eval_policy == "greedy")

    def run_name(self) -> str:
        return f"dice {self.config.env}"

    def describe(self) -> str:
        config = self.config
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

"""LBC on the shared stack: `LbcBuilder` (`common.experiments.builder.BurnInBuilder`),
which is the paper the command line runs. Imports TensorFlow only inside the methods that
build something."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from common.experiments import builder
from lbc import ablations as ablations_lib
from lbc import config as config_lib

if TYPE_CHECKING:
    from common.control.behaviour import BehaviourSpec
    from common.environments.protocols import AtariProtocol
    from common.runtime.acting import PolicyFactory
    from common.runtime.agent import EnvSpec
    from common.runtime.learning import LearnerParts


@dataclasses.dataclass(frozen=True)
class LbcBuilder(builder.BurnInBuilder[config_lib.LbcConfig]):
    """LBC's pieces: burn-in sequences each sampled twice (Table 3), the hybrid behaviour
    mapping sum_i omega_i softmax(tau_i A_i) (Eq. (10)) with psi from each environment's bandit
    population (Algorithm 1), one V-trace / Retrace / policy-gradient learner per network of the
    population (App. B)."""

    name = "lbc"
    config_class = config_lib.LbcConfig
    ablations = ablations_lib.ABLATIONS
    default_ablation = "lbc"
    env_defaults = {
        "CartPole": config_lib.CARTPOLE_OVERRIDES,
        "MinAtar": config_lib.MINATAR_OVERRIDES,
    }
    cartpole = True

    config: config_lib.LbcConfig

    def policy_factory(self) -> PolicyFactory:
        from lbc import acting

        return acting.make_policy(self.config)

    def make_learner(self, spec: EnvSpec) -> LearnerParts:
        """The learner process's parts (`lbc.learning.make_learner_parts`)."""
        from lbc import learning

        return learning.make_learner_parts(self.config, spec)

    def core_state_spec(self) -> Any:
        from lbc import networks

        return networks.core_state_spec(self.config)

    def behaviour(self) -> BehaviourSpec | None:
        from lbc import acting

        return acting.behaviour_spec(self.config)

    def value_heads(self) -> int:
        """A truncation stores V_i(x_final) of every network."""
        return self.config.num_networks

    def protocol(self) -> AtariProtocol:
        from lbc import acting

        return acting.protocol(self.config)

    def evaluation(self) -> builder.Evaluation:
        """§5.1.1: a separate evaluation process plays the bandits' behaviour (App. H.2: never
        an argmax), or with eval_policy=best_arm the arms they rate best; with
        eval_policy=training_episodes the training games' returns are the report (App. H.2; the
        evaluator's behaviour is our reading: docs/papers/lbc.md#departures-from-the-paper)."""
        return builder.Evaluation(enabled=self.config.eval_policy != "training_episodes")

    def run_name(self) -> str:
        return f"lbc {self.config.env}"

    def describe(self) -> str:
        config = self.config
        return (
            f"{config.num_actors} actors x {config.envs_per_actor} envs, {config.num_networks} "
            f"{config.network} nets, {config.bandit_num_policies}-component mixture, psi from "
            f"{config.bandit_selection} ({config.controller_scope}), batch {config.batch_size}x"
            f"({config.burn_in}+{config.sequence_length}) x{config.times_sampled}, "
            f"{config.total_frames:,} frames"
        )

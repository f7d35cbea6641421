"""GDI on the shared stack: `GdiBuilder` (`common.experiments.builder.BurnInBuilder`),
which is the paper the command line runs. Imports TensorFlow only inside the methods that
build something."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from common.experiments import builder
from gdi import ablations as ablations_lib
from gdi import config as config_lib

if TYPE_CHECKING:
    from common.control.behaviour import BehaviourSpec
    from common.environments.protocols import AtariProtocol
    from common.runtime.acting import PolicyFactory
    from common.runtime.agent import EnvSpec
    from common.runtime.learning import LearnerParts


@dataclasses.dataclass(frozen=True)
class GdiBuilder(builder.BurnInBuilder[config_lib.GdiConfig]):
    """GDI's pieces: burn-in sequences each sampled twice, Eq. (2)'s mixture over one (GDI-I3)
    or two (GDI-H3) networks with lambda from each environment's bandits (App. G), each network's
    V-trace / Retrace / policy-gradient learner with its dynamics heads (App. B, Table 6)."""

    name = "gdi"
    config_class = config_lib.GdiConfig
    ablations = ablations_lib.ABLATIONS
    default_ablation = "gdi_i3"
    env_defaults = {
        "CartPole": config_lib.CARTPOLE_OVERRIDES,
        "MinAtar": config_lib.MINATAR_OVERRIDES,
    }
    cartpole = True

    config: config_lib.GdiConfig

    def policy_factory(self) -> PolicyFactory:
        from gdi import acting

        return acting.make_policy(self.config)

    def make_learner(self, spec: EnvSpec) -> LearnerParts:
        """The learner process's parts (`gdi.learning.make_learner_parts`)."""
        from gdi import learning

        return learning.make_learner_parts(self.config, spec)

    def core_state_spec(self) -> Any:
        from gdi import networks

        return networks.core_state_spec(self.config)

    def behaviour(self) -> BehaviourSpec | None:
        from gdi import acting

        return acting.behaviour_spec(self.config)

    def value_heads(self) -> int:
        """A truncated game bootstraps each network in its own reward shaping's units."""
        return len(self.config.reward_shapings)

    def protocol(self) -> AtariProtocol:
        from gdi import acting

        return acting.protocol(self.config)

    def evaluation(self) -> builder.Evaluation:
        """Evaluation environments (§4.1's "additional environments"; which lambda they play is
        our choice, docs/papers/gdi.md#departures-from-the-paper) never write to replay; they run
        bandit ensembles of their own that learn from the evaluation games
        (--eval_policy=bandits) or play the best played region of the first actor's saved bandits,
        never updated (--eval_policy=best_region); never an argmax (`gdi.acting.behaviour_spec`)."""
        return builder.Evaluation()

    def run_name(self) -> str:
        return f"gdi-{self.config.variant} {self.config.env}"

    def describe(self) -> str:
        config = self.config
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
            f"{config.batch_size}x({config.burn_in}+{config.sequence_length}) "
            f"x{config.times_sampled}, {config.total_frames:,} frames"
        )

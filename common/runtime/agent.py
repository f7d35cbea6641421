"""A paper's agent as the shared stack runs it (docs/architecture.md#what-a-paper-supplies).

A paper supplies its pieces through its `common.experiments.builder.Builder`, and
`common.experiments.builder.build_agent` assembles them into an `Agent`; `common.launchers.launch`
runs them: actors (`common.runtime.acting`) write the per-step record its policy declares through
its replay pattern (`common.replay.patterns`), with the behaviour parameters its selector picks
(`common.control.behaviour`); the learner (`common.runtime.learning`) samples the pattern's batches
into its train step and publishes its acting variables.

Fields used by actor processes (`make_policy`, `replay`, `behaviour`) are picklable:
module-level functions, `functools.partial`s of them and frozen dataclasses.
"""

import dataclasses
from typing import Any, Callable, NamedTuple

import numpy as np
import reverb

from common.runtime import acting
from common.control import behaviour as behaviour_lib
from common.environments import env_names
from common.environments import envs as envs_lib
from common.environments import protocols
from common.runtime import learning
from common.replay import patterns
from common.replay import parameters
from common.replay import reports


class EnvSpec(NamedTuple):
    num_actions: int
    observation_shape: tuple
    observation_dtype: np.dtype


def probe_env(
    env: str, protocol: str | protocols.AtariProtocol | protocols.MinAtarProtocol
) -> EnvSpec:
    """Actions and observation format of `env`, from a batch of one env per game."""
    probe = envs_lib.make_env(env, len(env_names.games(env)), 0, protocol)
    try:
        return EnvSpec(
            probe.num_actions, tuple(probe.observation_shape), np.dtype(probe.observation_dtype)
        )
    finally:
        probe.close()


@dataclasses.dataclass(frozen=True)
class Agent:
    """A paper's agent on the shared stack (made by `common.experiments.builder.build_agent` from
    the paper's builder).

    - `replay`: the replay pattern (tables, writer, batches);
    - `make_policy(num_actions, observation_shape, observation_dtype, seed, greedy)`: the acting
      policy (`common.runtime.acting.Policy`) of one actor or evaluator process;
    - `policy_extras(env_spec)`: per-step `tf.TensorSpec`s of the extras its policy returns
      (e.g. IMPALA's behaviour logits), stored with every step;
    - `make_learner(env_spec)`: runs in the learner process only and returns
      `common.runtime.learning.LearnerParts` (train step, checkpointables, acting variables);
    - `core_state_spec`: per-env spec of the recurrent state stored at each item's first step
      (None: feed-forward);
    - `behaviour`: the per-game behaviour selector (None: the policy has no parameters to pick);
    - `value_heads`: values a truncated step stores (one per network of GDI-H3 / LBC, each in its
      own reward shaping's units; the policy's `value_heads` and `bootstrap_value` agree).
    """

    replay: patterns.Pattern
    make_policy: acting.PolicyFactory
    policy_extras: Callable[[EnvSpec], dict]
    make_learner: Callable[[EnvSpec], learning.LearnerParts]
    core_state_spec: Any = None
    behaviour: behaviour_lib.BehaviourSpec | None = None
    value_heads: int = 1

    def step_spec(self, spec: EnvSpec) -> dict:
        shapes = None if self.behaviour is None else self.behaviour.param_shapes
        return acting.step_spec(
            spec.observation_shape,
            spec.observation_dtype,
            self.policy_extras(spec),
            shapes,
            self.value_heads,
        )

    def signature(self, spec: EnvSpec) -> dict:
        """The experience tables' item signature."""
        first_step = (
            None if self.core_state_spec is None else {acting.CORE_STATE: self.core_state_spec}
        )
        return self.replay.signature(self.step_spec(spec), first_step)

    def tables(self, spec: EnvSpec) -> list[reverb.Table]:
        """Every table of a run: the pattern's, the params table and the reports table."""
        return [
            *self.replay.tables(self.signature(spec)),
            parameters.params_table(acting.PARAMS_TABLE),
            reports.reports_table(),
        ]

    @property
    def behaviour_names(self) -> tuple[str, ...]:
        return () if self.behaviour is None else tuple(self.behaviour.param_shapes)

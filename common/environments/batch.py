"""What every batch of environments is: `BatchedEnv`, stepped together, and its `StepResult`.

`common.environments.envs.make_env` returns one (a game's batch, or several games' as one:
`common.environments.multitask`); actors and evaluators only use this interface.
"""

from typing import NamedTuple, Protocol

import numpy as np


class StepResult(NamedTuple):
    """One batched step. Arrays are [B] unless noted.

    After a game ends (`terminated` at game over, or `truncated`), `observation` is already the
    first observation of the next game; after a life loss under a protocol that ends episodes on
    life loss, it is the next life's observation (the game continues).
    """

    observation: np.ndarray  # [B, ...]
    # [B, ...]; where a game ended, the observation it ended on (before the auto-reset), which a
    # truncated episode bootstraps from (docs/architecture.md#conventions); elsewhere the same as
    # `observation`.
    final_observation: np.ndarray
    reward: np.ndarray  # float32, processed by the protocol (e.g. clipped)
    raw_reward: np.ndarray  # float32, the game's reward
    terminated: np.ndarray  # bool; game over, or a life lost when the protocol says so
    truncated: np.ndarray  # bool; episode cap reached
    episode_return: np.ndarray  # float32; raw whole-game score where a game ended, else NaN
    episode_length: np.ndarray  # int32; agent steps of the game that ended here, else 0


class BatchedEnv(Protocol):
    """What the actor needs from a batch of environments."""

    num_envs: int
    num_actions: int
    observation_shape: tuple[int, ...]
    observation_dtype: np.dtype

    def reset(self) -> np.ndarray: ...

    def step(self, actions: np.ndarray) -> StepResult: ...

    def close(self) -> None: ...

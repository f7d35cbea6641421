"""Several games as one batch: the environments of IMPALA's multi-task agent (§5.3).

IMPALA's multi-task agent is one set of weights trained on several games at once, with a fixed
number of actors per game, and the model is not told which game it is playing. Here an actor
steps a batch of environments, so what is fixed per game is its number of environments: a batch
of `num_envs` is split as evenly as it divides, in the order the games are listed (the first
games get one more where it does not), and environment i always plays the same game, `tasks[i]`.
Over an actor fleet that makes a fixed number of environments per game, which is the paper's
fixed number of actors per game, an IMPALA actor being one environment.

What the games must share, since one network reads them all: the action set (MinAtar's `-v0`
gives every game all 6 actions, and Atari games under a full action set share 18; a game's
minimal set does not match another's) and the observation's dtype and shape but for the
channels of a MinAtar frame, which are padded with zeros to the game with the most (Seaquest's
10), as the paper's DMLab-30 and Atari-57 agents read every task through one input. The games
keep their own seeds: environment i is seeded `seed + i`, as in one game's batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from common.environments.batch import BatchedEnv, StepResult


def split(num_envs: int, games: int) -> list[int]:
    """Environments per game: `num_envs` as even as it divides, the first games one more."""
    if num_envs < games:
        raise ValueError(
            f"{num_envs} environments cannot play {games} games: a multi-task batch needs at "
            "least one environment per game (raise the environments per actor or evaluator)"
        )
    return [num_envs // games + (g < num_envs % games) for g in range(games)]


class MultiTaskEnv:
    """Implements `BatchedEnv` over one batch per game (module docstring); `tasks[i]` is the
    index in `games` of the game environment i plays."""

    def __init__(
        self,
        games: Sequence[str],
        num_envs: int,
        seed: int,
        make_one: Callable[[str, int, int], BatchedEnv],
    ) -> None:
        """`make_one(game, num_envs, seed)` makes one game's batch."""
        self.games = tuple(games)
        counts = split(num_envs, len(self.games))
        self.num_envs = num_envs
        self.tasks = np.repeat(np.arange(len(self.games)), counts)
        self._bounds = np.concatenate([[0], np.cumsum(counts)])
        self._batches: list[BatchedEnv] = []
        try:
            for game, count, start in zip(self.games, counts, self._bounds):
                self._batches.append(make_one(game, count, seed + int(start)))
            self._check_shared()
        except Exception:
            self.close()
            raise
        first = self._batches[0]
        self.num_actions = first.num_actions
        self.observation_dtype = np.dtype(first.observation_dtype)
        shapes = [batch.observation_shape for batch in self._batches]
        self.observation_shape = (*shapes[0][:-1], max(shape[-1] for shape in shapes))

    def _check_shared(self) -> None:
        # The frames' other axes agree within a family (MinAtar's 10 x 10, the Atari protocol's
        # stack), and families do not mix (`env_names.canonical_env`): the actions may differ.
        actions = {game: batch.num_actions for game, batch in zip(self.games, self._batches)}
        if len(set(actions.values())) > 1:
            raise ValueError(
                f"the games' action sets differ ({', '.join(f'{g}: {n}' for g, n in actions.items())}"
                "): one network acts in all of them, so give every game its full action set "
                "(MinAtar/<Game>-v0; on Atari, --full_action_set)"
            )

    def _padded(self, parts: Sequence[np.ndarray]) -> np.ndarray:
        """The games' [n_g, ..., C_g] arrays as one [B, ..., C], zeros in the channels a game
        lacks."""
        out = np.zeros((self.num_envs, *self.observation_shape), self.observation_dtype)
        for part, start, end in zip(parts, self._bounds[:-1], self._bounds[1:]):
            out[start:end, ..., : part.shape[-1]] = part
        return out

    def reset(self) -> np.ndarray:
        return self._padded([batch.reset() for batch in self._batches])

    def step(self, actions: np.ndarray) -> StepResult:
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs,):
            raise ValueError(f"actions must have shape ({self.num_envs},), got {actions.shape}")
        results = [
            batch.step(actions[start:end])
            for batch, start, end in zip(self._batches, self._bounds[:-1], self._bounds[1:])
        ]
        observation = self._padded([r.observation for r in results])
        ended = any((r.terminated | r.truncated).any() for r in results)
        return StepResult(
            observation=observation,
            final_observation=(
                self._padded([r.final_observation for r in results]) if ended else observation
            ),
            **{
                field: np.concatenate([getattr(r, field) for r in results])
                for field in StepResult._fields
                if field not in ("observation", "final_observation")
            },
        )

    def close(self) -> None:
        for batch in self._batches:
            batch.close()


def tasks_of(env: BatchedEnv) -> np.ndarray | None:
    """The game each environment of `env` plays (`MultiTaskEnv.tasks`); None for one game's."""
    return env.tasks if isinstance(env, MultiTaskEnv) else None

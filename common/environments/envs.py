"""Batched environments: each paper's Atari protocol, MinAtar, and CartPole.

`make_env` returns a `BatchedEnv`: a batch of `num_envs` environments stepped together, with
same-step auto-reset and the bookkeeping every paper needs (reward clipping, life loss, whole-game
scores). Three env families (`common.environments.env_names.env_family`): Atari games (the papers'
benchmark), MinAtar's five games (Young & Tian 2019: 10x10 versions of Asterix, Breakout, Freeway,
Seaquest and Space Invaders, for runs that fit a small machine) and CartPole (a smoke test).

MinAtar (`common.environments.protocols.MINATAR_PROTOCOL`) runs the library's own
`minatar.Environment` objects, one per batch entry, with the published protocol (sticky actions 0.1,
difficulty ramping, no frame skip, no frame stack, raw rewards); `MinAtar/<Game>-v0` has all 6
actions, `-v1` the game's minimal action set (MinAtar's gym.py). The Atari `protocol` and `backend`
arguments do not apply to it.
`common.environments.recording.render_rgb` draws MinAtar (and Atari) observations as RGB images.

Two Atari backends produce the same frames:

- `"vector"`: ale-py's C++ `AtariVectorEnv`: frame skip, max-pool, grayscale, resize, frame stack
  and no-op starts run in C++ threads. This is the fast path for actors.
- `"gym"`: gymnasium's `AtariPreprocessing` + `FrameStackObservation` over `ALE/<Game>-v5`, one
  Python env per batch entry. It is the reference the vector backend is tested against.

Both always max-pool the last 2 raw frames of each action repeat and convert to grayscale, as every
protocol here does (IMPALA Table G.1 prints both; DiCE Table 5, GDI Table 5 and LBC Table 3 print
grayscale, and the max-pool is the DQN / Agent57 processing they follow:
docs/papers/gdi.md#departures-from-the-paper). Frames are stacked with zero padding after a reset
(the C++ env's behaviour; the gym backend is configured to match).

Life loss and reward clipping are applied in Python on top of either backend, identically: the
emulator only resets at game over or at the episode cap, so an IMPALA "episode" that ends on a
lost life continues with the next life's frames, and `episode_return` is always the whole game's
raw score (the number the papers report).

Where a game ends (game over or the episode cap), `StepResult.final_observation` is the frame stack
it ended on, which a truncated episode bootstraps from (docs/architecture.md#conventions);
`observation` is then the next game's first.

Where the backends differ (both documented in `tests/common/environments/test_envs.py`):
- No-op starts: the C++ env draws 0..noop_max-1 raw frames from its own generator,
  `AtariPreprocessing` draws 1..noop_max (the papers' convention, e.g. IMPALA §5.3.2's "[1, 30]")
  from the env's `np_random`. Actors use the fast C++ batch, evaluators the exact gym path
  (`common.runtime.acting`). With `noop_max=0` and no sticky actions the two backends are
  frame-identical.
- The four multi-player ROMs (combat, joust, maze_craze, warlords) have no `ALE/<Game>-v5`
  registration, so only the vector backend runs them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import NamedTuple, Protocol

import ale_py
import ale_py.roms
import gymnasium
import numpy as np
from ale_py.registration import rom_id_to_name
from ale_py.vector_env import AtariVectorEnv
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

from common.environments import minatar_games
from common.environments.protocols import (
    MINATAR_PROTOCOL,
    PROTOCOLS,
    AtariProtocol,
    MinAtarProtocol,
)
from common.environments import env_names, multitask
from common.environments.batch import BatchedEnv, StepResult
from common.environments.env_names import (
    CARTPOLE,
    ROM_IDS,
    atari_game,
    canonical_env,
    minatar_game,
)

gymnasium.register_envs(ale_py)
# The emulator's banner ("A.L.E: Arcade Learning Environment ...", "[Powered by Stella]") on every
# game the evaluator opens is not the project's; ALE's warnings are dropped with it, its errors
# kept.
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)


BACKENDS = ("vector", "gym")


class _RawStep(NamedTuple):
    """What a backend returns: raw rewards, game ends, lives; same-step auto-reset done."""

    observation: np.ndarray
    final_observation: np.ndarray  # the observation before an auto-reset (else `observation`)
    reward: np.ndarray
    game_over: np.ndarray
    truncated: np.ndarray
    lives: np.ndarray


class _Backend(Protocol):
    num_envs: int
    num_actions: int
    observation_space: gymnasium.spaces.Box  # of one env, as the backend emits it

    def reset(self, seed: int | None) -> tuple[np.ndarray, np.ndarray]: ...

    def step(self, actions: np.ndarray) -> _RawStep: ...

    def close(self) -> None: ...


def _num_actions(space: gymnasium.spaces.Space) -> int:
    if not isinstance(space, gymnasium.spaces.Discrete):
        raise ValueError(f"the env's actions must be discrete, got {space}")
    return int(space.n)


def _box(space: gymnasium.spaces.Space) -> gymnasium.spaces.Box:
    if not isinstance(space, gymnasium.spaces.Box):
        raise ValueError(f"the env's observations must be an array (a Box), got {space}")
    return space


class _AleVectorBackend:
    """ale-py's C++ vector env, with its own life-loss handling and reward clipping turned off."""

    def __init__(self, game: str, num_envs: int, protocol: AtariProtocol) -> None:
        self.num_envs = num_envs
        self._env = AtariVectorEnv(
            game,
            num_envs,
            # choice: one C++ thread per core (more threads than cores only adds switching).
            num_threads=min(num_envs, len(os.sched_getaffinity(0))),
            max_num_frames_per_episode=protocol.max_episode_frames,
            repeat_action_probability=protocol.repeat_action_probability,
            full_action_space=protocol.full_action_space,
            autoreset_mode="SameStep",
            img_height=protocol.screen_size,
            img_width=protocol.screen_size,
            grayscale=True,
            stack_num=protocol.frame_stack,
            frameskip=protocol.frame_skip,
            maxpool=True,
            noop_max=protocol.noop_max,
            episodic_life=False,  # life loss is handled in _ProtocolEnv, for both backends alike
            reward_clipping=False,  # raw rewards are needed for the reported score
            use_fire_reset=False,  # choice: no paper presses FIRE at reset
        )
        self.num_actions = _num_actions(self._env.single_action_space)
        self.observation_space = _box(self._env.single_observation_space)

    def reset(self, seed: int | None) -> tuple[np.ndarray, np.ndarray]:
        obs, info = self._env.reset(seed=seed)  # env i is seeded with seed + i
        return obs, info["lives"]

    def step(self, actions: np.ndarray) -> _RawStep:
        obs, reward, terminated, truncated, info = self._env.step(actions)
        final_obs = obs
        if "final_obs" in info:  # on steps where some game ended; valid in those rows only
            ended = terminated | truncated
            final_obs = obs.copy()
            final_obs[ended] = info["final_obs"][ended]
        return _RawStep(obs, final_obs, reward, terminated, truncated, info["lives"])

    def close(self) -> None:
        self._env.close()


class _GymListBackend:
    """A list of gymnasium envs stepped in turn, each reset on the step its episode ends."""

    def __init__(self, make_one: Callable[[], gymnasium.Env], num_envs: int) -> None:
        self.num_envs = num_envs
        self.envs = [make_one() for _ in range(num_envs)]
        self.num_actions = _num_actions(self.envs[0].action_space)
        self.observation_space = _box(self.envs[0].observation_space)

    def reset(self, seed: int | None) -> tuple[np.ndarray, np.ndarray]:
        results = [
            env.reset(seed=None if seed is None else seed + i) for i, env in enumerate(self.envs)
        ]
        return (
            np.stack([obs for obs, _ in results]),
            np.array([info.get("lives", 0) for _, info in results], np.int32),
        )

    def step(self, actions: np.ndarray) -> _RawStep:
        obs, final_obs, rewards, game_over, truncated, lives = [], [], [], [], [], []
        for env, action in zip(self.envs, actions):
            o, r, term, trunc, info = env.step(int(action))
            final_obs.append(o)
            if term or trunc:
                o, info = env.reset()
            obs.append(o)
            rewards.append(r)
            game_over.append(term)
            truncated.append(trunc)
            lives.append(info.get("lives", 0))
        return _RawStep(
            np.stack(obs),
            np.stack(final_obs),
            np.asarray(rewards),
            np.asarray(game_over, bool),
            np.asarray(truncated, bool),
            np.asarray(lives, np.int32),
        )

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _make_gym_atari(game: str, protocol: AtariProtocol) -> gymnasium.Env:
    env = gymnasium.make(
        f"ALE/{rom_id_to_name(game)}-v5",
        frameskip=1,  # AtariPreprocessing does the action repeat (and the max-pool)
        repeat_action_probability=protocol.repeat_action_probability,
        full_action_space=protocol.full_action_space,
        max_num_frames_per_episode=protocol.max_episode_frames,
    )
    env = AtariPreprocessing(
        env,
        noop_max=protocol.noop_max,
        frame_skip=protocol.frame_skip,
        screen_size=protocol.screen_size,
        terminal_on_life_loss=False,  # life loss is handled in _ProtocolEnv
        grayscale_obs=True,
        scale_obs=False,
    )
    return FrameStackObservation(env, protocol.frame_stack, padding_type="zero")


class _MinAtarEnv:
    """Implements `BatchedEnv` on a batch of MinAtar games (`common.environments.minatar_games`:
    Space Invaders as one set of arrays, the other games as MinAtar's own `minatar.Environment`
    objects), each reset on the step its game ends; the same auto-reset, `final_observation`,
    `episode_return` and `episode_length` as `_ProtocolEnv`, whose per-step numpy bookkeeping (life
    loss, channel moves) would cost more than a MinAtar game step.

    States are already [10, 10, C] channels last; they are emitted as uint8 0/1. MinAtar has no
    lives and no cap of its own beyond the games' ends, so `terminated` is the game's terminal
    flag and `truncated` is never set.
    """

    def __init__(
        self, game: str, num_envs: int, seed: int, minimal_actions: bool, protocol: MinAtarProtocol
    ) -> None:
        # Imported here: minatar imports matplotlib and seaborn (for its display) when imported.
        from minatar import Environment

        first = Environment(game)
        self.num_envs = num_envs
        sticky, ramping = protocol.sticky_action_prob, protocol.difficulty_ramping
        self._games: minatar_games.BatchedSpaceInvaders | minatar_games.LibraryGames
        if game == "space_invaders":  # the one game whose step is a large share of an actor's
            self._games = minatar_games.BatchedSpaceInvaders(num_envs, sticky, ramping)
        else:
            self._games = minatar_games.LibraryGames(game, num_envs, sticky, ramping)
        # v1: agent action i is the game's action minimal_action_set()[i] (MinAtar's gym.py).
        self._action_set = (
            list(first.minimal_action_set())
            if minimal_actions
            else list(range(first.num_actions()))
        )
        self.num_actions = len(self._action_set)
        self.observation_shape = tuple(first.state_shape())
        self.observation_dtype = np.dtype(np.uint8)
        self._shape = (num_envs, *self.observation_shape)
        self._seed: int | None = seed  # None after the first reset
        self._reward_clip = protocol.reward_clip
        self._started = False
        self._game_return = np.zeros(num_envs)  # raw rewards of each env's game so far
        self._game_length = np.zeros(num_envs, np.int32)

    def reset(self) -> np.ndarray:
        """Starts new games in every env: [B, 10, 10, C] observations.

        The first reset seeds env i with seed + i (`Environment.seed`: one np.random.RandomState
        per env drives both its game and its sticky actions, MinAtar's environment.py); later
        resets continue the envs' RNG streams."""
        if self._seed is not None:
            self._games.seed(self._seed)
        # The construction-time reset drew from an unseeded generator: restart the games.
        self._games.reset(range(self.num_envs))
        observation = np.empty(self._shape, bool)
        self._games.states(observation)
        self._seed = None
        self._started = True
        self._game_return[:] = 0.0
        self._game_length[:] = 0
        return observation.view(np.uint8)

    def step(self, actions: np.ndarray) -> StepResult:
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs,) or actions.dtype.kind not in "iu":
            raise ValueError(
                f"actions must be an integer array of shape ({self.num_envs},), "
                f"got dtype {actions.dtype} and shape {actions.shape}"
            )
        if not self._started:
            raise RuntimeError("call reset() before step()")
        indices = actions.tolist()
        if min(indices) < 0 or max(indices) >= self.num_actions:
            raise ValueError(f"actions must lie in [0, {self.num_actions}), got {actions}")
        raw_reward, terminated = self._games.act([self._action_set[i] for i in indices])
        self._game_return += raw_reward
        self._game_length += 1
        # Written as bool, the dtype of MinAtar's states (a plain copy), then viewed as uint8.
        observation = np.empty(self._shape, bool)
        ended = np.flatnonzero(terminated)
        if ended.size:
            final_states = np.empty((ended.size, *self.observation_shape), bool)
            self._games.states(final_states, ended)
            self._games.reset(ended)
        self._games.states(observation)
        observation = observation.view(np.uint8)
        final_observation = observation
        episode_return = np.full(self.num_envs, np.nan, np.float32)
        episode_length = np.zeros(self.num_envs, np.int32)
        if ended.size:
            final_observation = observation.copy()
            final_observation[ended] = final_states.view(np.uint8)
            episode_return[ended] = self._game_return[ended]
            episode_length[ended] = self._game_length[ended]
            self._game_return[ended] = 0.0
            self._game_length[ended] = 0
        reward = (
            raw_reward
            if self._reward_clip is None
            else np.clip(raw_reward, -self._reward_clip, self._reward_clip)
        )
        return StepResult(
            observation,
            final_observation,
            reward,
            raw_reward,
            terminated,
            np.zeros(self.num_envs, bool),  # truncated: never
            episode_return,
            episode_length,
        )

    def close(self) -> None:
        pass  # MinAtar's display was never opened


class _ProtocolEnv:
    """Implements `BatchedEnv` on a backend: reward clipping, life loss and game scores.

    `channels_last` moves Atari's stack axis last: [B, S, H, W] -> [B, H, W, S].
    """

    def __init__(
        self,
        backend: _Backend,
        seed: int,
        reward_clip: float | None,
        terminal_on_life_loss: bool,
        channels_last: bool,
    ) -> None:
        self._backend = backend
        self._seed: int | None = seed  # None after the first reset
        self._reward_clip = reward_clip
        self._terminal_on_life_loss = terminal_on_life_loss
        self._channels_last = channels_last
        self.num_envs = backend.num_envs
        self.num_actions = backend.num_actions
        shape = backend.observation_space.shape
        self.observation_shape = shape[1:] + shape[:1] if channels_last else shape
        self.observation_dtype = backend.observation_space.dtype
        self._lives: np.ndarray | None = None  # None until the first reset
        self._game_return = np.zeros(self.num_envs, np.float64)
        self._game_length = np.zeros(self.num_envs, np.int32)

    def _observation(self, obs: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.moveaxis(obs, 1, -1)) if self._channels_last else obs

    def reset(self) -> np.ndarray:
        """Starts new games in every env: [B, ...] observations.

        The first reset seeds env i with seed + i; later resets continue the envs' RNG streams, so
        a run is reproducible from the seed and the sequence of calls.
        """
        obs, self._lives = self._backend.reset(self._seed)
        self._seed = None
        self._game_return[:] = 0.0
        self._game_length[:] = 0
        return self._observation(obs)

    def step(self, actions: np.ndarray) -> StepResult:
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs,) or not np.issubdtype(actions.dtype, np.integer):
            raise ValueError(
                f"actions must be an integer array of shape ({self.num_envs},), "
                f"got dtype {actions.dtype} and shape {actions.shape}"
            )
        if self._lives is None:
            raise RuntimeError("call reset() before step()")
        if np.any((actions < 0) | (actions >= self.num_actions)):
            raise ValueError(f"actions must lie in [0, {self.num_actions}), got {actions}")
        raw = self._backend.step(actions.astype(np.int32))
        raw_reward = raw.reward.astype(np.float32)
        reward = (
            raw_reward
            if self._reward_clip is None
            else np.clip(raw_reward, -self._reward_clip, self._reward_clip)
        )
        game_end = raw.game_over | raw.truncated
        # At a game end the backend already reports the next game's lives: not a life loss.
        life_lost = (raw.lives < self._lives) & ~game_end
        self._lives = raw.lives
        terminated = raw.game_over | (life_lost & self._terminal_on_life_loss)

        self._game_return += raw_reward
        self._game_length += 1
        episode_return = np.where(game_end, self._game_return, np.nan).astype(np.float32)
        episode_length = np.where(game_end, self._game_length, 0).astype(np.int32)
        self._game_return[game_end] = 0.0
        self._game_length[game_end] = 0
        observation = self._observation(raw.observation)
        final_observation = (
            observation
            if raw.final_observation is raw.observation
            else self._observation(raw.final_observation)
        )
        return StepResult(
            observation,
            final_observation,
            reward,
            raw_reward,
            terminated,
            raw.truncated,
            episode_return,
            episode_length,
        )

    def emulators(self) -> list | None:
        """The ALE interface of each env where the batch is a list of gymnasium Atari envs (the
        "gym" backend, the evaluator's): what shows the game's own RGB screen; else None."""
        members = getattr(self._backend, "envs", None)
        if not members:
            return None
        interfaces = [getattr(member.unwrapped, "ale", None) for member in members]
        return None if any(ale is None for ale in interfaces) else interfaces

    def close(self) -> None:
        self._backend.close()


def make_env(
    env: str,
    num_envs: int,
    seed: int,
    protocol: str | AtariProtocol | MinAtarProtocol = "impala",
    backend: str = "vector",
) -> BatchedEnv:
    """A batch of `num_envs` envs; the first `reset()` seeds env i with `seed + i`.

    `env`: an Atari game (see `atari_game`), a MinAtar game (see `minatar_game`; observations
    uint8 0/1 [10, 10, C]) or "CartPole" (CartPole-v1). `protocol`: a name in `PROTOCOLS`, or an
    `AtariProtocol`; it does not apply to CartPole; MinAtar plays `protocol` if it is a
    `MinAtarProtocol`, else `MINATAR_PROTOCOL` with the Atari protocol's reward clipping. `backend`
    (Atari only): "vector" (ale-py C++) or "gym" (gymnasium wrappers), see the module docstring.
    Several games, comma-separated, make one `common.environments.multitask.MultiTaskEnv`.
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    games = env_names.games(env)
    if len(games) > 1:
        # ValueError for a game named twice or families mixed; None: a game is unknown, which
        # its own make_env names.
        games = env_names.games(canonical_env(env) or env)
        return multitask.MultiTaskEnv(
            games, num_envs, seed, lambda game, n, s: make_env(game, n, s, protocol, backend)
        )
    minatar = minatar_game(env)
    if minatar is not None:
        game, version = minatar
        if not isinstance(protocol, MinAtarProtocol):
            # The game is MinAtar's; the reward clipping of the paper's protocol is its agent's
            # (IMPALA clips to [-1, 1], Table G.1), so it carries over. Scores stay raw.
            atari = PROTOCOLS[protocol] if isinstance(protocol, str) else protocol
            protocol = dataclasses.replace(MINATAR_PROTOCOL, reward_clip=atari.reward_clip)
        return _MinAtarEnv(game, num_envs, seed, version == 1, protocol)
    if canonical_env(env) == CARTPOLE:
        return _ProtocolEnv(
            _GymListBackend(lambda: gymnasium.make("CartPole-v1"), num_envs),
            seed,
            reward_clip=None,
            terminal_on_life_loss=False,
            channels_last=False,
        )
    rom = atari_game(env)
    if rom is None:
        raise ValueError(
            f"unknown env {env!r}: use {CARTPOLE!r}, a MinAtar game (MinAtar/Breakout-v0, "
            f"breakout-minatar) or an Atari game, written "
            f"'Pong', 'pong', 'MsPacman', 'ms_pacman' or 'ALE/MsPacman-v5'; "
            f"games: {', '.join(ROM_IDS)}"
        )
    if isinstance(protocol, str):
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r}: use one of {sorted(PROTOCOLS)}")
        protocol = PROTOCOLS[protocol]
    if isinstance(protocol, MinAtarProtocol):
        raise ValueError(f"{env!r} is an Atari game: give it an Atari protocol, not {protocol}")
    atari_protocol = protocol
    batch: _Backend
    if backend == "vector":
        batch = _AleVectorBackend(rom, num_envs, atari_protocol)
    elif backend == "gym":
        batch = _GymListBackend(lambda: _make_gym_atari(rom, atari_protocol), num_envs)
    else:
        raise ValueError(f"unknown backend {backend!r}: use one of {BACKENDS}")
    return _ProtocolEnv(
        batch,
        seed,
        atari_protocol.reward_clip,
        atari_protocol.terminal_on_life_loss,
        channels_last=True,
    )

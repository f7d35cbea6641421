"""MinAtar's games for a batch of environments: the library's own objects stepped in turn, or, for
Space Invaders, one set of arrays stepped at once.

`common.environments.envs` steps MinAtar through either class. Both act with MinAtar's `Environment`
wrapper (environment.py): a sticky action repeats the previous one with probability
`sticky_action_prob` (one `RandomState.rand()` per step from the environment's own generator, which
`seed` replaces), and the previous action survives a reset. `BatchedSpaceInvaders` computes what
minatar/environments/space_invaders.py computes, for every environment at once: its game draws no
random numbers, so the sticky draws are the only ones and come in blocks from each environment's
generator, the same stream as one draw a step. `tests/common/environments/test_envs.py` plays both
beside MinAtar's objects.
"""

from typing import Sequence

import numpy as np

Indices = Sequence[int] | np.ndarray  # environments of the batch, or actions, one per env


class LibraryGames:
    """`num_envs` of MinAtar's own `minatar.Environment` objects, one step each in turn."""

    def __init__(self, game: str, num_envs: int, sticky_action_prob: float, ramping: bool) -> None:
        # Imported here: minatar imports matplotlib and seaborn (for its display) when imported.
        from minatar import Environment

        self._envs = [
            Environment(game, sticky_action_prob=sticky_action_prob, difficulty_ramping=ramping)
            for _ in range(num_envs)
        ]

    def seed(self, seed: int) -> None:
        """Env i draws from `np.random.RandomState(seed + i)` (its game's and sticky draws)."""
        for i, env in enumerate(self._envs):
            env.seed(seed + i)

    def reset(self, envs: Indices) -> None:
        for i in envs:
            self._envs[i].reset()

    def act(self, actions: Indices) -> tuple[np.ndarray, np.ndarray]:
        """Game actions (0-5) -> rewards [B] and terminal flags [B]."""
        rewards, terminal = zip(*[env.act(action) for env, action in zip(self._envs, actions)])
        return np.array(rewards, np.float32), np.array(terminal, bool)

    def states(self, out: np.ndarray, envs: Indices | None = None) -> None:
        """Writes the states of `envs` (all by default) into `out` [len(envs), 10, 10, C]."""
        for row, i in enumerate(range(len(self._envs)) if envs is None else envs):
            out[row] = self._envs[i].state()


# space_invaders.py's constants.
SHOT_COOL_DOWN = 5
ENEMY_MOVE_INTERVAL = 12
ENEMY_SHOT_INTERVAL = 10
FIRE, LEFT, RIGHT = 5, 1, 3  # its action_map ['n', 'l', 'u', 'r', 'd', 'f']
STICKY_BLOCK = 256  # sticky draws taken from each environment's generator at a time


class BatchedSpaceInvaders:
    """MinAtar's Space Invaders (space_invaders.py `Env.act`, `state`, `reset`) behind MinAtar's
    `Environment` wrapper, for `num_envs` environments as arrays: the same states, rewards and
    terminals as `LibraryGames("space_invaders", ...)` given the same seeds and actions."""

    def __init__(self, num_envs: int, sticky_action_prob: float, ramping: bool) -> None:
        self._sticky = sticky_action_prob
        self._ramping = ramping
        self._rows = np.arange(num_envs)
        self._last_action = np.zeros(num_envs, np.int64)
        self._rngs = [np.random.RandomState() for _ in range(num_envs)]  # unseeded, as MinAtar
        self._draws = np.empty((num_envs, 0))
        self._next_draw = 0
        self._pos = np.zeros(num_envs, np.int64)
        self._friendly = np.zeros((num_envs, 10, 10), bool)
        self._enemy = np.zeros((num_envs, 10, 10), bool)
        self._aliens = np.zeros((num_envs, 10, 10), bool)
        self._direction = np.zeros(num_envs, np.int64)
        self._move_interval = np.zeros(num_envs, np.int64)
        self._move_timer = np.zeros(num_envs, np.int64)
        self._alien_shot_timer = np.zeros(num_envs, np.int64)
        self._ramp_index = np.zeros(num_envs, np.int64)
        self._shot_timer = np.zeros(num_envs, np.int64)
        self.reset(self._rows)

    @property
    def ramp_index(self) -> np.ndarray:
        """Each game's difficulty level (`Env.difficulty_ramp`)."""
        return self._ramp_index.copy()

    def seed(self, seed: int) -> None:
        self._rngs = [np.random.RandomState(seed + i) for i in range(len(self._rows))]
        self._draws = np.empty((len(self._rows), 0))
        self._next_draw = 0

    def reset(self, envs: Indices) -> None:
        rows = np.asarray(envs, np.int64)
        self._pos[rows] = 5
        self._friendly[rows] = False
        self._enemy[rows] = False
        self._aliens[rows] = False
        self._aliens[rows[:, None, None], np.arange(4)[:, None], np.arange(2, 8)] = True
        self._direction[rows] = -1
        self._move_interval[rows] = ENEMY_MOVE_INTERVAL
        self._move_timer[rows] = ENEMY_MOVE_INTERVAL
        self._alien_shot_timer[rows] = ENEMY_SHOT_INTERVAL
        self._ramp_index[rows] = 0
        self._shot_timer[rows] = 0

    def _sticky_draws(self) -> np.ndarray:
        if self._next_draw == self._draws.shape[1]:
            self._draws = np.stack([rng.rand(STICKY_BLOCK) for rng in self._rngs])
            self._next_draw = 0
        self._next_draw += 1
        return self._draws[:, self._next_draw - 1]

    def act(self, actions: Indices) -> tuple[np.ndarray, np.ndarray]:
        """Game actions (0-5) -> rewards [B] and terminal flags [B], for games that are not over
        (`common.environments.envs` resets each game on the step it ends)."""
        rows, pos = self._rows, self._pos
        action = np.where(self._sticky_draws() < self._sticky, self._last_action, actions)
        self._last_action = action
        # The player: fire if the gun has cooled down, else move.
        fire = (action == FIRE) & (self._shot_timer == 0)
        self._friendly[rows[fire], 9, pos[fire]] = True
        self._shot_timer[fire] = SHOT_COOL_DOWN
        pos[action == LEFT] = np.maximum(0, pos[action == LEFT] - 1)
        pos[action == RIGHT] = np.minimum(9, pos[action == RIGHT] + 1)
        # Bullets: the player's move up a row, the aliens' down a row.
        self._friendly[:, :9] = self._friendly[:, 1:]
        self._friendly[:, 9] = False
        self._enemy[:, 1:] = self._enemy[:, :9]
        self._enemy[:, 0] = False
        terminal = self._enemy[rows, 9, pos] | self._aliens[rows, 9, pos]
        self._move_aliens(terminal)
        self._aliens_shoot()
        kills = self._aliens & self._friendly
        rewards = kills.sum(axis=(1, 2)).astype(np.float32)
        self._aliens &= ~kills
        self._friendly &= ~kills
        self._shot_timer -= self._shot_timer > 0
        self._move_timer -= 1
        self._alien_shot_timer -= 1
        # A cleared wave comes back, faster while ramping allows.
        cleared = ~self._aliens.any(axis=(1, 2))
        faster = cleared & (self._move_interval > 6) & self._ramping
        self._move_interval[faster] -= 1
        self._ramp_index[faster] += 1
        self._aliens[rows[cleared, None, None], np.arange(4)[:, None], np.arange(2, 8)] = True
        return rewards, terminal

    def _move_aliens(self, terminal: np.ndarray) -> None:
        """The aliens whose move timer ran out step sideways, or down a row (turning) at an edge."""
        moving = self._move_timer == 0
        if not moving.any():
            return
        aliens, direction = self._aliens, self._direction
        count = aliens.sum(axis=(1, 2))
        self._move_timer[moving] = np.minimum(count, self._move_interval)[moving]
        at_edge = (aliens[:, :, 0].any(axis=1) & (direction < 0)) | (
            aliens[:, :, 9].any(axis=1) & (direction > 0)
        )
        turn = moving & at_edge
        direction[turn] = -direction[turn]
        terminal |= turn & aliens[:, 9].any(axis=1)
        aliens[turn] = np.roll(aliens[turn], 1, axis=1)
        for step in (-1, 1):
            side = moving & ~turn & (direction == step)
            aliens[side] = np.roll(aliens[side], step, axis=2)
        terminal |= moving & aliens[self._rows, 9, self._pos]

    def _aliens_shoot(self) -> None:
        """Where the shot timer ran out, the lowest alien of the occupied column nearest the
        player (`Env._nearest_alien`: the nearer column first, the left one on a tie) shoots."""
        shooting = np.flatnonzero(self._alien_shot_timer == 0)
        if shooting.size == 0:
            return
        self._alien_shot_timer[shooting] = ENEMY_SHOT_INTERVAL
        aliens = self._aliens[shooting]  # [n, 10 rows, 10 columns]
        columns = np.arange(10)
        order = np.abs(columns - self._pos[shooting, None]) * 10 + columns
        column = np.where(aliens.any(axis=1), order, 1000).argmin(axis=1)
        in_column = aliens[np.arange(shooting.size), :, column]  # [n, 10 rows]
        row = np.where(in_column, columns, -1).max(axis=1)
        self._enemy[shooting, row, column] = True

    def states(self, out: np.ndarray, envs: Indices | None = None) -> None:
        """Writes the states of `envs` (all by default) into `out` [len(envs), 10, 10, 6] (bool):
        `Env.state`'s channels, cannon, alien, alien_left, alien_right, friendly and enemy
        bullets."""
        rows = self._rows if envs is None else np.asarray(envs, np.int64)
        aliens = self._aliens[rows]
        left = (self._direction[rows] < 0)[:, None, None]
        out[...] = False
        out[np.arange(len(rows)), 9, self._pos[rows], 0] = True
        out[..., 1] = aliens
        out[..., 2] = aliens & left
        out[..., 3] = aliens & ~left
        out[..., 4] = self._friendly[rows]
        out[..., 5] = self._enemy[rows]

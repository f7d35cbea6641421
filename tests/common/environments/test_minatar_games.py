"""`common.environments.minatar_games`: the batched Space Invaders against MinAtar's own objects
where random play seldom goes, a wave shot clear and the faster waves that follow (difficulty
ramping). `tests/common/environments/test_envs.py::test_minatar_equals_the_library` plays every
game through `common.environments.envs` beside the library for thousands of random steps."""

import numpy as np
import pytest

from common.environments import minatar_games


def load_state(batched, i, game) -> None:
    """Copies the state of space_invaders.py's `Env` `game` into environment i of `batched`."""
    batched._pos[i] = game.pos
    batched._friendly[i] = game.f_bullet_map.astype(bool)
    batched._enemy[i] = game.e_bullet_map.astype(bool)
    batched._aliens[i] = game.alien_map.astype(bool)
    batched._direction[i] = game.alien_dir
    batched._move_interval[i] = game.enemy_move_interval
    batched._move_timer[i] = game.alien_move_timer
    batched._alien_shot_timer[i] = game.alien_shot_timer
    batched._ramp_index[i] = game.ramp_index
    batched._shot_timer[i] = game.shot_timer


@pytest.mark.parametrize("ramping", [True, False])
def test_a_cleared_wave_and_the_faster_ones_after_it_equal_the_library(ramping):
    num_envs, steps = 4, 400
    library = minatar_games.LibraryGames("space_invaders", num_envs, 0.1, ramping)
    batched = minatar_games.BatchedSpaceInvaders(num_envs, 0.1, ramping)
    library.seed(7)
    batched.seed(7)
    library.reset(range(num_envs))
    batched.reset(range(num_envs))
    for i, env in enumerate(library._envs):
        game = env.env
        # One alien left, a friendly bullet below it that reaches it on the next step, at a
        # different column and move timer per environment; the wave before was already faster.
        game.alien_map[:] = 0
        game.alien_map[3, 2 + i] = 1
        game.f_bullet_map[4, 2 + i] = 1
        game.alien_move_timer = 3 + i
        game.enemy_move_interval = 10
        game.ramp_index = 2
        load_state(batched, i, game)
    rng = np.random.default_rng(0)
    library_states = np.empty((num_envs, 10, 10, 6), bool)
    batched_states = np.empty((num_envs, 10, 10, 6), bool)
    ramps, total_reward = [], 0.0
    for t in range(steps):
        actions = rng.integers(0, 6, num_envs).tolist()
        library_reward, library_terminal = library.act(actions)
        batched_reward, batched_terminal = batched.act(actions)
        np.testing.assert_array_equal(batched_reward, library_reward, err_msg=f"step {t}")
        np.testing.assert_array_equal(batched_terminal, library_terminal, err_msg=f"step {t}")
        library.states(library_states)
        batched.states(batched_states)
        np.testing.assert_array_equal(batched_states, library_states, err_msg=f"step {t}")
        ramp = [env.env.difficulty_ramp() for env in library._envs]
        np.testing.assert_array_equal(batched.ramp_index, ramp)
        if t == 0:
            ramps = ramp
        total_reward += float(library_reward.sum())
        ended = np.flatnonzero(library_terminal)
        library.reset(ended)
        batched.reset(ended)
    # Every environment shot its last alien on the first step: a new wave, faster if ramping.
    assert ramps == ([3] * num_envs if ramping else [2] * num_envs)
    assert total_reward > num_envs  # more aliens shot after the wave


def test_sticky_draws_come_from_each_environments_own_generator():
    """Actions of one environment never depend on the others': env i of a batch seeded s plays
    as env 0 of a batch of one seeded s + i, across more steps than one block of draws."""
    steps = 3 * minatar_games.STICKY_BLOCK
    rng = np.random.default_rng(1)
    actions = rng.integers(0, 6, (steps, 3))
    pair = minatar_games.BatchedSpaceInvaders(3, 0.1, True)
    alone = minatar_games.BatchedSpaceInvaders(1, 0.1, True)
    pair.seed(4)
    alone.seed(6)
    states, state_alone = np.empty((3, 10, 10, 6), bool), np.empty((1, 10, 10, 6), bool)
    for row in actions:
        _, terminal = pair.act(row)
        _, terminal_alone = alone.act(row[2:])
        pair.states(states)
        alone.states(state_alone)
        np.testing.assert_array_equal(states[2], state_alone[0])
        pair.reset(np.flatnonzero(terminal))
        alone.reset(np.flatnonzero(terminal_alone))

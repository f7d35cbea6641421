"""Tests for common/envs.py: protocols, backend equivalence, life loss, scores, errors, CartPole."""

import dataclasses

import ale_py.roms
import numpy as np
import pytest

from common.envs import PROTOCOLS, StepResult, atari_game, canonical_env, make_env


def _run(env, actions):
    """Steps `env` (reset first) through actions [T, B]; returns the StepResults, stacked."""
    first = env.reset()
    results = [env.step(a) for a in actions]
    env.close()
    return first, StepResult(*(np.stack(field) for field in zip(*results)))


def _random_actions(num_actions, steps, num_envs, seed=0):
    return np.random.default_rng(seed).integers(0, num_actions, (steps, num_envs)).astype(np.int32)


def test_vector_and_gym_backends_are_frame_identical_without_noop_starts():
    # The backends agree exactly when no RNG is involved: no no-op starts (their counts come
    # from different generators, see the envs.py docstring) and no sticky actions. A short
    # episode cap makes the run cross life losses, game overs and truncations.
    protocol = dataclasses.replace(PROTOCOLS["impala"], noop_max=0, max_episode_frames=800)
    actions = _random_actions(4, 400, 2)  # Breakout's minimal action set has 4 actions
    first_v, vec = _run(make_env("Breakout", 2, 7, protocol, "vector"), actions)
    first_g, gym = _run(make_env("Breakout", 2, 7, protocol, "gym"), actions)

    np.testing.assert_array_equal(first_v, first_g)
    for field in StepResult._fields:
        np.testing.assert_array_equal(getattr(vec, field), getattr(gym, field), err_msg=field)
    game_over = vec.terminated & ~np.isnan(vec.episode_return)
    assert game_over.any() and vec.truncated.any()  # both kinds of game end happened
    assert (vec.terminated & np.isnan(vec.episode_return)).any()  # and life losses

    # final_observation (equal on both backends, above) is the frame stack the game ended on:
    # the previous observation shifted by one new frame, not the next game's zero-padded stack.
    game_end = game_over | vec.truncated
    np.testing.assert_array_equal(vec.final_observation[~game_end], vec.observation[~game_end])
    for t, b in zip(*np.nonzero(game_end)):
        final, previous = vec.final_observation[t, b], vec.observation[t - 1, b]
        np.testing.assert_array_equal(final[..., :-1], previous[..., 1:])
        assert not np.array_equal(final, vec.observation[t, b])
        assert not vec.observation[t, b, ..., 0].any()  # the new game's padded stack


def _noop_counts(backend: str, resets: int) -> np.ndarray:
    """Raw frames one Pong env (noop_max=30) has run right after each of `resets` resets."""
    env = make_env("Pong", 1, 0, "impala", backend)
    env.reset()
    if backend == "vector":
        ale_env = env._backend._env
        counts = [ale_env.reset()[1]["episode_frame_number"][0] for _ in range(resets)]
    else:
        gym_env, counts = env._backend._envs[0], []
        for _ in range(resets):
            gym_env.reset()
            counts.append(gym_env.unwrapped.ale.getEpisodeFrameNumber())
    env.close()
    return np.asarray(counts)


def test_noop_start_ranges_of_the_two_backends():
    # The papers' convention (impala.md §4.3 "[1, 30]") is what the gym backend draws, and so
    # what the evaluator uses; ale-py's C++ batch draws 0..29 (documented in common.envs).
    gym, vector = _noop_counts("gym", 300), _noop_counts("vector", 300)
    assert gym.min() == 1 and gym.max() == 30 and len(np.unique(gym)) == 30
    assert vector.min() == 0 and vector.max() == 29 and len(np.unique(vector)) == 30


@pytest.mark.parametrize("backend", ["vector", "gym"])
def test_same_seed_and_actions_give_the_same_run(backend):
    actions = _random_actions(6, 60, 2)
    runs = [_run(make_env("Pong", 2, 3, "impala", backend), actions) for _ in range(2)]
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    for field in StepResult._fields:
        np.testing.assert_array_equal(getattr(runs[0][1], field), getattr(runs[1][1], field))


@pytest.mark.parametrize("backend", ["vector", "gym"])
@pytest.mark.parametrize("protocol, num_actions", [("impala", 6), ("dice_gdi_lbc", 18)])
def test_protocol_observations_and_action_sets(backend, protocol, num_actions):
    # impala: Pong's minimal action set (6) [impala.md §3.5]; DiCE/GDI/LBC: full set (18).
    env = make_env("ALE/Pong-v5", 3, 0, protocol, backend)
    assert env.num_envs == 3 and env.num_actions == num_actions
    assert env.observation_shape == (84, 84, 4) and env.observation_dtype == np.uint8
    obs = env.reset()
    assert obs.shape == (3, 84, 84, 4) and obs.dtype == np.uint8 and obs.flags.c_contiguous
    result = env.step(np.zeros(3, np.int32))
    env.close()
    assert result.observation.shape == (3, 84, 84, 4)
    assert result.reward.dtype == result.raw_reward.dtype == np.float32
    assert result.terminated.dtype == result.truncated.dtype == bool
    assert result.episode_return.dtype == np.float32
    assert result.episode_length.dtype == np.int32


@pytest.mark.parametrize("backend", ["vector", "gym"])
def test_frame_stack_is_channels_last_oldest_to_newest(backend):
    # Each step shifts the stack by one frame: the newest frame is the last channel.
    _, run = _run(make_env("MsPacman", 2, 0, "impala", backend), _random_actions(9, 12, 2))
    np.testing.assert_array_equal(run.observation[1:, ..., :-1], run.observation[:-1, ..., 1:])
    assert len({frame.tobytes() for frame in run.observation[:, 0, ..., -1]}) > 6  # it moves


def test_protocol_settings_cite_the_papers():
    impala, dice = PROTOCOLS["impala"], PROTOCOLS["dice_gdi_lbc"]
    # Table G.1 / A18
    assert (impala.frame_skip, impala.screen_size, impala.frame_stack) == (4, 84, 4)
    assert impala.reward_clip == 1.0 and impala.terminal_on_life_loss
    assert impala.repeat_action_probability == 0.0 and not impala.full_action_space
    # dice.md Table 5, gdi.md Table 5, lbc.md Table 3
    assert (dice.frame_skip, dice.screen_size, dice.frame_stack, dice.noop_max) == (4, 84, 4, 30)
    assert dice.reward_clip is None and not dice.terminal_on_life_loss
    assert dice.repeat_action_probability == 0.0 and dice.full_action_space


def test_life_loss_clipping_and_raw_whole_game_score():
    # MsPacman: pellets score 10 (clipping shows), 3 lives, a random game ends in 300-550 steps.
    # The impala protocol with the full action set differs from dice_gdi_lbc only in life-loss
    # termination and reward clipping, so both see the same frames for the same seed/actions.
    impala_full = dataclasses.replace(PROTOCOLS["impala"], full_action_space=True)
    dice = PROTOCOLS["dice_gdi_lbc"]
    assert (
        dataclasses.replace(
            impala_full, name=dice.name, terminal_on_life_loss=False, reward_clip=None
        )
        == dice
    )
    actions = _random_actions(18, 600, 2)
    _, imp = _run(make_env("ms_pacman", 2, 11, impala_full), actions)
    _, dic = _run(make_env("MsPacman", 2, 11, "dice_gdi_lbc"), actions)

    np.testing.assert_array_equal(imp.observation, dic.observation)
    np.testing.assert_array_equal(imp.raw_reward, dic.raw_reward)
    assert imp.raw_reward.max() >= 10
    np.testing.assert_array_equal(imp.reward, np.clip(imp.raw_reward, -1, 1))  # Table G.1
    np.testing.assert_array_equal(dic.reward, dic.raw_reward)  # "Reward Clip: No"

    game_end = ~np.isnan(dic.episode_return)
    assert game_end.any()
    np.testing.assert_array_equal(dic.terminated, game_end)  # life loss is not an episode end
    life_loss = imp.terminated & ~game_end
    assert life_loss.any()  # impala ends learning episodes on life loss ...
    assert imp.terminated[game_end].all()
    assert (life_loss.sum(0) <= 2 * (game_end.sum(0) + 1)).all()  # at most 2 per 3-life game
    np.testing.assert_array_equal(imp.episode_return, dic.episode_return)  # ... scores games

    for b in range(2):  # the reported score is the raw sum over the whole game, not clipped
        t_end = np.flatnonzero(game_end[:, b])[0]
        assert imp.episode_return[t_end, b] == imp.raw_reward[: t_end + 1, b].sum()
        assert imp.episode_return[t_end, b] > imp.reward[: t_end + 1, b].sum()
        assert imp.episode_length[t_end, b] == t_end + 1
    assert (imp.episode_length[~game_end] == 0).all()


def test_game_names_resolve_to_rom_ids():
    for name in ["Pong", "pong", "ALE/Pong-v5"]:
        assert atari_game(name) == "pong"
    for name in ["MsPacman", "ms_pacman", "ALE/MsPacman-v5"]:
        assert atari_game(name) == "ms_pacman"
    assert atari_game("TicTacToe3D") == "tic_tac_toe_3d"
    assert atari_game("NotAGame") is None
    for name in ["Pong-v4", "PongNoFrameskip-v4", "PongDeterministic-v4", "pongnoframeskip-v4"]:
        assert atari_game(name) == "pong"


def test_canonical_env_names():
    for name in ["CartPole", "CartPole-v1", "cartpole", "CARTPOLE"]:
        assert canonical_env(name) == "CartPole"
    for name in ["Pong", "pong", "ALE/Pong-v5", "PongNoFrameskip-v4", "Pong-v4"]:
        assert canonical_env(name) == "Pong"
    for name in ["MsPacman", "ms_pacman", "ALE/MsPacman-v5"]:
        assert canonical_env(name) == "MsPacman"
    assert canonical_env("tic_tac_toe_3d") == "TicTacToe3D"
    for name in ["Pongo", "CartPole-v0", "", "ALE/"]:
        assert canonical_env(name) is None
    # Every game's canonical name is itself canonical, and names the same ROM.
    for rom in ale_py.roms.get_all_rom_ids():
        name = canonical_env(rom)
        assert canonical_env(name) == name and atari_game(name) == rom


def test_unknown_names_raise_listing_the_valid_ones():
    with pytest.raises(ValueError, match="unknown env 'NotAGame'.*ms_pacman.*zaxxon"):
        make_env("NotAGame", 1, 0)
    with pytest.raises(ValueError, match="unknown protocol 'r2d2'.*dice_gdi_lbc.*impala"):
        make_env("Pong", 1, 0, protocol="r2d2")
    with pytest.raises(ValueError, match="unknown backend 'envpool'.*vector.*gym"):
        make_env("Pong", 1, 0, backend="envpool")


def test_bad_actions_raise():
    env = make_env("Pong", 2, 0)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(2, np.int32))
    env.reset()
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(3, np.int32))
    with pytest.raises(ValueError, match=r"\[0, 6\)"):
        env.step(np.array([0, 6], np.int32))
    env.close()


def test_cartpole_batches_and_resets_on_the_same_step():
    env = make_env("CartPole", 4, 0)
    assert env.num_actions == 2 and env.observation_shape == (4,)
    assert env.observation_dtype == np.float32
    first, run = _run(env, _random_actions(2, 200, 4))
    assert first.shape == (4, 4) and run.observation.dtype == np.float32
    np.testing.assert_array_equal(run.reward, 1.0)
    ended = run.terminated | run.truncated
    assert ended.sum() >= 4  # random play drops the pole within ~20 steps
    # The observation on an ending step is the next episode's first: CartPole starts every
    # state variable in U(-0.05, 0.05).
    assert (np.abs(run.observation[ended]) <= 0.05).all()
    np.testing.assert_array_equal(run.episode_return[ended], run.episode_length[ended])
    for b in range(4):  # episodes tile the steps: each length counts from the previous end
        ends = np.flatnonzero(ended[:, b])
        np.testing.assert_array_equal(run.episode_length[ends, b], np.diff(ends, prepend=-1))
    assert np.isnan(run.episode_return[~ended]).all()

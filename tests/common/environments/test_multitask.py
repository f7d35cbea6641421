"""common.environments.multitask and the names of several games: a multi-task batch is each
game's own batch, side by side, its frames padded to one shape."""

import dataclasses

import numpy as np
import pytest

from common.environments import env_names, envs, multitask, protocols

BREAKOUT, SEAQUEST = "MinAtar/Breakout-v0", "MinAtar/Seaquest-v0"


def test_environments_are_split_evenly_the_first_games_one_more():
    assert multitask.split(7, 3) == [3, 2, 2]
    assert multitask.split(6, 3) == [2, 2, 2]
    assert multitask.split(3, 3) == [1, 1, 1]
    with pytest.raises(ValueError, match="2 environments cannot play 3 games"):
        multitask.split(2, 3)


def test_names_of_several_games():
    mixed = "breakout-minatar, minatar:seaquest"
    assert env_names.games(mixed) == ("breakout-minatar", "minatar:seaquest")
    assert env_names.canonical_env(mixed) == f"{BREAKOUT},{SEAQUEST}"
    assert env_names.canonical_env("pong,ms_pacman") == "Pong,MsPacman"
    assert env_names.canonical_env("pong,no_such_game") is None
    assert env_names.env_family(f"{BREAKOUT},{SEAQUEST}") == "minatar"
    assert env_names.env_family("Pong,MsPacman") == "atari"
    assert env_names.is_minatar(f"{BREAKOUT},{SEAQUEST}")
    assert not env_names.is_minatar(f"{BREAKOUT},Pong")
    assert env_names.hns_game("Pong,MsPacman") is None and env_names.hns_game("pong") == "Pong"
    with pytest.raises(ValueError, match="names MinAtar/Breakout-v0 twice: list each game once"):
        env_names.canonical_env(f"{BREAKOUT},breakout-minatar")
    with pytest.raises(ValueError, match="mixes families .*MinAtar or all Atari"):
        env_names.canonical_env(f"{BREAKOUT},Pong")


def test_a_multitask_batch_is_each_games_batch_side_by_side():
    # Environments 0-2 play Breakout (4 channels) seeded 5, 6, 7; 3-4 play Seaquest (10 channels)
    # seeded 8, 9: the same games, step for step, as those batches made alone, Breakout's frames
    # padded with six zero channels.
    seed, steps = 5, 400
    batch = envs.make_env(f"{BREAKOUT},{SEAQUEST}", 5, seed)
    alone = [envs.make_env(BREAKOUT, 3, seed), envs.make_env(SEAQUEST, 2, seed + 3)]
    assert batch.games == (BREAKOUT, SEAQUEST)
    np.testing.assert_array_equal(batch.tasks, [0, 0, 0, 1, 1])
    assert (batch.num_actions, batch.observation_shape) == (6, (10, 10, 10))
    assert batch.observation_dtype == np.uint8

    def padded(breakout, seaquest):
        out = np.zeros((5, 10, 10, 10), np.uint8)
        out[:3, ..., :4], out[3:] = breakout, seaquest
        return out

    np.testing.assert_array_equal(batch.reset(), padded(*(env.reset() for env in alone)))
    rng = np.random.default_rng(0)
    games_ended = 0
    for _ in range(steps):
        actions = rng.integers(0, 6, size=5)
        result = batch.step(actions)
        parts = [alone[0].step(actions[:3]), alone[1].step(actions[3:])]
        np.testing.assert_array_equal(result.observation, padded(*(p.observation for p in parts)))
        np.testing.assert_array_equal(
            result.final_observation, padded(*(p.final_observation for p in parts))
        )
        for field in ("reward", "raw_reward", "terminated", "truncated", "episode_length"):
            np.testing.assert_array_equal(
                getattr(result, field), np.concatenate([getattr(p, field) for p in parts])
            )
        np.testing.assert_array_equal(
            result.episode_return, np.concatenate([p.episode_return for p in parts])
        )
        games_ended += int((~np.isnan(result.episode_return)).sum())
    assert games_ended > 0  # the comparison went through game ends and resets
    for env in [batch, *alone]:
        env.close()


def test_games_one_network_cannot_share_are_refused_in_one_line():
    with pytest.raises(ValueError, match=r"action sets differ \(MinAtar/Breakout-v1: 3, "):
        envs.make_env("MinAtar/Breakout-v1,MinAtar/Asterix-v1", 2, 0)
    with pytest.raises(ValueError, match="at least one environment per game"):
        envs.make_env(f"{BREAKOUT},{SEAQUEST}", 1, 0)
    with pytest.raises(ValueError, match="unknown env 'no_such_game'"):
        envs.make_env("pong,no_such_game", 2, 0)


def test_atari_games_share_a_batch_under_the_full_action_set():
    with pytest.raises(ValueError, match=r"\(Pong: 6, Breakout: 4\).*--full_action_set"):
        envs.make_env("Pong,Breakout", 2, 0, "impala")
    full = dataclasses.replace(protocols.PROTOCOLS["impala"], full_action_space=True)
    batch = envs.make_env("Pong,Breakout", 4, 0, full)
    assert (batch.num_actions, batch.observation_shape) == (18, (84, 84, 4))
    np.testing.assert_array_equal(batch.tasks, [0, 0, 1, 1])
    assert batch.reset().shape == (4, 84, 84, 4)
    batch.close()

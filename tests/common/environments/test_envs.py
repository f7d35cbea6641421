"""Tests for common/environments/envs.py: protocols, backend equivalence, life loss, scores, errors,
CartPole, MinAtar (names, families, equality with the library, seeds, rendering)."""

import dataclasses
import inspect

import ale_py.roms
import minatar
import numpy as np
import pytest


from common.environments import recording

from common.environments import protocols

from common.environments import env_names
from common.environments.envs import StepResult, make_env
from common.environments.protocols import PROTOCOLS
from common.environments.env_names import atari_game, canonical_env


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
        gym_env, counts = env._backend.envs[0], []
        for _ in range(resets):
            gym_env.reset()
            counts.append(gym_env.unwrapped.ale.getEpisodeFrameNumber())
    env.close()
    return np.asarray(counts)


def test_noop_start_ranges_of_the_two_backends():
    # The papers' convention (IMPALA §5.3.2: "uniformly chosen from [1, 30]") is what the gym
    # backend draws, and so what the evaluator uses; ale-py's C++ batch draws 0..29 (documented in
    # common.environments.envs).
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
    # impala: Pong's minimal action set (6) [IMPALA App. G]; DiCE/GDI/LBC: full set (18).
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
    # IMPALA Table G.1; no sticky actions (docs/papers/impala.md#departures-from-the-paper)
    assert (impala.frame_skip, impala.screen_size, impala.frame_stack) == (4, 84, 4)
    assert impala.reward_clip == 1.0 and impala.terminal_on_life_loss
    assert impala.repeat_action_probability == 0.0 and not impala.full_action_space
    # DiCE Table 5, GDI Table 5, LBC Table 3
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


# ------------------------------------------------------------------------------------- MinAtar

# MinAtar's games: module name, gym id's game, channels (each game's `state_shape()`) and the size
# of its minimal action set (`minimal_action_set()`).
MINATAR = [
    ("asterix", "Asterix", 4, 5),
    ("breakout", "Breakout", 4, 3),
    ("freeway", "Freeway", 7, 3),
    ("seaquest", "Seaquest", 10, 6),
    ("space_invaders", "SpaceInvaders", 6, 4),
]


@pytest.mark.parametrize(
    "written, canonical",
    [
        ("MinAtar/Breakout-v0", "MinAtar/Breakout-v0"),
        ("MinAtar/Breakout-v1", "MinAtar/Breakout-v1"),
        ("breakout-minatar", "MinAtar/Breakout-v0"),
        ("Breakout-MinAtar", "MinAtar/Breakout-v0"),  # gymnax's spelling
        ("minatar:breakout", "MinAtar/Breakout-v0"),
        ("minatar/breakout", "MinAtar/Breakout-v0"),
        ("MINATAR/BREAKOUT-V1", "MinAtar/Breakout-v1"),
        ("minatar-space_invaders", "MinAtar/SpaceInvaders-v0"),
        ("MinAtar/space_invaders", "MinAtar/SpaceInvaders-v0"),
        ("minatar:spaceinvaders-v1", "MinAtar/SpaceInvaders-v1"),
        ("space_invaders-minatar", "MinAtar/SpaceInvaders-v0"),
        ("SpaceInvaders-MinAtar-v1", "MinAtar/SpaceInvaders-v1"),
        ("MinAtar/Asterix-v0", "MinAtar/Asterix-v0"),
        ("minatar_freeway", "MinAtar/Freeway-v0"),
        ("Seaquest-MinAtar", "MinAtar/Seaquest-v0"),
    ],
)
def test_minatar_names_as_people_write_them(written, canonical):
    assert canonical_env(written) == canonical
    assert canonical_env(canonical) == canonical
    assert env_names.env_family(written) == "minatar" and env_names.is_minatar(written)


def test_minatar_gym_ids_of_every_game_are_canonical():
    for game, name, _, _ in MINATAR:
        for version in (0, 1):
            gym_id = f"MinAtar/{name}-v{version}"  # as MinAtar's gym.py registers them
            assert canonical_env(gym_id) == gym_id
            assert env_names.minatar_game(gym_id) == (game, version)
            assert canonical_env(f"minatar:{game}-v{version}") == gym_id
        assert env_names.minatar_game(name) is None  # no "minatar" in it: the Atari game
        assert env_names.env_family(name) == "atari"


@pytest.mark.parametrize(
    "name", ["MinAtar/Pong-v0", "pong-minatar", "MinAtar/Breakout-v2", "minatar"]
)
def test_bad_minatar_names_raise_one_line_listing_the_games(name):
    games = "asterix, breakout, freeway, seaquest, space_invaders"
    for call in (canonical_env, env_names.env_family, lambda n: make_env(n, 1, 0)):
        with pytest.raises(ValueError) as error:
            call(name)
        message = str(error.value)
        assert "\n" not in message and repr(name) in message and games in message, message
    assert not env_names.is_minatar(name)


def test_env_families_frames_per_step_and_hns_games():
    assert [
        env_names.env_family(n) for n in ("cartpole", "PongNoFrameskip-v4", "breakout-minatar")
    ] == [
        "cartpole",
        "atari",
        "minatar",
    ]
    assert set(env_names.FAMILIES) == {"cartpole", "atari", "minatar"}
    assert not env_names.is_minatar("Breakout") and not env_names.is_minatar("CartPole")
    # MinAtar repeats no action: one agent step is one frame (as on CartPole).
    assert protocols.frames_per_step("MinAtar/Breakout-v0") == 1
    assert protocols.frames_per_step("MinAtar/SpaceInvaders-v1", PROTOCOLS["dice_gdi_lbc"]) == 1
    assert protocols.frames_per_step("CartPole") == 1 and protocols.frames_per_step("Breakout") == 4
    # Human-normalised scores exist for Atari only: not Atari Breakout's for MinAtar Breakout.
    assert env_names.hns_game("breakout") == "Breakout"
    assert (
        env_names.hns_game("MinAtar/Breakout-v0") is None and env_names.hns_game("CartPole") is None
    )
    with pytest.raises(ValueError, match="unknown env 'Pongo'"):
        env_names.env_family("Pongo")


def test_minatar_protocol_is_the_library_default():
    defaults = inspect.signature(minatar.Environment).parameters
    protocol = protocols.MINATAR_PROTOCOL
    assert protocol.sticky_action_prob == defaults["sticky_action_prob"].default == 0.1
    assert protocol.difficulty_ramping is defaults["difficulty_ramping"].default is True
    assert protocol.reward_clip is None and not protocol.terminal_on_life_loss
    assert (protocol.frame_skip, protocol.frame_stack, protocol.max_episode_frames) == (1, 1, None)


@pytest.mark.parametrize("game, name, channels, minimal", MINATAR, ids=[g[0] for g in MINATAR])
@pytest.mark.parametrize("version", [0, 1])
def test_minatar_observations_and_action_sets(game, name, channels, minimal, version):
    env = make_env(f"MinAtar/{name}-v{version}", 2, 0)
    assert env.num_envs == 2 and env.num_actions == (6 if version == 0 else minimal)
    assert env.observation_shape == (10, 10, channels) and env.observation_dtype == np.uint8
    obs = env.reset()
    assert obs.shape == (2, 10, 10, channels) and obs.dtype == np.uint8
    assert set(np.unique(obs)) <= {0, 1} and obs.any()
    result = env.step(np.full(2, env.num_actions - 1, np.int32))
    env.close()
    assert result.observation.shape == (2, 10, 10, channels)
    assert result.observation.dtype == result.final_observation.dtype == np.uint8
    assert result.reward.dtype == result.raw_reward.dtype == np.float32
    assert result.terminated.dtype == result.truncated.dtype == bool
    assert result.episode_return.dtype == np.float32
    assert result.episode_length.dtype == np.int32


def _library_run(game: str, seed: int, actions: np.ndarray, action_set):
    """The reference: MinAtar's own Environment objects seeded seed + i, agent action a played as
    action_set[a], reset when the game ends. Returns the first observations and [T, B] arrays of
    observations (after any reset), the states games ended on, rewards and terminals."""
    games = [minatar.Environment(game) for _ in range(actions.shape[1])]
    for i, env in enumerate(games):
        env.seed(seed + i)
        env.reset()
    first = np.stack([env.state() for env in games])
    observations, final_observations, rewards, terminals = [], [], [], []
    for row in actions:
        step = [[], [], [], []]
        for env, action in zip(games, row):
            reward, terminal = env.act(action_set[action])
            step[1].append(env.state())
            if terminal:
                env.reset()
            step[0].append(env.state())
            step[2].append(reward)
            step[3].append(terminal)
        for out, values in zip((observations, final_observations, rewards, terminals), step):
            out.append(np.stack(values) if isinstance(values[0], np.ndarray) else values)
    return first, *(np.asarray(x) for x in (observations, final_observations, rewards, terminals))


@pytest.mark.parametrize("game, name, channels, minimal", MINATAR, ids=[g[0] for g in MINATAR])
@pytest.mark.parametrize("version", [0, 1])
def test_minatar_equals_the_library(game, name, channels, minimal, version):
    # Freeway ends itself after 2500 frames: v0 runs past that; v1 checks the action mapping.
    steps = 2600 if version == 0 else 600
    env = make_env(f"MinAtar/{name}-v{version}", 3, 11)
    actions = _random_actions(env.num_actions, steps, 3, seed=version)
    action_set = list(range(6)) if version == 0 else minatar.Environment(game).minimal_action_set()
    assert env.num_actions == len(action_set)
    first, run = _run(env, actions)
    ref_first, ref_obs, ref_final, ref_reward, ref_terminal = _library_run(
        game, 11, actions, action_set
    )
    np.testing.assert_array_equal(first, ref_first)
    np.testing.assert_array_equal(run.observation, ref_obs)
    np.testing.assert_array_equal(run.final_observation, ref_final)
    np.testing.assert_array_equal(run.raw_reward, ref_reward)
    np.testing.assert_array_equal(run.reward, ref_reward)  # no clipping
    np.testing.assert_array_equal(run.terminated, ref_terminal)
    assert not run.truncated.any()  # no cap beyond the games' own ends
    if version == 0:
        assert ref_terminal.any(axis=0).all()  # every env's game ended at least once
    # episode_return / episode_length: the raw rewards and steps since the previous game end.
    for b in range(3):
        start = 0
        for t in range(steps):
            if ref_terminal[t, b]:
                assert run.episode_return[t, b] == ref_reward[start : t + 1, b].sum()
                assert run.episode_length[t, b] == t + 1 - start
                start = t + 1
            else:
                assert np.isnan(run.episode_return[t, b]) and run.episode_length[t, b] == 0


def test_minatar_seeds_make_runs_reproducible():
    actions = _random_actions(6, 300, 2)
    first_a, run_a = _run(make_env("minatar:space_invaders", 2, 5), actions)
    first_b, run_b = _run(make_env("MinAtar/SpaceInvaders-v0", 2, 5), actions)
    np.testing.assert_array_equal(first_a, first_b)
    for field in StepResult._fields:
        np.testing.assert_array_equal(getattr(run_a, field), getattr(run_b, field), err_msg=field)
    _, run_c = _run(make_env("minatar:space_invaders", 2, 6), actions)
    assert not np.array_equal(run_a.observation, run_c.observation)
    # Env i is seeded with seed + i: env 1 of seed 5 is env 0 of seed 6, given its actions.
    _, run_d = _run(make_env("minatar:space_invaders", 1, 6), actions[:, 1:])
    np.testing.assert_array_equal(run_a.observation[:, 1], run_d.observation[:, 0])


def test_minatar_keeps_only_the_papers_reward_clipping_from_an_atari_protocol():
    # Seaquest pays up to 10 for surfacing with six divers; the game is scripted to pay 10, -3
    # and 0.5 so the clipping shows. IMPALA's protocol clips the reward the learner sees to
    # [-1, 1] (Table G.1); DiCE/GDI/LBC's does not; the score is the raw sum in both.
    paid = {"impala": [1.0, -1.0, 0.5], "dice_gdi_lbc": [10.0, -3.0, 0.5]}
    for protocol, expected in paid.items():
        env = make_env("MinAtar/Seaquest-v0", 1, 0, protocol)
        env.reset()
        script = iter([(10.0, False), (-3.0, False), (0.5, True)])
        env._games._envs[0].act = lambda action: next(script)
        results = [env.step(np.zeros(1, np.int32)) for _ in range(3)]
        np.testing.assert_array_equal([r.reward[0] for r in results], expected)
        np.testing.assert_array_equal([r.raw_reward[0] for r in results], [10.0, -3.0, 0.5])
        assert results[-1].episode_return[0] == 7.5
        env.close()


def test_minatar_ignores_the_atari_protocol_and_backend():
    actions = _random_actions(3, 100, 2)
    _, plain = _run(make_env("MinAtar/Breakout-v1", 2, 0), actions)
    _, atari_args = _run(make_env("MinAtar/Breakout-v1", 2, 0, "dice_gdi_lbc", "gym"), actions)
    np.testing.assert_array_equal(plain.observation, atari_args.observation)
    # A MinAtarProtocol does apply: without sticky actions the same seed plays differently.
    no_sticky = protocols.MinAtarProtocol(sticky_action_prob=0.0)
    _, other = _run(make_env("MinAtar/Breakout-v1", 2, 0, no_sticky), actions)
    assert not np.array_equal(plain.observation, other.observation)


def test_minatar_bad_actions_raise():
    env = make_env("MinAtar/Breakout-v1", 2, 0)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(2, np.int32))
    env.reset()
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(3, np.int32))
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(2, np.float32))
    for bad in ([0, 3], [-1, 0]):
        with pytest.raises(ValueError, match=r"\[0, 3\)"):
            env.step(np.array(bad, np.int32))
    env.close()


def test_render_rgb_colours_each_minatar_channel():
    channels = 10  # Seaquest's
    observation = np.zeros((10, 10, channels), np.uint8)
    for c in range(channels):
        observation[0, c, c] = 1  # cell (0, c) shows channel c alone
    observation[5, 5, [2, 7]] = 1  # two channels: the last one's colour, as MinAtar's display
    image = recording.render_rgb("MinAtar/Seaquest-v0", observation)
    assert image.shape == (160, 160, 3) and image.dtype == np.uint8
    colours = [tuple(image[8, 16 * c + 8]) for c in range(channels)]
    assert len(set(colours)) == channels and (0, 0, 0) not in colours
    assert tuple(image[5 * 16 + 3, 5 * 16 + 3]) == colours[7]
    assert not image[16:, :, :][np.arange(16, 160) // 16 != 5].any()  # black background
    # Each cell is a uniform 16 x 16 block.
    assert (image[:16, 32:48] == colours[2]).all()
    # A batch of observations, another scale; the real game's states.
    env = make_env("breakout-minatar", 3, 0)
    batch = env.reset()
    images = recording.render_rgb("breakout-minatar", batch, scale=4)
    assert images.shape == (3, 40, 40, 3) and images.dtype == np.uint8
    np.testing.assert_array_equal(images[1], recording.render_rgb("breakout-minatar", batch[1], 4))
    # Black, the paddle, the bricks (the ball and its trail start on a brick row, under it).
    assert len({tuple(p) for p in images.reshape(-1, 3)}) == 3
    # Atari: the newest frame in grey; CartPole has no image.
    frames = np.arange(84 * 84 * 4, dtype=np.uint32).reshape(84, 84, 4).astype(np.uint8)
    grey = recording.render_rgb("Pong", frames, scale=1)
    assert grey.shape == (84, 84, 3)
    np.testing.assert_array_equal(grey, np.repeat(frames[..., -1:], 3, axis=-1))
    with pytest.raises(ValueError, match="CartPole"):
        recording.render_rgb("CartPole", np.zeros((2, 4), np.float32))

"""common.environments.recording: evaluation games as GIFs (`--role=evaluate --record_dir=DIR`).

The file-name scheme; GIFs from synthetic frames read back with Pillow (frame count, size,
colours, timing) and are written atomically; the real evaluator
(`common.runtime.evaluation.Evaluator`) on MinAtar Space Invaders with a seeded random policy
records exactly the first N of its games, named with their returns, and plays the same games with
and without recording; Atari screens (the evaluator's gym backend) and grayscale frames (the vector
backend); the flag errors. Slow: the bad flags through `python -m impala.main`, and a short IMPALA
run on MinAtar Breakout evaluated with `--record_dir`.
"""

import csv
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from absl import flags
from PIL import Image


from common.runtime import evaluation
from common.experiments import cli
from common.experiments import dataclass_flags
from common.environments import envs
from common.environments import recording
from impala import builder as impala_builder

SAFE = re.compile(r"[A-Za-z0-9._-]+")


# ------------------------------------------------------------------------------ file names


def test_file_name_scheme():
    name = recording.file_name("impala", "MinAtar/Breakout-v0", 1_200_000, 3, 12.0)
    assert name == "impala_MinAtar-Breakout-v0_frames1200000_game03_score12.gif"
    assert recording.file_name("dice", "Pong", 400, 1, -21.0) == (
        "dice_Pong_frames400_game01_score-21.gif"
    )
    # An ablation as common.experiments.compare spells agents; a fractional score; game numbers as
    # wide as the number of games recorded.
    name = recording.file_name(
        recording.agent_name("gdi", "gdi_i3"), "MsPacman", 0, 7, 2.5, games=120
    )
    assert name == "gdi.gdi_i3_MsPacman_frames0_game007_score2.5.gif"
    assert recording.agent_name("impala", None) == "impala"
    # Only letters, digits, ".", "_" and "-": anything else becomes "-".
    name = recording.file_name("a b/c", "x:y", 1, 1, 1.0 / 3.0)
    assert name == "a-b-c_x-y_frames1_game01_score0.333.gif"
    assert SAFE.fullmatch(name)


def test_frame_durations_are_tenths_of_centiseconds_averaging_the_frame_rate():
    assert recording.frame_durations(6, 15) == [70, 60, 70, 70, 60, 70]
    assert sum(recording.frame_durations(15, 15)) == 1000  # 15 frames at 15 fps: one second
    assert recording.frame_durations(3, 10) == [100, 100, 100]


# --------------------------------------------------------------------------------- GIF files


def distinct_frames(count: int, height: int, width: int) -> list[np.ndarray]:
    """`count` RGB frames, each unlike the one before, with a few hundred colours in all."""
    rng = np.random.default_rng(0)
    colours = rng.integers(0, 256, (200, 3), dtype=np.uint8)
    return [colours[rng.integers(0, 200, (height, width))] for _ in range(count)]


def read_gif(path: str) -> tuple[list[np.ndarray], list[int]]:
    """(RGB frames, durations in ms) of a GIF, read back with Pillow."""
    frames, durations = [], []
    with Image.open(path) as gif:
        for index in range(gif.n_frames):
            gif.seek(index)
            frames.append(np.asarray(gif.convert("RGB")))
            durations.append(gif.info["duration"])
    return frames, durations


def test_gif_from_synthetic_frames_reads_back(tmp_path):
    frames = distinct_frames(7, height=20, width=30)
    path = str(tmp_path / "out" / "game.gif")  # the directory is made
    assert recording.write_gif(path, frames, fps=15) == path
    back, durations = read_gif(path)
    assert len(back) == 7
    assert all(frame.shape == (20, 30, 3) for frame in back)
    for original, read in zip(frames, back):
        np.testing.assert_array_equal(read, original)
    assert durations == recording.frame_durations(7, 15)
    with Image.open(path) as gif:
        assert gif.size == (30, 20) and gif.info["loop"] == 0  # loops forever
    assert os.listdir(tmp_path / "out") == ["game.gif"]  # no temporary file left


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600)])
def test_a_gif_gets_the_mode_of_a_new_file(umask, mode, tmp_path):
    """Written through a private temporary file, the GIF still ends with the umask's mode."""
    before = os.umask(umask)
    try:
        path = recording.write_gif(str(tmp_path / "game.gif"), distinct_frames(2, 4, 4), fps=10)
    finally:
        os.umask(before)
    assert os.stat(path).st_mode & 0o777 == mode


def test_gif_from_palette_indices_reads_back(tmp_path):
    palette = np.random.default_rng(1).integers(0, 256, (256, 3), dtype=np.uint8)
    indices = [np.full((4, 5), k, np.uint8) for k in (3, 200, 3, 17)]
    path = recording.write_gif(str(tmp_path / "p.gif"), indices, palette=palette)
    back, _ = read_gif(path)
    assert [tuple(frame[0, 0]) for frame in back] == [tuple(palette[k]) for k in (3, 200, 3, 17)]


def test_equal_frames_merge_into_one_gif_frame_showing_for_both(tmp_path):
    frames = distinct_frames(2, 6, 6)
    path = recording.write_gif(str(tmp_path / "m.gif"), [frames[0], frames[0], frames[1]], fps=10)
    back, durations = read_gif(path)
    assert len(back) == 2 and durations == [200, 100]


def test_a_failed_write_leaves_neither_the_gif_nor_a_temporary_file(tmp_path):
    frames = distinct_frames(3, 8, 8)
    bad = [frames[0], frames[1], np.zeros((8, 8), np.uint8)]  # not RGB
    with pytest.raises(ValueError, match="RGB frames"):
        recording.write_gif(str(tmp_path / "bad.gif"), bad)
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="at least one frame"):
        recording.write_gif(str(tmp_path / "empty.gif"), [])


def test_record_settings_check_their_values():
    with pytest.raises(ValueError, match=">= 1"):
        recording.RecordSettings("dir", 0, "impala")
    with pytest.raises(ValueError, match="empty"):
        recording.RecordSettings("", 1, "impala")


# ------------------------------------------------- the evaluator, MinAtar Space Invaders


class RandomPolicy:
    """`acting.Policy` with uniform actions from a generator seeded like the evaluator's."""

    def __init__(self, num_actions, observation_shape, observation_dtype, seed, greedy):
        self.num_actions = num_actions
        self.rng = np.random.default_rng(seed)

    def initial_state(self, batch_size):
        return ()

    def step(self, observation, prev_action, prev_reward, reset, state, behaviour=None):
        actions = self.rng.integers(0, self.num_actions, len(observation)).astype(np.int32)
        return actions, {}, state

    def set_weights(self, weights):
        pass


BREAKOUT = "MinAtar/Breakout-v0"
# Its random games last a few hundred steps and score 2 to 5: the scores tell games apart.
INVADERS = "MinAtar/SpaceInvaders-v0"


def evaluator_settings(env: str = INVADERS, num_envs: int = 3) -> evaluation.EvaluatorSettings:
    return evaluation.EvaluatorSettings(
        env=env,
        protocol="impala",
        num_envs=num_envs,
        round_episodes=num_envs,
        final_episodes=7,
        interval_s=0,
        greedy=False,
        seed=5,
    )


class StepLog:
    """Wraps a BatchedEnv: the length of each game that ends on each env, in order."""

    def __init__(self, env):
        self.env = env
        self.lengths = [[] for _ in range(env.num_envs)]

    def __getattr__(self, name):
        return getattr(self.env, name)

    def step(self, actions):
        result = self.env.step(actions)
        for i in np.flatnonzero(~np.isnan(result.episode_return)):
            self.lengths[i].append(int(result.episode_length[i]))
        return result


def play(tmp_path, name: str, record: recording.RecordSettings | None):
    """7 games of MinAtar Space Invaders on 3 envs (quotas 3, 2, 2) of weights published at 120
    frames: (scores, the lengths of each env's games, eval.csv's returns)."""
    logdir = str(tmp_path / name / "evaluate")
    evaluator = evaluation.Evaluator(evaluator_settings(), RandomPolicy, logdir)
    evaluator.env = StepLog(evaluator.env)
    try:
        scores = evaluator.play(120, [], 7, record=record)
    finally:
        evaluator.close()
    with open(os.path.join(logdir, "eval.csv")) as f:
        logged = [float(row["episode_return"]) for row in csv.DictReader(f)]
    return scores, evaluator.env.lengths, logged


def test_recording_n_of_m_games_writes_their_gifs_and_plays_the_same_games(tmp_path):
    directory = str(tmp_path / "gifs")
    record = recording.RecordSettings(directory, 4, "impala")
    scores, lengths, logged = play(tmp_path, "recorded", record)
    plain_scores, plain_lengths, _ = play(tmp_path, "plain", None)
    # Recording only reads: the same games, returns and eval.csv with and without it.
    assert scores == plain_scores == logged and lengths == plain_lengths
    assert len(scores) == 7 and len(set(scores[:4])) > 1
    # Games 1-3 are env 0's three (one after another), game 4 env 1's first (alongside).
    names = sorted(os.listdir(directory))
    assert names == [
        recording.file_name("impala", INVADERS, 120, k + 1, scores[k], games=4) for k in range(4)
    ]
    game_lengths = lengths[0][:3] + lengths[1][:1]
    first = envs.make_env(INVADERS, 3, 5).reset()  # the evaluator's envs start as these do
    for k, name in enumerate(names):
        frames, durations = read_gif(os.path.join(directory, name))
        assert all(frame.shape == (160, 160, 3) for frame in frames)
        # One frame per observation acted on plus the one the game ended on: its duration at
        # 15 fps (equal frames merge, the time they show does not change).
        assert sum(durations) == sum(recording.frame_durations(game_lengths[k] + 1))
        if k in (0, 3):  # a first game: it starts on the env's first observation
            expected = recording.render_rgb(INVADERS, first[0 if k == 0 else 1])
            np.testing.assert_array_equal(frames[0], expected)


def test_recording_more_games_than_the_evaluation_plays_records_them_all(tmp_path):
    directory = str(tmp_path / "gifs")
    scores, _, _ = play(tmp_path, "run", recording.RecordSettings(directory, 50, "impala"))
    names = sorted(os.listdir(directory))
    assert len(names) == 7
    assert [float(n.rsplit("_score", 1)[1].removesuffix(".gif")) for n in names] == scores


def test_cartpole_is_refused():
    with pytest.raises(ValueError, match="needs an Atari or MinAtar env"):
        recording.check_env("CartPole")
    env = envs.make_env("CartPole", 1, 0)
    with pytest.raises(ValueError, match="needs an Atari or MinAtar env"):
        recording.GameRecorder(recording.RecordSettings("d", 1, "x"), "CartPole", 0, env)


# ------------------------------------------------------------------------------------- Atari


def end_game_of_env_0(result: envs.StepResult, score: float) -> envs.StepResult:
    """`result` as if env 0's game had ended there with `score`."""
    episode_return = result.episode_return.copy()
    episode_return[0] = score
    return result._replace(episode_return=episode_return)


def test_atari_games_show_the_emulator_screens_of_the_gym_backend(tmp_path):
    env = envs.make_env("Pong", 2, 0, "impala", backend="gym")  # the evaluator's backend
    record = recording.RecordSettings(str(tmp_path), 2, "impala")
    recorder = recording.GameRecorder(record, "Pong", 400, env, log=None)
    interfaces = env.emulators()
    observation = env.reset()
    screens = [interfaces[0].getScreenRGB()]
    recorder.begin([1, 1], observation)
    for _ in range(3):
        result = env.step(np.zeros(2, np.int32))
        screens.append(interfaces[0].getScreenRGB())
        recorder.step(result)
    recorder.step(end_game_of_env_0(env.step(np.zeros(2, np.int32)), -21.0))
    env.close()
    (path,) = recorder.paths  # env 1's game has not ended: nothing written for it
    assert os.path.basename(path) == "impala_Pong_frames400_game01_score-21.gif"
    frames, durations = read_gif(path)
    assert frames[0].shape == (210, 160, 3)  # the real screen, in colour
    np.testing.assert_array_equal(frames[0], screens[0])
    np.testing.assert_array_equal(frames[-1], screens[-1])
    # The screens the agent acted on (the final one is gone with the same-step auto-reset).
    assert sum(durations) == sum(recording.frame_durations(4))


def test_atari_without_screens_shows_the_grayscale_frames(tmp_path):
    env = envs.make_env("Pong", 1, 0, "impala", backend="vector")
    assert env.emulators() is None
    record = recording.RecordSettings(str(tmp_path), 1, "impala")
    recorder = recording.GameRecorder(record, "Pong", 0, env, log=None)
    observation = env.reset()
    recorder.begin([1], observation)
    result = end_game_of_env_0(env.step(np.zeros(1, np.int32)), 0.0)
    recorder.step(result)
    env.close()
    frames, _ = read_gif(recorder.paths[0])
    scale = recording.ATARI_GRAY_SCALE
    expected = recording.render_rgb("Pong", observation[0], scale)
    assert frames[0].shape == (84 * scale, 84 * scale, 3)
    np.testing.assert_array_equal(frames[0], expected)
    last = recording.render_rgb("Pong", result.final_observation[0], scale)
    np.testing.assert_array_equal(frames[-1], last)


# ------------------------------------------------------------------------------------- flags


def plan(*argv: str) -> cli.Plan:
    flag_values = flags.FlagValues()
    cli.define_flags(impala_builder.ImpalaBuilder, flag_values)
    rest = dataclass_flags.parse_flags(["prog", *argv], flag_values)
    return cli.plan_from_flags(impala_builder.ImpalaBuilder, rest, flag_values)


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--role=actor", "--replay_address=h:1", "--record_dir=gifs"],
            "--record_dir=gifs records a final evaluation, which --role=actor does not play "
            "(allowed: --role=local, learner, evaluate)",
        ),
        (["--launcher=ray", "--record_dir=gifs"], "not --launcher=ray"),
        (
            ["--env=breakout-minatar", "--record_dir=gifs", "--eval_interval_s=0"],
            "--eval_interval_s=0 turns off",
        ),
        (["--role=evaluate", "--record_dir=gifs", "--record_games=0"], "--record_games=0 must"),
        (["--role=evaluate", "--record_games=-2"], "--record_games=-2 must be >= 1"),
        (["--role=evaluate", "--record_dir="], "--record_dir='' must name a directory"),
        (
            ["--role=evaluate", "--record_dir=gifs", "--env=CartPole"],
            "needs an Atari or MinAtar env",
        ),
    ],
)
def test_bad_record_flags_are_one_flag_error(argv, message):
    with pytest.raises(dataclass_flags.FlagError, match=re.escape(message)):
        plan(*argv)


def test_record_flags_and_their_defaults():
    settings = plan("--role=evaluate", "--env=breakout-minatar", "--record_dir=gifs").settings
    assert (settings.record_dir, settings.record_games) == ("gifs", 3)
    settings = plan("--role=evaluate", "--record_dir=g", "--record_games=5").settings
    assert settings.record_games == 5
    assert plan().settings.record_dir is None
    # A training run records its final evaluation.
    assert plan("--env=breakout-minatar", "--record_dir=g").settings.record_dir == "g"
    learner = ("--role=learner", "--replay_address=h:1", "--env=breakout-minatar")
    assert plan(*learner, "--record_dir=g").settings.record_dir == "g"


@pytest.mark.slow
def test_bad_record_flags_exit_on_one_line_writing_nothing(tmp_path):
    directory = tmp_path / "gifs"
    for argv in (
        ["--role=actor", "--replay_address=localhost:1", f"--record_dir={directory}"],
        ["--role=evaluate", f"--record_dir={directory}", "--record_games=0"],
        ["--role=evaluate", f"--record_dir={directory}", "--env=CartPole"],
    ):
        result = subprocess.run(
            [sys.executable, "-m", "impala.main", f"--logdir={tmp_path / 'run'}", *argv],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == dataclass_flags.EXIT_USAGE, result.stderr
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: --record_"), lines
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------------------ end to end

E2E_FLAGS = [
    f"--env={BREAKOUT}",
    "--num_actors=1",
    "--envs_per_actor=4",
    "--batch_size=4",
    "--queue_capacity=4",
    "--total_frames=1000",
    "--eval_interval_s=0",
    "--eval_episodes=2",
    "--log_interval_s=1",
]


@pytest.mark.slow
def test_a_training_run_records_its_final_evaluation(tmp_path):
    from tests.system_helpers import checkpoint_frames, run_to_completion

    logdir, directory = str(tmp_path / "run"), str(tmp_path / "gifs")
    os.makedirs(logdir)
    output = run_to_completion(
        logdir,
        "--eval_interval_s=1000",  # the final evaluation only
        f"--record_dir={directory}",
        "--record_games=1",
        flags=E2E_FLAGS,
        timeout_s=180,
    )
    assert f"final evaluation (2 episodes; the first 1 as GIFs into {directory})" in output
    with open(os.path.join(logdir, "eval.csv")) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 and int(rows[0]["frames"]) == checkpoint_frames(logdir)
    expected = recording.file_name(
        "impala", BREAKOUT, int(rows[0]["frames"]), 1, float(rows[0]["episode_return"])
    )
    assert os.listdir(directory) == [expected]
    gif_frames, _ = read_gif(os.path.join(directory, expected))
    assert gif_frames and gif_frames[0].shape == (160, 160, 3)


@pytest.mark.slow
def test_impala_on_minatar_breakout_then_evaluate_with_record_dir(tmp_path):
    from tests.system_helpers import checkpoint_step, run_to_completion

    logdir = str(tmp_path / "run")
    os.makedirs(logdir)
    run_to_completion(logdir, flags=E2E_FLAGS, timeout_s=180)
    step = checkpoint_step(logdir)
    assert step > 0
    directory = str(tmp_path / "gifs")
    output = run_to_completion(
        logdir,
        "--role=evaluate",
        f"--record_dir={directory}",
        "--record_games=2",
        flags=E2E_FLAGS,
        timeout_s=180,
    )
    assert f"recording the first 2 games as GIFs into {directory}" in output
    with open(os.path.join(logdir, "evaluate", "eval.csv")) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2
    frames = int(rows[0]["frames"])
    assert frames == step * 4 * 20  # the checkpoint's: batch 4 x unroll 20 frames a step
    expected = [
        recording.file_name("impala", BREAKOUT, frames, k + 1, float(row["episode_return"]))
        for k, row in enumerate(rows)
    ]
    assert sorted(os.listdir(directory)) == expected
    for name in expected:
        gif_frames, _ = read_gif(os.path.join(directory, name))
        assert gif_frames and gif_frames[0].shape == (160, 160, 3)

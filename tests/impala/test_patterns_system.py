"""IMPALA's recurrent learner on every replay pattern, through `python -m impala.main` (real
launcher, actor processes, Reverb server and learner), and a resume that restores the replay.

Budgets are a few learner steps: these runs prove the plumbing of each pattern end to end
(items arrive, the learner steps and checkpoints, every game is logged, replay is restored);
learning curves live in benchmarks/ and
docs/results/."""

import csv
import os

import pytest
import tensorflow as tf

from tests import system_helpers

pytestmark = pytest.mark.slow

FLAGS = [
    "--env=CartPole-v1",
    "--use_lstm",
    "--lstm_units=16",
    "--num_actors=1",
    "--envs_per_actor=8",
    "--batch_size=8",
    "--queue_capacity=8",
    "--unroll_length=10",
    "--replay_capacity=500",
    "--eval_interval_s=0",
    "--log_interval_s=1",
]


def run_to_budget(logdir, *extra, timeout_s=240) -> str:
    """Runs `python -m impala.main` with this module's flags to its frame budget; its output."""
    return system_helpers.run_to_completion(logdir, *extra, flags=FLAGS, timeout_s=timeout_s)


def episode_rows(logdir) -> list[dict]:
    with open(os.path.join(logdir, "episodes.csv")) as f:
        return list(csv.DictReader(f))


def check_six_steps_of(replay: str, logdir: str, output: str) -> None:
    assert f"[replay] {replay}:" in output  # capacity and memory estimate at start
    if replay == "sample_k":  # padded items count only their real steps: at least 6 steps
        assert system_helpers.checkpoint_step(logdir) >= 6
    else:
        assert system_helpers.checkpoint_step(logdir) == 6
    rows = episode_rows(logdir)
    assert rows and all(float(r["episode_return"]) == int(r["episode_length"]) for r in rows)
    frames = [int(r["frames"]) for r in rows]
    assert frames == sorted(frames)  # each game at the frames produced when it ended
    assert os.path.isdir(os.path.join(logdir, "replay")) == (replay != "queue")


@pytest.mark.parametrize(
    "replay, frames_per_step",
    [
        ("queue", 8 * 10),
        ("queue_with_replay", 4 * 10),  # half of each batch is replayed
        ("prioritized", 8 * 10),
        # sample_k: the first run of the resume test below.
    ],
)
def test_each_pattern_trains_through_the_launcher(replay, frames_per_step, tmp_path):
    logdir = str(tmp_path)
    output = run_to_budget(logdir, f"--replay={replay}", f"--total_frames={6 * frames_per_step}")
    check_six_steps_of(replay, logdir, output)


def test_sample_k_trains_and_resume_restores_the_replay_and_the_counters(tmp_path):
    logdir = str(tmp_path)
    budget = 6 * 40  # 8 x 10 steps per batch, each item trained on twice
    output = run_to_budget(logdir, "--replay=sample_k", "--burn_in=4", f"--total_frames={budget}")
    check_six_steps_of("sample_k", logdir, output)
    games = len(episode_rows(logdir))
    step = system_helpers.checkpoint_step(logdir)
    checkpoint = os.path.join(logdir, "checkpoints", f"ckpt-{step}")
    produced = int(tf.train.load_variable(checkpoint, "actor_frames/.ATTRIBUTES/VARIABLE_VALUE"))
    frames = int(tf.train.load_variable(checkpoint, "frames/.ATTRIBUTES/VARIABLE_VALUE"))
    assert frames >= budget
    assert produced > 0  # the frames the actors had reported by the checkpoint
    output = run_to_budget(
        logdir, "--replay=sample_k", "--burn_in=4", f"--total_frames={2 * budget}"
    )
    assert "Successfully loaded 4 tables" in output  # experience, params, reports, actor claims
    # The actors' frame count continues from the checkpoint instead of restarting at 0.
    resumed = f"resumed {checkpoint} (step {step}, {frames} frames; actors had produced"
    assert f"{resumed} {produced} frames)" in output
    assert system_helpers.checkpoint_step(logdir) > step
    # Games keep being appended (their reports may arrive after the learner's last step: the
    # reports table is checkpointed and read on the next resume, so none is lost).
    rows = episode_rows(logdir)
    assert len(rows) >= games
    assert all(int(r["frames"]) >= produced for r in rows[games:])

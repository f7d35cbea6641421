"""Chaos: for each replay pattern (IMPALA's queue, Reactor's prioritised sequences, DiCE's sample-k
items with bandits), a real run on CartPole is killed with SIGKILL, its whole process group at
once, at three random moments (the first before its first checkpoint, the others after one past
a random share of the budget), and resumed each time with the same command. It finishes; frames
never go back in any log; no game is counted twice; each resume restores the latest checkpoint,
with its replay and its bandits; no process outlives a kill."""

import collections
import os
import random
import re
import signal
import time

import numpy as np
import pytest
import tensorflow as tf

from common.runtime import learning
from common.runtime import runlog
from tests.system_helpers import (
    ONE_GRAPH,
    checkpoint_frames,
    checkpoint_step,
    episodes,
    finish,
    process_group,
    run_main,
    run_to_completion,
    wait_until,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

COMMON = [
    "--env=CartPole",
    "--num_actors=1",
    "--checkpoint_interval_s=2",
    "--log_interval_s=1",
    "--eval_interval_s=5",
    "--eval_round_episodes=2",
    "--eval_episodes=4",
]
# pattern: (module, flags, budget in frames, whether its replay is checkpointed)
PATTERNS = {
    # choice: IMPALA's 40K frames are acted on 16 environments (CartPole's games are short and
    # the learner keeps up): 24 s of acting where 4 environments took 36 s
    "queue": (
        "impala.main",
        ["--envs_per_actor=16", "--batch_size=4", "--queue_capacity=8"],
        40_000,
        False,
    ),
    "prioritised": (
        "reactor.main",
        [
            "--envs_per_actor=4",
            "--sequence_length=9",
            "--min_replay_size=40",
            "--target_update_period=4",
        ],
        1_500,
        True,
    ),
    "sample_k": (
        "dice.main",
        [
            "--envs_per_actor=4",
            "--lstm_units=16",
            "--burn_in=4",
            "--sequence_length=8",
            "--batch_size=8",
            "--replay_capacity=256",
            "--warmup_steps=2",
            ONE_GRAPH,
        ],
        6_000,
        True,
    ),
}


def actor_frames_at_checkpoint(logdir: str) -> int:
    path = tf.train.latest_checkpoint(os.path.join(logdir, "checkpoints"))
    return int(tf.train.load_variable(path, "actor_frames/.ATTRIBUTES/VARIABLE_VALUE"))


def keeps_actor_state(logdir: str) -> bool:
    """Whether the latest checkpoint under `logdir` keeps actor 0's bandits (`Learner.save`)."""
    path = tf.train.latest_checkpoint(os.path.join(logdir, "checkpoints"))
    return os.path.exists(os.path.join(learning.kept_behaviour(path), "actor_0.npz"))


def learner_points(logdir: str) -> list[int]:
    return [frames for frames, _ in runlog.read_scalars(logdir).get("progress/learner_step", [])]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_run_killed_three_times_at_random_finishes_counting_each_game_once(pattern, tmp_path):
    module, flags, budget, checkpointed = PATTERNS[pattern]
    flags = [*COMMON, *flags, f"--total_frames={budget}"]
    logdir = str(tmp_path)
    rng = random.Random(f"chaos {pattern}")
    for kill in range(3):
        before = checkpoint_step(logdir)
        process, output_path = run_main(logdir, flags=flags, module=module, start_new_session=True)
        try:
            if kill == 0:  # before the first checkpoint: TensorFlow alone takes longer to start
                time.sleep(rng.uniform(0.5, 4.0))
                assert checkpoint_step(logdir) == -1
            else:  # after a checkpoint of this process past a random share of the budget
                # (frames, not seconds: a run resumed late in its budget could finish unkilled)
                share = rng.uniform(0.1, 0.3) if kill == 1 else rng.uniform(0.4, 0.6)
                wait_until(
                    lambda: (
                        (
                            checkpoint_step(logdir) > before
                            and actor_frames_at_checkpoint(logdir) > 0
                            and checkpoint_frames(logdir) >= share * budget
                            # the actor saves its bandits every 2 s at a game's end: a process
                            # killed before its first save leaves a checkpoint with none, rightly
                            and (module != "dice.main" or keeps_actor_state(logdir))
                        )
                        or process.poll() is not None
                    ),
                    300,
                    f"a checkpoint past {share:.0%} of the budget",
                )
                assert process.poll() is None, open(output_path).read()
                time.sleep(rng.uniform(0.0, 1.0))
        finally:
            os.killpg(process.pid, signal.SIGKILL)
            output = finish(process, output_path, timeout_s=30)
        wait_until(lambda: not process_group(process.pid), 30, "every killed process gone")
        if kill > 0:
            assert f"resumed {logdir}/checkpoints/ckpt-{before}" in output or before == -1
    # The games the last checkpoint had seen stay as they were; the kill lost those after it.
    cut = actor_frames_at_checkpoint(logdir)
    seen = [row for row in episodes(logdir) if int(row[0]) <= cut]

    output = run_to_completion(logdir, flags=flags, module=module, timeout_s=600)
    latest = re.search(r"resumed \S+/ckpt-(\d+) ", output)
    assert latest and int(latest.group(1)) >= 1
    if checkpointed:
        assert "Successfully loaded" in output  # the replay of the checkpoint came back
    if module == "dice.main":
        assert f"behaviour state of ckpt-{latest.group(1)} restored (actor_0.npz" in output
    rows = episodes(logdir)
    assert seen and rows[: len(seen)] == seen and all(int(r[0]) > cut for r in rows[len(seen) :])
    # No game counted twice: each report adds the frames its actor produced since its last, so
    # a game logged again would sit at a later count; games ended on one actor step share one
    # (at most one game per env).
    envs = int(next(f for f in flags if f.startswith("--envs_per_actor=")).split("=")[1])
    produced = [int(row[0]) for row in rows]
    assert produced == sorted(produced) and max(collections.Counter(produced).values()) <= envs
    # Every log's frames only grow: the learner's points, the games, the evaluation rounds.
    points = learner_points(logdir)
    assert points == sorted(points) and points[-1] >= budget
    with open(os.path.join(logdir, runlog.EVAL_CSV)) as f:
        evaluated = [float(line.split(",")[0]) for line in f.readlines()[1:]]
    assert evaluated == sorted(evaluated) and evaluated[-1] >= budget
    assert np.isfinite(runlog.read_scalars(logdir)["loss/total"][-1][1])


STOP_MOMENTS = ("starting", "waiting", "training")


def catches_sigterm(pid: int) -> bool:
    """Whether process `pid` has a handler for SIGTERM (its SigCgt mask in /proc): a paper's
    main installs one first thing. Before it, in the imports of a few light modules, SIGTERM
    ends the process at once, with nothing started and nothing to save."""
    with open(f"/proc/{pid}/status") as f:
        caught = next(line for line in f if line.startswith("SigCgt:")).split()[1]
    return bool(int(caught, 16) >> (signal.SIGTERM - 1) & 1)


@pytest.mark.parametrize("moment", STOP_MOMENTS)
def test_a_sigterm_at_any_moment_ends_with_the_clean_line_and_a_checkpoint(moment, tmp_path):
    # `kill <pid>` on a DiCE run (sample-k replay, bandits): while it starts (TensorFlow importing,
    # the learner maybe not built yet), while its learner waits inside Reverb's sampler for the
    # replay to fill, and while it trains. Each ends as Ctrl-C does: one clean line, no
    # traceback, exit status 0, no process left, and a checkpoint once the learner exists.
    module, flags, budget, _ = PATTERNS["sample_k"]
    flags = [*COMMON, *flags, f"--total_frames={budget * 100}"]
    logdir = str(tmp_path)
    rng = random.Random(f"sigterm {moment}")
    process, output_path = run_main(logdir, flags=flags, module=module, start_new_session=True)
    try:
        if moment == "starting":  # once its main has begun, while TensorFlow imports
            wait_until(lambda: catches_sigterm(process.pid), 60, "the main to begin")
            time.sleep(rng.uniform(0.0, 2.0))
        elif moment == "waiting":
            wait_until(
                lambda: "waiting for experience" in open(output_path).read(),
                300,
                "the learner to wait for experience",
            )
        else:
            wait_until(lambda: checkpoint_step(logdir) > 0, 300, "a checkpoint of training")
            time.sleep(rng.uniform(0.0, 1.0))
        assert process.poll() is None, open(output_path).read()
        process.send_signal(signal.SIGTERM)
        output = finish(process, output_path, timeout_s=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    wait_until(lambda: not process_group(process.pid), 30, "every process of the run gone")
    assert process.returncode == 0, output
    clean = ["[launch] local interrupted; shut down", "[dice] interrupted; shut down"]
    assert any(line in output.splitlines() for line in clean), output
    assert "Traceback" not in output, output
    saved = re.findall(rf"checkpoint {re.escape(logdir)}/checkpoints/ckpt-(\d+) \(step", output)
    if moment != "starting":
        assert saved and int(saved[-1]) == checkpoint_step(logdir), output

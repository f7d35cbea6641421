"""common/runtime/learning.py: the generic learner loop on a real Reverb queue with synthetic
unrolls and actor reports: step and frame counters, publication, episodes.csv (each game once, at
the frames the actors had produced), checkpoint and resume."""

import csv
import os

import numpy as np
import pytest
import tensorflow as tf

from common.control import behaviour as behaviour_lib
from common.runtime import agent as agent_lib
from common.runtime import learning
from common.runtime import runlog
from common.replay import patterns
from common.replay import replay
from common.replay import parameters
from common.replay import reports

T, NUM_ENVS, STEPS_PER_ENV, BATCH = 5, 2, 16, 2
FRAMES_PER_STEP = BATCH * T * 4


class Toy(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable([0.0, 0.0])


def make_train_step(net):
    @tf.function
    def step(batch, frames):
        net.w.assign_add([tf.reduce_mean(batch["reward"]), 1.0])
        return {"loss/total": tf.reduce_sum(net.w), "frames_seen": tf.cast(frames, tf.float32)}

    return step


def episode_return_at(t: int) -> float:
    """Games end at t = 5, 10, 15 (raw score 10 + t); t = 5 and 10 are unroll boundaries."""
    return 10.0 + t if t > 0 and t % 5 == 0 else np.nan


PATTERN = patterns.Queue(length=T, capacity=100)
AGENT = agent_lib.Agent(
    replay=PATTERN, make_policy=None, make_learner=None, policy_extras=lambda spec: {}
)
SPEC = agent_lib.EnvSpec(2, (1,), np.uint8)


@pytest.fixture
def queue():
    server = replay.start_server(AGENT.tables(SPEC))
    address = replay.address_of(server)
    client = replay.connect(address)
    reporter = reports.Reporter(client, NUM_ENVS, frames_per_step=4)
    with PATTERN.writer(client, NUM_ENVS, flush_timeout_ms=1000) as writer:
        for t in range(STEPS_PER_ENV):
            writer.append(
                dict(
                    observation=np.zeros((NUM_ENVS, 1), np.uint8),
                    prev_action=np.zeros(NUM_ENVS, np.int32),
                    prev_reward=np.zeros(NUM_ENVS, np.float32),
                    reset=np.full(NUM_ENVS, t > 0 and t % 5 == 1),
                    action=np.zeros(NUM_ENVS, np.int32),
                    reward=np.full(NUM_ENVS, float(t), np.float32),
                    params_step=np.zeros(NUM_ENVS, np.int64),
                    truncation_value=np.zeros(NUM_ENVS, np.float32),
                )
            )
            ret = episode_return_at(t)
            reporter.step(
                np.full(NUM_ENVS, ret, np.float32),
                np.full(NUM_ENVS, 0 if np.isnan(ret) else 5, np.int32),
                # env 0's policy reports its game's mean behaviour entropy, env 1's none (NaN).
                behaviour_entropy=np.array([t / 10, np.nan]),
            )
    reporter.close()
    yield client, address, AGENT.signature(SPEC)
    server.stop()


def make_learner(
    logdir,
    queue,
    total_batches=100,
    log_interval_s=0.0,
    publish_lag=0,
    behaviour_names=(),
    max_checkpoints=3,
):
    client, address, signature = queue
    net = Toy()
    extra = tf.Variable(3.0)  # stands for an optimizer's state
    settings = learning.LearnerSettings(
        logdir=str(logdir),
        total_frames=total_batches * FRAMES_PER_STEP,
        frames_per_learner_step=FRAMES_PER_STEP,
        batch_size=BATCH,
        publish_interval=2,
        publish_lag=publish_lag,
        log_interval_s=log_interval_s,
        checkpoint_interval_s=1e9,
        sample_timeout_ms=500,
        max_checkpoints=max_checkpoints,
    )
    parts = learning.LearnerParts(
        make_train_step(net), {"network": net, "extra": extra}, net.variables
    )
    learner = learning.Learner(
        settings, parts, client, address, PATTERN, signature, behaviour_names
    )
    return learner, net, extra


def test_a_run_shorter_than_the_log_interval_logs_its_steps_when_it_ends(queue, tmp_path, capsys):
    learner, _, _ = make_learner(tmp_path, queue, log_interval_s=1e9)
    learner.run(max_steps=3)
    learner.close()
    # One line for the three steps: their mean, (0 + F + 2F) / 3 = F, and the step it ends at.
    assert learner.last_stats["frames_seen"] == FRAMES_PER_STEP
    assert "[learner] step 3" in capsys.readouterr().out
    logged = runlog.read_scalars(str(tmp_path))["frames_seen"]
    assert logged == [(3 * FRAMES_PER_STEP, FRAMES_PER_STEP)]


def test_lagged_weights_are_published_with_the_frames_of_their_step(queue, tmp_path):
    # Batches of uneven real steps (padded items count only those), so the frames of a step are
    # not step x frames per step: weights published publish_lag = 1 step old carry the frames
    # the learner had consumed when they were made.
    learner, net, _ = make_learner(tmp_path, queue, publish_lag=1)
    new_frames = iter([7, 11, 13])
    learner._new_frames = lambda steps: next(new_frames)
    learner.run(max_steps=3)  # the queue's 3 batches: frames 7, 18, 31; publishes at 0 and 2
    published = parameters.ParamsSubscriber(learner.client).latest()
    assert (published.step, published.frames) == (1, 7)  # step 2's publish, one step old
    # The weights as they were after step 1 (w[1] counts the steps), though two steps moved them.
    assert published.weights[0][1] == 1.0 and net.w.numpy()[1] == 3.0
    learner.publish(latest=True)  # the final evaluation's: step 3's own weights
    published = parameters.ParamsSubscriber(learner.client).latest()
    learner.close()
    assert (published.step, published.frames) == (3, 31)
    assert published.weights[0][1] == 3.0


def test_learner_counts_publishes_logs_each_episode_once_and_resumes(queue, tmp_path, capsys):
    learner, net, extra = make_learner(tmp_path, queue)
    assert not learner.restored_from
    learner.run(max_steps=3)  # 6 unrolls = 3 batches
    assert int(learner.step.numpy()) == 3
    assert int(learner.frames.numpy()) == 3 * FRAMES_PER_STEP
    np.testing.assert_allclose(net.w.numpy()[1], 3.0)
    # The train step sees the frame count before it (0, F, 2F); logged every step, the last is 2F.
    assert learner.last_stats["frames_seen"] == 2 * FRAMES_PER_STEP
    step, frames, _ = parameters.ParamsSubscriber(learner.client).latest()
    assert step == 2  # published at start (0) and every 2 steps
    assert frames == 2 * FRAMES_PER_STEP  # the learner's count when step 2's weights were made
    extra.assign(5.0)
    learner.save()
    learner.close()
    assert "[learner] step 3" in capsys.readouterr().out

    with open(tmp_path / "episodes.csv") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == runlog.EPISODES_HEADER
    # Every game the actor reported, once, whatever was trained on: ends at t = 5, 10, 15 per
    # env, each logged at the frames produced through its step (2 envs x 4 frames per step).
    assert [float(r["episode_return"]) for r in rows] == [15.0, 15.0, 20.0, 20.0, 25.0, 25.0]
    assert [int(r["frames"]) for r in rows] == [6 * 8] * 2 + [11 * 8] * 2 + [16 * 8] * 2
    assert {int(r["episode_length"]) for r in rows} == {5}
    assert learner.games_logged == 6
    assert int(learner.actor_frames.numpy()) == STEPS_PER_ENV * NUM_ENVS * 4
    # Only the games that came with a behaviour entropy log one, in order.
    logged = runlog.read_scalars(str(tmp_path))["behaviour/entropy"]
    assert [step for step, _ in logged] == [6 * 8, 11 * 8, 16 * 8]
    np.testing.assert_allclose([value for _, value in logged], [0.5, 1.0, 1.5])

    # A game logged after the checkpoint, by a process killed before its next one: the resumed
    # learner cuts it (the restored state has not seen it) and logs on from the checkpoint.
    killed = runlog.CsvLog(str(tmp_path / "episodes.csv"), runlog.EPISODES_HEADER)
    killed.append(STEPS_PER_ENV * NUM_ENVS * 4 + 8, 30.0, 5, 99.0)
    killed.close()

    resumed, net2, extra2 = make_learner(tmp_path, queue)
    assert resumed.restored_from
    with open(tmp_path / "episodes.csv") as f:
        assert list(csv.DictReader(f)) == rows
    assert "dropped 1 games of episodes.csv" in capsys.readouterr().out
    assert int(resumed.step.numpy()) == 3 and int(resumed.frames.numpy()) == 3 * FRAMES_PER_STEP
    assert int(resumed.actor_frames.numpy()) == STEPS_PER_ENV * NUM_ENVS * 4
    np.testing.assert_allclose(net2.w.numpy(), net.w.numpy())
    assert extra2.numpy() == 5.0
    assert resumed.elapsed_s.numpy() > 0
    resumed.close()


def test_a_checkpoint_keeps_the_behaviour_state_that_a_resume_restores(queue, tmp_path):
    states = tmp_path / "behaviour"
    states.mkdir()

    def write(name, value):
        np.savez(states / name, value=np.array(value))

    def read(name):
        with np.load(states / name) as saved:
            return float(saved["value"])

    write("actor_0.npz", 1.0)  # left by a run killed before its first checkpoint
    write("evaluator.npz", 7.0)
    learner, _, _ = make_learner(tmp_path, queue, behaviour_names=("eta",), max_checkpoints=2)
    # Starting over, the run has no bandits yet: the stale ones go, and the resume is marked.
    assert os.listdir(states) == [behaviour_lib.RESTORED]
    assert behaviour_lib.read_restored(str(states))[1] is None
    write("evaluator.npz", 7.0)
    for step, value in enumerate([1.0, 2.0, 3.0]):
        write("actor_0.npz", value)
        if step == 1:
            write("actor_1.npz", 5.0)  # an actor that saved its first state after checkpoint 0
        learner.step.assign(step)
        learner.save()
    kept = tmp_path / "checkpoints" / "behaviour"
    assert sorted(os.listdir(kept)) == ["ckpt-1", "ckpt-2"]  # as the checkpoints kept
    assert sorted(os.listdir(kept / "ckpt-2")) == ["actor_0.npz", "actor_1.npz", "evaluator.npz"]
    learner.close()

    # A process killed after its checkpoint: the actors saved newer state, and a new actor too.
    write("actor_0.npz", 9.0)
    write("actor_2.npz", 4.0)
    write("actor_2.npz.tmp.npz", 4.0)  # a save the kill interrupted
    resumed, _, _ = make_learner(tmp_path, queue, behaviour_names=("eta",), max_checkpoints=2)
    assert resumed.restored_from.endswith("ckpt-2")
    assert sorted(os.listdir(states)) == [
        "actor_0.npz",
        "actor_1.npz",
        "evaluator.npz",
        behaviour_lib.RESTORED,
    ]
    # Actors running elsewhere across the resume find the kept state it restored (their roll-
    # back: tests/common/control/test_behaviour.py).
    assert behaviour_lib.read_restored(str(states))[1] == str(kept / "ckpt-2")
    assert (read("actor_0.npz"), read("actor_1.npz"), read("evaluator.npz")) == (3.0, 5.0, 7.0)
    resumed.close()

    # Agents without behaviour state keep nothing beside their checkpoints.
    plain, _, _ = make_learner(tmp_path / "plain", queue)
    plain.save()
    assert not (tmp_path / "plain" / "checkpoints" / "behaviour").exists()
    plain.close()


def test_a_resume_under_another_budget_says_so_once_and_records_it(queue, tmp_path, capsys):
    # A run extended past the budget it trained under: its budget-tied schedules jump at the
    # resume, which the learner says; the next checkpoint records the new budget, so a second
    # resume under it is silent, as is a first resume under the same budget.
    learner, _, _ = make_learner(tmp_path, queue, total_batches=100)
    learner.run(max_steps=1)
    learner.save()
    learner.close()
    same, _, _ = make_learner(tmp_path, queue, total_batches=100)
    same.close()
    assert "warning" not in capsys.readouterr().out

    extended, _, _ = make_learner(tmp_path, queue, total_batches=200)
    out = capsys.readouterr().out
    assert (
        f"under a budget of {100 * FRAMES_PER_STEP:,} frames with "
        f"--total_frames={200 * FRAMES_PER_STEP:,}" in out
    )
    assert int(extended.budget.numpy()) == 200 * FRAMES_PER_STEP
    extended.save()
    extended.close()
    again, _, _ = make_learner(tmp_path, queue, total_batches=200)
    again.close()
    assert "warning" not in capsys.readouterr().out


def test_learner_stops_at_the_frame_budget_without_data(queue, tmp_path):
    learner, _, _ = make_learner(tmp_path, queue, total_batches=2)
    learner.run()  # 3 batches are waiting, the budget is 2
    assert int(learner.step.numpy()) == 2 and learner.done
    learner.close()
    again, _, _ = make_learner(tmp_path, queue, total_batches=2)
    again.run()  # a finished run does nothing
    assert int(again.step.numpy()) == 2
    again.close()


def test_learner_waits_with_timeouts_and_honours_stop(queue, tmp_path, capsys):
    learner, _, _ = make_learner(tmp_path, queue)
    calls = []

    def stop_after_data_runs_out():
        calls.append(1)
        return int(learner.step.numpy()) == 3 and len(calls) > 6  # several empty waits

    learner.run(should_stop=stop_after_data_runs_out)
    assert int(learner.step.numpy()) == 3
    learner.close()
    # While no batch comes, the console says so (a replay that takes minutes to fill).
    assert "waiting for experience (replay filling or rate-limited): actors produced" in (
        capsys.readouterr().out
    )


def test_csv_log_appends_and_rejects_a_foreign_header(tmp_path):
    path = str(tmp_path / "e.csv")
    log = runlog.CsvLog(path, runlog.EVAL_HEADER)
    log.append(1, 2.0, 3.0, 4.0)
    log.close()
    runlog.CsvLog(path, runlog.EVAL_HEADER).append(5, 6.0, 7.0, 8.0)
    assert open(path).read().splitlines() == [
        "frames,episode_return,hns,wall_time",
        "1,2.0,3.0,4.0",
        "5,6.0,7.0,8.0",
    ]
    with pytest.raises(ValueError, match="expected \\('frames', 'episode_return', 'episode_len"):
        runlog.CsvLog(path, runlog.EPISODES_HEADER)

"""End to end on CartPole with real processes and a real Reverb server.

1. `python -m impala.main` runs until it has checkpointed, then is SIGKILLed: its spawned actor
   notices the dead parent and exits.
2. In this process, a learner on the same logdir resumes the checkpoint (step, weights,
   optimizer state), trains with one spawned actor process: items arrive, the learner steps, the
   weights change, the actor picks up the new weights; an actor killed mid-run is replaced and
   training goes on.
3. `python -m impala.main` on the same logdir again continues the step counter and finishes.
4. A run with an evaluator, SIGKILLed whole after its checkpoint and resumed to a budget past
   the cut, finishes with logs that count each game once: its episodes.csv, eval.csv and
   TensorBoard points never go back in frames.
5. A run whose actors lag the learner (`--publish_lag`) ends with a final evaluation of the
   weights it ends with, at the budget's frames.
"""

import csv
import os
import signal
import time

import numpy as np
import pytest
import tensorflow as tf

from common.runtime import agent as agent_lib
from common.experiments import builder as builder_lib
from common.launchers import launch
from common.launchers.supervisor import Supervisor
from common.replay import replay
from common.runtime import runlog
from impala import builder as impala_builder
from impala import config as config_lib
from tests.system_helpers import alive, check_instruments, checkpoint_step, finish, run_main
from tests.system_helpers import run_to_completion

pytestmark = pytest.mark.slow

# Small batches so that a single actor of 8 envs fills one batch per unroll.
FLAGS = [
    "--env=CartPole",
    "--num_actors=1",
    "--envs_per_actor=8",
    "--batch_size=8",
    "--queue_capacity=8",
    "--eval_interval_s=0",
    "--log_interval_s=1",
]
FRAMES_PER_BATCH = 8 * 20  # batch 8 x unroll 20, CartPole has no action repeat


def children_of(pid: int) -> list[int]:
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                children.append(int(entry))
    return children


def wait_for(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory):
    logdir = str(tmp_path_factory.mktemp("impala_cartpole"))
    process, output_path = run_main(
        logdir, "--total_frames=100000000", "--checkpoint_interval_s=1", flags=FLAGS
    )
    try:
        wait_for(
            lambda: checkpoint_step(logdir) >= 3 or process.poll() is not None,
            120,
            "a checkpoint at step >= 3",
        )
        assert process.poll() is None, open(output_path).read()
        children = children_of(process.pid)
        assert children, "the launcher should have spawned an actor"
    finally:
        output = finish(process, output_path, timeout_s=0)  # SIGKILL
    # The orphaned actor notices its dead parent and exits on its own.
    wait_for(lambda: not any(alive(pid) for pid in children), 30, "the orphaned actor to exit")
    return logdir, checkpoint_step(logdir), output


def test_killed_launcher_left_a_checkpoint_and_progress(killed_run):
    logdir, step, output = killed_run
    assert step >= 3
    assert "[impala CartPole] step" in output  # the console progress line
    with open(os.path.join(logdir, "episodes.csv")) as f:
        assert f.readline().strip() == "frames,episode_return,episode_length,wall_time"
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(logdir))


def test_resume_train_with_an_actor_and_replace_a_killed_actor(killed_run):
    logdir, checkpointed_step, _ = killed_run
    config = config_lib.default_config(
        "CartPole",
        num_actors=1,
        envs_per_actor=8,
        batch_size=8,
        queue_capacity=8,
        total_frames=100_000_000,
        eval_interval_s=0,
        log_interval_s=1.0,
    ).validate()
    experiment = builder_lib.build_experiment(impala_builder.ImpalaBuilder(config), logdir)
    spec = agent_lib.probe_env("CartPole", experiment.actor.protocol)
    server = launch.start_server(experiment, spec)
    address = replay.address_of(server)
    supervisor = Supervisor()
    try:
        learner = launch.build_learner(experiment, spec, address)
        # Resumed: the step counter, frames and the checkpointed weights.
        assert int(learner.step.numpy()) == checkpointed_step
        assert int(learner.frames.numpy()) == checkpointed_step * FRAMES_PER_BATCH
        saved = impala_builder.ImpalaBuilder(config).make_learner(spec).checkpointables["network"]
        tf.train.Checkpoint(network=saved).restore(learner.restored_from).expect_partial()
        before = [v.numpy().copy() for v in learner.acting_variables]
        for restored, reference in zip(before, saved.variables):
            np.testing.assert_array_equal(restored, reference.numpy())
        assert any(np.any(s.numpy() != 1.0) for s in learner.checkpoint.optimizer.mean_squares)

        launch.start_actors(supervisor, experiment, address)
        # While the first step compiles, the actor fills the queue, the sampler's in-flight slots,
        # the prefetch buffer and its writer with unrolls of the resumed weights (~6 batches).
        learner.run(max_steps=10, on_idle=supervisor.restart_dead)
        assert int(learner.step.numpy()) == checkpointed_step + 10  # items arrived, steps ran
        after = [v.numpy() for v in learner.acting_variables]
        assert any(np.any(a != b) for a, b in zip(after, before))  # the weights changed
        # The actor acted with weights published in this run (params step > the resumed step).
        assert max(learner.params_steps_seen) > checkpointed_step

        actor = supervisor.process("actor_0")
        os.kill(actor.pid, signal.SIGKILL)
        learner.run(max_steps=4, on_idle=supervisor.restart_dead)
        assert supervisor.restarts("actor_0") == 1
        assert supervisor.process("actor_0").pid != actor.pid
        assert int(learner.step.numpy()) == checkpointed_step + 14  # training went on
        learner.close()
    finally:
        supervisor.stop()
        server.stop()


def test_main_resumes_the_same_logdir_and_finishes(killed_run):
    logdir, _, _ = killed_run
    start = checkpoint_step(logdir)
    budget = (start + 3) * FRAMES_PER_BATCH
    process, output_path = run_main(logdir, f"--total_frames={budget}", flags=FLAGS)
    output = finish(process, output_path, timeout_s=180)
    assert process.returncode == 0, output
    assert checkpoint_step(logdir) == start + 3, output
    steps = [
        int(line.split("step ")[1].split()[0])
        for line in output.splitlines()
        if line.startswith("[impala CartPole] step")
    ]
    assert steps and min(steps) > start, output  # the counter continued, it did not restart at 1
    with open(os.path.join(logdir, "episodes.csv")) as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["frames", "episode_return", "episode_length", "wall_time"]
    assert int(rows[-1][0]) > start * FRAMES_PER_BATCH  # appended after the resumed frames


def test_ctrl_c_checkpoints_and_shuts_everything_down(tmp_path):
    logdir = str(tmp_path)
    process, output_path = run_main(
        logdir, "--total_frames=100000000", "--checkpoint_interval_s=1", flags=FLAGS
    )
    try:
        wait_for(
            lambda: checkpoint_step(logdir) >= 1 or process.poll() is not None,
            120,
            "a first checkpoint",
        )
        children = children_of(process.pid)
        process.send_signal(signal.SIGINT)
    finally:
        output = finish(process, output_path, timeout_s=60)
    assert process.returncode == 0, output
    assert "[launch] local interrupted; shut down" in output
    last_line = [line for line in output.splitlines() if "checkpoint" in line][-1]
    assert f"(step {checkpoint_step(logdir)}," in last_line  # the shutdown checkpoint
    # The actor was stopped before the launcher exited; multiprocessing's resource tracker
    # follows once its parent is gone.
    wait_for(lambda: not any(alive(pid) for pid in children), 15, "the children to exit")


@pytest.mark.parametrize(
    "where, swallowed_as, checkpoint",
    [
        ("common.launchers.launch:probe_env", "nothing", -1),
        ("common.launchers.launch:start_actors", "nothing", 0),
        ("impala.builder:ImpalaBuilder.make_learner", "AttributeError", -1),
    ],
    ids=["swallowed_after_probe_env", "swallowed_after_start_actors", "AttributeError_instead"],
)
def test_a_stop_signal_that_a_library_swallowed_still_stops_the_run(
    tmp_path, where, swallowed_as, checkpoint
):
    # Before: a swallowed stop trained on to the budget (in the MinAtar grid, until the runner's
    # SIGKILL 60 s later, without a checkpoint), and one that came out as another exception ended
    # the run with its traceback. Now the run stops where it next looks: after probing the env,
    # before it builds anything (no checkpoint), or at the learner's first step (one at step 0);
    # the other exception ends it as an interrupted run.
    logdir = str(tmp_path)
    process, output_path = run_main(
        logdir,
        "--total_frames=100000000",
        flags=FLAGS,
        module="tests.swallowed_stop_main",
        env={**os.environ, "SWALLOWED_STOP_AT": where, "SWALLOWED_STOP_AS": swallowed_as},
    )
    output = finish(process, output_path, timeout_s=120)
    assert process.returncode == 0, output
    assert "[launch] local interrupted; shut down" in output
    assert checkpoint_step(logdir) == checkpoint, output
    if checkpoint == 0:
        assert "(step 0, 0 frames)" in output


# Killed after a checkpoint, then resumed to the end. Evaluation rounds of 2 games and a
# checkpoint every second: the run is killed a few seconds into training, once it has logged
# games and a round on both sides of its latest checkpoint (the first usually comes before the
# learner has read a game). Its budget is one it never reaches, so that its own end cannot beat
# the test to that moment (with 20K frames an idle machine once finished a run in 6 s, before
# any look fell between a round past the latest checkpoint and the next checkpoint); the resumed
# run's budget is RESUMED_FRAMES past the cut.
NEVER_REACHED = 100_000_000
RESUMED_FRAMES = 20_000
RESUME_FLAGS = [
    *(flag for flag in FLAGS if not flag.startswith("--eval_interval_s")),
    "--eval_interval_s=1",
    "--eval_round_episodes=2",
    "--eval_episodes=2",
    "--checkpoint_interval_s=1",
]


def read_csv(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def frames_of(rows) -> list[int]:
    return [int(row["frames"]) for row in rows]


def checkpoint_frames(logdir) -> tuple[int, int] | None:
    """(learner frames, produced frames) of the checkpoint a resumed run restores."""
    path = tf.train.latest_checkpoint(os.path.join(logdir, "checkpoints"))
    if path is None:
        return None
    value = lambda name: int(tf.train.load_variable(path, f"{name}/.ATTRIBUTES/VARIABLE_VALUE"))
    return value("frames"), value("actor_frames")


def check_cut(killed: list[dict], final: list[dict], cut: int, resumed_from: int) -> None:
    """`final` holds each game once: the killed run's rows at or before `cut`, unchanged and in
    order, then only the resumed run's, at `resumed_from` frames or later; frames never go back.
    (Rows are not unique by themselves: two envs' games that end at the same step can match in
    every column, so a game's identity is its place among the killed run's rows up to the cut,
    or its being logged by the resumed run.)"""
    kept = [row for row in killed if int(row["frames"]) <= cut]
    assert kept and final[: len(kept)] == kept
    after = final[len(kept) :]
    assert after and min(frames_of(after)) >= resumed_from
    frames = frames_of(final)
    assert frames == sorted(frames)
    # None of the killed run's games past the cut is left (wall times are in milliseconds).
    lost = {tuple(row.values()) for row in killed if int(row["frames"]) > cut}
    assert lost and not lost & {tuple(row.values()) for row in after}


def test_a_run_killed_after_its_checkpoint_and_resumed_counts_each_game_once(tmp_path):
    logdir = str(tmp_path)
    episodes_csv = os.path.join(logdir, runlog.EPISODES_CSV)
    eval_csv = os.path.join(logdir, runlog.EVAL_CSV)
    # Its own process group: SIGKILL reaches the launcher, Reverb, the actor and the evaluator.
    process, output_path = run_main(
        logdir, f"--total_frames={NEVER_REACHED}", flags=RESUME_FLAGS, start_new_session=True
    )
    group = process.pid

    def straddles(path, cut: int) -> bool:
        frames = frames_of(read_csv(path)) if os.path.exists(path) else []
        return any(f <= cut for f in frames) and any(f > cut for f in frames)

    def frozen_past_a_checkpoint():
        """Stops the whole run (no checkpoint can land between the look and the kill) and
        returns the checkpoint's frames once both logs hold rows before and after it; else lets
        the run go on."""
        if process.poll() is not None:
            return "exited"
        os.killpg(group, signal.SIGSTOP)
        cut = checkpoint_frames(logdir)
        if cut and straddles(episodes_csv, cut[1]) and straddles(eval_csv, cut[0]):
            return cut
        os.killpg(group, signal.SIGCONT)
        return None

    try:
        cut = wait_for(frozen_past_a_checkpoint, 180, "games and a round past a checkpoint")
        assert cut != "exited", open(output_path).read()
        children = children_of(process.pid)
        assert len(children) >= 2  # the actor and the evaluator
    finally:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:  # the run ended by itself (the assertion above says why)
            pass
        finish(process, output_path, timeout_s=30)
    wait_for(lambda: not any(alive(pid) for pid in children), 30, "the killed run's processes")
    assert checkpoint_frames(logdir) == cut
    killed_episodes, killed_eval = read_csv(episodes_csv), read_csv(eval_csv)

    frames, actor_frames = cut
    budget = frames + RESUMED_FRAMES
    output = run_to_completion(
        logdir, f"--total_frames={budget}", flags=RESUME_FLAGS, timeout_s=240
    )
    assert "[impala CartPole] resumed" in output, output
    assert "[impala CartPole] logs cut back to the checkpoint" in output, output
    assert checkpoint_frames(logdir)[0] >= budget  # it finished
    episodes, evaluation = read_csv(episodes_csv), read_csv(eval_csv)
    check_cut(killed_episodes, episodes, actor_frames, resumed_from=actor_frames + 1)
    # The resumed evaluator plays the restored weights or later ones; the final round is last.
    check_cut(killed_eval, evaluation, frames, resumed_from=frames)
    assert int(evaluation[-1]["frames"]) == checkpoint_frames(logdir)[0]

    # TensorBoard: the games past the cut are the resumed run's, as in episodes.csv (the killed
    # writer may not have flushed its last points); the learner's points never go back.
    games = runlog.read_scalars(logdir)["episode/return"]
    assert [step for step, _ in games] == sorted(step for step, _ in games)
    assert [point for point in games if point[0] > actor_frames] == [
        (int(row["frames"]), float(row["episode_return"]))
        for row in episodes
        if int(row["frames"]) > actor_frames
    ]
    losses = [step for step, _ in runlog.read_scalars(logdir)["loss/total"]]
    assert losses == sorted(set(losses)) and losses[-1] >= budget
    rounds = runlog.read_scalars(os.path.join(logdir, runlog.EVAL_DIR))["eval/return"]
    assert [step for step, _ in rounds] == sorted(step for step, _ in rounds)
    check_instruments(logdir, output, num_actions=2)


def test_a_lagged_run_s_final_evaluation_plays_the_weights_it_ends_with(tmp_path):
    # The actors act with weights publish_lag = 4 updates old; the final evaluation does not: it
    # plays the learner's last weights and is logged at the budget's frames (before the fix, at
    # those of the update 4 back, below the budget, where the MinAtar report drops it).
    logdir = str(tmp_path)
    budget = 10 * FRAMES_PER_BATCH
    flags = [flag for flag in FLAGS if not flag.startswith("--eval_interval_s")]
    run_to_completion(
        logdir,
        f"--total_frames={budget}",
        "--publish_lag=4",
        "--eval_interval_s=600",  # the final evaluation only
        "--eval_episodes=4",
        flags=flags,
    )
    final_frames = checkpoint_frames(logdir)[0]
    assert final_frames >= budget
    assert frames_of(read_csv(os.path.join(logdir, runlog.EVAL_CSV))) == [final_frames] * 4


def test_a_run_killed_in_its_final_evaluation_plays_it_again_whole_on_resume(tmp_path):
    logdir = str(tmp_path)
    eval_csv = os.path.join(logdir, runlog.EVAL_CSV)
    games = 3000  # some seconds of CartPole games, so that the kill lands inside them
    flags = [*FLAGS, "--total_frames=800", "--eval_interval_s=1000", f"--eval_episodes={games}"]
    process, output_path = run_main(logdir, flags=flags, start_new_session=True)
    started = f"[launch] frame budget reached: final evaluation ({games} episodes)"
    try:
        wait_for(lambda: started in open(output_path).read(), 180, "the final evaluation")
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the launcher, Reverb and the evaluator
        finish(process, output_path, timeout_s=30)
    budget = checkpoint_frames(logdir)[0]
    cut_short = len(read_csv(eval_csv)) if os.path.exists(eval_csv) else 0
    assert cut_short < games and set(frames_of(read_csv(eval_csv))) <= {budget}

    output = run_to_completion(logdir, flags=flags, timeout_s=240)
    assert (
        f"reached its frame budget ({budget} frames) but its final evaluation was stopped "
        f"after {cut_short} of {games} games: playing it again"
    ) in output
    assert "[impala CartPole] step" not in output  # nothing more was trained
    assert checkpoint_frames(logdir)[0] == budget
    assert frames_of(read_csv(eval_csv)) == [budget] * games  # the whole evaluation, once
    rounds = runlog.read_scalars(os.path.join(logdir, runlog.EVAL_DIR))["eval/return"]
    assert [step for step, _ in rounds] == [budget]
    # A third start finds the run finished.
    output = run_to_completion(logdir, flags=flags, timeout_s=240)
    assert "already reached its frame budget" in output
    assert len(read_csv(eval_csv)) == games

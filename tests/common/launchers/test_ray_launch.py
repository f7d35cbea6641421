"""`--launcher=ray` (common/launchers/ray_launch.py): the placement decisions and the flag errors,
then DiCE (a burn-in agent with per-game behaviour state; `system_helpers.FLEET_FLAGS` says why this
agent) trained on CartPole on a Ray cluster of three nodes on this machine
(`ray.cluster_utils.Cluster`): a head node with room for the learner only, and two worker nodes with
room for two actors each. The actors act on both workers; one worker node is removed while they run,
and its actor comes back on the other worker with its index and its behaviour state; SIGTERM to the
driver then stops the run with a checkpoint, and episodes.csv counts each game once."""

import os
import re
import signal
import subprocess
import sys
import types

import pytest

from common.launchers import actor_range
from common.experiments import cli
from common.experiments import dataclass_flags
from common.launchers import ray_launch
from tests.system_helpers import (
    assert_the_run_went_on,
    episodes,
    assert_one_line_error,
    bandit_counts,
    checkpoint_step,
    FLEET_FLAGS,
    FLEET_STARTUP_S,
    finish,
    fleet_flags,
    run_main,
    wait_until,
)


# ------------------------------------------------------------------------------ no cluster


def test_the_learner_asks_for_a_gpu_only_when_the_cluster_has_one():
    experiment = types.SimpleNamespace(learner_threads=2, actor_threads=1, num_actors=3)
    cpu_only = ray_launch.learner_options(experiment, {"CPU": 16.0}, "a" * 56)
    assert cpu_only["num_cpus"] == 2 and "num_gpus" not in cpu_only
    assert cpu_only["max_restarts"] == 0  # a lost learner ends the run; the command resumes it
    strategy = cpu_only["scheduling_strategy"]
    assert strategy.node_id == "a" * 56 and strategy.soft  # the driver's node, unless a GPU
    with_gpu = ray_launch.learner_options(experiment, {"CPU": 16.0, "GPU": 1.0}, "a" * 56)
    assert with_gpu["num_gpus"] == 1


def test_actors_spread_by_their_cpu_requests_and_are_restarted():
    experiment = types.SimpleNamespace(learner_threads=2, actor_threads=3, num_actors=4)
    options = ray_launch.actor_options(experiment)
    assert options["num_cpus"] == 3
    assert options["scheduling_strategy"] == "SPREAD"
    assert options["max_restarts"] == -1
    # A local cluster offers what the local launcher would start threads for.
    assert ray_launch.local_cpus(experiment) == 2 + 4 * 3


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--launcher=mpi"], "--launcher="),
        (["--ray_address=auto"], "--ray_address=auto names the Ray cluster of --launcher=ray"),
        (
            ["--launcher=ray", "--role=learner", "--replay_address=h:1"],
            "--launcher=ray places every role of --role=local",
        ),
        (
            ["--launcher=ray"],
            "--launcher=ray serves its Reverb server to other machines: add --open_port",
        ),
    ],
)
def test_bad_launcher_flags_are_one_line(flags, message):
    assert_one_line_error("impala.main", ["--env=CartPole", *flags], message)


def test_launcher_ray_without_ray_installed_is_one_line(monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else find_spec(name, *a)
    )
    with pytest.raises(
        dataclass_flags.FlagError, match=r"^--launcher=ray needs Ray, which is not installed"
    ):
        cli.RunSettings(launcher="ray").validate()
    cli.RunSettings().validate()  # the default launcher needs no Ray
    with pytest.raises(
        dataclass_flags.FlagError, match=r"^--launcher=ray needs Ray, which is not installed"
    ):
        cli.RunSettings(launcher="ray", open_port=True).validate()


def test_the_default_commands_do_not_import_ray():
    code = (
        "import common.launchers.launch, common.experiments.cli, impala.main, sys; "
        "print('ray' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    assert result.stdout.strip() == "False"


# ------------------------------------------------------------------------ a three-node cluster

NUM_ACTORS, ENVS, SEED = 2, 4, 5
COMMON = fleet_flags(SEED, NUM_ACTORS, ENVS)
SERVING = re.compile(r"^\[ray\] Reverb server and learner on node \w+, serving (\S+)$", re.M)
ACTING = re.compile(r"^\[ray\] actor_(\d+) acting on node (\w+)$", re.MULTILINE)
STOPPED = re.compile(r"^\[ray\] actor_(\d+) stopped: (\d+) steps", re.MULTILINE)
NODE_ARGS = dict(object_store_memory=100 * 2**20)  # choice: Ray's small end; nothing big travels


@pytest.fixture
def cluster():
    """A head node with 2 CPUs (the learner's 2 threads: no actor fits beside it) and two worker
    nodes with 2 CPUs each; shut down when the test ends."""
    from ray import cluster_utils

    cluster = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args=dict(NODE_ARGS, num_cpus=2, include_dashboard=False),
    )
    try:
        workers = [cluster.add_node(num_cpus=2, **NODE_ARGS) for _ in range(2)]
        cluster.wait_for_nodes()
        yield cluster, workers
    finally:
        cluster.shutdown()


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_actors_on_two_worker_nodes_survive_losing_one(cluster, tmp_path):
    cluster, workers = cluster
    logdir = str(tmp_path)
    process, output_path = run_main(
        logdir,
        "--launcher=ray",
        f"--ray_address={cluster.address}",
        "--open_port",
        flags=COMMON + FLEET_FLAGS,
        module="dice.main",
    )

    def output() -> str:
        assert process.poll() is None, read(output_path)
        return read(output_path)

    def acting() -> list[tuple[int, str]]:
        return [(int(i), node) for i, node in ACTING.findall(output())]

    behaviour = [os.path.join(logdir, "behaviour", f"actor_{i}.npz") for i in range(NUM_ACTORS)]
    try:
        # Each actor acts on its own worker node: SPREAD, and the head has no CPU left.
        placed = dict(wait_until(lambda: len(acting()) == NUM_ACTORS and acting(), FLEET_STARTUP_S))
        worker_ids = {worker.node_id for worker in workers}
        assert set(placed.values()) == worker_ids, (placed, worker_ids)
        # The driver holds actors 0.. on the run's server, as an actor host holds its range.
        (claim,) = actor_range.ActorRange(SERVING.search(output()).group(1), 0, 1).claims()
        assert (claim.first, claim.count) == (0, NUM_ACTORS)

        def trained_and_saved():
            # The actors save their bandits each checkpoint interval, 1 s here: the test waits.
            saved = all(os.path.exists(path) for path in behaviour)
            return output() and checkpoint_step(logdir) >= 2 and episodes(logdir) and saved

        wait_until(trained_and_saved, FLEET_STARTUP_S, "a checkpoint, games (and behaviour state)")
        saved_counts = bandit_counts(logdir, 0, ENVS)
        lost = next(worker for worker in workers if worker.node_id == placed[0])
        survivor = next(worker for worker in workers if worker is not lost)
        cluster.remove_node(lost)
        lost_step, lost_games = checkpoint_step(logdir), len(episodes(logdir))

        # actor_0 acts again, on the surviving worker, and the run goes on.
        wait_until(
            lambda: acting()[NUM_ACTORS:] == [(0, survivor.node_id)],
            FLEET_STARTUP_S,
            "actor_0 to act on the other worker",
        )
        wait_until(
            lambda: (
                output()
                and checkpoint_step(logdir) > lost_step
                and len(episodes(logdir)) > lost_games
            ),
            FLEET_STARTUP_S,
            "training after the loss",
        )
        process.send_signal(signal.SIGTERM)  # a user stopping the driver
        out = finish(process, output_path, timeout_s=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(60)
    assert process.returncode == 0, out
    # Its loop ended with the node (lost with its process, or returned on its parent's death).
    assert re.search(r"\[ray\] actor_0 (was lost|returned|failed).*starting it again", out), out
    assert "[ray] interrupted; shutting down" in out
    assert re.search(r"checkpoint \S+ckpt-\d+ \(step \d+", out.split("interrupted")[-1]), out
    stopped = dict((int(i), int(steps)) for i, steps in STOPPED.findall(out))
    assert sorted(stopped) == list(range(NUM_ACTORS)) and min(stopped.values()) > 0, out

    # The learner never went back, and each game is logged once.
    assert_the_run_went_on(logdir, lost_step, lost_games, ties=NUM_ACTORS * ENVS)

    # The restarted actor_0 loaded the bandits its lost predecessor saved and went on.
    after = bandit_counts(logdir, 0, ENVS)
    assert (after >= saved_counts).all() and after.sum() > saved_counts.sum()

"""common/launchers/launch.py: the process supervisor (spawned children, restarts, shutdown that
never hangs), the table layout, and the actors' cluster-wide indices (--first_actor and the claims
that keep two actor hosts' ranges apart). The full launcher runs end to end in
tests/impala/test_system.py, across two network namespaces in tests/common/test_multihost.py."""

import os
import re
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from common.runtime import acting
from common.runtime import agent as agent_lib
from common.control import behaviour as behaviour_lib
from common.launchers import actor_range
from common.experiments import builder as builder_lib
from common.experiments import cli
from common.experiments import dataclass_flags
from common.launchers import launch
from common.launchers.supervisor import Supervisor
from common.replay import patterns
from common.replay import replay
from common.replay import parameters
from common.replay import reports
from dice import builder as dice_builder
from reactor import builder as reactor_builder
from impala import builder as impala_builder
from impala import config as impala_config
from tests.system_helpers import (
    alive,
    crash_once,
    ignore_stop,
    run_main_logging_imports,
    wait_until,
)


def test_supervisor_restarts_a_crashed_child_with_new_kwargs(tmp_path):
    path = str(tmp_path / "seeds.txt")
    supervisor = Supervisor(restart_delay_s=0.1)
    try:
        supervisor.start(
            "child",
            crash_once,
            dict(path=path, seed=0),
            reseed=lambda kwargs, n: dict(kwargs, seed=100 + n),
        )
        first = supervisor.process("child")
        first.join(60)
        assert first.exitcode == 1  # the traceback goes to stderr, the code to the supervisor
        wait_until(lambda: supervisor.restart_dead() == ["child"])
        wait_until(lambda: os.path.exists(path) and len(open(path).read().split()) == 2)
        assert open(path).read().split() == ["0", "101"]
        assert supervisor.restarts("child") == 1
        assert supervisor.restart_dead() == []  # alive: nothing to do
    finally:
        supervisor.stop(timeout_s=10)
    assert not supervisor.process("child").is_alive()
    assert supervisor.process("child").exitcode == 0  # it saw the stop event


def test_stop_terminates_a_child_that_ignores_the_stop_event():
    supervisor = Supervisor()
    supervisor.start("stubborn", ignore_stop, {})
    supervisor.stop(timeout_s=0.5)
    process = supervisor.process("stubborn")
    assert not process.is_alive() and process.exitcode != 0  # SIGTERM
    assert supervisor.restart_dead() == []  # never restarted once stopping


def test_children_die_with_a_killed_parent_even_while_blocked(tmp_path):
    # The child sleeps without looking at its stop event or its parent (like an actor blocked in
    # C++); only the parent-death signal can end it once the launcher is SIGKILLed.
    ready = str(tmp_path / "child_pid")
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from common.launchers.supervisor import Supervisor; "
            "from tests.system_helpers import block_after_ready; s = Supervisor(); "
            f"s.start('child', block_after_ready, dict(path={ready!r})); time.sleep(600)",
        ]
    )
    try:
        wait_until(lambda: os.path.exists(ready) and open(ready).read().endswith("\n"))
        child = int(open(ready).read())
    finally:
        parent.kill()
        parent.wait(10)
    wait_until(lambda: not alive(child), timeout_s=10)


def test_should_stop_on_event():
    event = Supervisor().event()
    should_stop = acting.ShouldStop(event)
    assert not should_stop()
    event.set()
    assert should_stop()


def test_tables_match_what_actors_write():
    agent = agent_lib.Agent(
        replay=patterns.Queue(length=3, capacity=4),
        make_policy=None,
        make_learner=None,
        policy_extras=lambda spec: acting.CategoricalPolicy.extras_spec(spec.num_actions),
        core_state_spec=(tf.TensorSpec([5], tf.float32), tf.TensorSpec([5], tf.float32)),
    )
    spec = agent_lib.probe_env("CartPole", "impala")
    assert spec.num_actions == 2 and spec.observation_shape == (4,)
    server = replay.start_server(agent.tables(spec))
    try:
        client = replay.connect(replay.address_of(server))
        info = client.server_info()
        assert set(info) == {patterns.EXPERIENCE_TABLE, acting.PARAMS_TABLE, reports.REPORTS_TABLE}
        assert info[patterns.EXPERIENCE_TABLE].max_size == 4
        signature = agent.signature(spec)
        assert signature[replay.STEPS]["observation"].shape == (4, *spec.observation_shape)
        assert signature[replay.STEPS]["behaviour_logits"].shape == (4, 2)
        assert signature[replay.FIRST_STEP_EXTRAS][acting.CORE_STATE][0].shape == (5,)
    finally:
        server.stop()


# ------------------------------------------------------------------ actor indices across hosts


class RecordingSupervisor:
    """Records what `launch.start_actors` would start."""

    def __init__(self):
        self.started = {}

    def start(self, name, target, kwargs, reseed=None):
        self.started[name] = kwargs["settings"]


def dice_experiment(logdir, num_actors=2):
    config = cli.make_config(dice_builder.DiceBuilder, dict(env="CartPole", num_actors=num_actors))
    return builder_lib.build_experiment(dice_builder.DiceBuilder(config), str(logdir))


def test_actors_save_their_bandits_as_often_as_the_run_checkpoints(tmp_path):
    def saved_after(checkpoint_interval_s, wait_s):
        config = dict(env="CartPole", checkpoint_interval_s=checkpoint_interval_s)
        logdir = str(tmp_path / f"{checkpoint_interval_s}_{wait_s}")
        experiment = builder_lib.build_experiment(
            dice_builder.DiceBuilder(cli.make_config(dice_builder.DiceBuilder, config)), logdir
        )
        settings = launch.actor_settings(experiment, 0)
        selector = acting.make_behaviour(experiment.agent.behaviour, settings)
        time.sleep(wait_s)
        selector.end_games(np.ones(settings.num_envs))  # an actor saves when games end
        return settings.state_save_interval_s, os.path.exists(selector.state_path)

    assert saved_after(300.0, 0.0) == (behaviour_lib.SAVE_INTERVAL_S, False)  # every 30 s
    assert saved_after(0.2, 0.0) == (0.2, False)  # not yet
    assert saved_after(0.2, 0.3) == (0.2, True)  # one checkpoint interval later


def test_an_actor_host_numbers_its_actors_from_first_actor(tmp_path, capsys):
    experiment = dice_experiment(tmp_path)
    seed, envs = experiment.actor.seed, experiment.actor.num_envs
    local = RecordingSupervisor()
    launch.start_actors(local, experiment, "a:1")  # the local launcher: 0..n-1
    assert [(name, s.actor_id, s.seed) for name, s in local.started.items()] == [
        ("actor_0", 0, seed),
        ("actor_1", 1, seed + envs),
    ]
    host = RecordingSupervisor()
    launch.start_actors(host, experiment, "a:1", first_actor=4)
    assert [(name, s.actor_id, s.seed) for name, s in host.started.items()] == [
        ("actor_4", 4, seed + 4 * envs),
        ("actor_5", 5, seed + 5 * envs),
    ]
    # Distinct env seeds across the cluster: each actor seeds its envs seed, seed + 1, ...
    assert host.started["actor_4"].seed >= local.started["actor_1"].seed + envs
    paths = [
        acting.make_behaviour(experiment.agent.behaviour, s).state_path
        for s in host.started.values()
    ]
    assert paths == [str(tmp_path / "behaviour" / f"actor_{i}.npz") for i in (4, 5)]
    # The actor host's line about each actor names its index, seed and state file.
    launch._print_actor(experiment, 4)
    os.makedirs(tmp_path / "behaviour")
    open(paths[1], "wb").close()
    launch._print_actor(experiment, 5)
    assert capsys.readouterr().out.splitlines() == [
        f"[actor] actor_4: seed {seed + 4 * envs}, behaviour state {paths[0]} (new)",
        f"[actor] actor_5: seed {seed + 5 * envs}, behaviour state {paths[1]} (restored)",
    ]
    with pytest.raises(ValueError, match="--first_actor=-1 must be >= 0"):
        launch.start_actors(RecordingSupervisor(), experiment, "a:1", first_actor=-1)
    with pytest.raises(ValueError, match="--first_actor=4 numbers --role=actor's actors"):
        launch.run(experiment, "learner", "a:1", first_actor=4)


@pytest.fixture
def claims_address():
    server = replay.start_server([parameters.params_table(actor_range.ACTOR_CLAIMS_TABLE)])
    yield replay.address_of(server)
    server.stop()


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait(60)
    return process.pid


def test_an_overlapping_range_of_a_live_host_is_refused(claims_address):
    holder = actor_range.ActorRange(claims_address, 4, 2, host="host-a")
    holder.acquire(settle_s=0)
    for first, count in [(5, 1), (0, 5), (3, 4)]:
        with pytest.raises(actor_range.ActorRangeError) as error:
            actor_range.ActorRange(claims_address, first, count, host="host-b").acquire(settle_s=0)
        (line,) = str(error.value).splitlines()
        assert line.startswith(f"--first_actor={first} with --num_actors={count}: actors ")
        assert "overlap actors 4..5 of the live actor host host-a" in line
        assert "from --first_actor=6 on all are free" in line
    # Ranges that touch but do not overlap share the server.
    below = actor_range.ActorRange(claims_address, 0, 4, host="host-b")
    above = actor_range.ActorRange(claims_address, 6, 2, host="host-c")
    below.acquire(settle_s=0)
    above.acquire(settle_s=0)
    assert sorted((c.first, c.host) for c in holder.claims()) == [
        (0, "host-b"),
        (4, "host-a"),
        (6, "host-c"),
    ]
    holder.heartbeat()  # still holds its range
    # Released on a clean exit: another host takes the range at once.
    holder.release()
    actor_range.ActorRange(claims_address, 4, 2, host="host-d").acquire(settle_s=0)


def test_a_dead_host_s_range_is_taken_back_once_its_claim_expired(claims_address):
    now = [1000.0]
    clock = lambda: now[0]  # noqa: E731
    actor_range.ActorRange(claims_address, 4, 2, clock=clock, host="host-a").heartbeat()
    restarted = actor_range.ActorRange(claims_address, 4, 2, clock=clock, host="host-b")
    now[0] += actor_range.CLAIM_EXPIRY_S  # the last heartbeat is exactly as old as the expiry
    with pytest.raises(actor_range.ActorRangeError, match="heartbeat 30 s ago"):
        restarted.heartbeat()
    now[0] += 1.0  # host-a missed its heartbeats: its claim expired
    restarted.heartbeat()
    assert [(c.first, c.host) for c in restarted.claims()] == [(4, "host-b")]


def test_a_supervisor_restarted_on_the_same_host_takes_its_range_back_at_once(claims_address):
    host = socket.gethostname()
    killed = actor_range.ActorRange(claims_address, 4, 2, host=host, pid=dead_pid())
    killed.heartbeat()  # then kill -9: no release
    actor_range.ActorRange(claims_address, 4, 2, host=host).acquire(settle_s=0)
    # A supervisor of this host that still runs (this process) keeps its range.
    holder = re.escape(f"live actor host {host} (pid {os.getpid()},")
    with pytest.raises(actor_range.ActorRangeError, match=holder):
        actor_range.ActorRange(claims_address, 5, 2, host=host, pid=dead_pid()).heartbeat()


def test_a_supervisor_whose_claim_a_concurrent_host_overwrote_stops(claims_address):
    # Both read the empty list; x wrote first, y's write (of what it read, plus its own claim)
    # replaced x's. x notices at its next check, y keeps the range.
    x = actor_range.ActorRange(claims_address, 4, 2, host="host-x")
    y = actor_range.ActorRange(claims_address, 5, 2, host="host-y")
    x.heartbeat()
    y_claim = actor_range.ActorClaim(5, 2, "host-y", y.pid, time.time())
    y._write(replay.connect(claims_address), [y_claim])
    with pytest.raises(
        actor_range.ActorRangeError, match="overlap actors 5..6 of the live actor host"
    ):
        x.heartbeat()
    y.heartbeat()
    x.release()  # holds nothing: writes nothing
    assert [c.host for c in y.claims()] == ["host-y"]


def test_a_held_range_is_renewed_until_released_and_lost_to_a_winning_host(claims_address):
    fleet = actor_range.ActorRange(claims_address, 0, 2, host="launcher")
    with fleet.held(interval_s=0.05):
        with pytest.raises(
            actor_range.ActorRangeError, match="overlap actors 0..1 of the live actor host launcher"
        ):
            actor_range.ActorRange(claims_address, 1, 2, host="by-hand").acquire(settle_s=0)
        (claim,) = fleet.claims()
        wait_until(lambda: fleet.claims()[0].heartbeat > claim.heartbeat, what="a renewal")
        assert fleet.lost is None
    assert fleet.claims() == []  # released when the block ends
    # A concurrent host's write replaced the claim with its own overlapping one: the renewing
    # thread reports the loss to the launcher's loop and leaves the winner's claim alone.
    with fleet.held(interval_s=0.05):
        winner = actor_range.ActorClaim(1, 2, "winner", os.getpid(), time.time())
        fleet._write(replay.connect(claims_address), [winner])
        wait_until(lambda: fleet.lost is not None, what="the loss")
        assert "overlap actors 1..2 of the live actor host winner" in fleet.lost
    assert [c.host for c in fleet.claims()] == ["winner"]


def test_the_local_role_holds_its_actors_range_while_it_runs(tmp_path):
    config = impala_config.default_config(
        "CartPole", num_actors=2, envs_per_actor=2, total_frames=10**8, eval_interval_s=0
    ).validate()
    experiment = builder_lib.build_experiment(impala_builder.ImpalaBuilder(config), str(tmp_path))
    spec = agent_lib.probe_env("CartPole", experiment.actor.protocol)
    server = launch.start_server(experiment, spec)
    address = replay.address_of(server)
    held = []

    def should_stop() -> bool:  # asked before the learner's first step: its actors are started
        held.extend(actor_range.ActorRange(address, 0, 1).claims())
        with pytest.raises(actor_range.ActorRangeError, match="overlap actors 0..1 of the live"):
            actor_range.ActorRange(address, 1, 1, host="by-hand").acquire(settle_s=0)
        return True

    try:
        launch.run_learner_with_children(
            experiment, spec, address, with_actors=True, should_stop=should_stop
        )
        assert [(c.first, c.count, c.pid) for c in held] == [(0, 2, os.getpid())]
        assert actor_range.ActorRange(address, 0, 1).claims() == []  # released on the way out
    finally:
        server.stop()


def test_an_actor_host_on_a_held_range_fails_on_one_line_before_writing(claims_address, tmp_path):
    actor_range.ActorRange(claims_address, 4, 2, host="host-a").heartbeat()
    logdir = tmp_path / "run"
    result, messages, _ = run_main_logging_imports(
        "--env=CartPole",
        "--role=actor",
        f"--replay_address={claims_address}",
        "--num_actors=2",
        "--first_actor=5",
        f"--logdir={logdir}",
        timeout=240,
    )
    assert result.returncode == dataclass_flags.EXIT_FAILURE, result.stderr
    errors = [line for line in messages if line.startswith("error: ")]
    assert len(errors) == 1, messages
    assert errors[0].startswith("error: --first_actor=5 with --num_actors=2: actors 5..6 overlap")
    assert "[actor] actor_5" not in result.stdout  # refused before any actor started
    assert not logdir.exists()  # nothing written


def test_learner_threads_reach_the_experiment_and_take_effect_before_tensorflow_starts(tmp_path):
    reactor = builder_lib.build_experiment(
        reactor_builder.ReactorBuilder(cli.make_config(reactor_builder.ReactorBuilder, {})),
        str(tmp_path / "reactor"),
    )
    config = cli.make_config(dice_builder.DiceBuilder, dict(env="CartPole", learner_threads=3))
    dice = builder_lib.build_experiment(dice_builder.DiceBuilder(config), str(tmp_path / "dice"))
    assert (reactor.learner_threads, dice.learner_threads) == (1, 3)  # Reactor's own default
    # A process sets its pools only before TensorFlow runs anything; afterwards the call says so.
    script = (
        "import common; from common.runtime import acting; import tensorflow as tf\n"
        "first = acting.configure_threads(3)\n"
        "tf.constant(1.0) + 1.0\n"
        "print(first, tf.config.threading.get_intra_op_parallelism_threads(),"
        " acting.configure_threads(3), acting.configure_threads(1))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.stdout.split() == ["True", "3", "True", "False"], result.stderr[-2000:]

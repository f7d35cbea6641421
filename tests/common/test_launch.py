"""common/launch.py: the process supervisor (spawned children, restarts, shutdown that never
hangs) and the table layout. The full launcher runs end to end in tests/impala/test_system.py."""

import os
import subprocess
import sys
import time

import tensorflow as tf

from common import acting
from common import agent as agent_lib
from common import launch
from common import patterns
from common import replay
from common import reports
from tests.system_helpers import alive, crash_once, ignore_stop


def wait_until(condition, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_supervisor_restarts_a_crashed_child_with_new_kwargs(tmp_path):
    path = str(tmp_path / "seeds.txt")
    supervisor = launch.Supervisor(restart_delay_s=0.1)
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
    supervisor = launch.Supervisor()
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
            "import time; from common import launch; "
            "from tests.system_helpers import block_after_ready; s = launch.Supervisor(); "
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
    event = launch.Supervisor().event()
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

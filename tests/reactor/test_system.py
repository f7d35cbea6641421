"""Reactor end to end on CartPole with real actor processes, a real Reverb server and the learner.

1. `python -m reactor.main` trains to a budget of learner steps, checkpoints (replay included),
   and a second run on the same logdir resumes the step counter and the replay.
2. In this process, the same pieces started by hand: new keys enter with the learner's
   published estimate and sampled ones get their priorities written back (Reverb's priorities
   change), and the target network lags the online one by the update period.
"""

import os

import numpy as np
import pytest

from common.runtime import agent as agent_lib
from common.experiments import builder as builder_lib
from common.launchers import launch
from common.launchers.supervisor import Supervisor
from common.replay import patterns
from common.replay import replay
from common.replay import parameters
from reactor import builder as reactor_builder
from reactor import config as config_lib
from tests import system_helpers

pytestmark = pytest.mark.slow

SMALL = dict(
    num_actors=1,
    envs_per_actor=4,
    sequence_length=9,
    min_replay_size=40,
    replay_error_buffer=1000.0,  # sampling may run ahead of the niced actor on a busy machine
    target_update_period=4,
    estimate_pull_interval=5,
    params_pull_interval=5,
    eval_interval_s=0.0,
    log_interval_s=1.0,
)
FLAGS = ["--env=CartPole", *[f"--{k}={v}" for k, v in SMALL.items()]]
FRAMES_PER_STEP = 5  # --acting_steps_per_learner_step, CartPole has no action repeat


def run_to_budget(logdir, steps) -> str:
    return system_helpers.run_to_completion(
        logdir,
        f"--total_frames={steps * FRAMES_PER_STEP}",
        flags=FLAGS,
        module="reactor.main",
        timeout_s=180,
    )


def test_main_trains_checkpoints_and_resumes_with_the_replay(tmp_path):
    logdir = str(tmp_path)
    output = run_to_budget(logdir, 6)
    assert "[replay] prioritized:" in output
    assert "[reactor CartPole] step" in output
    assert launch.THREADS_NOT_SET not in output  # the learner runs on Reactor's one thread
    assert system_helpers.checkpoint_step(logdir) == 6
    assert os.path.isdir(os.path.join(logdir, "replay"))
    output = run_to_budget(logdir, 10)
    assert "Successfully loaded 4 tables" in output  # experience, params, reports, actor claims
    assert f"resumed {logdir}/checkpoints/ckpt-6 (step 6, 30 frames;" in output
    assert system_helpers.checkpoint_step(logdir) == 10
    system_helpers.check_instruments(logdir, output, num_actions=2)


def weights(module):
    return [v.numpy().copy() for v in module.variables]


def test_priorities_change_in_reverb_and_the_target_lags_by_the_period(tmp_path):
    # alpha = 0.01: sampling is nearly uniform, so the few keys the learner has written back
    # (total-variation priorities, well below the 1.0 new keys enter with) are found among
    # hundreds of fresh ones; their stored priorities still differ from 1.0.
    config = config_lib.ReactorConfig(
        **dict(config_lib.CARTPOLE_OVERRIDES, env="CartPole", priority_exponent=0.01, **SMALL)
    ).validate()
    experiment = builder_lib.build_experiment(reactor_builder.ReactorBuilder(config), str(tmp_path))
    spec = agent_lib.probe_env("CartPole", experiment.actor.protocol)
    server = launch.start_server(experiment, spec)
    address = replay.address_of(server)
    supervisor = Supervisor()
    try:
        learner = launch.build_learner(experiment, spec, address)
        network, target = learner.checkpoint.network, learner.checkpoint.target
        initial_target = weights(target)
        launch.start_actors(supervisor, experiment, address)
        learner.run(max_steps=3, on_idle=supervisor.restart_dead)
        for a, b in zip(weights(target), initial_target):  # no copy before step 4
            np.testing.assert_array_equal(a, b)
        learner.run(max_steps=1, on_idle=supervisor.restart_dead)  # step 4: copied
        at_copy = weights(network)
        for a, b in zip(weights(target), at_copy):
            np.testing.assert_array_equal(a, b)
        learner.run(max_steps=3, on_idle=supervisor.restart_dead)  # steps 5-7: it lags
        assert int(learner.step.numpy()) == 7
        for a, b in zip(weights(target), at_copy):
            np.testing.assert_array_equal(a, b)
        assert any(np.any(a != b) for a, b in zip(weights(network), at_copy))
        estimate = float(learner.checkpoint.priorities.insert_priority.numpy())
        assert estimate != 1.0  # the learner's estimate moved from the initial priority

        client = learner.client
        sampled = [
            float(parameters.sample_once(client, patterns.EXPERIENCE_TABLE, 60.0).info.priority)
            for _ in range(200)
        ]
        # Items entered with 1.0; written-back priorities and the published estimate differ.
        assert any(p != 1.0 for p in sampled), sampled
        assert len(set(sampled)) > 2, sampled
        learner.close()
    finally:
        supervisor.stop()
        server.stop()

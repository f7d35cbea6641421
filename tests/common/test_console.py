"""The console speaks the project's language: TensorFlow's C++ log is quiet by default, comes back
with TF_CPP_MIN_LOG_LEVEL, the deep torso's graph no longer trips Grappler's remapper, and the
Atari emulator opens games without its banner.

Each case runs in a fresh interpreter, since TensorFlow reads its log level once, when it loads.
"""

import os
import re
import subprocess
import sys

import pytest

# TensorFlow's C++ log line: "2026-11-26 07:22:28.025685: E external/...cc:9261] message".
CPP_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] ", re.MULTILINE)

LOAD_AND_COMPUTE = (
    "import common, tensorflow as tf; "
    "print(float(tf.function(lambda x: tf.reduce_sum(tf.nn.relu(x)))(tf.ones([4]))))"
)

DEEP_TORSO_STEP = """
import common, numpy as np, tensorflow as tf
from common.models import networks
torso = networks.DeepTorso()
frames = tf.constant(np.random.default_rng(0).integers(0, 255, (2, 84, 84, 4), dtype=np.uint8))
@tf.function
def step(frames):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(torso(frames))
    return tape.gradient(loss, torso.trainable_variables)
step(frames)
print("stepped")
"""


def _run(code: str, **env) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-c", code],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_tensorflow_loads_and_computes_without_a_log_line():
    result = _run(LOAD_AND_COMPUTE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "4.0"
    assert not CPP_LOG_LINE.search(result.stderr), result.stderr


def test_tensorflows_own_variable_brings_the_log_back():
    # With oneDNN on (common's default) TensorFlow always logs that its custom ops are on.
    result = _run(LOAD_AND_COMPUTE, TF_CPP_MIN_LOG_LEVEL="0")
    assert result.returncode == 0, result.stderr
    assert CPP_LOG_LINE.search(result.stderr), result.stderr
    assert "oneDNN custom operations are on" in result.stderr


def test_the_deep_torso_does_not_trip_the_remapper():
    """At full verbosity: the fix is in the graph's optimisation, not in hiding its message."""
    result = _run(DEEP_TORSO_STEP, TF_CPP_MIN_LOG_LEVEL="0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "stepped"
    assert "remapper failed" not in result.stderr, result.stderr


def test_an_atari_game_opens_without_the_emulators_banner():
    code = (
        "from common.environments import envs; import gymnasium; "
        "gymnasium.make('ALE/Pong-v5').reset(seed=0); print('opened')"
    )
    result = _run(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "opened"
    assert "Arcade Learning Environment" not in result.stdout + result.stderr


@pytest.mark.slow
def test_a_runs_console_has_no_routine_reverb_line(tmp_path):
    # A real run through a paper's main: its Reverb server starts and stops, its tables are read
    # in-process and it checkpoints, each of which Reverb announces on stderr; none reaches the
    # console, and the run's own lines do (common/runtime/stderr_filter.py).
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "impala.main",
            "--env=CartPole",
            "--total_frames=2000",
            "--eval_interval_s=0",
            f"--logdir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    console = result.stdout + result.stderr
    assert "[impala CartPole] checkpoint" in console
    assert "[reverb/cc/" not in console

"""Reverb's routine C++ lines stay off the console of a run, like TensorFlow's, and come back with
TensorFlow's switch (TF_CPP_MIN_LOG_LEVEL=0); everything else a run writes to stderr passes, from
its children too and from a process that aborts."""

import os
import subprocess
import sys

import pytest

from common.runtime import stderr_filter

ROUTINE = b"[reverb/cc/platform/default/server.cc:71] Started replay server on port 41597\n"
CHECK = b"[reverb/cc/table.cc:12] Check failed: size > 0\n"

CHILD = f"import os; os.write(2, {ROUTINE + b'from the child' + bytes([10])!r})"
# A program that filters its stderr, then writes through every path a run has: Python's
# sys.stderr, fd 2 directly, a child process, and (with "abort") a last line before dying.
PROGRAM = f"""
import os, subprocess, sys
from common.runtime import stderr_filter
stderr_filter.filter_reverb_lines()
os.write(2, {ROUTINE!r})
os.write(2, {CHECK!r})
print("from python", file=sys.stderr, flush=True)
subprocess.run([sys.executable, "-c", {CHILD!r}], check=True)
if sys.argv[1:] == ["abort"]:
    os.write(2, b"last words\\n")
    os.abort()
"""


def _run(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != stderr_filter.FILTERED}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, *args],
        capture_output=True,
        env=environment,
        timeout=60,
    )


def test_routine_reverb_lines_are_held_back_and_the_rest_passes():
    result = _run()
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        CHECK.rstrip(),
        b"from python",
        b"from the child",
    ]


def test_tensorflows_switch_brings_them_back():
    result = _run(TF_CPP_MIN_LOG_LEVEL="0")
    assert result.returncode == 0
    assert result.stderr.count(ROUTINE) == 2  # the process's and its child's
    assert CHECK in result.stderr


def test_what_an_aborting_process_wrote_last_reaches_the_console():
    result = _run("abort")
    assert result.returncode != 0
    assert result.stderr.splitlines()[-1] == b"last words"
    assert ROUTINE not in result.stderr


@pytest.mark.parametrize(
    "line, held",
    [
        (ROUTINE, True),
        (b"[reverb/cc/client.cc:87] Sampler and server are owned by the same process (1)\n", True),
        (
            b"[reverb/cc/platform/tfrecord_checkpointer.cc:162]  Initializing TFRecordCheckpointer in /tmp/x.\n",
            True,
        ),
        (CHECK, False),
        (
            b"[reverb/cc/trajectory_writer.cc:9] The number of pending items is alarmingly high\n",
            False,
        ),
        (b"Started replay server on port 1\n", False),
    ],
)
def test_which_lines_are_routine(line, held):
    assert stderr_filter.routine(line) == held

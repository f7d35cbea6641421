"""Reverb's C++ info lines off the console by default, as TensorFlow's are (`common/__init__.py`).

dm-reverb 0.14 writes its log lines ("[reverb/cc/platform/default/server.cc:71] Started replay
server on port 41597", about ten per run) to `std::clog` with no level and no switch, so only the
file descriptor can hold them back. `filter_reverb_lines()` turns the process's stderr (fd 2) into
a pipe to a small filter process that copies every line to the console but Reverb's routine ones
(`ROUTINE`: a server started or stopped, a checkpoint written or loaded, a table read in-process);
Reverb's warnings, errors and failed checks carry no level of their own, so every other line passes.
The processes the run spawns inherit the pipe. The filter is a process of its own, not a thread,
so that what a dying process wrote last still reaches the console; it runs in a session of its
own, so Ctrl-C and a signal to the run's process group leave it to end when the last process
holding the pipe has exited.

`TF_CPP_MIN_LOG_LEVEL=0`, the switch that brings back TensorFlow's C++ log, leaves stderr as it is.
"""

import os
import signal
import subprocess
import sys

REVERB_PREFIX = b"[reverb/cc/"
# The messages of Reverb's routine lines, after its "[file:line] " prefix.
ROUTINE = (
    b"Sampler and server are owned by the same process",
    b"Started replay server on port",
    b"Shutting down replay server",
    b"Initializing TFRecordCheckpointer in",
    b"Loading latest checkpoint from",
    b"Stored checkpoint to",
)
# Set in the environment once a process filters, so that processes it starts which call
# `filter_reverb_lines` again (a run's subprocesses) add no second filter.
FILTERED = "RL_PAPERS_STDERR_FILTERED"


def routine(line: bytes) -> bool:
    """Whether the filter holds `line` back (the rule the filter process runs)."""
    return line.startswith(REVERB_PREFIX) and line.partition(b"] ")[2].lstrip().startswith(ROUTINE)


def wanted() -> bool:
    """Whether Reverb's lines are to be held back: unless TensorFlow's C++ log is asked for
    (`TF_CPP_MIN_LOG_LEVEL=0`) or a parent process already filters this stderr."""
    return os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3") != "0" and FILTERED not in os.environ


def filter_reverb_lines() -> bool:
    """Routes this process's stderr through the filter (see the module docstring); returns
    whether it did. Call it early in a program's main, before threads start."""
    if not wanted():
        return False
    sys.stderr.flush()
    # This file run as a script, isolated (-I: no PYTHON* variables, not even its own folder on
    # the path) and without site packages (-S): it needs
    # only the standard library and starts in milliseconds).
    filter_process = subprocess.Popen(
        [sys.executable, "-I", "-S", os.path.abspath(__file__)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    pipe = filter_process.stdin
    assert pipe is not None  # stdin=PIPE
    os.dup2(pipe.fileno(), 2)
    pipe.close()  # fd 2 is now this process's one write end
    os.environ[FILTERED] = "1"
    return True


def _copy_all_but_routine() -> None:
    """The filter process: stdin to stderr, line by line, less Reverb's routine lines."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = sys.stderr.buffer
    for line in sys.stdin.buffer:
        if not routine(line):
            out.write(line)
            out.flush()


if __name__ == "__main__":
    _copy_all_but_routine()

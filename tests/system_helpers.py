"""What several test modules share to drive real processes: `python -m <paper>.main` runs and
their checkpoints and logs (the papers' system tests, tests/common/test_multihost.py), the quick
flag checks of every `<paper>/test_main.py`, waiting on processes, and the children of
`common.launchers.supervisor.Supervisor` (tests/common/launchers/test_launch.py; module-level here
so that spawned processes import them without importing a test module).

Not a test module: pytest collects nothing here, and no test module imports another."""

import collections
import csv
import os
import re
import subprocess
import sys
import time

import numpy as np
import tensorflow as tf

from common.equations import instruments
from common.runtime import run_summary
from common.runtime import runlog

# ------------------------------------------------------------------ `python -m <paper>.main` runs


def run_main(
    logdir, *extra, flags, module="impala.main", prefix=(), **popen
) -> tuple[subprocess.Popen, str]:
    """Starts `python -m <module> --logdir=<logdir>` with `flags` and `extra` (and
    `subprocess.Popen`'s `popen` arguments), after the command `prefix` if any (e.g. `ip netns
    exec <name>`, which runs it in place); returns the process and the file its output goes to.

    Output goes to a file, not a pipe: reading a pipe to its end waits for every process that
    inherited it, and a hung grandchild would then hang the test instead of failing it."""
    output_path = os.path.join(logdir, f"main_output_{time.monotonic_ns()}.txt")
    with open(output_path, "w") as output:
        process = subprocess.Popen(
            [*prefix, sys.executable, "-m", module, f"--logdir={logdir}", *flags, *extra],
            stdout=output,
            stderr=subprocess.STDOUT,
            **popen,
        )
    return process, output_path


def finish(process: subprocess.Popen, output_path: str, timeout_s: float) -> str:
    """Waits for `process` (killing it after `timeout_s`) and returns its output."""
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()  # SIGKILL: the exit code says so to the caller's assertions
        process.wait()
    with open(output_path) as f:
        return f.read()


def run_to_completion(logdir, *extra, flags, module="impala.main", timeout_s: float = 240) -> str:
    """Runs `python -m <module>` with `flags` and `extra` until it exits; asserts it succeeded
    and returns its output."""
    process, output_path = run_main(logdir, *extra, flags=flags, module=module)
    output = finish(process, output_path, timeout_s)
    assert process.returncode == 0, output
    return output


def checkpoint_step(logdir: str) -> int:
    """The learner step of the latest checkpoint under `logdir`; -1 if there is none."""
    state = tf.train.get_checkpoint_state(os.path.join(logdir, "checkpoints"))
    return int(state.model_checkpoint_path.rsplit("-", 1)[1]) if state else -1


def checkpoint_frames(logdir: str) -> int:
    """The learner's frame count in the latest checkpoint under `logdir`."""
    path = tf.train.latest_checkpoint(os.path.join(logdir, "checkpoints"))
    return int(tf.train.load_variable(path, "frames/.ATTRIBUTES/VARIABLE_VALUE"))


def scalars(logdir) -> dict[str, list[float]]:
    """Every scalar written to TensorBoard under `logdir` (not its subdirectories), by tag."""
    return {tag: [v for _, v in points] for tag, points in runlog.read_scalars(logdir).items()}


def check_instruments(logdir: str, output: str, num_actions: int) -> dict:
    """A finished run's summary.json holds every learner instrument (once, or once per network
    with an `_<i>` suffix) with values that could be real, and its console says so; returns the
    instruments."""
    summary = run_summary.read_summary(logdir)
    assert summary is not None and summary["frames"] == checkpoint_frames(logdir)
    assert "instruments over the last 20% of frames: grad norm" in output
    found = summary["instruments"]

    def values(tag: str) -> list[float]:
        own = [v for t, v in found.items() if t == tag or re.fullmatch(rf"{tag}_\d+", t)]
        assert own, f"{tag} missing from {sorted(found)}"
        return own

    clipped, norms = values(instruments.GRAD_NORM_CLIPPED), values(instruments.GRAD_NORM)
    assert all(0 < after <= before + 1e-6 for after, before in zip(clipped, norms))
    assert all(0.0 <= share <= 1.0 for share in values(instruments.CLIPPED))
    assert all(step > 0 for step in values(instruments.MEAN_STEP))
    assert all(0.0 < h <= np.log(num_actions) + 1e-5 for h in values(instruments.ENTROPY))
    assert all(x >= 0 for x in values(instruments.VALUE_ERROR) + values(instruments.ABS_LOG_RHO))
    return found


# ------------------------------------------------------------ the bandits of DiCE, GDI and LBC runs


def kept_state(logdir: str, step: int, actor: int = 0) -> str:
    """Actor `actor`'s behaviour state file as the checkpoint of `step` kept it."""
    return os.path.join(logdir, "checkpoints", "behaviour", f"ckpt-{step}", f"actor_{actor}.npz")


def bandit_counts(
    logdir, actor: int = 0, envs: int = 8, state_file: str | None = None
) -> np.ndarray:
    """Games each of the `envs` envs' bandits have learned from (actor `actor`'s saved state, or
    the state in `state_file`)."""
    path = state_file or os.path.join(logdir, "behaviour", f"actor_{actor}.npz")
    with np.load(path) as state:
        return np.array([state[f"{env}/selector0/bandit0/counts"].sum() for env in range(envs)])


def games_logged(logdir) -> int:
    """Training games the learner logged: the rows of the run's episodes.csv."""
    with open(os.path.join(logdir, runlog.EPISODES_CSV)) as f:
        return len(f.readlines()) - 1


def check_one_draw_per_game(values, logdir, high: float) -> None:
    """Every game the learner logged (a row of episodes.csv) carries its own draw of a behaviour
    parameter (`values`, one TensorBoard point per game), in [0, high]. How many games a short run
    finishes is up to scheduling, so the count is read from the run rather than fixed; at least
    two, to see draws differ."""
    games = games_logged(logdir)
    assert len(values) == games >= 2, (len(values), games)
    assert len(set(values)) == len(values), values  # continuous draws: equal ones were shared
    assert all(0.0 <= v <= high for v in values), values


def check_games_fed_the_bandits(counts: np.ndarray, logdir) -> None:
    """Every training game the learner logged fed a bandit, and the games spread over the envs'
    own controllers. Which env's controller a game updates is tested exactly in
    tests/common/control/test_behaviour.py; here an env whose first game outlasts a short run may
    not have finished one yet, so not every env is required to have a game."""
    assert counts.sum() >= games_logged(logdir) > 0
    assert (counts > 0).sum() >= len(counts) // 2


# ------------------------------------------------------------------------- the quick flag checks

IMPORT_TIME = "import time:"


def run_main_logging_imports(*flags, timeout=60, module="impala.main"):
    """Runs `python -m <module>`; returns the result, its stderr lines that are not the
    interpreter's import log, and the modules it imported (`-X importtime` logs every import on
    stderr, on any CPU)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", module, *flags],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = result.stderr.splitlines()
    imported = {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith(IMPORT_TIME)}
    messages = [line for line in lines if not line.startswith(IMPORT_TIME)]
    return result, messages, imported


def assert_one_line_error(module: str, flags, message: str) -> None:
    """`python -m <module> <flags>` exits 2 with one stderr line naming `message`, before
    TensorFlow or Reverb is imported."""
    result, messages, imported = run_main_logging_imports(*flags, module=module)
    assert result.returncode == 2
    assert len(messages) == 1 and messages[0].startswith("error: "), messages
    assert message in messages[0], messages
    assert "absl.flags" in imported  # the import log was read
    assert not {"tensorflow", "reverb"} & imported


# ------------------------------------------------------------------------------------- processes


def process_group(pgid: int) -> list[int]:
    """The running processes of process group `pgid`."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and alive(int(entry)):
                members.append(int(entry))
    return members


def wait_until(condition, timeout_s: float = 60.0, what: str = "the condition"):
    """Polls `condition()` until it returns something true, which it returns; fails after
    `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.1)


def alive(pid: int) -> bool:
    """Running (a zombie whose new parent has not reaped it yet counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def crash_once(path: str, seed: int, stop) -> None:
    """A Supervisor child: writes its seed; the first incarnation then crashes, later ones wait
    for stop."""
    with open(path, "a") as f:
        f.write(f"{seed}\n")
    if seed == 0:
        raise RuntimeError("simulated actor crash")
    stop.wait(60)


def ignore_stop(stop) -> None:
    """A Supervisor child that never looks at its stop event."""
    time.sleep(600)


def block_after_ready(path: str, stop) -> None:
    """A Supervisor child that writes its pid, then sleeps without looking at anything."""
    with open(path, "w") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(600)


# choice: the burn-in papers' system tests that are about something else than the learner's padding
# cut (GDI's, LBC's, the fleet and chaos tests) train without it. With it the train step holds three
# gradient graphs a slice (whole, and cut in two halves), and tracing and optimising them was
# most of a small run's start: LBC's 320-frame CartPole run took 31 CPU seconds with the cut and
# 19 without. The cut stays end to end in tests/dice/test_system.py (and compiled in
# tests/common/burn_in and tests/dice/test_learning.py).
ONE_GRAPH = "--trim_padding=false"

# The fleet tests (tests/common/test_multihost.py, test_ray_launch.py): a small DiCE on CartPole
# (tests/dice/test_system.py's) that the test stops. DiCE, not IMPALA: a burn-in agent with
# replay and per-game behaviour state goes through every step an IMPALA run does (the actors'
# indices, seeds and restarts), and through the behaviour state files too. choice: one agent
# each, for the suite's time (an IMPALA case took another ~150 s on 2 cores in each test).
FLEET_FLAGS = [
    "--lstm_units=16",
    "--burn_in=4",
    "--sequence_length=8",
    "--replay_capacity=256",
    "--warmup_steps=2",
    ONE_GRAPH,
]
FLEET_STARTUP_S = (
    300  # choice: generous; TensorFlow imports and compiles on a loaded 2-core machine
)


def fleet_flags(seed: int, num_actors: int, envs_per_actor: int) -> list[str]:
    """The flags both fleet tests share: checkpoints and console lines every second, a budget the
    test never reaches, and no evaluator (the machine has 2 cores)."""
    return [
        "--env=CartPole",
        f"--seed={seed}",
        f"--num_actors={num_actors}",
        f"--envs_per_actor={envs_per_actor}",
        "--batch_size=8",
        "--total_frames=100000000",
        "--checkpoint_interval_s=1",
        "--log_interval_s=1",
        "--eval_interval_s=0",
    ]


def episodes(logdir: str) -> list[tuple[str, ...]]:
    """The rows of episodes.csv (none before the learner created it)."""
    path = os.path.join(logdir, runlog.EPISODES_CSV)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        rows = [tuple(row) for row in csv.reader(f)]
    assert rows[0] == runlog.EPISODES_HEADER
    return rows[1:]


def assert_the_run_went_on(logdir: str, since_step: int, since_games: int, ties: int) -> None:
    """After an interruption at learner step `since_step` with `since_games` games logged: the
    learner's step and frames only grew, past `since_step`, and episodes.csv counts each game
    once. Every game report adds the frames its actor produced since its last one, so a game
    logged twice would sit at a later count; games that end on one actor step share a count (the
    second brings no new frames: common.replay.reports), and CartPole's often share their length and
    return too, so identical rows are ties, at most `ties` (one game per env) at one count."""
    points = runlog.read_scalars(logdir)["progress/learner_step"]  # (frames, step)
    frames, steps = np.array(points).T
    assert (np.diff(frames) >= 0).all() and (np.diff(steps) >= 0).all()
    assert steps[-1] > since_step
    rows = episodes(logdir)
    produced = [int(row[0]) for row in rows]
    assert produced == sorted(produced)
    assert max(collections.Counter(produced).values()) <= ties
    assert len(rows) > since_games > 0

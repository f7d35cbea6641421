"""What `--launcher=ray` costs against the local launcher: one paper's training, the same command
under each launcher, on this machine, in one sitting.

    python -m benchmarks.launcher_overhead --paper=impala --env=Pong --seconds=120 --warmup_s=60

Each run is `python -m <paper>.main --env=<env> --launcher=<launcher> --logdir=<a new directory>`
with no evaluator, no periodic checkpoint and a frame budget no run reaches (arguments after `--`
go to every run, e.g. --num_actors=4). The launchers take turns, `--repeats` times (local, ray,
local, ray, ...), so a drift of the machine's speed during the sitting falls on both. A run is
measured from its learner's summaries (`progress/learner_step`, written every --log_interval_s
at the learner's frames, and `progress/actor_frames`, the frames the actors reported): over the
`--seconds` that follow `--warmup_s` after the learner's first summary, the learner's frames/s
(its new frames per second of wall time) and the actors' frames/s (a coarse figure: the actors
report every 100 steps, 6,400 frames for IMPALA's 16 envs on Atari, so a window's edges move it by
up to a report per actor; the learner's is the measure); then the run gets SIGINT, as
a user's Ctrl-C, and stops the way it would. "start" is the time from the command to the
learner's first summary: process start-up, Ray's cluster start-up under --launcher=ray, the
first weights, the first batch and the train step's tracing; it is not in the window.

The CPU line is printed first, then one markdown table: each run, each launcher's mean, and
Ray's mean as a share of local's. It prints figures; it asserts nothing.
"""

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from benchmarks.machine import cpu_line
from common.runtime import runlog

FLAGS = flags.FLAGS


def define_flags() -> None:
    """The benchmark's flags, defined when it runs (not on import, so tests import it freely)."""
    flags.DEFINE_string("paper", "impala", "The paper whose main runs: impala, reactor, dice, ...")
    flags.DEFINE_string("env", "Pong", "Game, as the paper's --env takes it.")
    flags.DEFINE_list("launchers", ["local", "ray"], "Launchers, in turn.")
    flags.DEFINE_integer("repeats", 2, "Runs per launcher.")
    flags.DEFINE_float("seconds", 120.0, "Measured seconds per run.")
    flags.DEFINE_float("warmup_s", 60.0, "Seconds after the learner's first summary, not measured.")
    flags.DEFINE_float(
        "log_interval_s", 5.0, "The runs' summary interval: the window's resolution."
    )
    flags.DEFINE_float("start_timeout_s", 600.0, "A run without a learner summary by then fails.")
    flags.DEFINE_string(
        "logdir", None, "Where the runs write (default: a new temporary directory)."
    )


STEPS = "progress/learner_step"  # written at the learner's frames
ACTOR_FRAMES = "progress/actor_frames"  # written at the learner's frames; its value: acted


def command(launcher: str, logdir: str, extra: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        f"{FLAGS.paper}.main",
        f"--env={FLAGS.env}",
        f"--launcher={launcher}",
        *(["--open_port"] if launcher == "ray" else []),  # Ray's roles meet over the network
        f"--logdir={logdir}",
        "--eval_interval_s=0",
        "--checkpoint_interval_s=1e9",
        f"--log_interval_s={FLAGS.log_interval_s}",
        "--total_frames=1000000000000",
        *extra,
    ]


def rate(points: list[tuple[float, float]], start: float, end: float) -> float:
    """(value change) / (time change) between the first and the last point of [start, end]."""
    inside = [(t, v) for t, v in points if start <= t <= end]
    if len(inside) < 2 or inside[-1][0] == inside[0][0]:
        return float("nan")
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def measure(launcher: str, logdir: str, extra: list[str], log) -> dict:
    started = time.time()
    process = subprocess.Popen(
        command(launcher, logdir, extra),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        first = None
        while True:
            time.sleep(FLAGS.log_interval_s)
            if process.poll() is not None:
                raise RuntimeError(
                    f"{launcher} run exited with {process.returncode} (log: {log.name})"
                )
            points = runlog.read_points(logdir, STEPS) if os.path.isdir(logdir) else []
            if first is None and points:
                first = points[0][0]
            if first is None and time.time() - started > FLAGS.start_timeout_s:
                raise RuntimeError(
                    f"{launcher} run: no learner summary in {FLAGS.start_timeout_s} s"
                )
            if first is not None and points[-1][0] > first + FLAGS.warmup_s + FLAGS.seconds:
                break
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    window = (first + FLAGS.warmup_s, first + FLAGS.warmup_s + FLAGS.seconds)
    return dict(
        launcher=launcher,
        start=first - started,
        learner=rate([(t, frames) for t, frames, _ in points], *window),
        actors=rate(
            [(t, acted) for t, _, acted in runlog.read_points(logdir, ACTOR_FRAMES)], *window
        ),
    )


def table(results: list[dict], launchers: list[str]) -> str:
    lines = [
        "| launcher | run | start (s) | learner frames/s | actors' frames/s |",
        "|---|---|---|---|---|",
    ]
    means = {}
    for launcher in launchers:
        runs = [r for r in results if r["launcher"] == launcher]
        for i, r in enumerate(runs):
            lines.append(
                f"| {launcher} | {i + 1} | {r['start']:.0f} | {r['learner']:.0f} | {r['actors']:.0f} |"
            )
        means[launcher] = {
            k: statistics.fmean(r[k] for r in runs) for k in ("start", "learner", "actors")
        }
        m = means[launcher]
        lines.append(
            f"| {launcher} | mean | {m['start']:.0f} | {m['learner']:.0f} | {m['actors']:.0f} |"
        )
    base = launchers[0]
    for launcher in launchers[1:]:
        share = {k: means[launcher][k] / means[base][k] for k in ("learner", "actors")}
        lines.append(
            f"| {launcher} / {base} | | | {share['learner']:.3f} | {share['actors']:.3f} |"
        )
    return "\n".join(lines)


def main(argv):
    extra = argv[1:]
    root = FLAGS.logdir or tempfile.mkdtemp(prefix="launcher_overhead_")
    os.makedirs(root, exist_ok=True)
    print(cpu_line())
    print(
        f"{FLAGS.paper} on {FLAGS.env}{' ' + ' '.join(extra) if extra else ''}: {FLAGS.seconds:.0f} s "
        f"after {FLAGS.warmup_s:.0f} s warm-up, {FLAGS.repeats} runs per launcher, in turn; runs "
        f"under {root}",
        flush=True,
    )
    results = []
    for repeat in range(FLAGS.repeats):
        for launcher in FLAGS.launchers:
            name = f"{launcher}_{repeat + 1}"
            with open(os.path.join(root, f"{name}.log"), "w") as log:
                result = measure(launcher, os.path.join(root, name), extra, log)
            results.append(result)
            print(
                f"{name}: start {result['start']:.0f} s, learner {result['learner']:.0f} "
                f"frames/s, actors {result['actors']:.0f} frames/s",
                flush=True,
            )
    print(table(results, FLAGS.launchers))


if __name__ == "__main__":
    define_flags()
    app.run(main)

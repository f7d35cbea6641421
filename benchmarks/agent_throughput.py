"""Each paper's full training, side by side on this machine: frames/s, updates/s, replay ratio.

    python -m benchmarks.agent_throughput --agents=impala,dice --env=Pong --seconds=180
    python -m benchmarks.agent_throughput --agents=gdi.gdi_h3,gdi.gdi_h3_shared_torso

Each agent, `<paper>` or `<paper>.<ablation>` (as common.compare names them), runs as
`python -m <paper>.main --env=<env> [--ablation=<ablation>]` with its paper's defaults (actors,
learner and Reverb on this machine, no evaluator) for `--warmup_s` (start-up, compilation, the
replay filling), then is measured over `--seconds` from the learner's TensorBoard scalars:

- trained frames/s: the learner's frame count (the paper's new frames per learner step);
- actor frames/s: the frames the actors produced (`progress/actor_frames`);
- updates/s: learner steps per second;
- replay ratio: agent steps trained on per agent step produced,
  updates x batch x trained steps per item / produced agent steps (IMPALA's queue: 1; DiCE's
  sample-k: 2; Reactor's prioritised replay: its acting : learning ratio).

The CPU, oneDNN and threads are printed first (benchmarks.throughput), so the table says where it
was measured. Agents run one after the other, never together. It prints figures; it asserts
nothing.
"""

import common  # noqa: F401  (first: TensorFlow's oneDNN default, common/__init__.py)

import os
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from benchmarks.machine import cpu_line
from common.runlog import read_scalars

_AGENTS = flags.DEFINE_list("agents", ["impala", "dice"], "Papers to measure, one at a time.")
_ENV = flags.DEFINE_string("env", "Pong", "Game (or CartPole).")
_SECONDS = flags.DEFINE_float("seconds", 180.0, "Measured seconds per agent.")
_WARMUP = flags.DEFINE_float("warmup_s", 90.0, "Seconds before measuring.")

PROGRESS = ("progress/learner_step", "progress/actor_frames")


def latest_scalars(logdir: str) -> dict[str, tuple[int, float]]:
    """The last value of each progress scalar, with its step (the learner's frame count)."""
    return {tag: points[-1] for tag, points in read_scalars(logdir).items() if tag in PROGRESS}


def steps_per_update(paper: str, ablation: str | None, env: str) -> tuple[int, int]:
    """(agent steps trained per learner update, environment frames per agent step) of the
    paper's default config for `env` (in a subprocess: each paper's main defines its flags)."""
    probe = (
        "from common import cli; from {paper} import main; "
        "c = cli.make_config(main.PAPER, {{'env': cli.normalise_env({env!r})}}, {ablation!r}); "
        "length = getattr(c, 'sequence_length', None) or c.unroll_length; "
        "print(c.batch_size, length, 1 if c.env == 'CartPole' else 4)"
    ).format(paper=paper, env=env, ablation=ablation)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    batch, length, frames_per_step = map(int, out.stdout.split()[-3:])
    if paper == "reactor":
        length -= 1  # 33 frames hold 32 trained transitions
    return batch * length, frames_per_step


def measure(agent: str, env: str, warmup_s: float, seconds: float) -> dict[str, float]:
    paper, _, ablation = agent.partition(".")
    with tempfile.TemporaryDirectory() as logdir:
        command = [
            sys.executable,
            "-m",
            f"{paper}.main",
            f"--env={env}",
            f"--logdir={logdir}",
            "--total_frames=10000000000",
            "--eval_interval_s=0",
            "--log_interval_s=5",
            *([f"--ablation={ablation}"] if ablation else []),
        ]
        with open(os.path.join(logdir, "output.txt"), "w") as output:
            process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        try:
            time.sleep(warmup_s)
            start, t0 = latest_scalars(logdir), time.monotonic()
            time.sleep(seconds)
            end, t1 = latest_scalars(logdir), time.monotonic()
        finally:
            # A learner mid-step (DiCE's take tens of seconds on a CPU) then checkpoints its
            # replay before it exits: give it time, then kill.
            process.terminate()
            try:
                process.wait(300)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if not all(tag in start for tag in PROGRESS):
            raise RuntimeError(f"{agent} logged no progress in {warmup_s} s of warm-up")
    # The scalars are written every few seconds; rates use their own frame stamps and the
    # measured window.
    elapsed = t1 - t0
    updates = end["progress/learner_step"][1] - start["progress/learner_step"][1]
    trained = end["progress/learner_step"][0] - start["progress/learner_step"][0]
    produced = end["progress/actor_frames"][1] - start["progress/actor_frames"][1]
    per_update, frames_per_step = steps_per_update(paper, ablation or None, env)
    return {
        "trained frames/s": trained / elapsed,
        "actor frames/s": produced / elapsed,
        "updates/s": updates / elapsed,
        "replay ratio": updates * per_update * frames_per_step / max(produced, 1),
    }


def main(argv):
    del argv
    print(cpu_line())
    print(f"TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS')}")
    rows = {}
    for paper in _AGENTS.value:
        rows[paper] = measure(paper, _ENV.value, _WARMUP.value, _SECONDS.value)
        print(paper, {k: round(v, 3) for k, v in rows[paper].items()}, flush=True)
    columns = list(next(iter(rows.values())))
    print(f"\n| {_ENV.value} | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for paper, row in rows.items():
        cells = [
            f"{row[c]:.2f}" if c in ("updates/s", "replay ratio") else f"{row[c]:.0f}"
            for c in columns
        ]
        print(f"| {paper} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    app.run(main)

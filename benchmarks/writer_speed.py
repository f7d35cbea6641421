"""How long one batched `BurnInSequenceWriter.append` takes, the DiCE actor's replay write, or
with --writer=unroll one batched `UnrollWriter.append`, IMPALA's.

    python -m benchmarks.writer_speed --steps=250 --baseline_steps=40
    python -m benchmarks.writer_speed --writer=unroll --num_envs=128 --steps=400 \\
        --baseline=0bd6b74~1

An in-process Reverb server holds DiCE's sample-k table (`patterns.SampleK(length=80,
burn_in=40)`: 121-step items with a mask, one every 80 steps, burn-in and end padding), with an
`error_buffer` of 1e9 so that the rate limiter never blocks the writer while nothing samples.
`--num_envs` environments append MinAtar-like DiCE steps: observation [10, 10, 4] uint8,
prev_action, prev_reward, reset, action, reward, params_step, truncation_value and a behaviour
params dict of two float32 per step, plus an LSTM state of two [512] float32 as first-step extras.
Episodes end at random (geometric lengths, the same sequence for every writer) with a mean of
`--short_mean` steps (MinAtar's early games) and, in a second case, `--long_mean` steps.

--writer=unroll: IMPALA's queue (`patterns.Queue(length=20)`, 21-step unrolls, one every 20
steps per environment, in a queue that never fills here) gets MinAtar-like IMPALA steps (the
fields above without the behaviour params, with six behaviour logits, no extras); episode ends
do not matter to it, so it has one case.

Each case runs for the writer of the working tree ("new", `--steps` timed appends) and for
the writers as of git `--baseline` ("old": `common/replay/writers.py`, or `common/replay.py`
before the layer folders, loaded from `git show`; in the short case only the first
`--baseline_steps` of the same sequence), each on a fresh server, timed after `--warmup` steps,
`--repeats` times alternating old and new. It prints the median microseconds per batched append:
wall clock (the final flush included; the items inserted in brackets) and the process's CPU time
(all threads, the in-process server's included: steadier than wall clock on a busy machine).
Both write the same items (tests/common/replay/test_replay.py checks the layout, and that whole
items equal items referencing the padded stream's steps).
"""

import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from absl import app, flags

from benchmarks.machine import cpu_line
from common.replay import patterns, replay, writers

FLAGS = flags.FLAGS


def define_flags() -> None:
    """This tool's flags, defined when it runs (not when it is imported)."""
    flags.DEFINE_enum("writer", "burn_in", ["burn_in", "unroll"], "DiCE's writer or IMPALA's.")
    flags.DEFINE_integer("num_envs", 80, "Environments per batched append (DiCE's actor: 80).")
    flags.DEFINE_integer(
        "steps",
        250,
        "Timed batched appends per case of the new writer: about two items' worth of steps per env "
        "in the long case, some 2,000 items in the short one.",
    )
    flags.DEFINE_integer("warmup", 20, "Untimed batched appends before timing.")
    flags.DEFINE_float("short_mean", 10.0, "Mean episode length of the short-episode case.")
    flags.DEFINE_float("long_mean", 1000.0, "Mean episode length of the long-episode case.")
    # The last commit before whole items (one append per environment and step, padding shared from
    # a block of zero steps); cae6ee7 is the one before that block (each padding step appended).
    flags.DEFINE_string(
        "baseline", "a28bd76", "Git revision of the replay writers to compare ('' skips)."
    )
    flags.DEFINE_integer(
        "baseline_steps",
        40,
        "Timed batched appends of the old writer in the short-episode case (the first of the same "
        "sequence): its cost per step is steady there (each game pads alike) and ~10x the new one's, "
        "so fewer suffice. The long case times both writers on the same --steps (items are created "
        "only from each episode's 81st step on).",
    )
    flags.DEFINE_integer(
        "repeats", 3, "Runs per case and writer, alternating; the median is shown."
    )


BURN_IN, LENGTH = 40, 80
CORE = 512
UNROLL = 20  # IMPALA's unroll length (Table G.1)


def load_baseline(revision: str):
    """The writers' module as of `revision` (`common/replay/writers.py`, or `common/replay.py`
    before the layer folders), imported as a module of its own."""
    root = Path(__file__).resolve().parents[1]
    for old_path in ("common/replay/writers.py", "common/replay.py"):
        shown = subprocess.run(
            ["git", "show", f"{revision}:{old_path}"], cwd=root, capture_output=True, text=True
        )
        if shown.returncode == 0:
            break
    else:
        raise SystemExit(f"--baseline={revision}: no replay writers at that revision")
    source = shown.stdout
    path = Path(tempfile.mkdtemp()) / "replay_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("replay_baseline", path)
    assert spec is not None and spec.loader is not None  # a .py file's
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def batched_steps(num_envs: int, count: int, rng: np.random.Generator):
    """`count` distinct batched steps (cycled through while timing) and their core states (None
    for IMPALA's, which has no extras and behaviour logits in place of the params)."""
    steps = []
    for _ in range(count):
        step = {
            "observation": rng.integers(0, 2, (num_envs, 10, 10, 4), dtype=np.uint8),
            "prev_action": rng.integers(0, 6, num_envs, dtype=np.int32),
            "prev_reward": rng.standard_normal(num_envs).astype(np.float32),
            "reset": rng.integers(0, 2, num_envs).astype(bool),
            "action": rng.integers(0, 6, num_envs, dtype=np.int32),
            "reward": rng.standard_normal(num_envs).astype(np.float32),
            "params_step": np.full(num_envs, 7, np.int64),
            "truncation_value": rng.standard_normal(num_envs).astype(np.float32),
            "behaviour": {
                "eta": rng.random(num_envs, dtype=np.float32),
                "eps": rng.random(num_envs, dtype=np.float32),
            },
        }
        core: dict | None = {
            "core_state": (
                rng.standard_normal((num_envs, CORE), dtype=np.float32),
                rng.standard_normal((num_envs, CORE), dtype=np.float32),
            )
        }
        if FLAGS.writer == "unroll":
            del step["behaviour"]
            step["behaviour_logits"] = rng.standard_normal((num_envs, 6), dtype=np.float32)
            core = None
        steps.append((step, core))
    return steps


def time_writer(module, steps, episode_ends, warmup: int, timed: int) -> tuple[float, float, int]:
    """Wall and CPU microseconds per batched append of `module.BurnInSequenceWriter` (or
    `UnrollWriter`), and the items inserted."""

    def spec_of(part: dict) -> dict:
        return replay.tf.nest.map_structure(
            lambda x: replay.tf.TensorSpec(x.shape[1:], x.dtype), part
        )

    step, core = steps[0]
    step_spec, core_spec = spec_of(step), None if core is None else spec_of(core)
    num_envs = len(episode_ends[0])
    pattern: patterns.Pattern
    if FLAGS.writer == "unroll":
        pattern = patterns.Queue(length=UNROLL, capacity=100_000)
    else:
        pattern = patterns.SampleK(
            length=LENGTH, burn_in=BURN_IN, capacity=100_000, error_buffer=1e9
        )
    server = replay.start_server(pattern.tables(pattern.signature(step_spec, core_spec)))
    try:
        client = replay.connect(replay.address_of(server))
        if FLAGS.writer == "unroll":
            writer = module.UnrollWriter(client, patterns.EXPERIENCE_TABLE, UNROLL, num_envs)
        else:
            writer = module.BurnInSequenceWriter(
                client, patterns.EXPERIENCE_TABLE, BURN_IN, LENGTH, num_envs
            )
        start = None
        for t, end in enumerate(episode_ends[: warmup + timed]):
            if t == warmup:
                start, cpu_start = time.perf_counter(), time.process_time()
            step, core = steps[t % len(steps)]
            if FLAGS.writer == "unroll":
                writer.append(step, first_step_extras=core)
            else:
                writer.append(step, end, first_step_extras=core)
        writer.flush()
        if start is None:
            raise ValueError(f"{len(episode_ends)} steps: none after the {warmup} warm-up ones")
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        writer.close()
        items = client.server_info()[patterns.EXPERIENCE_TABLE].current_size
        return 1e6 * wall / timed, 1e6 * cpu / timed, items
    finally:
        server.stop()


def main(argv):
    del argv
    print(cpu_line())
    writers_by_age = {"new": writers}
    if FLAGS.baseline:
        writers_by_age = {"old": load_baseline(FLAGS.baseline), **writers_by_age}
    rng = np.random.default_rng(0)
    steps = batched_steps(FLAGS.num_envs, 16, rng)
    total = FLAGS.warmup + max(FLAGS.steps, FLAGS.baseline_steps)
    items = (
        f"unroll={UNROLL}" if FLAGS.writer == "unroll" else f"burn_in={BURN_IN}, length={LENGTH}"
    )
    print(
        f"\n{FLAGS.num_envs} envs, {items}, {FLAGS.steps} timed "
        f"batched appends (old: the first {FLAGS.baseline_steps}) after {FLAGS.warmup}, median of {FLAGS.repeats}; µs per batched append, "
        "wall clock (items inserted), and the process's CPU time (all threads, the in-process "
        "server's included)\n"
    )
    names = list(writers_by_age)
    print(
        f"| mean episode | {' | '.join(f'{n} wall' for n in names)} | speed-up | "
        f"{' | '.join(f'{n} CPU' for n in names)} |"
    )
    print(f"|---|{'---|' * (2 * len(names) + 1)}")
    means = (FLAGS.short_mean,) if FLAGS.writer == "unroll" else (FLAGS.short_mean, FLAGS.long_mean)
    for mean in means:
        episode_ends = rng.random((total, FLAGS.num_envs)) < 1.0 / mean
        runs = {name: [] for name in writers_by_age}
        for _ in range(FLAGS.repeats):  # alternating, so that a busy machine hits both alike
            for name, module in writers_by_age.items():
                short_old = name == "old" and mean == FLAGS.short_mean and FLAGS.writer != "unroll"
                timed = FLAGS.baseline_steps if short_old else FLAGS.steps
                runs[name].append(time_writer(module, steps, episode_ends, FLAGS.warmup, timed))
        wall = {name: float(np.median([r[0] for r in runs[name]])) for name in names}
        cpu = {name: float(np.median([r[1] for r in runs[name]])) for name in names}
        cells = [f"{wall[n]:,.0f} ({runs[n][0][2]})" for n in names]
        speedup = f"{wall['old'] / wall['new']:.1f}x" if "old" in wall else "-"
        cpu_cells = [f"{cpu[n]:,.0f}" for n in names]
        case = "any" if FLAGS.writer == "unroll" else f"{mean:g} steps"
        print(f"| {case} | {' | '.join(cells)} | {speedup} | {' | '.join(cpu_cells)} |")


if __name__ == "__main__":
    define_flags()
    app.run(main)

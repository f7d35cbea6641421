"""Throughput on this machine: raw env stepping, the learner alone (L), the actor fleet alone (F),
full training and the shared-core bound 1/(1/L + 1/F).

    python -m benchmarks.throughput --env=Pong --seconds=40     # IMPALA's jit x precision grid

The measurements take any paper's `common.launchers.launch.Experiment` (built as the paper's `main`
builds it); `benchmarks.agent_throughput` runs them for every paper, each in its own process. Run as
a module, this file measures IMPALA: every `impala.main` flag applies (e.g. --num_actors,
--envs_per_actor, --network); the defaults are those of `python -m impala.main`.

Printed first: the CPU (model, cores, AVX2 / AVX-512 / AVX512-BF16 / AMX), whether TensorFlow
runs its oneDNN kernels (`TF_ENABLE_ONEDNN_OPTS`, common/__init__.py), the thread pools and any
GPU, so a table says where it was measured.

Rows (environment frames per second, action repeats included):
1. raw batched env stepping (`measure_raw`): the actor processes' vector envs with random
   actions, nothing else (any env: ALE, MinAtar, CartPole);
2. the learner alone, L (`measure_learner`): the paper's compiled train step on a synthetic
   batch already in memory (`synthetic_batch`: the shapes and dtypes of the replay's batches),
   times the paper's new frames per learner step (`LearnerSettings.frames_per_learner_step`);
3. the actor fleet alone, F (`measure_fleet`): the actor processes acting with the paper's
   network (initial weights, published once) and writing to Reverb through the paper's writer,
   no learner: each experience table is replaced by a sink of the same name and signature that
   drops its oldest item when full and never rate-limits (`sink_tables`), so neither a queue's
   back-pressure nor a samples-per-insert limiter waiting for a learner throttles the actors;
   frames are those the actors report (`common.replay.reports`, as the learner counts them), over a
   window that also holds `REPORTS_PER_ACTOR` reports per actor;
4. full training (`measure_training`): actors + learner (+ Reverb) on the same machine, the
   paper's own tables; the learner's frames; next to it the shared-core bound 1/(1/L + 1/F), the
   most any schedule reaches when the same cores run both, and each process's peak resident
   memory.
As a module, rows 2-4 run with and without --jit_compile (XLA for the policy call and the train
step), rows 3-4 with the actors' network in float32 and in bfloat16 (--actor_precision).

The project's targets: fleet >= 50% of raw; training >= 1.5K frames/s on 2 cores (deep net,
unroll 20, batch 32). It prints figures; it asserts nothing.
"""

import common  # noqa: F401  (first: TensorFlow's oneDNN default, common/__init__.py)

import dataclasses
import math
import multiprocessing
import os
import tempfile
import time
from typing import NamedTuple

import numpy as np
import tensorflow as tf
import tree
from absl import app
from absl import flags

from benchmarks.machine import cpu_line
from common.runtime import acting
from common.runtime import agent as agent_lib
from common.environments import envs
from common.environments import protocols
from common.launchers import launch
from common.launchers.supervisor import Supervisor
from common.runtime import learning
from common.replay import replay
from benchmarks.actor_fleet import REPORTS_PER_ACTOR, _CountingReports, measure_fleet


FLAGS = flags.FLAGS


def run_overrides(config):
    """`config` for a throughput run: no evaluator, no periodic checkpoints, a frame budget no
    run reaches, a console line every 30 s."""
    return dataclasses.replace(
        config,
        eval_interval_s=0.0,
        checkpoint_interval_s=1e9,
        log_interval_s=30.0,
        total_frames=10**12,
    ).validate()


def env_spec(experiment: launch.Experiment) -> agent_lib.EnvSpec:
    return agent_lib.probe_env(experiment.actor.env, experiment.actor.protocol)


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, NaN where the denominator is 0 or unknown."""
    if math.isnan(denominator) or denominator == 0:
        return float("nan")
    return numerator / denominator


def shared_core_bound(learner: float, fleet: float) -> float:
    """1/(1/L + 1/F): the frames/s of training when learner and actors take turns on the same
    cores, each at its own rate alone (NaN if either is unknown, 0 if either is 0)."""
    if math.isnan(learner) or math.isnan(fleet):
        return float("nan")
    if learner <= 0 or fleet <= 0:
        return 0.0
    return 1.0 / (1.0 / learner + 1.0 / fleet)


# ------------------------------------------------------------------------------------------------
# Raw env stepping


def raw_worker(
    env: str,
    num_envs: int,
    seed: int,
    protocol,
    warmup_s: float,
    seconds: float,
    results,
    stop=None,
) -> None:
    """Random actions on one process's vector env; puts its frames/s on `results`."""
    batch = envs.make_env(env, num_envs, seed, protocol)
    batch.reset()
    rng = np.random.default_rng(seed)
    frames_per_step = num_envs * protocols.frames_per_step(env, protocol)
    end_warmup = time.monotonic() + warmup_s
    while time.monotonic() < end_warmup:
        batch.step(rng.integers(0, batch.num_actions, num_envs))
    start, steps = time.monotonic(), 0
    while time.monotonic() - start < seconds:
        batch.step(rng.integers(0, batch.num_actions, num_envs))
        steps += 1
    results.put(steps * frames_per_step / (time.monotonic() - start))
    batch.close()


def measure_raw(experiment: launch.Experiment, warmup_s: float, seconds: float) -> float:
    """Raw batched env stepping of the experiment's actor processes, together."""
    supervisor = Supervisor()
    results = multiprocessing.get_context("spawn").Queue()
    settings = experiment.actor
    for i in range(experiment.num_actors):
        supervisor.start(
            f"raw_{i}",
            raw_worker,
            dict(
                env=settings.env,
                num_envs=settings.num_envs,
                seed=settings.seed + i * settings.num_envs,
                protocol=settings.protocol,
                warmup_s=warmup_s,
                seconds=seconds,
                results=results,
            ),
        )
    try:
        return sum(
            results.get(timeout=warmup_s + seconds + 120) for _ in range(experiment.num_actors)
        )
    finally:
        supervisor.stop()


# ------------------------------------------------------------------------------------------------
# The learner alone


def synthetic_batch(experiment: launch.Experiment, spec: agent_lib.EnvSpec, seed: int = 0) -> dict:
    """A learner batch of the agent's item signature, in memory, as
    `common.runtime.learning.Learner` hands it to the train step: the steps time-major `[L, B,
    ...]`, the stored core state
    `[B, ...]` (zeros), `info` and `learner_step` (set per step by `measure_learner`).

    The train step's cost does not depend on the values, but they are kept plausible so that the
    losses stay finite: random observations and actions, no episode starts, every step real
    (`mask` 1), behaviour probabilities uniform over the actions (log mu = -log A), other floats
    (rewards, logits, behaviour parameters) uniform in [0, 1); each item sampled for the first
    time with probability 1 / capacity."""
    signature = experiment.agent.signature(spec)
    batch_size = experiment.learner.batch_size
    num_actions = spec.num_actions
    rng = np.random.default_rng(seed)

    def step_field(path, item_spec: tf.TensorSpec):
        name = path[-1]
        shape = (item_spec.shape[0], batch_size, *item_spec.shape[1:])
        dtype = item_spec.dtype.as_numpy_dtype
        value: np.ndarray
        if name in ("action", "prev_action"):
            value = rng.integers(0, num_actions, shape)
        elif name == replay.MASK:
            value = np.ones(shape)
        elif name == "params_step" or dtype == np.bool_:  # reset: no episode starts
            value = np.zeros(shape)
        elif np.issubdtype(dtype, np.integer):  # observations
            value = rng.integers(0, min(256, np.iinfo(dtype).max + 1), shape)
        elif name.endswith("log_prob"):
            value = np.full(shape, -np.log(num_actions))
        elif name.endswith("probs"):
            value = np.full(shape, 1.0 / num_actions)
        else:
            value = rng.uniform(size=shape)
        return tf.constant(value.astype(dtype))

    batch = dict(tree.map_structure_with_path(step_field, signature[replay.STEPS]))
    if replay.FIRST_STEP_EXTRAS in signature:
        batch[acting.CORE_STATE] = tree.map_structure(
            lambda s: tf.zeros([batch_size, *s.shape], s.dtype),
            signature[replay.FIRST_STEP_EXTRAS][acting.CORE_STATE],
        )
    capacity = experiment.agent.replay.capacity
    batch[learning.INFO] = dict(
        key=tf.constant(np.arange(batch_size, dtype=np.uint64)),
        probability=tf.fill([batch_size], tf.constant(1.0 / capacity, tf.float64)),
        table_size=tf.fill([batch_size], tf.constant(capacity, tf.int64)),
        priority=tf.ones([batch_size], tf.float64),
        times_sampled=tf.ones([batch_size], tf.int32),
    )
    batch[learning.LEARNER_STEP] = tf.constant(0, tf.int64)
    return batch


class LearnerRate(NamedTuple):
    frames_per_s: float  # new frames per learner step x learner steps per second
    updates_per_s: float
    steps: int  # timed steps
    non_finite: tuple[str, ...]  # stats of the last step that were NaN or infinite


def measure_learner(
    experiment: launch.Experiment,
    spec: agent_lib.EnvSpec,
    warmup_s: float,
    seconds: float,
    parts: learning.LearnerParts | None = None,
) -> LearnerRate:
    """Train steps on a batch already in memory (`synthetic_batch`): the learner's frames/s with
    no actors and no Reverb (rate L of the shared-core bound). Each step gets the next learner
    step and frame count (schedules move as in training) and its stats are read back, as the
    learner reads them; at least 2 steps are timed."""
    acting.configure_threads(experiment.learner_threads)
    if parts is None:
        parts = experiment.agent.make_learner(spec)
    batch = synthetic_batch(experiment, spec)
    frames_per_step = experiment.learner.frames_per_learner_step
    steps_done = 0

    def train_step() -> dict:
        nonlocal steps_done
        batch[learning.LEARNER_STEP] = tf.constant(steps_done, tf.int64)
        frames = tf.constant(steps_done * frames_per_step, tf.int64)
        stats = {key: value.numpy() for key, value in parts.train_step(batch, frames).items()}
        steps_done += 1
        return stats

    train_step()  # tracing and compilation
    warmup_end = time.monotonic() + warmup_s
    while time.monotonic() < warmup_end:
        train_step()
    start, steps = time.monotonic(), 0
    while time.monotonic() - start < seconds or steps < 2:
        stats = train_step()
        steps += 1
    elapsed = time.monotonic() - start
    non_finite = tuple(
        key
        for key, value in stats.items()
        if key != learning.PRIORITIES and not np.all(np.isfinite(value))
    )
    return LearnerRate(steps * frames_per_step / elapsed, steps / elapsed, steps, non_finite)


# ------------------------------------------------------------------------------------------------
# Full training


def peak_resident_gib(pid: int | str | None = "self") -> float:
    """The peak resident set size of a process (Linux VmHWM), in GiB; NaN where unknown (a
    process not started has no `pid`)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("nan")


class Training(NamedTuple):
    """Counts of a measured window of full training."""

    seconds: float
    updates: int  # learner steps
    frames: int  # the learner's frames (new frames per learner step x steps)
    actor_frames: int  # frames the actors reported
    reports: int  # the actors' reports that carried them
    actors_peak_gib: tuple[float, ...]  # each actor process's peak resident memory

    @property
    def frames_per_s(self) -> float:
        return self.frames / self.seconds

    @property
    def actor_frames_per_s(self) -> float:
        return self.actor_frames / self.seconds

    @property
    def updates_per_s(self) -> float:
        return self.updates / self.seconds

    def replay_ratio(self, trained_steps_per_update: int, frames_per_step: int) -> float:
        """Agent steps trained on per agent step the actors produced."""
        produced_steps = self.actor_frames / frames_per_step
        if produced_steps <= 0:
            return float("nan")
        return self.updates * trained_steps_per_update / produced_steps


def measure_training(
    experiment: launch.Experiment,
    spec: agent_lib.EnvSpec,
    warmup_s: float,
    seconds: float,
    give_up_s: float = 1800.0,
    reports_per_actor: int = REPORTS_PER_ACTOR,
) -> Training:
    """Full training as `--role=local` runs it (Reverb and the learner in this process, the
    actors spawned; no evaluator): trains until `warmup_s` have passed and one learner step is
    done, then counts over a window of at least `seconds`, one learner step and
    `reports_per_actor` reports per actor. The window starts and ends between learner steps,
    where the learner has just read the actors' reports. RuntimeError if that takes `give_up_s`
    longer than `warmup_s + seconds` (e.g. a replay that never fills)."""
    server = launch.start_server(experiment, spec)
    address = replay.address_of(server)
    supervisor = Supervisor()
    marks: dict[str, tuple] = {}
    try:
        learner = launch.build_learner(experiment, spec, address)
        learner.reports = counted = _CountingReports(learner.reports)
        launch.start_actors(supervisor, experiment, address)
        started = time.monotonic()
        wanted = reports_per_actor * experiment.num_actors

        def counters() -> tuple:
            return (
                time.monotonic(),
                int(learner.step.numpy()),
                int(learner.frames.numpy()),
                int(learner.actor_frames.numpy()),
                counted.count,
            )

        def should_stop() -> bool:
            now, step = time.monotonic(), int(learner.step.numpy())
            if "start" not in marks:
                if now - started >= warmup_s and step > 0:
                    marks["start"] = counters()
            elif (
                now - marks["start"][0] >= seconds
                and step > marks["start"][1]
                and counted.count - marks["start"][4] >= wanted
            ):
                marks["end"] = counters()
                return True
            return now - started > warmup_s + seconds + give_up_s

        learner.run(should_stop=should_stop, on_idle=supervisor.restart_dead)
        learner.close()
        if "end" not in marks:
            raise RuntimeError(
                f"full training: no window of a learner step and {wanted} reports within "
                f"{warmup_s + seconds + give_up_s:.0f} s"
            )
        actors = tuple(
            peak_resident_gib(supervisor.process(f"actor_{i}").pid)
            for i in range(experiment.num_actors)
        )
    finally:
        supervisor.stop()
        server.stop()
    start, end = marks["start"], marks["end"]
    seconds, updates, frames, actor_frames, reports = (b - a for a, b in zip(start, end))
    return Training(seconds, updates, frames, actor_frames, reports, actors)


# ------------------------------------------------------------------------------------------------
# IMPALA's grid (python -m benchmarks.throughput)


def tensorflow_line(experiment: launch.Experiment) -> str:
    """oneDNN on or off (as TensorFlow decided it), thread pools, accelerators."""
    from tensorflow.python.util import _pywrap_util_port

    onednn = "on" if _pywrap_util_port.IsMklEnabled() else "off"
    gpus = [d.name for d in tf.config.list_physical_devices("GPU")]
    return (
        f"TensorFlow {tf.__version__}: oneDNN {onednn} (TF_ENABLE_ONEDNN_OPTS="
        f"{os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'unset')}); intra-op threads: learner "
        f"{experiment.learner_threads}, each actor {experiment.actor_threads}; inter-op 1; "
        f"GPUs: {', '.join(gpus) or 'none'}"
    )


def define_flags() -> None:
    """IMPALA's flags (`impala.main`'s) and this grid's; only when run as a module, so that
    `benchmarks.agent_throughput` imports the measurements without them."""
    from common.experiments import cli
    from impala import builder as impala_builder

    cli.define_flags(impala_builder.ImpalaBuilder)

    flags.DEFINE_float("seconds", 40.0, "Measured seconds per row.")
    flags.DEFINE_float("warmup_s", 15.0, "Seconds before measuring (compilation...).")
    flags.DEFINE_list("jit", ["off", "on"], "Rows 2-3 with jit_compile off and/or on.")
    flags.DEFINE_list(
        "rows",
        ["raw", "learner", "fleet", "train"],
        "Which measurements (train's bound needs learner and fleet).",
    )
    flags.DEFINE_list(
        "actor_precisions",
        ["float32", "bfloat16"],
        "Rows 2-3 with these --actor_precision values.",
    )


def main(argv):
    del argv
    from common.experiments import builder as builder_lib
    from common.experiments import cli
    from impala import builder as impala_builder

    paper = impala_builder.ImpalaBuilder
    acting.configure_threads(2)  # the learner's, before TensorFlow starts
    warmup_s, seconds, wanted = FLAGS.warmup_s, FLAGS.seconds, FLAGS.rows
    base = run_overrides(cli.config_from_flags(paper))
    logdir = tempfile.mkdtemp()
    experiment = builder_lib.build_experiment(paper(base), logdir)
    spec = env_spec(experiment)
    header = [
        cpu_line(),
        tensorflow_line(experiment),
        f"{base.env}: {base.num_actors} actor processes x {base.envs_per_actor} envs (nice "
        f"{base.actor_niceness}), {base.network} net, unroll {base.unroll_length}, batch "
        f"{base.batch_size}; {seconds:.0f} s per row after {warmup_s:.0f} s warm-up",
    ]
    print("\n".join(header), flush=True)
    rows, notes = [], []
    raw = measure_raw(experiment, warmup_s, seconds) if "raw" in wanted else float("nan")
    rows.append(("raw batched env stepping, random actions", "-", "-", raw))
    print(f"raw: {raw:.0f} frames/s", flush=True)
    for jit in FLAGS.jit:
        learner = float("nan")
        if "learner" in wanted:
            config = dataclasses.replace(base, jit_compile=jit == "on").validate()
            rate = measure_learner(
                builder_lib.build_experiment(paper(config), logdir), spec, warmup_s, seconds
            )
            learner = rate.frames_per_s
            rows.append(("learner alone (batches in memory), L", jit, "-", learner))
            print(f"learner jit={jit}: {learner:.0f} frames/s", flush=True)
            if rate.non_finite:
                notes.append(
                    f"jit={jit}: non-finite stats on the synthetic batch: {rate.non_finite}"
                )
        for precision in FLAGS.actor_precisions:
            config = dataclasses.replace(
                base, jit_compile=jit == "on", actor_precision=precision
            ).validate()
            experiment = builder_lib.build_experiment(paper(config), tempfile.mkdtemp())
            fleet = float("nan")
            if "fleet" in wanted:
                fleet = measure_fleet(experiment, spec, warmup_s, seconds)
                rows.append(("actor fleet alone (acting + Reverb), F", jit, precision, fleet))
                print(f"fleet jit={jit} {precision}: {fleet:.0f} frames/s", flush=True)
            if "train" in wanted:
                training = measure_training(experiment, spec, warmup_s, seconds)
                fps = training.frames_per_s
                rows.append(("full IMPALA training (actors + learner)", jit, precision, fps))
                bound = shared_core_bound(learner, fleet)
                rows.append(("shared-core bound 1/(1/L + 1/F)", jit, precision, bound))
                notes.append(
                    f"jit={jit} {precision}: training at {ratio(fps, bound):.0%} of the "
                    f"shared-core bound; peak resident: learner + Reverb + benchmark "
                    f"{peak_resident_gib():.2f} GiB, actors "
                    f"{', '.join(f'{g:.2f}' for g in training.actors_peak_gib)} GiB"
                )
                print(f"train jit={jit} {precision}: {fps:.0f} frames/s; {notes[-1]}", flush=True)
    print("\n" + "\n".join(header))
    print(f"\n| {'measurement':<42} | jit | actors   | frames/s | ratio to raw |")
    print(f"|{'-' * 44}|-----|----------|----------|--------------|")
    for name, jit, precision, fps in rows:
        print(
            f"| {name:<42} | {jit:<3} | {precision:<8} | {fps:>8.0f} | {ratio(fps, raw):>12.2f} |"
        )
    print("\n" + "\n".join(notes))


if __name__ == "__main__":
    define_flags()
    app.run(main)

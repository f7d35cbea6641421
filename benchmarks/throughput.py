"""IMPALA throughput on this machine, in one run: raw ALE, the actor fleet, full training.

    python -m benchmarks.throughput --env=Pong --seconds=40

Every `impala.main` flag applies (e.g. --num_actors, --envs_per_actor, --network); the defaults are
those of `python -m impala.main`.

Printed first: the CPU (model, cores, AVX2 / AVX-512 / AVX512-BF16 / AMX), whether TensorFlow
runs its oneDNN kernels (`TF_ENABLE_ONEDNN_OPTS`, common/__init__.py), the thread pools and any
GPU, so a table says where it was measured.

Rows (environment frames per second, action repeats included):
1. raw batched ALE stepping: the actor processes' vector envs with random actions, nothing else;
2. the learner alone, L: compiled train steps on a batch already in memory;
3. the actor fleet alone, F: the actor processes acting with the network (one batched policy call
   per step) and writing unrolls to Reverb, no learner (a table that drops old items);
4. full IMPALA training: actors + learner (+ Reverb) on the same machine; the learner's frames;
   next to it the shared-core bound 1/(1/L + 1/F), the most any schedule reaches when the same
   cores run both, and each process's peak resident memory.
Rows 2-4 run with and without --jit_compile (XLA for the policy call and the train step),
rows 3-4 with the actors' network in float32 and in bfloat16 (--actor_precision).

Targets (DESIGN.md §10): fleet >= 50% of raw; training >= 1.5K frames/s on 2 cores (deep net,
unroll 20, batch 32). It prints figures; it asserts nothing.
"""

import common  # noqa: F401  (first: TensorFlow's oneDNN default, common/__init__.py)

import dataclasses
import multiprocessing
import os
import tempfile
import time

import numpy as np
import reverb
import tensorflow as tf
from absl import app
from absl import flags

from benchmarks.machine import cpu_line
from common import acting
from common import agent as agent_lib
from common import cli
from common import envs
from common import launch
from common import patterns
from common import replay
from common import reports
from impala import config as config_lib
from impala import main as impala_main

_SECONDS = flags.DEFINE_float("seconds", 40.0, "Measured seconds per row.")
_WARMUP = flags.DEFINE_float("warmup_s", 15.0, "Seconds before measuring (compilation...).")
_JIT = flags.DEFINE_list("jit", ["off", "on"], "Rows 2-3 with jit_compile off and/or on.")
_ROWS = flags.DEFINE_list(
    "rows",
    ["raw", "learner", "fleet", "train"],
    "Which measurements (train needs learner and fleet).",
)
_PRECISIONS = flags.DEFINE_list(
    "actor_precisions", ["float32", "bfloat16"], "Rows 2-3 with these --actor_precision values."
)


def raw_worker(
    env: str, num_envs: int, seed: int, warmup_s: float, seconds: float, results, stop=None
) -> None:
    """Random actions on one process's vector env; puts its frames/s on `results`."""
    batch = envs.make_env(env, num_envs, seed)
    batch.reset()
    rng = np.random.default_rng(seed)
    frames_per_step = num_envs * envs.PROTOCOLS["impala"].frame_skip
    end_warmup = time.monotonic() + warmup_s
    while time.monotonic() < end_warmup:
        batch.step(rng.integers(0, batch.num_actions, num_envs))
    start, steps = time.monotonic(), 0
    while time.monotonic() - start < seconds:
        batch.step(rng.integers(0, batch.num_actions, num_envs))
        steps += 1
    results.put(steps * frames_per_step / (time.monotonic() - start))
    batch.close()


def measure_raw(config: config_lib.ImpalaConfig) -> float:
    supervisor = launch.Supervisor()
    results = multiprocessing.get_context("spawn").Queue()
    for i in range(config.num_actors):
        supervisor.start(
            f"raw_{i}",
            raw_worker,
            dict(
                env=config.env,
                num_envs=config.envs_per_actor,
                seed=i * config.envs_per_actor,
                warmup_s=_WARMUP.value,
                seconds=_SECONDS.value,
                results=results,
            ),
        )
    try:
        return sum(
            results.get(timeout=_WARMUP.value + _SECONDS.value + 120)
            for _ in range(config.num_actors)
        )
    finally:
        supervisor.stop()


def sink_table(experiment: launch.Experiment, spec: agent_lib.EnvSpec) -> reverb.Table:
    """The queue's signature without its back-pressure: full -> the oldest unroll is dropped."""
    return reverb.Table(
        name=patterns.EXPERIENCE_TABLE,
        sampler=reverb.selectors.Fifo(),
        remover=reverb.selectors.Fifo(),
        max_size=256,
        rate_limiter=reverb.rate_limiters.MinSize(1),
        signature=experiment.agent.signature(spec),
    )


def inserted_unrolls(client: reverb.Client) -> int:
    return client.server_info()[patterns.EXPERIENCE_TABLE].rate_limiter_info.insert_stats.completed


def measure_fleet(config: config_lib.ImpalaConfig) -> float:
    experiment = impala_main.build_experiment(config, tempfile.mkdtemp())
    spec = agent_lib.probe_env(config.env, experiment.actor.protocol)
    server = replay.start_server(
        [
            sink_table(experiment, spec),
            replay.params_table(acting.PARAMS_TABLE),
            reports.reports_table(),
        ]
    )
    address = replay.address_of(server)
    client = replay.connect(address)
    acting_variables = impala_main.make_learner(config, spec).acting_variables
    replay.ParamsPublisher(client, acting.PARAMS_TABLE).publish(
        0, [v.numpy() for v in acting_variables]
    )
    supervisor = launch.Supervisor()
    try:
        launch.start_actors(supervisor, experiment, address)
        while inserted_unrolls(client) == 0:
            time.sleep(0.5)
        time.sleep(_WARMUP.value)
        start, before = time.monotonic(), inserted_unrolls(client)
        time.sleep(_SECONDS.value)
        unrolls = inserted_unrolls(client) - before
        return unrolls * config.unroll_length * config.frames_per_step / (time.monotonic() - start)
    finally:
        supervisor.stop()
        server.stop()


def peak_resident_gib(pid: int | str = "self") -> float:
    """The peak resident set size of a process (Linux VmHWM), in GiB; NaN where unknown."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("nan")


def measure_training(config: config_lib.ImpalaConfig) -> tuple[float, list[float]]:
    """Full training's learner frames/s, and the actors' peak resident GiB."""
    experiment = impala_main.build_experiment(config, tempfile.mkdtemp())
    spec = agent_lib.probe_env(config.env, experiment.actor.protocol)
    server = launch.start_server(experiment, spec)
    address = replay.address_of(server)
    supervisor = launch.Supervisor()
    try:
        learner = launch.build_learner(experiment, spec, address)
        launch.start_actors(supervisor, experiment, address)
        warmup_end = time.monotonic() + _WARMUP.value
        learner.run(
            should_stop=lambda: time.monotonic() > warmup_end and int(learner.step.numpy()) > 0
        )
        start, frames = time.monotonic(), int(learner.frames.numpy())
        learner.run(should_stop=lambda: time.monotonic() - start > _SECONDS.value)
        fps = (int(learner.frames.numpy()) - frames) / (time.monotonic() - start)
        learner.close()
        actors = [
            peak_resident_gib(supervisor.process(f"actor_{i}").pid)
            for i in range(config.num_actors)
        ]
        return fps, actors
    finally:
        supervisor.stop()
        server.stop()


def synthetic_batch(config: config_lib.ImpalaConfig, spec: agent_lib.EnvSpec) -> dict:
    """A learner batch of the queue's item signature, in memory: random frames and actions (the
    train step's cost does not depend on the values)."""
    experiment = impala_main.build_experiment(config, tempfile.mkdtemp())
    signature = experiment.agent.signature(spec)
    rng = np.random.default_rng(0)
    batch = {}
    for key, item_spec in signature[replay.STEPS].items():
        shape = (item_spec.shape[0], config.batch_size, *item_spec.shape[1:])
        dtype = item_spec.dtype.as_numpy_dtype
        if key == "action":
            value = rng.integers(0, spec.num_actions, shape)
        elif np.issubdtype(dtype, np.integer):
            value = rng.integers(0, 255, shape)
        else:
            value = rng.normal(size=shape)
        batch[key] = tf.constant(value.astype(dtype))
    batch["reset"] = tf.zeros_like(batch["reset"])
    return batch


def measure_learner(config: config_lib.ImpalaConfig) -> float:
    """Train steps on a batch already in memory: the learner's frames/s with no actors and no
    Reverb (rate L of the shared-core bound)."""
    spec = agent_lib.probe_env(config.env, impala_main.build_experiment(config, "").actor.protocol)
    parts = impala_main.make_learner(config, spec)
    batch = synthetic_batch(config, spec)
    frames = tf.constant(0, tf.int64)
    parts.train_step(batch, frames)  # tracing and compilation
    warmup_end = time.monotonic() + _WARMUP.value
    while time.monotonic() < warmup_end:
        parts.train_step(batch, frames)
    start, steps = time.monotonic(), 0
    while time.monotonic() - start < _SECONDS.value or steps < 2:
        parts.train_step(batch, frames)["loss/total"].numpy()
        steps += 1
    return steps * config.frames_per_batch / (time.monotonic() - start)


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


def main(argv):
    del argv
    acting.configure_threads(2)  # the learner's, before TensorFlow starts
    base = dataclasses.replace(
        cli.config_from_flags(impala_main.PAPER),
        eval_interval_s=0.0,
        log_interval_s=1e9,
        checkpoint_interval_s=1e9,
    )
    header = [
        cpu_line(),
        tensorflow_line(impala_main.build_experiment(base, "")),
        f"{base.env}: {base.num_actors} actor processes x {base.envs_per_actor} envs (nice "
        f"{base.actor_niceness}), {base.network} net, unroll {base.unroll_length}, batch "
        f"{base.batch_size}; {_SECONDS.value:.0f} s per row after {_WARMUP.value:.0f} s warm-up",
    ]
    print("\n".join(header), flush=True)
    rows, notes = [], []
    raw = measure_raw(base) if "raw" in _ROWS.value else float("nan")
    rows.append(("raw batched ALE, random actions", "-", "-", raw))
    print(f"raw: {raw:.0f} frames/s", flush=True)
    for jit in _JIT.value:
        learner = float("nan")
        if "learner" in _ROWS.value:
            learner = measure_learner(dataclasses.replace(base, jit_compile=jit == "on"))
            rows.append(("learner alone (batches in memory), L", jit, "-", learner))
            print(f"learner jit={jit}: {learner:.0f} frames/s", flush=True)
        for precision in _PRECISIONS.value:
            config = dataclasses.replace(
                base, jit_compile=jit == "on", actor_precision=precision
            ).validate()
            fleet = float("nan")
            if "fleet" in _ROWS.value:
                fleet = measure_fleet(config)
                rows.append(("actor fleet alone (acting + Reverb), F", jit, precision, fleet))
                print(f"fleet jit={jit} {precision}: {fleet:.0f} frames/s", flush=True)
            if "train" in _ROWS.value:
                fps, actor_gib = measure_training(config)
                rows.append(("full IMPALA training (actors + learner)", jit, precision, fps))
                bound = 1.0 / (1.0 / learner + 1.0 / fleet)
                rows.append(("shared-core bound 1/(1/L + 1/F)", jit, precision, bound))
                notes.append(
                    f"jit={jit} {precision}: training at {fps / bound:.0%} of the shared-core "
                    f"bound; peak resident: learner + Reverb + benchmark "
                    f"{peak_resident_gib():.2f} GiB, actors "
                    f"{', '.join(f'{g:.2f}' for g in actor_gib)} GiB"
                )
                print(f"train jit={jit} {precision}: {fps:.0f} frames/s; {notes[-1]}", flush=True)
    print("\n" + "\n".join(header))
    print(f"\n| {'measurement':<42} | jit | actors   | frames/s | ratio to raw ALE |")
    print(f"|{'-' * 44}|-----|----------|----------|------------------|")
    for name, jit, precision, fps in rows:
        print(f"| {name:<42} | {jit:<3} | {precision:<8} | {fps:>8.0f} | {fps / raw:>16.2f} |")
    print("\n" + "\n".join(notes))


if __name__ == "__main__":
    app.run(main)

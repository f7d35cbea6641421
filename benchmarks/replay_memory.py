"""How much memory a Reverb replay really takes on this machine, per replay pattern.

    python -m benchmarks.replay_memory --num_envs=2 --windows=4 --window_steps=2500

For each measured pattern, in a fresh spawned process (so that one pattern's memory never mixes with
another's): Pong (`common.environments.envs`, protocol "dice_gdi_lbc": 84x84x4 uint8 stacked frames,
18 actions) steps `--num_envs` environments with uniformly random actions; each batched step is
written as the real per-step record of an Atari agent (`common.runtime.acting.step_spec`:
observation, prev_action, prev_reward, reset, action, reward, params_step, truncation_value,
IMPALA-style `behaviour_logits` [18] float32) plus an LSTM state (h, c) of 2 x 256 float32 as
first-step extras, through the pattern's own writer into the tables
`common.runtime.agent.Agent.tables` builds, on an in-process `replay.start_server`. Random logits
and states stand in for a network's (as incompressible as real ones); random-action Pong for a
trained agent's play.

Patterns (measured capacity: room for every item written, nothing is evicted):
- sample_k: `SampleK(length=80, burn_in=40, times_sampled=2)`, DiCE's item layout (121 steps,
  one item every 80 steps, mask field, burn-in padding); error_buffer 1e9 so that inserts are
  never rate-limited while nothing samples;
- prioritized: `Prioritized(length=32)`, Reactor's 33-step sequences, one item per step;
- reactor: the same pattern with Reactor's own record (reactor/acting.py): one 84x84 frame per
  step (Table 3), Pong's minimal action set, `behaviour_probs` [6] float32 and four LSTM vectors
  (policy and Q, h and c, 128 each) as first-step extras of every item;
- queue_with_replay: `QueueWithReplay(length=20)`, IMPALA's 21-step unrolls, one every 20 steps,
  each item in both tables (the queue is sized like the replay so that it never blocks; its
  copies are item metadata only, measured by resetting it at the end).

What is measured: the process's resident set size (psutil, else /proc/self/status VmRSS) after
`gc.collect()` and glibc's `malloc_trim(0)` (freed heap handed back to the OS does not count),
before the first step (env, server with empty tables, client and writer built) and after each of
`--windows` windows of `--window_steps` steps per env, the writer staying open throughout. So
each window's delta is what the server keeps for the steps and items of that window:
- the chunks: each column's steps, compressed by the TrajectoryWriter's chunker (Reverb 0.14:
  snappy, no delta encoding) in chunks whose length Reverb auto-tunes per column and per env,
  from 1 step upwards as the env's writer inserts items. The first window is this cold start
  (more, smaller chunks); windows 2.. are the steady state that a long run lives in, and the
  figures below are theirs. Since the tuning is per env, few envs with long streams (the
  default: 2) reach it soonest; the bytes per step do not depend on how many envs there are;
- the items that reference the chunks (keys, priorities, per-column chunk slices, selector and
  rate-limiter bookkeeping), and the stored core states;
- whatever the allocators kept from the traffic (freed pages are trimmed; fragments are not).
Padding steps and core states are spread over the real env steps: bytes/step = delta / env steps
written, bytes/item = delta / items inserted. The writer's own buffers (the last item_length
steps of each env, uncompressed) are open at every measurement and cancel out. As a check,
"released by emptying the tables" is what the process gave back once the writer was closed and
every table reset (`client.reset`), to compare with the total RSS growth.
Not counted: the writers' buffers while acting (about item_length uncompressed steps per env,
in the actor processes), the learner's sampled batches and dataset read-ahead, checkpoints on
disk, TensorFlow and the environments.

The raw size per step is `patterns.estimated_bytes(pattern, signature) / pattern.stored_steps()`
(the uncompressed step record, mask included); raw / measured is the compression Reverb achieves
on these frames. Extrapolation: measured bytes/step x `unique_steps()` of the papers' default
replays (dice/config.py, reactor/config.py, impala/config.py), the replay alone, against 24 GiB.
"""

import concurrent.futures
import ctypes
import gc
import multiprocessing
import time
from typing import Callable, NamedTuple, NoReturn

import numpy as np
import tensorflow as tf
from absl import app
from absl import flags

from benchmarks.machine import cpu_line

from common.runtime import acting
from common.runtime import agent as agent_lib
from common.environments import envs
from common.environments import protocols
from common.replay import patterns
from common.replay import replay
from dice import config as dice_config
from impala import config as impala_config
from reactor import acting as reactor_acting
from reactor import config as reactor_config
from reactor import networks as reactor_networks

FLAGS = flags.FLAGS


def define_flags() -> None:
    """This tool's flags, defined when it runs (not when it is imported)."""
    flags.DEFINE_integer("num_envs", 2, "Environments stepped together (one writer).")
    flags.DEFINE_integer("windows", 4, "Measured windows per pattern (the first: warm-up).")
    flags.DEFINE_integer("window_steps", 2500, "Steps per env in each window.")
    flags.DEFINE_list(
        "patterns",
        ["sample_k", "prioritized", "reactor", "queue_with_replay"],
        "Patterns to measure, each in its own process.",
    )
    flags.DEFINE_integer("seed", 0, "Seed of the environments and the random actions.")
    flags.DEFINE_integer("flush_timeout_ms", 60_000, "Writer flush timeout.")


ENV = "Pong"
PROTOCOL = "dice_gdi_lbc"
NUM_ACTIONS = 18  # the full action set of the protocol, IMPALA-style behaviour logits
LSTM_UNITS = 256
BUDGET_GIB = 24.0
GIB = 2.0**30
MIB = 2.0**20


# ----------------------------------------------------------------------------------------------
# Patterns and the record


class Record(NamedTuple):
    """What an agent's actors write per step besides the common fields."""

    protocol: str | protocols.AtariProtocol
    num_actions: int  # Pong's under the protocol
    observation_shape: tuple
    policy_extras: Callable[[agent_lib.EnvSpec], dict]
    core_state: tuple  # of tf.TensorSpec, one env's


ATARI_RECORD = Record(
    PROTOCOL,
    NUM_ACTIONS,
    (84, 84, 4),
    lambda spec: acting.CategoricalPolicy.extras_spec(spec.num_actions),
    (tf.TensorSpec([LSTM_UNITS], tf.float32),) * 2,
)
REACTOR_RECORD = Record(
    reactor_acting.protocol(reactor_config.ReactorConfig()),
    6,  # Pong's minimal action set (docs/papers/reactor.md#departures-from-the-paper)
    (84, 84, 1),
    reactor_acting.policy_extras,
    reactor_networks.core_state_spec(reactor_config.ReactorConfig()),
)


def record_of(kind: str) -> Record:
    return REACTOR_RECORD if kind == "reactor" else ATARI_RECORD


def measured_pattern(kind: str, capacity: int) -> patterns.Pattern:
    """The pattern of `kind` with room for `capacity` items (nothing evicted)."""
    dice = dice_config.DiceConfig()
    reactor = reactor_config.ReactorConfig()
    impala = impala_config.ImpalaConfig()
    pattern = {
        "sample_k": lambda: patterns.SampleK(
            length=dice.sequence_length,
            capacity=capacity,
            burn_in=dice.burn_in,
            times_sampled=dice.times_sampled,
            error_buffer=1e9,
        ),
        "prioritized": lambda: patterns.Prioritized(
            length=reactor.sequence_length - 1, capacity=capacity
        ),
        "reactor": lambda: patterns.Prioritized(
            length=reactor.sequence_length - 1, capacity=capacity
        ),
        "queue_with_replay": lambda: patterns.QueueWithReplay(
            length=impala.unroll_length, capacity=capacity, replay_capacity=capacity
        ),
    }[kind]()
    pattern.validate()
    return pattern


def default_patterns() -> list[tuple[str, str, patterns.Pattern]]:
    """(row label, measured kind whose bytes per step it uses, the paper's default replay)."""
    dice = dice_config.DiceConfig()
    reactor = reactor_config.ReactorConfig()
    impala = impala_config.ImpalaConfig()
    return [
        (
            "DiCE sample_k",
            "sample_k",
            patterns.SampleK(
                length=dice.sequence_length,
                capacity=dice.replay_capacity,
                burn_in=dice.burn_in,
                times_sampled=dice.times_sampled,
            ),
        ),
        (
            "Reactor prioritized",
            "prioritized",
            patterns.Prioritized(
                length=reactor.sequence_length - 1, capacity=reactor.replay_capacity
            ),
        ),
        (
            "Reactor, its own record",
            "reactor",
            patterns.Prioritized(
                length=reactor.sequence_length - 1, capacity=reactor.replay_capacity
            ),
        ),
        (
            "IMPALA queue_with_replay",
            "queue_with_replay",
            patterns.QueueWithReplay(
                length=impala.unroll_length,
                capacity=impala.queue_capacity,
                replay_capacity=impala.replay_capacity,
            ),
        ),
        (
            "IMPALA queue",
            "queue_with_replay",
            patterns.Queue(length=impala.unroll_length, capacity=impala.queue_capacity),
        ),
    ]


def _never_built(*args: object) -> NoReturn:
    raise AssertionError("the replay's memory needs no policy and no learner")


def make_agent(pattern: patterns.Pattern, record: Record) -> agent_lib.Agent:
    """The replay side of an agent (signature, tables): it acts and learns nothing."""
    return agent_lib.Agent(
        replay=pattern,
        make_policy=_never_built,
        policy_extras=record.policy_extras,
        make_learner=_never_built,
        core_state_spec=record.core_state,
    )


def env_spec(record: Record) -> agent_lib.EnvSpec:
    return agent_lib.EnvSpec(record.num_actions, record.observation_shape, np.dtype(np.uint8))


def raw_bytes_per_step(pattern: patterns.Pattern, record: Record) -> float:
    signature = make_agent(pattern, record).signature(env_spec(record))
    return patterns.estimated_bytes(pattern, signature) / pattern.stored_steps()


# ----------------------------------------------------------------------------------------------
# Resident memory


def _rss_bytes() -> int:
    try:
        import psutil

        return psutil.Process().memory_info().rss
    except ImportError:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _malloc_trim() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def settled_rss() -> int:
    """RSS once garbage is collected and freed heap is handed back to the OS."""
    for _ in range(2):
        gc.collect()
        _malloc_trim()
        time.sleep(0.5)
    return _rss_bytes()


# ----------------------------------------------------------------------------------------------
# One pattern, in its own process


def measure(
    kind: str, num_envs: int, windows: int, window_steps: int, seed: int, flush_timeout_ms: int
) -> dict:
    """Writes `windows` x `window_steps` real Pong steps per env through the pattern's writer;
    returns the RSS and table size after each window (module docstring)."""
    acting.configure_threads(1)
    record_kind = record_of(kind)
    env = envs.make_env(ENV, num_envs, seed, record_kind.protocol)
    spec = agent_lib.EnvSpec(
        env.num_actions, tuple(env.observation_shape), np.dtype(env.observation_dtype)
    )
    if spec != env_spec(record_kind):
        raise ValueError(f"expected {env_spec(record_kind)}, got {spec}")
    # Room for every item written (at most one per step): nothing is evicted.
    pattern = measured_pattern(kind, capacity=num_envs * windows * window_steps)
    agent = make_agent(pattern, record_kind)
    extras = record_kind.policy_extras(spec)
    state_sizes = [s.shape[0] for s in record_kind.core_state]
    table = (
        patterns.REPLAY_TABLE
        if isinstance(pattern, patterns.QueueWithReplay)
        else patterns.EXPERIENCE_TABLE
    )
    rng = np.random.default_rng(seed)

    def random_actions():
        return rng.integers(0, spec.num_actions, num_envs).astype(np.int32)

    observation = env.reset()
    inputs = acting.StepInputs.first(num_envs)
    for _ in range(20):  # warm-up: the env's and numpy's buffers exist before the first RSS
        result = env.step(random_actions())
        observation = result.observation
        inputs = acting.StepInputs.after(result, np.zeros(num_envs, np.int32))
    server = replay.start_server(agent.tables(spec))
    client = replay.connect(replay.address_of(server))
    writer = pattern.writer(client, num_envs, flush_timeout_ms)
    params_step = np.zeros(num_envs, np.int64)
    truncation_value = np.zeros(num_envs, np.float32)
    rss, items, write_s = [settled_rss()], [0], 0.0

    for _ in range(windows):
        start = time.monotonic()
        for _ in range(window_steps):
            action = random_actions()
            result = env.step(action)
            record = dict(
                observation=observation,
                **inputs._asdict(),
                action=action,
                reward=result.reward.astype(np.float32),
                params_step=params_step,
                truncation_value=truncation_value,
                **{
                    name: rng.standard_normal((num_envs, *e.shape), np.float32)
                    for name, e in extras.items()
                },
            )
            core_state = tuple(
                rng.standard_normal((num_envs, size), np.float32) for size in state_sizes
            )
            writer.append(
                record,
                first_step_extras={acting.CORE_STATE: core_state},
                episode_end=result.terminated | result.truncated,
            )
            inputs = acting.StepInputs.after(result, action)
            observation = result.observation
        write_s += time.monotonic() - start
        # Measured with the writer open, as after every window: its buffers (the last
        # item_length steps of each env) are the same size each time and cancel out.
        rss.append(settled_rss())
        items.append(int(client.server_info()[table].current_size))

    writer.close()
    del writer, record, core_state, result
    closed = settled_rss()
    queue_item_bytes = None
    if isinstance(pattern, patterns.QueueWithReplay):
        # The queue's copies of the items (their chunks are shared with the replay's): at the
        # default capacity it holds 32 of them, here every one.
        queue_items = client.server_info()[patterns.EXPERIENCE_TABLE].current_size
        client.reset(patterns.EXPERIENCE_TABLE)
        queue_item_bytes = (closed - settled_rss()) / max(queue_items, 1)
    for name in client.server_info():
        client.reset(name)
    released = closed - settled_rss()  # the check: what emptying the tables gives back
    server.stop()
    del client, server
    env.close()
    return dict(
        kind=kind,
        rss=rss,
        items=items,
        closed=closed,
        released=released,
        write_s=write_s,
        item_length=pattern.item_length,
        steps_per_window=num_envs * window_steps,
        raw_per_step=raw_bytes_per_step(pattern, record_kind),
        queue_item_bytes=queue_item_bytes,
    )


# ----------------------------------------------------------------------------------------------
# Report


def main(argv):
    del argv
    num_envs, windows, window_steps = FLAGS.num_envs, FLAGS.windows, FLAGS.window_steps
    if windows < 2:
        raise app.UsageError("--windows must be >= 2: the first one is the chunkers' cold start")
    print(f"CPU: {cpu_line()}")
    print(
        f"{ENV} ({PROTOCOL}, random actions): {num_envs} envs x {windows} windows x "
        f"{window_steps} steps per pattern, each pattern in a fresh spawned process",
        flush=True,
    )
    context = multiprocessing.get_context("spawn")
    results = {}
    for kind in FLAGS.patterns:
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
            r = pool.submit(
                measure, kind, num_envs, windows, window_steps, FLAGS.seed, FLAGS.flush_timeout_ms
            ).result()
        results[kind] = r
        by_window = ", ".join(
            f"{(after - before) / r['steps_per_window']:.0f}"
            for before, after in zip(r["rss"], r["rss"][1:])
        )
        steps = r["steps_per_window"] * windows
        queue = (
            ""
            if r["queue_item_bytes"] is None
            else f"; the queue's copy of an item: {r['queue_item_bytes']:.0f} bytes"
        )
        print(
            f"{kind}: {r['items'][-1]} items, {steps} env steps in {r['write_s']:.1f} s "
            f"({steps / r['write_s']:.0f} steps/s); bytes/step by window: {by_window}; "
            f"RSS {r['rss'][0] / MIB:.0f} -> {r['closed'] / MIB:.0f} MiB after closing the "
            f"writer, {r['released'] / MIB:.0f} MiB released by emptying the tables{queue}",
            flush=True,
        )

    per_step = {}
    print(
        f"\nMeasured: windows 2-{windows} ({num_envs} envs x {windows - 1} x {window_steps} "
        f"steps of real Pong frames, chunkers warmed up by window 1):\n"
    )
    print(
        "| pattern           | items | steps/item | env steps | RSS delta MiB | bytes/item "
        "| bytes/step | raw bytes/step | compression | window 1 bytes/step |"
    )
    print(
        "|-------------------|-------|------------|-----------|---------------|------------"
        "|------------|----------------|-------------|---------------------|"
    )
    for kind, r in results.items():
        delta = r["rss"][-1] - r["rss"][1]
        steps = r["steps_per_window"] * (windows - 1)
        items = r["items"][-1] - r["items"][1]
        per_step[kind] = delta / steps
        cold = (r["rss"][1] - r["rss"][0]) / r["steps_per_window"]
        print(
            f"| {kind:<17} | {items:>5} | {r['item_length']:>10} | {steps:>9} "
            f"| {delta / MIB:>13.1f} | {delta / items:>10.0f} | {per_step[kind]:>10.0f} "
            f"| {r['raw_per_step']:>14.0f} | {r['raw_per_step'] / per_step[kind]:>10.1f}x "
            f"| {cold:>19.0f} |"
        )

    print(
        f"\nAt the papers' default capacities (measured bytes/step x unique steps held; "
        f"the replay alone against {BUDGET_GIB:.0f} GiB):\n"
    )
    print(
        "| pattern                  | items              | steps/item | measured bytes/step "
        "| compression vs raw | estimated resident at default capacity | fits in 24 GiB? |"
    )
    print(
        "|--------------------------|--------------------|------------|---------------------"
        "|--------------------|----------------------------------------|-----------------|"
    )
    notes = []
    for label, kind, pattern in default_patterns():
        if kind not in per_step:
            continue
        raw_step = raw_bytes_per_step(pattern, record_of(kind))
        resident = per_step[kind] * pattern.unique_steps()
        items = (
            f"{pattern.replay_capacity:,} (+{pattern.capacity} queue)"
            if isinstance(pattern, patterns.QueueWithReplay)
            else f"{pattern.capacity:,}"
        )
        fits = "yes" if resident < BUDGET_GIB * GIB else "no"
        share = f"{resident / GIB:.2f} GiB ({100 * resident / (BUDGET_GIB * GIB):.0f}%)"
        print(
            f"| {label:<24} | {items:<18} | {pattern.item_length:>10} "
            f"| {per_step[kind]:>19.0f} | {raw_step / per_step[kind]:>17.1f}x "
            f"| {share:>38} | {fits:<15} |"
        )
        notes.append(
            f"{label}: {pattern.unique_steps():,} unique steps, "
            f"{raw_step * pattern.stored_steps() / GIB:.1f} GiB uncompressed "
            f"(patterns.estimated_bytes), {kind}'s bytes/step"
        )
    print()
    for note in notes:
        print(note)


if __name__ == "__main__":
    define_flags()
    app.run(main)

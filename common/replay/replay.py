"""Reverb replay: the item layout, tables, the server and its clients, and the learner's datasets
(docs/architecture.md#replay-patterns-commonreplaypatternspy, docs/architecture.md#data-flow).

Three replay patterns, all on plain `reverb.Table`s fed by `reverb.TrajectoryWriter`s
(`common.replay.writers`):

| pattern               | table                  | writer                 | used by         |
|-----------------------|------------------------|------------------------|-----------------|
| queue                 | `queue_table`          | `UnrollWriter`         | IMPALA          |
| prioritised sequences | `prioritized_table`    | `SequenceWriter`       | Reactor         |
| sample k times        | `sample_k_table`       | `BurnInSequenceWriter` | DiCE, GDI, LBC  |

plus the parameter table for the learner's latest weights (`common.replay.parameters`).

Item layout (every table of this layer): a dict with

- `"steps"`: the actor's step structure, every field with a leading time axis `[L, ...]`;
- `"first_step_extras"` (optional): fields stored once per item, taken at the item's first step
  (the recurrent core state at the start of the sequence: IMPALA §3's "initial LSTM state", the
  stored state DiCE §4.1 starts its burn-in from).

`sequence_signature` / `burn_in_signature` build the matching table signature from the step spec;
`unroll_dataset` reads any of these tables and yields time-major batches `[L, B, ...]`.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import reverb
import tensorflow as tf
import tree

STEPS = "steps"
FIRST_STEP_EXTRAS = "first_step_extras"
MASK = "mask"

# choice: an actor that cannot insert for this long raises instead of blocking forever
# (docs/architecture.md#replay-patterns-commonreplaypatternspy);
# long enough to cover a learner's first XLA compilation, short enough to notice a dead learner.
DEFAULT_FLUSH_TIMEOUT_MS = 60_000

Nest = Any  # a nested structure (dicts, lists, tuples) of arrays or specs


# ----------------------------------------------------------------------------------------------
# Signatures


def sequence_signature(
    step_spec: Mapping[str, Nest], sequence_length: int, first_step_extras_spec: Nest = None
) -> dict:
    """Table signature of items of `sequence_length` steps (the module's item layout).

    `step_spec` is the per-step structure of `tf.TensorSpec` (no batch or time axis); every field
    gets a leading time axis. `first_step_extras_spec` (optional) is stored once per item.
    """
    check_positive("sequence_length", sequence_length)
    signature = {
        STEPS: tree.map_structure(
            lambda s: tf.TensorSpec([sequence_length, *s.shape], s.dtype), dict(step_spec)
        )
    }
    if first_step_extras_spec is not None:
        signature[FIRST_STEP_EXTRAS] = first_step_extras_spec
    return signature


def burn_in_signature(
    step_spec: Mapping[str, Nest], burn_in: int, length: int, first_step_extras_spec: Nest = None
) -> dict:
    """Signature of `BurnInSequenceWriter` items: `burn_in + length + 1` steps plus a `mask`."""
    check_mask_free(step_spec)
    masked_spec = {**step_spec, MASK: tf.TensorSpec([], tf.float32)}
    return sequence_signature(masked_spec, burn_in + length + 1, first_step_extras_spec)


# ----------------------------------------------------------------------------------------------
# Tables


def queue_table(name: str, max_size: int, signature: Nest) -> reverb.Table:
    """IMPALA's queue (§3): each item is sampled exactly once, in insertion order.

    Inserts block (writers time out) while `max_size` items wait for the learner.
    """
    check_positive("max_size", max_size)
    return reverb.Table(
        name=name,
        sampler=reverb.selectors.Fifo(),
        remover=reverb.selectors.Fifo(),
        max_size=max_size,
        max_times_sampled=1,
        rate_limiter=reverb.rate_limiters.Queue(max_size),
        signature=signature,
    )


def uniform_table(name: str, max_size: int, signature: Nest, min_size: int = 1) -> reverb.Table:
    """IMPALA's replay of Table 2 "with replay" (§5.2.2, Table D.3): uniform sampling with
    replacement, oldest item evicted first, sampling once `min_size` items are in."""
    check_positive("max_size", max_size)
    check_positive("min_size", min_size)
    return reverb.Table(
        name=name,
        sampler=reverb.selectors.Uniform(),
        remover=reverb.selectors.Fifo(),
        max_size=max_size,
        rate_limiter=reverb.rate_limiters.MinSize(min_size),
        signature=signature,
    )


def prioritized_table(
    name: str,
    max_size: int,
    priority_exponent: float,
    signature: Nest,
    min_size: int = 1,
    samples_per_insert: float | None = None,
    error_buffer: float | None = None,
) -> reverb.Table:
    """Reactor's prioritised sequence replay (§3.3).

    Sampling is proportional to `priority ** priority_exponent` (Reactor §3.3 samples
    "proportionally" to the priority: exponent 1);
    the oldest item is evicted first. The learner writes priorities back with `update_priorities`.
    By default only `min_size` gates sampling; give `samples_per_insert` (and `error_buffer`) to
    hold the replay ratio instead (Reactor: about 0.8, from §3.4's 4-6 acting steps per learning
    step on batches of 4).
    """
    check_positive("max_size", max_size)
    check_positive("min_size", min_size)
    if not priority_exponent >= 0:
        raise ValueError(f"priority_exponent must be >= 0, got {priority_exponent}")
    if samples_per_insert is None:
        rate_limiter = reverb.rate_limiters.MinSize(min_size)
    else:
        if error_buffer is None:
            raise ValueError("error_buffer is required when samples_per_insert is given")
        rate_limiter = reverb.rate_limiters.SampleToInsertRatio(
            samples_per_insert, min_size, error_buffer
        )
    return reverb.Table(
        name=name,
        sampler=reverb.selectors.Prioritized(priority_exponent),
        remover=reverb.selectors.Fifo(),
        max_size=max_size,
        rate_limiter=rate_limiter,
        signature=signature,
    )


def sample_k_table(
    name: str,
    max_size: int,
    times_sampled: int,
    samples_per_insert: float,
    min_size_to_sample: int,
    error_buffer: float | tuple[float, float],
    signature: Nest,
) -> reverb.Table:
    """DiCE / GDI / LBC replay: uniform sampling, each item sampled at most `times_sampled` times.

    An item is removed after its `times_sampled`-th sample (or when evicted, oldest first); the
    `SampleToInsertRatio` limiter keeps sampled items per inserted item near `samples_per_insert`
    (DiCE, GDI and LBC "train each sample twice": k = 2, samples_per_insert = 2.0).
    """
    check_positive("max_size", max_size)
    check_positive("times_sampled", times_sampled)
    return reverb.Table(
        name=name,
        sampler=reverb.selectors.Uniform(),
        remover=reverb.selectors.Fifo(),
        max_size=max_size,
        max_times_sampled=times_sampled,
        rate_limiter=reverb.rate_limiters.SampleToInsertRatio(
            samples_per_insert, min_size_to_sample, error_buffer
        ),
        signature=signature,
    )


# ----------------------------------------------------------------------------------------------
# Server and client


def start_server(
    tables: Sequence[reverb.Table], port: int | None = None, checkpoint_dir: str | None = None
) -> reverb.Server:
    """Starts a Reverb server (`port=None` picks a free port).

    With `checkpoint_dir`, `client.checkpoint()` writes the tables there and a server started on
    the same directory restores the latest checkpoint
    (docs/architecture.md#replay-patterns-commonreplaypatternspy).
    """
    checkpointer = None
    if checkpoint_dir is not None:
        checkpointer = reverb.checkpointers.DefaultCheckpointer(path=str(checkpoint_dir))
    return reverb.Server(tables=list(tables), port=port, checkpointer=checkpointer)


def address_of(server: reverb.Server) -> str:
    """The address clients on this machine use: `"localhost:PORT"`."""
    return f"localhost:{server.port}"


def connect(address: str, timeout_s: float = 10.0) -> reverb.Client:
    """A client for the Reverb server at `address`, once the server answers.

    Raises `ConnectionError` after about `timeout_s` seconds (rounded up to whole seconds, the
    granularity of Reverb's `server_info` deadline) if nothing answers there.
    """
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    client = reverb.Client(address)
    try:
        client.server_info(timeout=math.ceil(timeout_s))
    except (reverb.DeadlineExceededError, RuntimeError) as error:
        raise ConnectionError(
            f"no Reverb server answered at --replay_address={address} within {timeout_s} s "
            f"({error}); start the learner / replay role first or fix --replay_address"
        ) from error
    return client


# ----------------------------------------------------------------------------------------------
# Learner side


def unroll_dataset(
    address: str,
    table: str,
    signature: Nest,
    batch_size: int,
    *,
    max_in_flight_samples_per_worker: int | None = None,
    num_workers_per_iterator: int = -1,
    rate_limiter_timeout_ms: int = -1,
    prefetch: int = 1,
) -> tf.data.Dataset:
    """Batches of items from any table of this module, time-major.

    Yields `reverb.ReplaySample(info, data)`:
    - `data[STEPS]`: every field `[L, batch_size, ...]` (Reverb's batch-major items transposed);
    - `data[FIRST_STEP_EXTRAS]` (if in `signature`): `[batch_size, ...]`;
    - `info`: `SampleInfo` of `[batch_size]` tensors: `key` (for `update_priorities`),
      `probability` and `table_size` (importance weights, Reactor §3.3), `times_sampled`.

    Sampling runs in tf.data, outside any compiled train step (docs/architecture.md#data-flow).
    Defaults: `max_in_flight_samples_per_worker = 2 * batch_size` (Reverb's rule of thumb: 2-3x the
    batch; more is faster but samples older priorities); `prefetch=1` batch is prepared while the
    learner computes (IMPALA §3.1) without adding more policy lag. `rate_limiter_timeout_ms` ends
    the dataset if the table cannot be sampled for that long (-1: wait forever).

    Shutdown: while the read-ahead waits on an empty or rate-limited table, deleting the iterator
    blocks until that sample returns. Stop the Reverb server first (pending samples then fail) or
    set `rate_limiter_timeout_ms`, so that shutdown never waits forever
    (docs/architecture.md#replay-patterns-commonreplaypatternspy).
    """
    check_positive("batch_size", batch_size)
    if STEPS not in signature:
        raise ValueError(
            f"signature needs a '{STEPS}' entry (build it with sequence_signature), "
            f"got keys {sorted(signature)}"
        )
    if max_in_flight_samples_per_worker is None:
        max_in_flight_samples_per_worker = 2 * batch_size
    dataset = reverb.TrajectoryDataset(
        server_address=address,
        table=table,
        dtypes=tree.map_structure(lambda spec: spec.dtype, signature),
        shapes=tree.map_structure(lambda spec: spec.shape, signature),
        max_in_flight_samples_per_worker=max_in_flight_samples_per_worker,
        num_workers_per_iterator=num_workers_per_iterator,
        rate_limiter_timeout_ms=rate_limiter_timeout_ms,
    )
    options = tf.data.Options()
    # The transpose is cheap: a parallelised map would only read more batches ahead (more policy
    # lag on a queue); `prefetch` is the one read-ahead stage.
    options.experimental_optimization.map_parallelization = False
    dataset = dataset.batch(batch_size, drop_remainder=True).with_options(options)
    return dataset.map(_time_major).prefetch(prefetch)


def _time_major(sample: reverb.ReplaySample) -> reverb.ReplaySample:
    def swap_batch_and_time(x: tf.Tensor) -> tf.Tensor:
        return tf.transpose(x, [1, 0, *range(2, x.shape.rank)])

    data = dict(sample.data)
    data[STEPS] = tf.nest.map_structure(swap_batch_and_time, data[STEPS])
    return reverb.ReplaySample(info=sample.info, data=data)


def last_real_trained_position(mask: tf.Tensor, burn_in: int) -> tf.Tensor:
    """Per item of a batch of `BurnInSequenceWriter` items (`mask` [burn_in + length + 1, B]),
    how many trained positions it holds up to its last real one ([B] int32; 0 if none)."""
    real = tf.cast(mask[burn_in:-1], tf.float32) > 0  # [length, B]
    positions = tf.range(1, tf.shape(real)[0] + 1)[:, None]
    return tf.reduce_max(tf.where(real, positions, 0), axis=0)


def trimmed_length(
    mask: tf.Tensor, burn_in: int, length: int | tf.Tensor, quantum: int = 1
) -> tf.Tensor:
    """Positions of a batch of `BurnInSequenceWriter` items (`mask` [burn_in + length + 1, B]) to
    keep: the burn-in, the trained positions up to the last one that is real in some item,
    rounded up to a multiple of `quantum` (at most `length`), and one bootstrap position.

    Every dropped position is padding in every item and lies after each item's last real step,
    where the discounts of episode ends and padding are 0 (`sequences.discounts_from_resets`) and
    every loss is a masked mean: the kept positions' losses and gradients are the same, and the
    new bootstrap position is padding in every item, as the old one was wherever it was cut.
    """
    needed = tf.maximum(tf.reduce_max(last_real_trained_position(mask, burn_in)), 1)
    kept = tf.minimum(length, (needed + quantum - 1) // quantum * quantum)
    return burn_in + kept + 1


def trim_trailing_padding(steps: Nest, burn_in: int, length: int | tf.Tensor, quantum: int) -> Nest:
    """`steps` (time-major fields of a batch of burn-in items) cut to `trimmed_length`."""
    end = trimmed_length(steps[MASK], burn_in, length, quantum)
    return tf.nest.map_structure(lambda x: x[:end], steps)


def update_priorities(client: reverb.Client, table: str, keys: Any, priorities: Any) -> None:
    """Writes new priorities for sampled items (Reactor §3.3) via `mutate_priorities`.

    `keys` are `info.key` of sampled items (any array-like of uint64); keys no longer in the table
    are ignored by Reverb. If a key repeats, its last priority wins.
    """
    # dtype given: numpy would turn a list mixing keys above and below 2**63 into float64.
    keys = np.asarray(keys, dtype=np.uint64).reshape(-1)
    priorities = np.asarray(priorities, dtype=np.float64).reshape(-1)
    if keys.shape != priorities.shape:
        raise ValueError(
            f"keys and priorities must have the same size, got {keys.size} and {priorities.size}"
        )
    bad = ~(np.isfinite(priorities) & (priorities >= 0))
    if bad.any():
        raise ValueError(f"priorities must be finite and >= 0, got {priorities[bad][:5]}")
    client.mutate_priorities(
        table, updates={int(key): float(p) for key, p in zip(keys, priorities)}
    )


# ----------------------------------------------------------------------------------------------
# Checks


def check_positive(name: str, value: int) -> None:
    if not value >= 1:
        raise ValueError(f"{name} must be a positive integer, got {value}")


def check_mask_free(step: Mapping[str, Any]) -> None:
    if MASK in step:
        raise ValueError(
            f"step must not contain a '{MASK}' field: BurnInSequenceWriter adds it "
            "(1 for real steps, 0 for padding)"
        )

"""Replay patterns: how an agent's experience is written to Reverb and sampled by its learner.

Each pattern is a small frozen (picklable) description that builds three things from the
per-step record of the agent (`common.runtime.acting.step_spec` plus its extras) and the core state
stored at each item's first step: the Reverb tables, the actor's writer (one writer family of
`common.replay.writers`, configured by length, period, padding at episode end and priority) and the
learner's batches.

| pattern            | papers                          | tables                            | writer           |
|--------------------|---------------------------------|-----------------------------------|------------------|
| `Queue`            | IMPALA                          | queue                             | `UnrollWriter`   |
| `QueueWithReplay`  | IMPALA Table 2 "with replay"    | queue + uniform replay, one item  | `UnrollWriter`   |
| `Prioritized`      | Reactor                         | prioritised, priorities written   | `SequenceWriter` |
| `SampleK`          | DiCE, GDI, LBC                  | uniform, each item sampled k times| `BurnInSequenceWriter` |

Batches are `reverb.ReplaySample(info, data)` with time-major steps (`replay.unroll_dataset`);
`QueueWithReplay` concatenates a fresh and a replayed part along the batch axis.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Iterator

import numpy as np
import reverb
import tensorflow as tf

from common.replay import replay

from common.replay import writers

EXPERIENCE_TABLE = "experience"
REPLAY_TABLE = "replay"  # QueueWithReplay's second table
KINDS = ("queue", "queue_with_replay", "prioritized", "sample_k")


@dataclasses.dataclass(frozen=True)
class Pattern:
    """What every pattern has: `length` trained steps per item (+1 bootstrap step) and the
    experience table's capacity in items."""

    length: int
    capacity: int

    kind: ClassVar[str] = "abstract"
    checkpointed: ClassVar[bool] = True  # replay whose contents matter: Reverb checkpoints it
    priority_table: ClassVar[str | None] = None  # the table whose priorities the learner writes

    def validate(self) -> None:
        for name in ("length", "capacity"):
            if not getattr(self, name) >= 1:
                raise ValueError(f"replay {name} must be >= 1, got {getattr(self, name)}")

    @property
    def item_length(self) -> int:
        return self.length + 1

    @property
    def period(self) -> int:
        """Steps between the starts of consecutive items of one environment."""
        return self.length

    @property
    def trained_steps(self) -> slice:
        """The time positions of an item a learner trains on (the rest is burn-in or the
        bootstrap step)."""
        return slice(0, self.length)

    def signature(self, step_spec: dict, first_step_spec: Any) -> dict:
        return replay.sequence_signature(step_spec, self.item_length, first_step_spec)

    def tables(self, signature: dict) -> list[reverb.Table]:
        raise NotImplementedError

    def writer(self, client: reverb.Client, num_envs: int, flush_timeout_ms: int) -> writers.Writer:
        raise NotImplementedError

    def batches(
        self, address: str, signature: dict, batch_size: int, timeout_ms: int
    ) -> Iterator[reverb.ReplaySample]:
        """Batches of `batch_size` items; the iterator ends if no batch came for `timeout_ms`."""
        return iter(
            replay.unroll_dataset(
                address,
                EXPERIENCE_TABLE,
                signature,
                batch_size,
                max_in_flight_samples_per_worker=self.in_flight(batch_size),
                rate_limiter_timeout_ms=timeout_ms,
            )
        )

    def in_flight(self, batch_size: int) -> int:
        # choice: replay patterns read ahead as Reverb advises (2x the batch, replay.unroll_dataset)
        return 2 * batch_size

    def unique_steps(self) -> int:
        """Distinct environment steps the items of a full table cover (consecutive items of an
        environment overlap by `item_length - period` steps)."""
        return self.capacity * self.period + self.item_length - self.period

    def stored_steps(self) -> int:
        """Step records a full table stores: the writers of `common.replay.replay` append each item
        whole, overlap and padding included (memory estimate)."""
        return self.capacity * self.item_length


@dataclasses.dataclass(frozen=True)
class Queue(Pattern):
    """IMPALA (§3): unrolls of `length` + 1 steps, each trained on exactly once, in
    order; actors block while `capacity` unrolls wait."""

    kind = "queue"
    checkpointed = False  # a queue of fresh unrolls: resuming refills it in seconds

    def tables(self, signature: dict) -> list[reverb.Table]:
        return [replay.queue_table(EXPERIENCE_TABLE, self.capacity, signature)]

    def writer(self, client: reverb.Client, num_envs: int, flush_timeout_ms: int) -> writers.Writer:
        return writers.UnrollWriter(
            client, self._write_tables(), self.length, num_envs, flush_timeout_ms=flush_timeout_ms
        )

    def _write_tables(self) -> tuple[str, ...]:
        return (EXPERIENCE_TABLE,)

    def in_flight(self, batch_size: int) -> int:
        # choice: one batch in flight (plus one prefetched): every unroll sampled ahead of the
        # train step is one whose policy lag grows while it waits.
        return batch_size


@dataclasses.dataclass(frozen=True)
class QueueWithReplay(Queue):
    """IMPALA Table 2 "with replay" (§5.2.2, Table D.3; writing every unroll to both is our
    reading): every fresh unroll goes both to the
    queue and to a uniform replay of `replay_capacity` unrolls (FIFO eviction); each batch takes
    `replay_fraction` of its unrolls from the replay and the rest from the queue. Replayed
    unrolls keep their stored behaviour logits and initial core state."""

    replay_capacity: int = 10_000  # IMPALA Table D.3: "Capacity 10,000 trajectories"
    replay_fraction: float = 0.5  # IMPALA §5.2.2: "50% of the items in each batch"

    kind = "queue_with_replay"
    checkpointed = True

    def validate(self) -> None:
        super().validate()
        if not self.replay_capacity >= 1:
            raise ValueError(f"replay_capacity must be >= 1, got {self.replay_capacity}")
        if not 0.0 < self.replay_fraction < 1.0:
            raise ValueError(f"replay_fraction must be in (0, 1), got {self.replay_fraction}")

    def tables(self, signature: dict) -> list[reverb.Table]:
        return [
            replay.queue_table(EXPERIENCE_TABLE, self.capacity, signature),
            replay.uniform_table(REPLAY_TABLE, self.replay_capacity, signature),
        ]

    def _write_tables(self) -> tuple[str, ...]:
        return (EXPERIENCE_TABLE, REPLAY_TABLE)

    def split(self, batch_size: int) -> tuple[int, int]:
        """(fresh, replayed) unrolls of a batch."""
        replayed = int(round(self.replay_fraction * batch_size))
        if not 1 <= replayed < batch_size:
            raise ValueError(
                f"replay_fraction={self.replay_fraction} of batch_size={batch_size} "
                "must leave at least one fresh and one replayed unroll"
            )
        return batch_size - replayed, replayed

    def batches(
        self, address: str, signature: dict, batch_size: int, timeout_ms: int
    ) -> Iterator[reverb.ReplaySample]:
        fresh, replayed = self.split(batch_size)
        queue = replay.unroll_dataset(
            address,
            EXPERIENCE_TABLE,
            signature,
            fresh,
            max_in_flight_samples_per_worker=fresh,
            rate_limiter_timeout_ms=timeout_ms,
        )
        uniform = replay.unroll_dataset(
            address,
            REPLAY_TABLE,
            signature,
            replayed,
            max_in_flight_samples_per_worker=2 * replayed,
            rate_limiter_timeout_ms=timeout_ms,
        )
        return iter(tf.data.Dataset.zip((queue, uniform)).map(concatenate_samples))

    def unique_steps(self) -> int:
        return max(self.capacity, self.replay_capacity) * self.period + 1

    def stored_steps(self) -> int:
        # An item's two copies (queue and replay) share its chunk.
        return max(self.capacity, self.replay_capacity) * self.item_length


@dataclasses.dataclass(frozen=True)
class Prioritized(Pattern):
    """Reactor (§3.3): overlapping sequences of `length` + 1 frames, one item
    per step (period 1), sampled in proportion to priority ** `priority_exponent`, evicted
    oldest first. Items enter with `initial_priority` (Reverb has no unknown priority: lazy
    initialisation is the learner's to emulate by rewriting it); the learner writes new
    priorities back after each step. With `samples_per_insert`, a rate limiter holds the replay
    ratio (about 0.8: §3.4's 4-6 acting steps per learning step of 4 sequences) within
    `error_buffer`."""

    priority_exponent: float = 1.0  # Reactor §3.3 samples "proportionally" to priority
    initial_priority: float = 1.0
    min_size: int = 1
    samples_per_insert: float | None = None
    error_buffer: float | None = None

    kind = "prioritized"
    priority_table = EXPERIENCE_TABLE

    @property
    def period(self) -> int:
        return 1  # Reactor §3.3: every overlapping sequence has a key

    def validate(self) -> None:
        super().validate()
        if not self.priority_exponent >= 0:
            raise ValueError(f"priority_exponent must be >= 0, got {self.priority_exponent}")
        if not (np.isfinite(self.initial_priority) and self.initial_priority >= 0):
            raise ValueError(
                f"initial_priority must be finite and >= 0, got {self.initial_priority}"
            )
        if (self.samples_per_insert is None) != (self.error_buffer is None):
            raise ValueError("samples_per_insert and error_buffer go together")

    def tables(self, signature: dict) -> list[reverb.Table]:
        return [
            replay.prioritized_table(
                EXPERIENCE_TABLE,
                self.capacity,
                self.priority_exponent,
                signature,
                min_size=self.min_size,
                samples_per_insert=self.samples_per_insert,
                error_buffer=self.error_buffer,
            )
        ]

    def stored_steps(self) -> int:
        return self.unique_steps()  # `writers.SequenceWriter`: items reference shared steps

    def writer(self, client: reverb.Client, num_envs: int, flush_timeout_ms: int) -> writers.Writer:
        return writers.SequenceWriter(
            client,
            EXPERIENCE_TABLE,
            self.item_length,
            1,
            num_envs,
            initial_priority=self.initial_priority,
            flush_timeout_ms=flush_timeout_ms,
        )


@dataclasses.dataclass(frozen=True)
class SampleK(Pattern):
    """DiCE / GDI / LBC (DiCE §4.1, Table 5): `burn_in` + `length` + 1 steps with the core state
    stored at the first step, padded and masked at episode ends (`writers.BurnInSequenceWriter`);
    uniform sampling, each item trained on `times_sampled` times, the sample-to-insert ratio held at
    `times_sampled` (each item sampled k times on average) within `error_buffer`."""

    burn_in: int = 0
    times_sampled: int = 2  # DiCE Table 5 "Sample Reuse 2"
    min_size: int = 1
    error_buffer: float | None = None  # default: a batch's worth either way
    trim_padding: bool = False  # batches lose the trailing positions that are padding in all items

    kind = "sample_k"

    @property
    def trim_quantum(self) -> int:
        """Trimmed batches keep a multiple of this many trained positions.

        choice: a quarter of an item's, so the train step sees at most four batch shapes, each
        traced once, while a batch of short games still drops most of its padding."""
        return -(-self.length // 4)

    @property
    def item_length(self) -> int:
        return self.burn_in + self.length + 1

    @property
    def trained_steps(self) -> slice:
        return slice(self.burn_in, self.burn_in + self.length)

    def validate(self) -> None:
        super().validate()
        if self.burn_in < 0:
            raise ValueError(f"burn_in must be >= 0, got {self.burn_in}")
        if not self.times_sampled >= 1:
            raise ValueError(f"times_sampled must be >= 1, got {self.times_sampled}")

    def signature(self, step_spec: dict, first_step_spec: Any) -> dict:
        return replay.burn_in_signature(step_spec, self.burn_in, self.length, first_step_spec)

    def tables(self, signature: dict) -> list[reverb.Table]:
        # choice: the limiter may drift by max(min_size, 64) x times_sampled samples either way
        # (128 at the burn-in papers' 2) before a side blocks, enough that actors and learner
        # rarely wait on each other.
        error_buffer = (
            self.error_buffer
            if self.error_buffer is not None
            else float(max(self.min_size, 64) * self.times_sampled)
        )
        return [
            replay.sample_k_table(
                EXPERIENCE_TABLE,
                self.capacity,
                self.times_sampled,
                samples_per_insert=float(self.times_sampled),
                min_size_to_sample=self.min_size,
                error_buffer=error_buffer,
                signature=signature,
            )
        ]

    def batches(
        self, address: str, signature: dict, batch_size: int, timeout_ms: int
    ) -> Iterator[reverb.ReplaySample]:
        batches = super().batches(address, signature, batch_size, timeout_ms)
        if not self.trim_padding:
            return batches
        return (self.trim(sample) for sample in batches)

    def trim(self, sample: reverb.ReplaySample) -> reverb.ReplaySample:
        """`sample` without the trailing positions that are padding in all its items
        (`replay.trim_trailing_padding`)."""
        data = dict(sample.data)
        data[replay.STEPS] = replay.trim_trailing_padding(
            data[replay.STEPS], self.burn_in, self.length, self.trim_quantum
        )
        return reverb.ReplaySample(info=sample.info, data=data)

    def writer(self, client: reverb.Client, num_envs: int, flush_timeout_ms: int) -> writers.Writer:
        return writers.BurnInSequenceWriter(
            client,
            EXPERIENCE_TABLE,
            self.burn_in,
            self.length,
            num_envs,
            flush_timeout_ms=flush_timeout_ms,
        )


def concatenate_samples(*samples: reverb.ReplaySample) -> reverb.ReplaySample:
    """One batch from several: steps along axis 1 (time-major), everything else along axis 0."""

    def concat(axis):
        return lambda *xs: tf.concat(xs, axis=axis)

    data = {
        key: tf.nest.map_structure(
            concat(1 if key == replay.STEPS else 0), *[s.data[key] for s in samples]
        )
        for key in samples[0].data
    }
    info = tf.nest.map_structure(concat(0), *[s.info for s in samples])
    return reverb.ReplaySample(info=info, data=data)


def estimated_bytes(pattern: Pattern, signature: dict) -> int:
    """Uncompressed bytes of a full experience table: stored steps x bytes per step (Reverb
    compresses chunks, so the resident size is smaller, padding most of all;
    benchmarks/replay_memory.py measures it)."""
    per_step = sum(
        int(np.prod(spec.shape[1:])) * spec.dtype.size
        for spec in tf.nest.flatten(signature[replay.STEPS])
    )
    return pattern.stored_steps() * per_step

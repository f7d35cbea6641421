"""Reverb writers: one *batched* actor step per `append` (every field has a leading `num_envs`
axis), the environments' streams kept apart (docs/architecture.md#replay-patterns-commonreplaypatternspy).

The unroll and burn-in writers append each item whole (one Reverb append per item), the sequence
writer appends every step of each environment and lets its heavily overlapping items share them
(the comment below says why). Writers bound their run-ahead and every wait has a timeout: a full
table raises `reverb.DeadlineExceededError` instead of blocking the actor forever. The items
follow `common.replay.replay`'s layout.
"""

from __future__ import annotations

from absl import logging

import collections
import math
from typing import Mapping, Protocol, Self, Sequence

import numpy as np
import reverb
import tree

from common.replay.replay import (
    DEFAULT_FLUSH_TIMEOUT_MS,
    FIRST_STEP_EXTRAS,
    MASK,
    STEPS,
    Nest,
    check_mask_free,
    check_positive,
)

# ----------------------------------------------------------------------------------------------
# Writers
#
# Two ways to write an item, chosen by how much consecutive items of an environment overlap:
#
# - Whole items (`UnrollWriter`, `BurnInSequenceWriter`): the actor keeps each environment's
#   recent steps in numpy rings and, when items complete, appends each one whole, as a single
#   step of one `TrajectoryWriter` whose cells are the item's arrays, and inserts it by
#   referencing that step (`ItemSink`). A Reverb append costs tens of µs whatever its size, so
#   one append per item instead of one per environment and step makes the write about an
#   item's length cheaper (benchmarks/writer_speed.py). The price is
#   that overlapping steps are stored once per item: one step in 21 for IMPALA's unrolls, the
#   41-step burn-in overlap of the burn-in papers' 121-step items, and their padding, which
#   Reverb's chunk compression reduces to almost nothing.
# - Shared references (`SequenceWriter`, Reactor's stride-1 sequences): one `TrajectoryWriter`
#   per environment, one append per step, items referencing the steps they span. With a new
#   33-step item at every step, whole items would store and send every step 33 times.


class Writer(Protocol):
    """What an actor needs of its pattern's writer (`common.replay.patterns.Pattern.writer`):
    every writer here, and Reactor's `reactor.replay.EstimatedPriorityWriter`."""

    def append(
        self, step: Mapping[str, Nest], *, first_step_extras: Nest, episode_end: np.ndarray
    ) -> None: ...

    def flush(self, timeout_ms: int | None = None) -> None: ...

    def close(self, timeout_ms: int | None = None) -> None: ...


class _Writer:
    """What every writer shares: checks of the batched inputs, bounded flushing, closing.

    A subclass keeps its Reverb writers as `_streams`: objects with a `writer`
    (`reverb.TrajectoryWriter`) and a `flush(max_pending, timeout_ms)`."""

    def __init__(self, num_envs: int, max_in_flight_items: int, flush_timeout_ms: int) -> None:
        check_positive("num_envs", num_envs)
        check_positive("flush_timeout_ms", flush_timeout_ms)
        if max_in_flight_items < 0:
            raise ValueError(f"max_in_flight_items must be >= 0, got {max_in_flight_items}")
        self.num_envs = num_envs
        self._max_in_flight_items = max_in_flight_items
        self._flush_timeout_ms = flush_timeout_ms
        self._streams: list = []
        self._step_structure = None  # both fixed by the first append
        self._extras_structure = None
        self._leaf_kinds: list | None = None  # (dtype, shape without the env axis) per leaf
        self._item_columns: list[int] | None = None  # see `_item_order`
        self._closed = False

    def flush(self, timeout_ms: int | None = None) -> None:
        """Waits until every created item is in the table; raises `DeadlineExceededError` after
        `timeout_ms` (default: the writer's `flush_timeout_ms`)."""
        self._flush(0, self._flush_timeout_ms if timeout_ms is None else timeout_ms)

    def close(self, timeout_ms: int | None = None) -> None:
        """Flushes (bounded by `timeout_ms`) and closes the streams. Never blocks forever: items
        the server has not accepted by then are dropped with a warning."""
        if self._closed:
            return
        self._closed = True
        try:
            self.flush(timeout_ms)
        except reverb.DeadlineExceededError:
            logging.warning("replay writer closed with items the server had not accepted")
        finally:
            for stream in self._streams:
                stream.writer.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _flush(self, max_pending: int, timeout_ms: int) -> None:
        for stream in self._streams:
            stream.flush(max_pending, timeout_ms)

    def _flush_run_ahead(self) -> None:
        """Bounds the items in flight; a full table raises after the timeout."""
        self._flush(self._max_in_flight_items, self._flush_timeout_ms)

    def _make_item(self, step_columns: list, first_step_columns: list) -> dict:
        item = {STEPS: tree.unflatten_as(self._step_structure, step_columns)}
        if self._extras_structure is not None:
            item[FIRST_STEP_EXTRAS] = tree.unflatten_as(self._extras_structure, first_step_columns)
        return item

    def _item_order(self, num_step_leaves: int, num_extras_leaves: int) -> list[int]:
        """For whole items (`ItemSink`): which of an item's leaves (step leaves, then extras)
        each column of the item is, in the order Reverb flattens the item's structure."""
        if self._item_columns is None:
            leaves = list(range(num_step_leaves + num_extras_leaves))
            item = self._make_item(leaves[:num_step_leaves], leaves[num_step_leaves:])
            self._item_columns = tree.flatten(item)
        return self._item_columns

    def _batched_leaves(self, step: Nest, first_step_extras: Nest) -> tuple[list, list]:
        """The flat leaves of a batched step and of its extras (`[num_envs, ...]` arrays), after
        checking them against the first append's structure, dtypes and shapes."""
        if self._step_structure is None:  # structures only: keep no arrays alive
            self._step_structure = tree.map_structure(lambda _: None, step)
            if first_step_extras is not None:
                self._extras_structure = tree.map_structure(lambda _: None, first_step_extras)
        tree.assert_same_structure(self._step_structure, step)
        if (self._extras_structure is None) != (first_step_extras is None):
            raise ValueError(
                "first_step_extras must be given on every append or on none (first append: "
                f"{'None' if self._extras_structure is None else 'given'})"
            )
        steps = self._checked_leaves(step, "step")
        extras = []
        if first_step_extras is not None:
            tree.assert_same_structure(self._extras_structure, first_step_extras)
            extras = self._checked_leaves(first_step_extras, "first_step_extras")
        kinds = [(leaf.dtype, leaf.shape[1:]) for leaf in steps + extras]
        if self._leaf_kinds is None:
            self._leaf_kinds = kinds
        elif kinds != self._leaf_kinds:
            self._name_changed_leaf(kinds, self._leaf_kinds, step, first_step_extras)
        return steps, extras

    def _name_changed_leaf(
        self, kinds: list, fixed: list, step: Nest, first_step_extras: Nest
    ) -> None:
        """Raises on the first leaf whose dtype or shape (`kinds`) differs from the first
        append's (`fixed`)."""
        named = [("step", path) for path, _ in tree.flatten_with_path(step)]
        if first_step_extras is not None:
            extras = tree.flatten_with_path(first_step_extras)
            named += [("first_step_extras", path) for path, _ in extras]
        for (what, path), (dtype, shape), (want_dtype, want_shape) in zip(named, kinds, fixed):
            if (dtype, shape) != (want_dtype, want_shape):
                raise ValueError(
                    f"{what} field {'/'.join(map(str, path))} is {dtype} {list(shape)} per env; "
                    f"the first append fixed it to {want_dtype} {list(want_shape)}"
                )

    def _checked_leaves(self, batched: Nest, what: str) -> list[np.ndarray]:
        leaves = [np.asarray(leaf) for leaf in tree.flatten(batched)]
        bad = [
            i for i, leaf in enumerate(leaves) if leaf.ndim == 0 or leaf.shape[0] != self.num_envs
        ]
        if bad:  # paths only here: flattening with them costs every append otherwise
            path, leaf = tree.flatten_with_path(batched)[bad[0]]
            raise ValueError(
                f"{what} field {'/'.join(map(str, path))} has shape {np.shape(leaf)}; "
                f"every field needs a leading num_envs={self.num_envs} axis"
            )
        return leaves


# Reverb's trajectory writer logs a warning ("The number of pending items is alarmingly high")
# every few items while 50 or more of its items await the server's confirmation; a batched
# step completes up to one whole item per environment at once, so whole items go to Reverb in
# groups of at most this many unconfirmed ones.
MAX_UNCONFIRMED_ITEMS = 32


def _flush_stream(stream, max_pending: int, timeout_ms: int) -> None:
    """Waits until at most `max_pending` of the stream's items are unconfirmed.

    A stream whose last flush returned with at most `flushed_to` items pending and that created
    no item since still has at most that many (pending items only get confirmed): flushing it
    again would return at once, yet costs ~0.1 ms per stream and batched step, and most
    streams create no item in a given step."""
    if stream.flushed_to is not None and stream.flushed_to <= max_pending:
        return
    stream.writer.flush(block_until_num_items=max_pending, timeout_ms=timeout_ms)
    stream.flushed_to = max_pending


class ItemSink:
    """Inserts whole items: each item's arrays are appended as one step of a Reverb trajectory
    writer and the item references that step's cells, in every table of `tables`.

    The writer keeps only that step alive, so every append is a chunk of its own: an item's
    sample reads exactly its own data, compressed on its own.

    `insert` hands an item to Reverb at once (a few items a step: reports, weights); `queue`
    keeps it until `flush`, which hands the queued items over `MAX_UNCONFIRMED_ITEMS` at a time
    (a writer's batch of items). It calls the writer's C++ core (`reverb.TrajectoryWriter.
    _writer`, dm-reverb 0.14.0: the pinned version) directly. The Python wrapper's `append` and
    `history` rebuild the step's paths and column structure on every call, about as long as the
    C++ append itself, and a whole item is one call of each (docs/guides/minatar.md, "On a Xeon: whole
    items through Reverb's C++ writer"). The C++ writer still checks every item against its
    table's signature, so a mismatch fails as loudly as before.
    """

    def __init__(self, client: reverb.Client, tables: tuple[str, ...]) -> None:
        self.writer = client.trajectory_writer(num_keep_alive_refs=1)  # flush and close
        self._core = self.writer._writer
        self.tables = tables
        self.flushed_to: int | None = 0  # see `_flush_stream`
        self._queued: collections.deque = collections.deque()  # (leaves, priority, order)
        self._unconfirmed = 0  # no fewer than the items Reverb has not confirmed yet

    def insert(self, leaves: list, priority: float, order: Sequence[int] | None = None) -> None:
        """Appends `leaves` (arrays) as one step and inserts the item whose flattened columns are
        `leaves[i] for i in order` (all of them, in turn, by default)."""
        refs = self._core.Append(leaves)
        columns = [[ref] for ref in refs] if order is None else [[refs[i]] for i in order]
        squeezed = [True] * len(columns)  # each column is one cell, without a time axis
        for table in self.tables:  # items of several tables share the same chunks
            self._core.CreateItem(table, priority, columns, squeezed)
        self._unconfirmed += len(self.tables)
        self.flushed_to = None  # a new item may be pending: the next flush must not be skipped

    def queue(self, leaves: list, priority: float, order: Sequence[int] | None = None) -> None:
        """`insert` at the next `flush`."""
        self._queued.append((leaves, priority, order))

    def flush(self, max_pending: int, timeout_ms: int) -> None:
        """Inserts the queued items, waiting for the server whenever `MAX_UNCONFIRMED_ITEMS` are
        unconfirmed, then until at most `max_pending` are. Raises `reverb.DeadlineExceededError`
        after `timeout_ms` of any one wait; the items not yet inserted stay queued."""
        per_item = len(self.tables)
        while self._queued:
            if self._unconfirmed + per_item > MAX_UNCONFIRMED_ITEMS:
                half = MAX_UNCONFIRMED_ITEMS // 2
                self.writer.flush(block_until_num_items=half, timeout_ms=timeout_ms)
                self._unconfirmed = half
            self.insert(*self._queued.popleft())
        _flush_stream(self, max_pending, timeout_ms)
        self._unconfirmed = min(self._unconfirmed, max_pending)


def _table_names(table: str | Sequence[str]) -> tuple[str, ...]:
    tables = (table,) if isinstance(table, str) else tuple(table)
    if not tables:
        raise ValueError("a writer needs at least one table")
    return tables


class UnrollWriter(_Writer):
    """IMPALA's unrolls (§3): items of `unroll_length + 1` steps, one every `unroll_length`
    steps, so consecutive unrolls of an environment share one step: the last (bootstrap) step
    of one item is the first step of the next. Unrolls run across episodes (the per-step
    discounts cut the returns). `first_step_extras` holds e.g. the core state at the start of
    the unroll (IMPALA §3: the "initial LSTM state").

    Whole items (see above): every environment's last `unroll_length + 1` steps sit in a numpy
    ring, and since all environments step together, every `unroll_length` steps each of them
    inserts its unroll, `num_envs` appends in all. `append(step, first_step_extras=None,
    episode_end=None)` takes one batched step (every field with a leading `num_envs` axis);
    `first_step_extras` is kept at unroll starts (pass it on every call or never);
    `episode_end` is ignored. By default an append returns once its items are in the table
    (`max_in_flight_items=0`, as the queue's blocking asks).
    """

    def __init__(
        self,
        client: reverb.Client,
        table: str | Sequence[str],
        unroll_length: int,
        num_envs: int,
        *,
        max_in_flight_items: int | None = None,
        flush_timeout_ms: int = DEFAULT_FLUSH_TIMEOUT_MS,
    ) -> None:
        check_positive("unroll_length", unroll_length)
        super().__init__(num_envs, max_in_flight_items or 0, flush_timeout_ms)
        self._sink = ItemSink(client, _table_names(table))
        self._streams = [self._sink]
        self.unroll_length = unroll_length
        self._count = 0  # batched steps appended
        self._steps: list[np.ndarray] = []  # per leaf [num_envs, unroll_length + 1, ...]
        self._extras: list[np.ndarray] = []  # per leaf [num_envs, 2, ...]: the last two starts

    def append(
        self,
        step: Mapping[str, Nest],
        first_step_extras: Nest = None,
        episode_end: np.ndarray | None = None,
    ) -> None:
        """Appends one batched step; inserts the unrolls it completes. Raises
        `reverb.DeadlineExceededError` if the table does not accept them within
        `flush_timeout_ms`; the step is kept and its items stay queued in the writer."""
        step_leaves, extras_leaves = self._batched_leaves(step, first_step_extras)
        period, length = self.unroll_length, self.unroll_length + 1
        if self._count == 0:
            self._steps = [_ring(leaf, length) for leaf in step_leaves]
            self._extras = [_ring(leaf, 2) for leaf in extras_leaves]
        for ring, leaf in zip(self._steps, step_leaves):
            ring[:, self._count % length] = leaf
        if self._count % period == 0:  # unroll k starts here; its extras go to slot k % 2
            for ring, leaf in zip(self._extras, extras_leaves):
                ring[:, (self._count // period) % 2] = leaf
        self._count += 1
        start = self._count - length
        if start >= 0 and start % period == 0:
            order = np.arange(start, self._count) % length
            steps = [ring[:, order] for ring in self._steps]
            extras = [ring[:, (start // period) % 2] for ring in self._extras]
            columns = self._item_order(len(steps), len(extras))
            for env in range(self.num_envs):
                leaves = [*(s[env] for s in steps), *(e[env] for e in extras)]
                self._sink.queue(leaves, 1.0, columns)
        self._flush_run_ahead()


def _ring(leaf: np.ndarray, size: int, extra_rows: int = 0) -> np.ndarray:
    """Zeros `[num_envs, size + extra_rows, ...]` for the per-env leaves of `leaf` [num_envs,
    ...]."""
    return np.zeros((leaf.shape[0], size + extra_rows, *leaf.shape[1:]), leaf.dtype)


class _EnvStream:
    """One environment's `TrajectoryWriter`, inserting an item every `period` appended steps.

    After `count` appended steps, an item of the last `length` steps is inserted whenever
    `count >= length` and `(count - length) % period == 0`, so items start at steps
    0, period, 2 * period, ... of the stream. Steps are appended as flat lists of leaves (step
    leaves, then first-step-extras leaves, which are kept only at item starts).
    `make_item(step_columns, first_step_columns)` rebuilds the item's structure from the
    referenced columns.
    """

    def __init__(
        self, client: reverb.Client, tables: tuple[str, ...], length: int, period: int, make_item
    ) -> None:
        self.writer = client.trajectory_writer(num_keep_alive_refs=length)
        self.tables = tables
        self.length = length
        self.period = period
        self.make_item = make_item
        self.count = 0
        self.flushed_to: int | None = 0  # see `_flush_stream`

    def push(self, step_leaves: list, first_step_leaves: list, priority: float) -> None:
        if self.count % self.period != 0:
            first_step_leaves = [None] * len(first_step_leaves)  # None: not stored at this step
        self.writer.append(step_leaves + first_step_leaves)
        self.count += 1
        if self.count >= self.length and (self.count - self.length) % self.period == 0:
            columns = self.writer.history
            num_step_leaves = len(step_leaves)
            item = self.make_item(
                [column[-self.length :] for column in columns[:num_step_leaves]],
                [column[-self.length] for column in columns[num_step_leaves:]],
            )
            for table in self.tables:  # items of several tables share the same chunks
                self.writer.create_item(table, priority, item)
            self.flushed_to = None  # a new item is pending: the next flush must not be skipped

    def flush(self, max_pending: int, timeout_ms: int) -> None:
        _flush_stream(self, max_pending, timeout_ms)


class SequenceWriter(_Writer):
    """Fixed-length overlapping sequences per environment (Reactor §3.3), written by shared
    references (see above).

    Every `stride` steps each environment inserts an item of its last `sequence_length` steps
    (Reactor: 33 steps, stride 1: every overlapping sequence has a key, §3.3-§3.4). Sequences run
    across episode boundaries; store per-step episode flags in `step` so the learner can cut traces
    and reset the core there.

    Lazy priorities (Reactor §3.3): Reverb has no "unknown" priority, so new items enter with
    the provisional `initial_priority` (a public attribute the actor may update, e.g. to the
    latest estimate the learner publishes; the max priority seen gives PER's rule) and the
    learner corrects it with `update_priorities` once the item has been through a train step.

    `append(step, first_step_extras=None)`: `step` is one batched actor step (every field has a
    leading `num_envs` axis). `first_step_extras` (same batching) is stored only at steps where
    an item starts; pass it on every call (e.g. the core state *before* this step) or never.
    Fields needed at every step (e.g. Reactor's two LSTM states, §3.4.1) go in `step`.
    """

    def __init__(
        self,
        client: reverb.Client,
        table: str | Sequence[str],
        sequence_length: int,
        stride: int,
        num_envs: int,
        *,
        initial_priority: float = 1.0,
        max_in_flight_items: int | None = None,
        flush_timeout_ms: int = DEFAULT_FLUSH_TIMEOUT_MS,
    ) -> None:
        check_positive("sequence_length", sequence_length)
        if not 1 <= stride <= sequence_length:
            raise ValueError(
                f"stride must be in [1, sequence_length={sequence_length}] so that every step "
                f"lands in an item, got {stride}"
            )
        if max_in_flight_items is None:
            # choice: let about one sequence's worth of items wait per environment, so chunks
            # can grow to about a sequence (compression).
            max_in_flight_items = sequence_length // stride - 1
        super().__init__(num_envs, max_in_flight_items, flush_timeout_ms)
        tables = _table_names(table)
        self._streams = [
            _EnvStream(client, tables, sequence_length, stride, self._make_item)
            for _ in range(num_envs)
        ]
        self.initial_priority = initial_priority

    def append(
        self,
        step: Mapping[str, Nest],
        first_step_extras: Nest = None,
        episode_end: np.ndarray | None = None,
    ) -> None:
        """Appends one batched actor step; inserts the items it completes (see class docstring).
        `episode_end` is accepted for a uniform writer API and ignored: these sequences run
        across episodes (the per-step `reset` flags cut them).

        Raises `reverb.DeadlineExceededError` if the table does not accept items within
        `flush_timeout_ms`; the step is kept and its items stay queued in the writer.
        """
        priority = self.initial_priority
        if not (math.isfinite(priority) and priority >= 0):
            raise ValueError(f"initial_priority must be finite and >= 0, got {priority}")
        step_leaves, extras_leaves = self._batched_leaves(step, first_step_extras)
        for env, stream in enumerate(self._streams):
            stream.push([x[env] for x in step_leaves], [x[env] for x in extras_leaves], priority)
        self._flush_run_ahead()


class BurnInSequenceWriter(_Writer):
    """R2D2-style sequences of DiCE / GDI / LBC: `burn_in + length + 1` steps per item.

    Layout (DiCE Table 5, GDI Table 6, LBC Table 3: burn-in 40, seq-length 80, bootstrap; the rest
    is ours, the sequence-layout row of docs/papers/dice.md#departures-from-the-paper): an item
    holds `burn_in` steps to warm
    up the core from the stored state, `length` trained steps and 1 bootstrap step; items start
    every `period` steps (default `length`, so the trained windows tile each episode and
    consecutive items overlap by `burn_in + 1` steps).

    Episodes are never mixed (a choice): each episode of each environment is its own
    stream, laid out as `burn_in` zero steps, the episode's steps, then zero steps until the last
    real step lies in some item's trained window. So the first item's burn-in is all padding
    and its trained window starts at the episode's first step. Every step carries
    `mask` (float32, 1 real, 0 padding); padding steps are zeros in every field. The learner must
    keep padding from changing the core state (e.g. start from the stored state at the first
    unmasked step) and drop masked steps from the losses.

    `append(step, episode_end, first_step_extras=None)`: `step` is one batched actor step without
    a `mask` field; `episode_end[i]` is True when this is the last step of environment i's episode
    (the next step starts a new episode). The item's last step is only a bootstrap step if the
    actor appends it: a truncated episode bootstraps only if its final observation is appended.
    `first_step_extras` (e.g. the core state before this step; pass it on every call or never) is
    stored at item starts; items whose start is padding store the extras of the episode's first
    step, i.e. the initial state (zeros for a fresh LSTM).

    Whole items (see above): item k of an episode covers its real steps
    [k * period - burn_in, k * period - burn_in + item_length), those outside the episode being
    padding. It is inserted in the append of its last step or, at the episode's end, if its
    trained window holds real steps. Each environment's last `item_length` real steps sit in a
    numpy ring with one zero row behind them, so the items an append completes are gathered in
    one indexing per field (padding reads the zero row) and appended one by one.
    """

    def __init__(
        self,
        client: reverb.Client,
        table: str | Sequence[str],
        burn_in: int,
        length: int,
        num_envs: int,
        *,
        period: int | None = None,
        max_in_flight_items: int | None = None,
        flush_timeout_ms: int = DEFAULT_FLUSH_TIMEOUT_MS,
    ) -> None:
        if burn_in < 0:
            raise ValueError(f"burn_in must be >= 0, got {burn_in}")
        check_positive("length", length)
        period = length if period is None else period  # choice: stride = length (80)
        if not 1 <= period <= length:
            raise ValueError(
                f"period must be in [1, length={length}] so that every step is trained, "
                f"got {period}"
            )
        super().__init__(num_envs, max_in_flight_items or 0, flush_timeout_ms)
        self._sink = ItemSink(client, _table_names(table))
        self._streams = [self._sink]
        self.burn_in = burn_in
        self.period = period
        self.item_length = burn_in + length + 1
        # Items whose extras are kept while they wait: their starts lie within an item's length
        # of each other, so this many slots are never reused before the item is inserted.
        self._slots = self.item_length // period + 2
        self._count = np.zeros(num_envs, np.int64)  # real steps of each env's episode so far
        self._items = np.zeros(num_envs, np.int64)  # items of each env's episode inserted
        self._steps: list[np.ndarray] = []  # per leaf [num_envs, item_length + 1, ...]
        self._extras: list[np.ndarray] = []  # per leaf [num_envs, slots, ...]

    def append(
        self, step: Mapping[str, Nest], episode_end: np.ndarray, first_step_extras: Nest = None
    ) -> None:
        """Appends one batched actor step; pads and closes the episodes that end here.

        Raises `reverb.DeadlineExceededError` if the table does not accept items within
        `flush_timeout_ms`; the step is kept and its items stay queued in the writer.
        """
        check_mask_free(step)
        episode_end = np.asarray(episode_end, dtype=bool)
        if episode_end.shape != (self.num_envs,):
            raise ValueError(
                f"episode_end must have shape ({self.num_envs},), got {episode_end.shape}"
            )
        step_leaves, extras_leaves = self._batched_leaves(step, first_step_extras)
        H = self.item_length
        if not self._steps:  # the last row stays zero: what padding positions read
            self._steps = [_ring(leaf, H, extra_rows=1) for leaf in step_leaves]
            self._extras = [_ring(leaf, self._slots) for leaf in extras_leaves]
        envs = np.arange(self.num_envs)
        for ring, leaf in zip(self._steps, step_leaves):
            ring[envs, self._count % H] = leaf
        self._keep_extras(extras_leaves)
        self._count += 1
        # The item this step completes (at most one: item starts are `period` >= 1 apart), and
        # at an episode's end every item whose trained window holds real steps
        # (k * period < count).
        done = self._items + (self._items * self.period + H <= self.burn_in + self._count)
        last = np.where(episode_end, -(-self._count // self.period), done)
        self._insert(np.repeat(envs, last - self._items), self._items, last)
        self._items = np.where(episode_end, 0, last)
        self._count[episode_end] = 0
        self._flush_run_ahead()

    def _keep_extras(self, leaves: list) -> None:
        """Stores the extras of the items whose first real step this is: at an episode's first
        step every item that starts in the burn-in padding, later the item starting here."""
        if not leaves:
            return
        first = np.flatnonzero(self._count == 0)
        later = np.flatnonzero(
            (self._count > 0) & ((self._count + self.burn_in) % self.period == 0)
        )
        later_slots = (self._count[later] + self.burn_in) // self.period % self._slots
        for ring, leaf in zip(self._extras, leaves):
            for k in range(self.burn_in // self.period + 1):
                ring[first, k % self._slots] = leaf[first]
            ring[later, later_slots] = leaf[later]

    def _insert(self, envs: np.ndarray, first: np.ndarray, last: np.ndarray) -> None:
        """Inserts items first[e]..last[e]-1 of each env e (`envs` repeats e once per item)."""
        if envs.size == 0:
            return
        n = last - first
        ks = np.arange(envs.size) - np.repeat(np.cumsum(n) - n, n) + np.repeat(first, n)
        real = (ks * self.period - self.burn_in)[:, None] + np.arange(self.item_length)
        mask = (real >= 0) & (real < self._count[envs][:, None])
        rows = np.where(mask, real % self.item_length, self.item_length)
        steps = [ring[envs[:, None], rows] for ring in self._steps] + [mask.astype(np.float32)]
        extras = [ring[envs, ks % self._slots] for ring in self._extras]
        order = self._item_order(len(steps), len(extras))
        for i in range(envs.size):
            self._sink.queue([*(s[i] for s in steps), *(e[i] for e in extras)], 1.0, order)

    def _make_item(self, step_columns: list, first_step_columns: list) -> dict:
        # The mask is the last step leaf (`_insert`); it goes back into the steps by name.
        item = super()._make_item(step_columns[:-1], first_step_columns)
        item[STEPS][MASK] = step_columns[-1]
        return item

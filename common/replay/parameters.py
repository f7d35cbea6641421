"""The learner's latest weights through a one-item Reverb table: the learner publishes, actors and
the evaluator read (docs/architecture.md#data-flow)."""

from __future__ import annotations

import math
import threading
from typing import NamedTuple, Sequence

import numpy as np
import reverb

from common.replay.replay import DEFAULT_FLUSH_TIMEOUT_MS
from common.replay.writers import ItemSink

# choice: a params sample follows a server_info answer, so it takes milliseconds; one this late
# means the server died in between (a 6 MB deep-network sample on a loaded host stays far below).
PARAMS_SAMPLE_TIMEOUT_S = 30.0


def params_table(name: str = "params") -> reverb.Table:
    """A one-item table holding the learner's latest weights; a new insert evicts the old one."""
    return reverb.Table(
        name=name,
        sampler=reverb.selectors.Fifo(),
        remover=reverb.selectors.Fifo(),
        max_size=1,
        rate_limiter=reverb.rate_limiters.MinSize(1),
    )


class Published(NamedTuple):
    """Weights the learner published: the learner step they are from and the frames the learner
    had consumed by then (its frame count, which an evaluation is logged at; a step alone does
    not give it when padded items count only their real steps)."""

    step: int
    frames: int
    weights: list[np.ndarray]


class ParamsPublisher:
    """Publishes the learner's weights to the one-item `params_table`
    (docs/architecture.md#data-flow).

    Each `publish` inserts `(step, frames, weights)` and Reverb evicts the previous item, so the
    table always holds only the latest weights.
    """

    def __init__(
        self,
        client: reverb.Client,
        table: str = "params",
        timeout_ms: int = DEFAULT_FLUSH_TIMEOUT_MS,
    ) -> None:
        self._sink = ItemSink(client, (table,))
        self._timeout_ms = timeout_ms

    def publish(self, step: int, frames: int, weights: Sequence[np.ndarray]) -> None:
        """Inserts the weights of learner step `step`, when the learner had consumed `frames`;
        returns once the server holds them."""
        self._sink.insert([np.int64(step), np.int64(frames), *map(np.asarray, weights)], 1.0)
        self._sink.writer.flush(timeout_ms=self._timeout_ms)

    def close(self) -> None:
        self._sink.writer.close()


class ParamsSubscriber:
    """Reads the latest published weights (actors pull them every few steps;
    docs/architecture.md#data-flow)."""

    def __init__(
        self,
        client: reverb.Client,
        table: str = "params",
        sample_timeout_s: float = PARAMS_SAMPLE_TIMEOUT_S,
    ) -> None:
        self._client = client
        self._table = table
        self._sample_timeout_s = sample_timeout_s

    def latest(self, timeout_ms: int = 1000) -> Published | None:
        """The weights last published, or None if nothing was published yet (or only an item of
        the layout before frames, which a replay checkpoint of an older run can hold).

        Never waits for a publish: it asks the server whether the table holds an item (bounded by
        `timeout_ms`, rounded up to whole seconds; `reverb.DeadlineExceededError` if the server
        does not answer) and only then samples it. The sample is bounded too: should the server
        die between the two calls, `reverb.DeadlineExceededError` follows `sample_timeout_s`.
        """
        info = self._client.server_info(timeout=max(1, math.ceil(timeout_ms / 1000)))
        if self._table not in info:
            raise ValueError(f"no table '{self._table}' on the server; it has {sorted(info)}")
        if info[self._table].current_size == 0:
            return None
        step, *rest = sample_once(self._client, self._table, self._sample_timeout_s).data
        frames = np.asarray(rest[0]) if rest else None
        if frames is None or frames.ndim != 0 or not np.issubdtype(frames.dtype, np.integer):
            # A (step, weights) item from before frames were published, restored with an older
            # run's replay checkpoint: nothing to read until the learner's first publish (at its
            # start) replaces it.
            return None
        return Published(int(step), int(frames), [np.asarray(w) for w in rest[1:]])


def sample_once(client: reverb.Client, table: str, timeout_s: float) -> reverb.ReplaySample:
    """One item of `table`, or `reverb.DeadlineExceededError` after `timeout_s`.

    Reverb 0.14's sampler has no deadline and retries a lost connection forever (a sample from
    a killed server never returns), so the sample runs in a daemon thread that is abandoned on
    timeout; the caller is expected to give up on the server then.
    """
    result: list = []
    worker = threading.Thread(
        target=lambda: result.append(next(client.sample(table, emit_timesteps=False))),
        name=f"sample_{table}",
        daemon=True,
    )
    worker.start()
    worker.join(timeout_s)
    if not result:
        raise reverb.DeadlineExceededError(
            f"no sample from table '{table}' within {timeout_s} s: the server is unreachable"
        )
    return result[0]

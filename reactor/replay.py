"""Reactor's replay on Reverb: `common.replay.patterns.Prioritized` (33-frame overlapping sequences,
one key per step, FIFO eviction, the acting : learning ratio held by a samples-per-insert limiter)
whose writer inserts new keys with the learner's current estimate (reactor/priorities.py).

The learner publishes the estimate as the last of its acting weights; each actor's writer reads
it every `estimate_pull_interval` steps. `prioritisation="max"` publishes the largest priority
written so far instead (PER, App. 6.5), and "uniform" samples with priority ** 0.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import reverb

from common.runtime import acting
from common.replay import patterns
from common.replay import parameters
from common.replay import writers

if TYPE_CHECKING:
    from reactor import config as config_lib


@dataclasses.dataclass(frozen=True)
class EstimatedPrioritized(patterns.Prioritized):
    """`Prioritized` whose new keys enter with the learner's published estimate, one key every
    `stride` steps (§3.3: every step)."""

    estimate_pull_interval: int = 100
    stride: int = 1

    @property
    def period(self) -> int:
        return self.stride

    def writer(
        self, client: reverb.Client, num_envs: int, flush_timeout_ms: int
    ) -> EstimatedPriorityWriter:
        sequences = writers.SequenceWriter(
            client,
            patterns.EXPERIENCE_TABLE,
            self.item_length,
            self.stride,
            num_envs,
            initial_priority=self.initial_priority,
            flush_timeout_ms=flush_timeout_ms,
        )
        return EstimatedPriorityWriter(
            sequences,
            parameters.ParamsSubscriber(client, acting.PARAMS_TABLE),
            self.estimate_pull_interval,
        )


class EstimatedPriorityWriter:
    """A `writers.SequenceWriter` whose `initial_priority` follows the published estimate."""

    def __init__(
        self,
        writer: writers.SequenceWriter,
        subscriber: parameters.ParamsSubscriber,
        pull_interval: int,
    ) -> None:
        self._writer = writer
        self._subscriber = subscriber
        self._pull_interval = pull_interval
        self._appends = 0

    @property
    def initial_priority(self) -> float:
        return self._writer.initial_priority

    def append(
        self,
        step: Mapping[str, Any],
        first_step_extras: Any = None,
        episode_end: np.ndarray | None = None,
    ) -> None:
        if self._appends % self._pull_interval == 0:
            latest = self._subscriber.latest(timeout_ms=1000)
            if latest is not None:
                self._writer.initial_priority = float(latest.weights[-1])
        self._appends += 1
        self._writer.append(step, first_step_extras=first_step_extras, episode_end=episode_end)

    def flush(self, timeout_ms: int | None = None) -> None:
        self._writer.flush(timeout_ms)

    def close(self, timeout_ms: int | None = None) -> None:
        self._writer.close(timeout_ms)


def make_pattern(config: config_lib.ReactorConfig) -> patterns.Prioritized:
    """The replay of `config` (§3.3, §3.4; reactor/priorities.py maps it onto Reverb)."""
    pattern = EstimatedPrioritized(
        length=config.sequence_length - 1,
        capacity=config.replay_capacity,
        priority_exponent=0.0 if config.prioritisation == "uniform" else config.priority_exponent,
        initial_priority=1.0,  # choice: PriorityState's initial estimate (reactor.learning)
        min_size=max(config.min_replay_size, config.batch_size),
        samples_per_insert=config.samples_per_insert,
        error_buffer=config.replay_error_buffer,
        estimate_pull_interval=config.estimate_pull_interval,
        stride=config.sequence_stride,
    )
    pattern.validate()
    return pattern

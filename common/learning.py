"""The learner loop: Reverb -> compiled train step -> publish params, checkpoint, log.

Generic over papers (DESIGN.md §2, §6): a paper supplies its network, its compiled
`train_step(batch_steps, frames) -> stats` and the objects to checkpoint (optimizer...); this
module samples unroll batches outside the compiled function (Reverb ops cannot be XLA-compiled),
counts steps and environment frames, publishes the weights every `publish_interval` steps, writes
`tf.train.CheckpointManager` checkpoints periodically and at shutdown, and logs TensorBoard
scalars, `episodes.csv` and a console line.

Resuming: a learner started on a logdir that holds checkpoints restores the network, the
optimizer state, the step and frame counters and the run's elapsed wall time, so the learning
rate schedule and the CSV time axis continue where the previous process stopped.
"""

import collections
import dataclasses
import os
import time
from typing import Any, Callable, Iterator, Mapping

import numpy as np
import reverb
import tensorflow as tf

from common import acting
from common import replay
from common import runlog as run_logging

TrainStep = Callable[[dict, tf.Tensor], Mapping[str, tf.Tensor]]


@dataclasses.dataclass(frozen=True)
class LearnerSettings:
    logdir: str
    total_frames: int
    frames_per_batch: int  # environment frames one train step consumes
    batch_size: int
    publish_interval: int = 1  # learner steps between parameter publications
    checkpoint_interval_s: float = 300.0
    log_interval_s: float = 10.0
    max_checkpoints: int = 3  # choice: a few, in case the newest is from a diverged run
    sample_timeout_ms: int = 2000  # choice: wake up this often to notice a stop request
    name: str = "learner"


class Learner:
    """Owns the counters, checkpoints and logs around a paper's train step."""

    def __init__(self, settings: LearnerSettings, network: tf.Module, train_step: TrainStep,
                 checkpointables: Mapping[str, Any], client: reverb.Client,
                 replay_address: str, signature: dict, table: str = acting.UNROLLS_TABLE):
        self.settings = settings
        self.network = network
        self.train_step = train_step
        self.client = client
        self._replay_address = replay_address
        self._signature = signature
        self._table = table
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="learner_step")
        self.frames = tf.Variable(0, dtype=tf.int64, trainable=False, name="frames")
        self.elapsed_s = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="elapsed_s")
        self.checkpoint = tf.train.Checkpoint(step=self.step, frames=self.frames,
                                              elapsed_s=self.elapsed_s, network=network,
                                              **checkpointables)
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, os.path.join(settings.logdir, "checkpoints"),
            max_to_keep=settings.max_checkpoints, step_counter=self.step)
        self.restored_from = self.manager.restore_or_initialize()
        if self.restored_from:
            print(f"[{settings.name}] resumed {self.restored_from} (step "
                  f"{int(self.step.numpy())}, {int(self.frames.numpy())} frames)", flush=True)
        self.publisher = replay.ParamsPublisher(client, acting.PARAMS_TABLE)
        self.logger = run_logging.RunLogger(settings.logdir, settings.total_frames,
                                            settings.name)
        self.last_stats: dict[str, float] = {}
        # The mean params step of the unrolls of each recent batch (policy lag diagnostics).
        self.params_steps_seen: collections.deque = collections.deque(maxlen=1000)
        self._elapsed = lambda: float(self.elapsed_s.numpy())  # run() makes it a live clock

    @property
    def done(self) -> bool:
        return int(self.frames.numpy()) >= self.settings.total_frames

    def publish(self) -> None:
        self.publisher.publish(int(self.step.numpy()),
                               [v.numpy() for v in self.network.variables])

    def save(self) -> str:
        return self.manager.save(checkpoint_number=self.step)

    def _batches(self) -> Iterator:
        # choice: one batch in flight (plus the one prefetched): every item sampled ahead of the
        # train step is an item whose policy lag grows while it waits.
        dataset = replay.unroll_dataset(
            self._replay_address, self._table, self._signature, self.settings.batch_size,
            max_in_flight_samples_per_worker=self.settings.batch_size,
            rate_limiter_timeout_ms=self.settings.sample_timeout_ms)
        return iter(dataset)

    def run(self, should_stop: Callable[[], bool] = lambda: False, max_steps: int | None = None,
            on_idle: Callable[[], None] = lambda: None) -> None:
        """Trains until the frame budget, `should_stop()`, or `max_steps` steps of this call.

        `on_idle` runs between steps and while waiting for data (e.g. the actor supervisor).
        Always publishes first (actors wait for it) and checkpoints when it returns.
        """
        start_elapsed = float(self.elapsed_s.numpy())
        started = time.monotonic()
        self._elapsed = lambda: start_elapsed + time.monotonic() - started
        last_log = last_checkpoint = started
        frames_at_last_log = int(self.frames.numpy())
        stats_sum: dict[str, float] = {}
        stats_count = 0
        steps_this_run = 0
        self.publish()
        batches = self._batches()
        try:
            while not self.done and not should_stop() and (
                    max_steps is None or steps_this_run < max_steps):
                on_idle()
                try:
                    sample = next(batches)
                except (StopIteration, tf.errors.OutOfRangeError):
                    batches = self._batches()  # the sample timeout ended the dataset: no data yet
                    continue
                stats = self._train_on(sample)
                steps_this_run += 1
                for key, value in stats.items():
                    stats_sum[key] = stats_sum.get(key, 0.0) + float(value)
                stats_count += 1
                now = time.monotonic()
                self.elapsed_s.assign(self._elapsed())
                if now - last_log >= self.settings.log_interval_s:
                    frames = int(self.frames.numpy())
                    fps = (frames - frames_at_last_log) / (now - last_log)
                    self.last_stats = {k: v / stats_count for k, v in stats_sum.items()}
                    self._log(fps)
                    stats_sum, stats_count = {}, 0
                    last_log, frames_at_last_log = now, frames
                if now - last_checkpoint >= self.settings.checkpoint_interval_s:
                    self.save()
                    last_checkpoint = now
        finally:
            self.elapsed_s.assign(self._elapsed())
            path = self.save()
            print(f"[{self.settings.name}] checkpoint {path} (step {int(self.step.numpy())}, "
                  f"{int(self.frames.numpy())} frames)", flush=True)

    def _train_on(self, sample) -> Mapping[str, tf.Tensor]:
        """One train step on a sampled batch; counts, logs its episodes, publishes."""
        steps = sample.data[replay.STEPS]
        batch = dict(steps)
        if replay.FIRST_STEP_EXTRAS in sample.data:
            batch[acting.CORE_STATE] = sample.data[replay.FIRST_STEP_EXTRAS][acting.CORE_STATE]
        stats = self.train_step(batch, self.frames.read_value())
        self.step.assign_add(1)
        self.frames.assign_add(self.settings.frames_per_batch)
        self._record_episodes(steps)
        self.params_steps_seen.append(
            float(tf.reduce_mean(tf.cast(steps["params_step"], tf.float64))))
        if int(self.step.numpy()) % self.settings.publish_interval == 0:
            self.publish()
        return stats

    def _record_episodes(self, steps: Mapping[str, tf.Tensor]) -> None:
        """Logs the games that ended in steps 0..T-1 of the batch (common.acting docstring)."""
        returns = steps["episode_return"][:-1].numpy()
        ended = ~np.isnan(returns)
        if not ended.any():
            return
        lengths = steps["episode_length"][:-1].numpy()[ended]
        frames = int(self.frames.numpy())
        wall_time = self._elapsed()
        for episode_return, length in zip(returns[ended], lengths):
            self.logger.episode(frames, episode_return, length, wall_time)

    def _log(self, fps: float) -> None:
        step = int(self.step.numpy())
        frames = int(self.frames.numpy())
        # Learner steps between the weights that acted and the update that used the unrolls.
        lag = step - 1 - self.params_steps_seen[-1]
        scalars = dict(self.last_stats, **{"throughput/frames_per_second": fps,
                                           "throughput/policy_lag_steps": lag,
                                           "progress/learner_step": step})
        if np.isfinite(self.logger.mean_recent_return):
            scalars["episode/mean_recent_return"] = self.logger.mean_recent_return
        self.logger.scalars(scalars, frames)
        self.logger.progress(step, frames, fps, self.last_stats.get("loss/total", float("nan")),
                             extra=f"lag {lag:.1f}")

    def close(self) -> None:
        self.publisher.close()
        self.logger.close()

"""The learner loop: Reverb -> compiled train step -> priorities, publish params, checkpoint, log.

Generic over papers (docs/architecture.md#the-learner-learner-side). A paper supplies
`LearnerParts`: its compiled `train_step(batch, frames) -> stats`, everything a resume needs
(`checkpointables`: networks, target networks, optimizers) and the variables its actors act with
(`acting_variables`, the only ones published). This module samples batches of the agent's replay
pattern (`common.replay.patterns`) outside the compiled function (Reverb ops cannot be
XLA-compiled), counts steps and frames, writes back the priorities a train step returns, publishes
the acting weights every `publish_interval` steps (optionally `publish_lag` steps old), writes
`tf.train.CheckpointManager` checkpoints (and Reverb checkpoints of replay whose contents matter)
periodically and at shutdown, and logs TensorBoard scalars, `episodes.csv` and a console line.

The batch a train step receives (`batch`): the item's steps, time-major `[L, B, ...]`; `core_state`
(the stored recurrent state at each item's first step, `[B, ...]`) when the agent has one;
`info`: `key`, `probability`, `table_size`, `priority`, `times_sampled` of each item (`[B]`, for
importance weights and priorities); `learner_step` (int64, before this step). `frames` is the
learner's frame count before this step (it sets schedules). A `priorities` entry `[B]` in the
returned stats is written back to the pattern's `priority_table` and not logged.

Frames: `frames` counts the environment frames the learner has consumed (`frames_per_learner_step`
per step: a paper's definition of new frames per learner step, which sets the budget and the
schedules). Items padded after an episode's end (`replay.MASK`) count only their real trained steps:
`frames_per_learner_step` times the share of the batch's trained positions that are real, rounded to
a whole frame, so a batch of full items counts exactly `frames_per_learner_step`. (Counting padding
as frames would end a run whose games are short, MinAtar's early ones of about ten steps in an
80-step item, several times too early.) `actor_frames` counts the frames the actors produced, as
their reports say (`common.replay.reports`). Each finished game is logged once, at the
`actor_frames` count when its report arrived (the papers' x-axis counts frames of experience).

Resuming: a learner started on a logdir that holds checkpoints restores the checkpointables, both
frame counters, the step and the run's elapsed wall time, so schedules and the CSV time axis
continue where the previous process stopped. Before it logs anything it cuts the run's logs back
to the restored counters (`common.runtime.runlog.rewind`; to nothing without a checkpoint): a
process killed after its checkpoint has logged games and points that the restored state has not
seen, and the resumed run logs its own from there, so each game is logged once and frames never go
back. The cut is exact because each counter only grows and every game and learner point is
logged at the counter's value then: those logged before the checkpoint are at or below its
counts, those logged after it above them. An evaluation round is logged at the learner frames of
the weights it played: one that ended after the checkpoint on weights of the restored history is
kept, and the resumed run's rounds play the restored weights or later ones. Reports that a
checkpointed replay restores (its `reports` table) were not counted by the restored learner:
logged after the checkpoint, they are cut, and logged again once. One tie: a second game ended
at the same actor step carries no new frames; read just after the checkpoint, it is kept, and
would be logged twice only if the replay's checkpoint, taken just before, restored its report.
"""

import collections
import dataclasses
import os
import shutil
import time
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Sequence

import numpy as np
import reverb
import tensorflow as tf

from common.runtime import acting
from common.control import behaviour as behaviour_lib
from common.replay import patterns
from common.replay import replay
from common.replay import parameters
from common.replay import reports
from common.runtime import run_summary
from common.runtime import runlog as run_logging

TrainStep = Callable[[dict, tf.Tensor], Mapping[str, tf.Tensor]]
PRIORITIES = "priorities"
INFO = "info"
LEARNER_STEP = "learner_step"


def kept_behaviour(checkpoint: str) -> str:
    """Where the checkpoint at `checkpoint` keeps the behaviour state files (`Learner.save`)."""
    return os.path.join(os.path.dirname(checkpoint), "behaviour", os.path.basename(checkpoint))


class LearnerParts(NamedTuple):
    """What a paper's learner factory returns (see `common.runtime.agent.Agent.make_learner`)."""

    train_step: TrainStep
    checkpointables: Mapping[str, Any]  # networks, target networks, optimizers, ...
    acting_variables: Sequence[tf.Variable]  # published, in the order the policy's weights go


@dataclasses.dataclass(frozen=True)
class LearnerSettings:
    logdir: str
    total_frames: int
    frames_per_learner_step: int  # environment frames one train step consumes
    batch_size: int
    publish_interval: int = 1  # learner steps between parameter publications
    # IMPALA App. E.1: actors act with weights this many learner steps old.
    publish_lag: int = 0
    checkpoint_interval_s: float = 300.0
    log_interval_s: float = 10.0
    max_checkpoints: int = 3  # choice: a few, in case the newest is from a diverged run
    sample_timeout_ms: int = 2000  # choice: wake up this often to notice a stop request
    name: str = "learner"
    # A multi-task run's games (common.environments.env_names.games), logged per game.
    games: tuple[str, ...] = ()


class Learner:
    """Owns the counters, checkpoints and logs around a paper's train step."""

    def __init__(
        self,
        settings: LearnerSettings,
        parts: LearnerParts,
        client: reverb.Client,
        replay_address: str,
        pattern: patterns.Pattern,
        signature: dict,
        behaviour_names: Sequence[str] = (),
    ) -> None:
        self.settings = settings
        self.train_step = parts.train_step
        self.acting_variables = list(parts.acting_variables)
        # One call reads them all: a `numpy()` per variable costs an eager read op each, which
        # for Reactor's many small variables, published every step, was a tenth of its learner.
        self._read_acting = tf.function(
            lambda: [v.read_value() for v in self.acting_variables], autograph=False
        ).get_concrete_function()
        self.client = client
        self.pattern = pattern
        self._replay_address = replay_address
        self._signature = signature
        self._behaviour_names = sorted(behaviour_names)  # the order actors report them in
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="learner_step")
        self.frames = tf.Variable(0, dtype=tf.int64, trainable=False, name="frames")
        self.actor_frames = tf.Variable(0, dtype=tf.int64, trainable=False, name="actor_frames")
        self.elapsed_s = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="elapsed_s")
        # The frame budget the run has trained under: its schedules that end at the budget (the
        # burn-in learners' learning-rate and weight-decay decays, IMPALA's learning-rate decay)
        # were read against it. A checkpoint written before it was saved holds none: such a
        # run resumes under whatever budget it is given, without a warning.
        self.budget = tf.Variable(
            settings.total_frames, dtype=tf.int64, trainable=False, name="total_frames"
        )
        self.checkpoint = tf.train.Checkpoint(
            step=self.step,
            frames=self.frames,
            actor_frames=self.actor_frames,
            elapsed_s=self.elapsed_s,
            total_frames=self.budget,
            **parts.checkpointables,
        )
        self.manager = tf.train.CheckpointManager(
            self.checkpoint,
            os.path.join(settings.logdir, "checkpoints"),
            max_to_keep=settings.max_checkpoints,
            step_counter=self.step,
        )
        self.restored_from = self.manager.restore_or_initialize()
        if self.restored_from:
            print(
                f"[{settings.name}] resumed {self.restored_from} (step "
                f"{int(self.step.numpy())}, {int(self.frames.numpy())} frames; actors had "
                f"produced {int(self.actor_frames.numpy())} frames)",
                flush=True,
            )
            self._warn_if_the_budget_changed()
        self._restore_behaviour()
        self._rewind_logs()
        self.publisher = parameters.ParamsPublisher(client, acting.PARAMS_TABLE)
        self.reports: reports.ReportSource = reports.ReportReader(client)
        # The Published weights of the last publish_lag + 1 steps: the oldest is published.
        self._snapshots: collections.deque = collections.deque(maxlen=settings.publish_lag + 1)
        self.logger = run_logging.RunLogger(
            settings.logdir, settings.total_frames, settings.name, games=settings.games
        )
        self.last_stats: dict[str, float] = {}
        self.games_logged = 0
        # The mean params step of the items of each recent batch (policy lag diagnostics).
        self.params_steps_seen: collections.deque = collections.deque(maxlen=1000)
        self._elapsed = lambda: float(self.elapsed_s.numpy())  # run() makes it a live clock

    def _warn_if_the_budget_changed(self) -> None:
        """A resume under another --total_frames is allowed (a run is often extended), but its
        budget-tied schedules are then read against the new budget from where the run stands, so
        they jump at the resume: a run trained to 1M frames, with its learning rate decayed to
        near 0, resumed to 2M starts again at half the peak rate. Said once, and the new budget
        is what the next checkpoint records."""
        previous, budget = int(self.budget.numpy()), self.settings.total_frames
        if previous == budget:
            return
        print(
            f"[{self.settings.name}] warning: resuming a run trained under a budget of "
            f"{previous:,} frames with --total_frames={budget:,}: schedules that end at the "
            f"budget now end at {budget:,} and jump here, so this run is not one trained with "
            f"--total_frames={budget:,} from the start",
            flush=True,
        )
        self.budget.assign(budget)

    def _rewind_logs(self) -> None:
        """The logs cut back to what the restored state has seen (module docstring), before
        this learner's loggers and its evaluator open them."""
        if self.restored_from:
            frames, actor_frames = int(self.frames.numpy()), int(self.actor_frames.numpy())
        else:
            frames = actor_frames = -1  # nothing restored: nothing logged before counts
        dropped = run_logging.rewind(self.settings.logdir, frames, actor_frames)
        if any(dropped.values()):
            print(
                f"[{self.settings.name}] logs cut back to the "
                f"{'checkpoint' if self.restored_from else 'start (no checkpoint)'}: dropped "
                f"{dropped[run_logging.EPISODES_CSV]} games of {run_logging.EPISODES_CSV}, "
                f"{dropped[run_logging.EVAL_CSV]} rows of {run_logging.EVAL_CSV} and "
                f"{dropped['tensorboard']} TensorBoard points logged after it",
                flush=True,
            )

    @property
    def done(self) -> bool:
        return int(self.frames.numpy()) >= self.settings.total_frames

    def publish(self, latest: bool = False) -> None:
        """Publishes the acting weights of `publish_lag` steps ago (the oldest held until that
        many steps exist), with the step they are from and the frames consumed by then;
        `latest`: this step's, whatever the lag, for the final evaluation, which measures the
        policy the run ends with rather than the actors' lagged copy of it."""
        self._snapshot()
        self.publisher.publish(*self._snapshots[-1 if latest else 0])

    def _snapshot(self) -> None:
        step = int(self.step.numpy())
        if not self._snapshots or self._snapshots[-1].step != step:
            weights = [w.numpy() for w in self._read_acting()]
            self._snapshots.append(parameters.Published(step, int(self.frames.numpy()), weights))

    def save(self) -> str:
        """A learner checkpoint and, for replay whose contents matter, a Reverb checkpoint; for
        agents with behaviour state, the actors' state files as last saved, kept beside it."""
        if self.pattern.checkpointed:
            self.client.checkpoint()
        path = self.manager.save(checkpoint_number=self.step)
        if self._behaviour_names:
            behaviour_lib.keep_states(self.settings.logdir, kept_behaviour(path))
            kept = {kept_behaviour(p) for p in self.manager.checkpoints}
            folder = os.path.dirname(kept_behaviour(path))
            for name in os.listdir(folder):
                if os.path.join(folder, name) not in kept:
                    shutil.rmtree(os.path.join(folder, name), ignore_errors=True)
        return path

    def _restore_behaviour(self) -> None:
        """The behaviour state files of the restored checkpoint, not newer ones, and none for a
        run that starts over (before this machine's actors start; actors already running
        elsewhere roll back at their next save, `common.control.behaviour`): the bandits resume
        from what the restored learner had seen."""
        if not self._behaviour_names:
            return
        kept = kept_behaviour(self.restored_from) if self.restored_from else None
        if kept is not None and not os.path.isdir(kept):
            # A checkpoint written before checkpoints kept these files: they stay as they are.
            return
        behaviour_lib.restore_states(self.settings.logdir, kept)
        if kept is not None:
            print(
                f"[{self.settings.name}] behaviour state of {os.path.basename(kept)} restored "
                f"({', '.join(sorted(os.listdir(kept))) or 'none saved yet'})",
                flush=True,
            )

    def _batches(self) -> Iterator[reverb.ReplaySample]:
        return self.pattern.batches(
            self._replay_address,
            self._signature,
            self.settings.batch_size,
            self.settings.sample_timeout_ms,
        )

    def run(
        self,
        should_stop: Callable[[], bool] = lambda: False,
        max_steps: int | None = None,
        on_idle: Callable[[], object] = lambda: None,
        before_final_save: Callable[[], None] = lambda: None,
    ) -> None:
        """Trains until the frame budget, `should_stop()`, or `max_steps` steps of this call.

        `on_idle` runs between steps and while waiting for data (e.g. the actor supervisor).
        Always publishes first (actors wait for it) and checkpoints when it returns, after
        `before_final_save` (e.g. stopping the actors, whose last games it then logs).
        """
        start_elapsed = float(self.elapsed_s.numpy())
        started = time.monotonic()
        self._elapsed = lambda: start_elapsed + time.monotonic() - started
        last_log = last_checkpoint = started
        frames_at_last_log = int(self.frames.numpy())
        actor_frames_at_last_log = int(self.actor_frames.numpy())
        stats_sum: dict[str, float] = {}
        stats_count = 0
        steps_this_run = 0

        def flush_log(now: float) -> None:
            """Logs the mean stats of the steps since the last line, and the throughput."""
            nonlocal stats_sum, stats_count, last_log, frames_at_last_log, actor_frames_at_last_log
            frames, actor_frames = int(self.frames.numpy()), int(self.actor_frames.numpy())
            seconds = max(now - last_log, 1e-9)
            self.last_stats = {k: v / stats_count for k, v in stats_sum.items()}
            self._log(
                (frames - frames_at_last_log) / seconds,
                (actor_frames - actor_frames_at_last_log) / seconds,
            )
            stats_sum, stats_count = {}, 0
            last_log, frames_at_last_log, actor_frames_at_last_log = now, frames, actor_frames

        self.publish()
        batches = self._batches()
        try:
            while (
                not self.done
                and not should_stop()
                and (max_steps is None or steps_this_run < max_steps)
            ):
                on_idle()
                self.record_reports()
                try:
                    sample = next(batches)
                except (StopIteration, tf.errors.OutOfRangeError):
                    batches = self._batches()  # the sample timeout ended the dataset: no data yet
                    if time.monotonic() - last_log >= self.settings.log_interval_s:
                        last_log = time.monotonic()
                        print(
                            f"[{self.settings.name}] waiting for experience (replay filling or rate-limited): actors "
                            f"produced {run_logging.format_count(int(self.actor_frames.numpy()))} "
                            f"frames, {self.games_logged} games",
                            flush=True,
                        )
                    continue
                stats = self._train_on(sample)
                steps_this_run += 1
                for key, value in stats.items():
                    stats_sum[key] = stats_sum.get(key, 0.0) + float(value)
                stats_count += 1
                now = time.monotonic()
                self.elapsed_s.assign(self._elapsed())
                if now - last_log >= self.settings.log_interval_s:
                    flush_log(now)
                if now - last_checkpoint >= self.settings.checkpoint_interval_s:
                    self.save()
                    last_checkpoint = now
            # The steps since the last line are logged too, so a run's final scalars are there.
            if stats_count:
                flush_log(time.monotonic())
            if self.done:
                self._summarize()
        finally:
            before_final_save()
            self.record_reports()
            self.elapsed_s.assign(self._elapsed())
            path = self.save()
            print(
                f"[{self.settings.name}] checkpoint {path} (step {int(self.step.numpy())}, "
                f"{int(self.frames.numpy())} frames)",
                flush=True,
            )

    def _train_on(self, sample: reverb.ReplaySample) -> dict[str, float]:
        """One train step on a sampled batch; writes priorities back, counts, publishes."""
        steps = sample.data[replay.STEPS]
        batch = dict(steps)
        if replay.FIRST_STEP_EXTRAS in sample.data:
            batch[acting.CORE_STATE] = sample.data[replay.FIRST_STEP_EXTRAS][acting.CORE_STATE]
        batch[INFO] = sample.info._asdict()
        batch[LEARNER_STEP] = self.step.read_value()
        stats = dict(self.train_step(batch, self.frames.read_value()))
        # How often the items of this batch have been sampled, this sample included (sample-k:
        # between 1 and k; a queue: 1).
        stats["replay/times_sampled"] = tf.reduce_mean(
            tf.cast(sample.info.times_sampled, tf.float32)
        )
        priorities = stats.pop(PRIORITIES, None)
        if priorities is not None:
            if self.pattern.priority_table is None:
                raise ValueError(
                    f"the train step returned priorities, but the "
                    f"{self.pattern.kind} pattern has no priorities"
                )
            replay.update_priorities(
                self.client,
                self.pattern.priority_table,
                sample.info.key.numpy(),
                priorities.numpy(),
            )
        self.step.assign_add(1)
        self.frames.assign_add(self._new_frames(steps))
        params_steps = tf.cast(steps["params_step"], tf.float64)
        if replay.MASK in steps:  # padding carries params_step 0: only real steps count
            real = tf.cast(steps[replay.MASK], tf.float64)
            mean_params_step = tf.reduce_sum(params_steps * real) / tf.reduce_sum(real)
        else:
            mean_params_step = tf.reduce_mean(params_steps)
        self.params_steps_seen.append(float(mean_params_step))
        if self.settings.publish_lag:
            self._snapshot()
        if int(self.step.numpy()) % self.settings.publish_interval == 0:
            self.publish()
        return stats

    def _new_frames(self, steps: Mapping[str, tf.Tensor]) -> int:
        """The frames this batch consumed: `frames_per_learner_step`, scaled by the share of its
        trained positions that hold real steps when items are padded (see the module docstring).
        The share is of the pattern's full `length`, so a batch whose trailing padding was cut
        (`patterns.SampleK.trim_padding`; what was cut held no real step) counts the same."""
        if replay.MASK not in steps:
            return self.settings.frames_per_learner_step
        mask = steps[replay.MASK]
        real = float(tf.reduce_sum(tf.cast(mask[self.pattern.trained_steps], tf.float64)))
        share = real / (self.pattern.length * int(mask.shape[1]))
        return round(self.settings.frames_per_learner_step * share)

    def record_reports(self) -> None:
        """Adds the actors' produced frames and logs each finished game they reported, once,
        at the frames produced up to its report."""
        reports = self.reports.drain()
        if not reports:
            return
        produced = int(self.actor_frames.numpy()) + np.cumsum([r.frames for r in reports])
        self.actor_frames.assign(int(produced[-1]))
        games = [i for i, report in enumerate(reports) if report.is_game]
        if not games:
            return
        played = [reports[i] for i in games]
        behaviour = {
            name: np.stack([report.behaviour[k] for report in played])
            for k, name in enumerate(self._behaviour_names)
        }
        behaviour["entropy"] = np.array([report.behaviour_entropy for report in played])
        self.logger.episodes(
            produced[games],
            [report.episode_return for report in played],
            [report.episode_length for report in played],
            self._elapsed(),
            behaviour,
            [report.task for report in played],
        )
        self.games_logged += len(games)

    def _log(self, fps: float, actor_fps: float) -> None:
        step = int(self.step.numpy())
        frames = int(self.frames.numpy())
        # Learner steps between the weights that acted and the update that used the items.
        lag = step - 1 - self.params_steps_seen[-1]
        scalars = dict(
            self.last_stats,
            **{
                "throughput/frames_per_second": fps,
                "throughput/actor_frames_per_second": actor_fps,
                "throughput/policy_lag_steps": lag,
                "progress/learner_step": step,
                "progress/actor_frames": int(self.actor_frames.numpy()),
            },
        )
        if np.isfinite(self.logger.mean_recent_return):
            scalars["episode/mean_recent_return"] = self.logger.mean_recent_return
        self.logger.scalars(scalars, frames)
        self.logger.progress(
            step,
            frames,
            fps,
            self.last_stats.get("loss/total", float("nan")),
            extra=f"acted {run_logging.format_count(actor_fps)} fps | lag {lag:.1f}",
        )

    def _summarize(self) -> None:
        """Writes the run's summary.json and prints its instruments on one line."""
        frames = int(self.frames.numpy())
        summary = run_summary.write_summary(
            self.settings.logdir, frames, self.logger.mean_recent_return
        )
        print(f"[{self.settings.name}] {run_summary.describe(summary)}", flush=True)

    def close(self) -> None:
        self.publisher.close()
        self.logger.close()

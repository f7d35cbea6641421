"""Finished games and produced frames, from the actors to the learner through one Reverb table.

Whatever a replay pattern does with the steps (a queue consumes each once; prioritised replay
samples overlapping sequences many times; sample-k items are padded and sampled k times), each
finished game must be logged once, when it finished. So games do not travel with the experience:
each actor inserts a small report per finished game (raw whole-game score, length in agent steps,
the game's mean behaviour entropy where the policy reports one, the index of the game played in a
multi-task run's list, the game's behaviour parameters)
into the `reports` table, plus a heartbeat every
`heartbeat_steps` steps; every report carries the environment frames the actor produced since
its previous report. The learner reads the table (each report is sampled once and then
removed), adds up the produced frames and logs each game at the produced-frame count when its
report arrived. Remote actors need no other channel than Reverb.
"""

import queue
import threading
from typing import NamedTuple, Protocol, Sequence

import numpy as np
import reverb


from common.replay import writers

REPORTS_TABLE = "reports"
# choice: far more reports than a learner falls behind on; a full table drops the oldest.
REPORTS_CAPACITY = 1_000_000
# choice: produced frames reach the learner at least this often (agent steps of one actor).
HEARTBEAT_STEPS = 100


def reports_table(name: str = REPORTS_TABLE) -> reverb.Table:
    """First in, first out, each report sampled once; inserts never block."""
    return reverb.Table(
        name=name,
        sampler=reverb.selectors.Fifo(),
        remover=reverb.selectors.Fifo(),
        max_size=REPORTS_CAPACITY,
        max_times_sampled=1,
        rate_limiter=reverb.rate_limiters.MinSize(1),
    )


class Report(NamedTuple):
    frames: int  # environment frames produced by the actor since its previous report
    episode_return: float  # raw whole-game score; NaN for a heartbeat
    episode_length: int  # agent steps of the game
    behaviour: tuple[np.ndarray, ...]  # the game's behaviour parameters (empty without any)
    # H[mu(.|x_t)] averaged over the game's steps; NaN for a heartbeat or a policy without it.
    behaviour_entropy: float = float("nan")
    # Which of a multi-task run's games was played (its index in the run's list; 0 for one game).
    task: int = 0

    @property
    def is_game(self) -> bool:
        return not np.isnan(self.episode_return)


class Reporter:
    """The actor's side: one item per batched step in which games finished, a heartbeat every
    `heartbeat_steps` steps."""

    def __init__(
        self,
        client: reverb.Client,
        num_envs: int,
        frames_per_step: int,
        table: str = REPORTS_TABLE,
        heartbeat_steps: int = HEARTBEAT_STEPS,
        tasks: np.ndarray | None = None,
    ) -> None:
        """`tasks[i]`: the game environment i plays in a multi-task batch (its index in the
        run's list; `common.environments.multitask.MultiTaskEnv.tasks`); all 0 without one."""
        self._sink = writers.ItemSink(client, (table,))
        self._num_envs = num_envs
        self._tasks = np.zeros(num_envs, np.int32) if tasks is None else np.asarray(tasks, np.int32)
        self._frames_per_env_step = num_envs * frames_per_step
        self._heartbeat_steps = heartbeat_steps
        self._pending_frames = 0
        self._steps_since_report = 0
        self._param_shapes: list[tuple] = []

    def step(
        self,
        episode_returns: np.ndarray,
        episode_lengths: np.ndarray,
        behaviour: Sequence[np.ndarray] = (),
        behaviour_entropy: np.ndarray | None = None,
    ) -> None:
        """After one batched env step: `episode_returns[i]` is the raw score where env i's game
        ended (NaN elsewhere); `behaviour` holds the batched parameters that game was played
        with (`[num_envs, ...]` arrays, the same every step); `behaviour_entropy[i]`, where
        given, the game's mean behaviour entropy."""
        self._param_shapes = [np.shape(b)[1:] for b in behaviour]
        self._pending_frames += self._frames_per_env_step
        self._steps_since_report += 1
        if not np.isnan(episode_returns).all():
            entropy = (
                np.full(self._num_envs, np.nan) if behaviour_entropy is None else behaviour_entropy
            )
            self._insert(episode_returns, episode_lengths, entropy, behaviour)
        elif self._steps_since_report >= self._heartbeat_steps:
            self.heartbeat()

    def heartbeat(self) -> None:
        """Reports the frames produced since the last report, without a game."""
        if self._pending_frames:
            no_games = np.full(self._num_envs, np.nan)
            params = [np.zeros((self._num_envs, *shape)) for shape in self._param_shapes]
            self._insert(no_games, np.zeros(self._num_envs), no_games, params)

    def _insert(self, returns, lengths, entropy, params: Sequence[np.ndarray]) -> None:
        self._sink.insert(
            [
                np.int64(self._pending_frames),
                np.asarray(returns, np.float32),
                np.asarray(lengths, np.int32),
                np.asarray(entropy, np.float32),
                self._tasks,
                *(np.asarray(p, np.float32) for p in params),
            ],
            1.0,
        )
        self._pending_frames = 0
        self._steps_since_report = 0

    def close(self, timeout_ms: int = 1000) -> None:
        """Sends what is left (bounded: reports the server cannot take are dropped)."""
        try:
            self._sink.writer.flush(timeout_ms=timeout_ms)
        except reverb.DeadlineExceededError:
            pass
        self._sink.writer.close()


def reports_in(data: Sequence) -> list[Report]:
    """The reports one item of the table holds (`Reporter`): a game per environment whose game
    ended, in environment order, the first carrying the item's frames; a heartbeat (no game)
    where none ended."""
    frames, returns, lengths, entropy, tasks, *params = (np.asarray(column) for column in data)
    games = np.flatnonzero(~np.isnan(returns))
    if not games.size:
        return [Report(int(frames), float("nan"), 0, tuple(p[0] for p in params))]
    return [
        Report(
            int(frames) if i == 0 else 0,
            float(returns[env]),
            int(lengths[env]),
            tuple(p[env] for p in params),
            float(entropy[env]),
            int(tasks[env]),
        )
        for i, env in enumerate(games)
    ]


class ReportSource(Protocol):
    """Where the learner drains its actors' reports from: a `ReportReader` (or a wrapper of one,
    e.g. the throughput benchmark's, which counts them)."""

    def drain(self) -> list[Report]: ...


class ReportReader:
    """The learner's side: a daemon thread takes reports from `table` as they arrive (each is
    sampled once, then removed); `drain()` returns those read so far, oldest first, never
    waiting. One long-lived sampler: a new one per drain would cost a round trip each time."""

    def __init__(self, client: reverb.Client, table: str = REPORTS_TABLE) -> None:
        self._received: queue.SimpleQueue = queue.SimpleQueue()
        self.error: Exception | None = None
        self._thread = threading.Thread(
            target=self._read, args=(client, table), name=f"read_{table}", daemon=True
        )
        self._thread.start()

    def _read(self, client: reverb.Client, table: str) -> None:
        try:
            # choice: no end; the thread blocks between reports and ends with the server.
            for sample in client.sample(table, 2**62, emit_timesteps=False):
                for report in reports_in(sample.data):
                    self._received.put(report)
        except Exception as error:  # the server went away: nothing more will arrive
            self.error = error

    def drain(self) -> list[Report]:
        received = []
        while True:
            try:
                received.append(self._received.get_nowait())
            except queue.Empty:
                return received

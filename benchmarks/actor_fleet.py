"""An agent's actor fleet alone, writing to tables that keep only their newest items, and where an
actor's time goes (cProfile of one actor process): the fleet rate F and the actor profile rows of
`benchmarks.throughput` and `benchmarks.agent_throughput`."""

import common  # noqa: F401  (first: TensorFlow's oneDNN default, common/__init__.py)

import contextlib
import cProfile
import dataclasses
import json
import os
import pstats
import tempfile
import time
from typing import Iterator, NamedTuple

import numpy as np
import reverb

from common.runtime import acting
from common.runtime import agent as agent_lib
from common.launchers import launch
from common.launchers.supervisor import Supervisor
from common.replay import replay
from common.replay import parameters
from common.replay import reports


# choice: the sink holds a few batches' worth; a full sink drops its oldest item.
SINK_CAPACITY = 256
# choice: actors start (spawn, TensorFlow, envs) well within this on a loaded 2-core machine.
FIRST_REPORT_TIMEOUT_S = 600.0
# choice: a window of F or of full training lasts until it holds this many of the actors' reports
# per actor process, so that the produced frames counted at its two ends (each actor's count
# trails by up to one report) err by a fraction of the window's frames, not all of them. Reports
# come with each finished game and every 100 steps: with 80 envs per actor on Atari, every
# 32,000 frames, i.e. minutes apart on 2 cores.
REPORTS_PER_ACTOR = 3


# ------------------------------------------------------------------------------------------------
# The actor fleet alone


def sink_tables(experiment: launch.Experiment, spec: agent_lib.EnvSpec) -> list[reverb.Table]:
    """Every table of the experiment's run, with each experience table (the pattern's: a queue, a
    prioritised or sample-k table, Table 2's replay) replaced by a sink of the same name and item
    signature: first in, first out, `SINK_CAPACITY` items, the oldest dropped when full, inserts
    never blocked (no queue back-pressure, no samples-per-insert limiter waiting for a learner)."""
    agent = experiment.agent
    signature = agent.signature(spec)
    sinks = [
        reverb.Table(
            name=table.name,
            sampler=reverb.selectors.Fifo(),
            remover=reverb.selectors.Fifo(),
            max_size=SINK_CAPACITY,
            rate_limiter=reverb.rate_limiters.MinSize(1),
            signature=signature,
        )
        for table in agent.replay.tables(signature)
    ]
    return [*sinks, parameters.params_table(acting.PARAMS_TABLE), reports.reports_table()]


class ProducedFrames:
    """The frames and the number of reports the actors have sent so far (`common.replay.reports`:
    one per finished game and one every `reports.HEARTBEAT_STEPS` steps of each actor, each with the
    frames since the actor's previous one, so the count trails each actor by up to one report)."""

    def __init__(self, client: reverb.Client):
        self._reader = reports.ReportReader(client)
        self.frames = self.reports = 0

    def update(self) -> tuple[int, int]:
        received = self._reader.drain()
        self.frames += sum(report.frames for report in received)
        self.reports += len(received)
        return self.frames, self.reports


class _CountingReports:
    """A learner's report reader that counts the reports it hands over."""

    def __init__(self, reader: reports.ReportSource) -> None:
        self._reader = reader
        self.count = 0

    def drain(self) -> list[reports.Report]:
        received = self._reader.drain()
        self.count += len(received)
        return received


def _sleep_watching(supervisor: Supervisor, seconds: float) -> None:
    """Sleeps, restarting actors that die (the launcher's `restart_dead`, which prints them)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        supervisor.restart_dead()
        time.sleep(min(1.0, max(0.0, end - time.monotonic())))


@contextlib.contextmanager
def actors_on_sinks(
    experiment: launch.Experiment, spec: agent_lib.EnvSpec, weights: list[np.ndarray] | None
) -> Iterator[tuple[str, reverb.Client, Supervisor]]:
    """A Reverb server of sink tables (`sink_tables`) with `weights` published once (default: a
    fresh learner's acting variables), and a supervisor for the actors to start on it: (address,
    client, supervisor). Both stop on exit."""
    if weights is None:
        acting.configure_threads(experiment.learner_threads)
        weights = [v.numpy() for v in experiment.agent.make_learner(spec).acting_variables]
    server = replay.start_server(sink_tables(experiment, spec))
    address = replay.address_of(server)
    supervisor = Supervisor()
    try:
        client = replay.connect(address)
        publisher = parameters.ParamsPublisher(client, acting.PARAMS_TABLE)
        publisher.publish(0, 0, weights)
        publisher.close()
        yield address, client, supervisor
    finally:
        supervisor.stop()
        server.stop()


def measure_fleet(
    experiment: launch.Experiment,
    spec: agent_lib.EnvSpec,
    warmup_s: float,
    seconds: float,
    weights: list[np.ndarray] | None = None,
    reports_per_actor: int = REPORTS_PER_ACTOR,
) -> float:
    """The actor processes writing to sink tables (`sink_tables`), no learner: the frames/s they
    report over at least `seconds` and `reports_per_actor` reports per actor, after `warmup_s`
    from their first report. They act with `weights` (the learner's acting variables; default: a
    fresh learner's initial ones), published once."""
    with actors_on_sinks(experiment, spec, weights) as (address, client, supervisor):
        produced = ProducedFrames(client)
        launch.start_actors(supervisor, experiment, address)
        deadline = time.monotonic() + FIRST_REPORT_TIMEOUT_S
        while produced.update()[1] == 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no actor reported within {FIRST_REPORT_TIMEOUT_S:.0f} s")
            _sleep_watching(supervisor, 0.5)
        _sleep_watching(supervisor, warmup_s)
        start = time.monotonic()
        frames0, reports0 = produced.update()
        wanted = reports_per_actor * experiment.num_actors
        while True:
            _sleep_watching(supervisor, 0.5)
            elapsed = time.monotonic() - start
            frames, count = produced.update()
            if elapsed >= seconds and count - reports0 >= wanted:
                return (frames - frames0) / elapsed
            if elapsed >= seconds + FIRST_REPORT_TIMEOUT_S:
                raise RuntimeError(
                    f"{count - reports0} reports in {elapsed:.0f} s (a window needs {wanted})"
                )


# ------------------------------------------------------------------------------------------------
# Where an actor's time goes


class ActorProfile(NamedTuple):
    steps: int  # batched steps in the window
    seconds: float
    parts: tuple[tuple[str, float], ...]  # (what, seconds in the window), largest first

    @property
    def ms_per_step(self) -> float:
        return 1000.0 * self.seconds / max(self.steps, 1)

    def summary(self, top: int = 6) -> str:
        """'12.3 ms a step: policy step 61%, ...' (the rest as 'other')."""
        shown = [f"{name} {t / self.seconds:.0%}" for name, t in self.parts[:top]]
        rest = self.seconds - sum(t for _, t in self.parts[:top])
        if rest > 0.005 * self.seconds:
            shown.append(f"other {rest / self.seconds:.0%}")
        return f"{self.ms_per_step:.2f} ms a batched step: " + ", ".join(shown)


# What an actor's loop (`common.runtime.acting.run_actor`) calls, by (file, function), named for a
# reader; any other call keeps its file:function name.
ACTOR_CALLS = {
    ("acting.py", "step"): "policy step (inference)",
    ("advantage_policy.py", "step"): "policy step (inference)",
    ("behaviour.py", "end_games"): "bandit updates",
    ("envs.py", "step"): "environment step",
    ("acting.py", "_append_until_accepted"): "replay write",
    ("reports.py", "step"): "game reports",
    ("acting.py", "truncation_values"): "truncation values",
    ("parameters.py", "latest"): "weights pull",
    ("acting.py", "after"): "next step's inputs",
}


class _ProfilingStop:
    """The `stop` an actor polls once a step (`common.runtime.acting.ShouldStop`): it turns the
    profiler on `warmup_s` after the first poll (construction, tracing and the first steps left
    out), and reads as set `seconds` later, or when the supervisor's event is set. Enabled from the
    actor's own loop, the profiler sees each call the loop makes as a top-level call."""

    def __init__(self, event, warmup_s: float, seconds: float, profiler: cProfile.Profile):
        self._event, self._warmup_s, self._seconds = event, warmup_s, seconds
        self._profiler = profiler
        self._first: float | None = None
        self.start: float | None = None
        self.end: float | None = None
        self.polls = 0

    def is_set(self) -> bool:
        now = time.monotonic()
        if self._first is None:
            self._first = now
        if self.start is None and now - self._first >= self._warmup_s:
            self.start = now
            self._profiler.enable()
        if self.start is not None:
            self.polls += 1
        if self._event.is_set() or (self.start is not None and now - self.start >= self._seconds):
            if self.start is not None and self.end is None:
                self._profiler.disable()
                # The clock read after disable(): the profile counts this call up to there, and
                # under load reading the event can take tens of ms after `now`.
                self.end = time.monotonic()
            return True
        return False


def profiled_actor(result_path: str, warmup_s: float, seconds: float, stop, **actor_kwargs):
    """`common.runtime.acting.run_actor` under cProfile for `seconds` after `warmup_s` (a spawned
    child's target): writes the window's top-level calls, their cumulative times and the steps
    to `result_path` (JSON)."""
    profiler = cProfile.Profile()
    window = _ProfilingStop(stop, warmup_s, seconds, profiler)
    acting.run_actor(stop=window, **actor_kwargs)
    if window.start is None or window.end is None:
        raise RuntimeError("the actor stopped before its profiling window ended")
    calls = top_level_calls(profiler)
    with open(result_path, "w") as f:
        # Polls during the window: one per step at the loop's top (the profiler starts inside
        # one, and the last one ends it).
        json.dump(dict(steps=window.polls - 1, seconds=window.end - window.start, calls=calls), f)


def top_level_calls(profiler: cProfile.Profile) -> dict[str, float]:
    """The cumulative seconds of each call `profiler` saw made from outside it (the loop's own
    calls when it was enabled inside the loop), by name (`ACTOR_CALLS`, else file:function). A
    function that the loop calls and that a profiled call also calls has callers, so it is left
    out whole (its time counts only inside its callers')."""
    calls: dict[str, float] = {}
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]  # typeshed omits it
    for (filename, _, function), (_, _, _, cumulative, callers) in stats.items():
        if callers:  # called by another profiled call: inside a top-level one
            continue
        name = ACTOR_CALLS.get(
            (os.path.basename(filename), function), f"{os.path.basename(filename)}:{function}"
        )
        calls[name] = calls.get(name, 0.0) + cumulative
    return calls


def profile_actor(
    experiment: launch.Experiment,
    spec: agent_lib.EnvSpec,
    warmup_s: float,
    seconds: float,
    weights: list[np.ndarray] | None = None,
) -> ActorProfile:
    """Where one actor process's time goes: actor 0 of the experiment, alone, writing to sink
    tables (`sink_tables`) with `weights` (default: a fresh learner's), profiled for `seconds`
    after `warmup_s`. Profiling costs each call a little, so the shares are the measurement,
    not the step time."""
    with tempfile.TemporaryDirectory() as tmp:
        result_path = os.path.join(tmp, "profile.json")
        with actors_on_sinks(experiment, spec, weights) as (address, _, supervisor):
            supervisor.start(
                "actor_0",
                profiled_actor,
                dict(
                    result_path=result_path,
                    warmup_s=warmup_s,
                    seconds=seconds,
                    settings=dataclasses.replace(experiment.actor, actor_id=0),
                    make_policy=experiment.agent.make_policy,
                    pattern=experiment.agent.replay,
                    replay_address=address,
                    behaviour=experiment.agent.behaviour,
                    intra_op_threads=experiment.actor_threads,
                ),
            )
            process = supervisor.process("actor_0")
            process.join(warmup_s + seconds + FIRST_REPORT_TIMEOUT_S)
            if process.is_alive() or process.exitcode != 0:
                raise RuntimeError(f"the profiled actor ended with exit code {process.exitcode}")
        with open(result_path) as f:
            result = json.load(f)
    parts = sorted(result["calls"].items(), key=lambda item: -item[1])
    return ActorProfile(result["steps"], result["seconds"], tuple(parts))

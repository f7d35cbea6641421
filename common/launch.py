"""Processes of one run: embedded Reverb, the actor fleet, the learner and the evaluator.

`run(experiment, role, replay_address)` (DESIGN.md §2):

| role      | this process                                  | children (spawned)        |
|-----------|-----------------------------------------------|---------------------------|
| `local`   | Reverb server (embedded) + learner            | actors, evaluator         |
| `replay`  | Reverb server only, until Ctrl-C              |                           |
| `learner` | learner on a remote `--replay_address`        | evaluator                 |
| `actor`   | supervisor of actors on `--replay_address`    | actors                    |

Children are started with the multiprocessing 'spawn' context (never fork after TensorFlow is
imported), ignore Ctrl-C (the parent shuts them down in order), and exit on their own when their
parent dies (between steps, and through the kernel's parent-death signal wherever they are
blocked). A child that dies while the run goes on is restarted (with fresh env seeds). Every wait
has a timeout: writers flush in short slices, the learner samples with a timeout, and shutdown
escalates from a stop event to SIGTERM to SIGKILL.
"""

import ctypes
import dataclasses
import multiprocessing
import os
import signal
import sys
import time
import traceback
from typing import Any, Callable, NamedTuple

import numpy as np
import tensorflow as tf

from common import acting
from common import envs as envs_lib
from common import learning
from common import replay

ROLES = ("local", "replay", "learner", "actor")


class EnvSpec(NamedTuple):
    num_actions: int
    observation_shape: tuple
    observation_dtype: np.dtype


class LearnerParts(NamedTuple):
    """What a paper's learner builder returns (see `Experiment.make_learner`)."""

    network: tf.Module
    train_step: learning.TrainStep
    checkpointables: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Experiment:
    """Everything the launcher needs from a paper package. Fields used by children are
    picklable (module-level functions, `functools.partial`s of them, frozen dataclasses)."""

    actor: acting.ActorSettings  # per actor process; actor i offsets the seed
    num_actors: int
    make_policy: acting.PolicyFactory
    make_learner: Callable[[EnvSpec], LearnerParts]  # runs in the learner process only
    learner: learning.LearnerSettings
    queue_capacity: int
    core_state_spec: Any = None  # per-env spec of the recurrent state (None: feed-forward)
    evaluator: acting.EvaluatorSettings | None = None
    replay_port: int | None = None  # None: any free port (local); the `replay` role needs one
    actor_threads: int = 1  # TF intra-op threads per actor process
    learner_threads: int = 2  # TF intra-op threads of the learner process


def probe_env(env: str, protocol) -> EnvSpec:
    """Actions and observation format of `env`, from a one-env batch."""
    probe = envs_lib.make_env(env, 1, 0, protocol)
    try:
        return EnvSpec(probe.num_actions, tuple(probe.observation_shape),
                       np.dtype(probe.observation_dtype))
    finally:
        probe.close()


def unroll_signature(experiment: Experiment, spec: EnvSpec) -> dict:
    """The queue table's item signature: T+1 steps plus the core state at the first step."""
    extras = (None if experiment.core_state_spec is None
              else {acting.CORE_STATE: experiment.core_state_spec})
    return replay.sequence_signature(
        acting.step_spec(spec.observation_shape, spec.observation_dtype, spec.num_actions),
        experiment.actor.unroll_length + 1, extras)


def make_tables(experiment: Experiment, spec: EnvSpec) -> list:
    return [replay.queue_table(acting.UNROLLS_TABLE, experiment.queue_capacity,
                               unroll_signature(experiment, spec)),
            replay.params_table(acting.PARAMS_TABLE)]


# ------------------------------------------------------------------------------------------------
# Child processes


def _die_with_parent() -> None:
    """Has the kernel SIGTERM this process when its parent dies (Linux). `acting.ShouldStop`
    notices a dead parent only between steps; a child blocked in C++ (a Reverb call to a server
    that died with the launcher retries forever) would otherwise outlive a SIGKILLed launcher."""
    if not sys.platform.startswith("linux"):
        return
    pr_set_pdeathsig = 1  # <linux/prctl.h>
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != multiprocessing.parent_process().pid:
        os._exit(1)  # the parent died before the request took effect


def _child_main(target: Callable, kwargs: dict) -> None:
    """Entry point of every spawned child: dies with its parent, ignores Ctrl-C, reports crashes
    with a traceback."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        target(**kwargs)
    except BaseException:  # the supervisor restarts on the non-zero exit code
        traceback.print_exc()
        os._exit(1)


@dataclasses.dataclass
class _Child:
    target: Callable
    kwargs: dict
    reseed: Callable[[dict, int], dict] | None
    process: multiprocessing.Process | None = None
    started: float = 0.0
    restarts: int = 0


class Supervisor:
    """Starts named children, restarts the ones that die, and stops them all without hanging."""

    def __init__(self, restart_delay_s: float = 1.0):
        self._context = multiprocessing.get_context("spawn")
        self.stop_event = self._context.Event()
        self._children: dict[str, _Child] = {}
        # choice: at most one restart per child per delay, so a crash loop cannot spin
        self._restart_delay_s = restart_delay_s

    def event(self):
        return self._context.Event()

    def start(self, name: str, target: Callable, kwargs: dict,
              reseed: Callable[[dict, int], dict] | None = None) -> None:
        """Starts `target(**kwargs, stop=event)` in a spawned process. `reseed(kwargs, n)` gives
        the kwargs of the n-th restart (e.g. new env seeds)."""
        self._children[name] = _Child(target, kwargs, reseed)
        self._launch(name)

    def _launch(self, name: str) -> None:
        child = self._children[name]
        kwargs = dict(child.kwargs, stop=self.stop_event)
        if child.reseed is not None and child.restarts:
            kwargs = child.reseed(kwargs, child.restarts)
        child.process = self._context.Process(target=_child_main, args=(child.target, kwargs),
                                              name=name, daemon=True)
        child.process.start()
        child.started = time.monotonic()

    def process(self, name: str) -> multiprocessing.Process:
        return self._children[name].process

    def restarts(self, name: str) -> int:
        return self._children[name].restarts

    def restart_dead(self) -> list[str]:
        """Restarts the children that exited (unless stopping); returns their names."""
        restarted = []
        for name, child in self._children.items():
            if (self.stop_event.is_set() or child.process.is_alive()
                    or time.monotonic() - child.started < self._restart_delay_s):
                continue
            print(f"[launch] {name} exited (code {child.process.exitcode}); restarting",
                  flush=True)
            child.restarts += 1
            self._launch(name)
            restarted.append(name)
        return restarted

    def stop(self, timeout_s: float = 10.0) -> None:
        """Sets the stop event, then escalates to SIGTERM and SIGKILL per child."""
        self.stop_event.set()
        deadline = time.monotonic() + timeout_s
        for child in self._children.values():
            child.process.join(max(0.0, deadline - time.monotonic()))
        for child in self._children.values():
            if child.process.is_alive():
                child.process.terminate()
                child.process.join(2.0)
            if child.process.is_alive():
                child.process.kill()
                child.process.join(2.0)


def _reseed_actor(kwargs: dict, restarts: int) -> dict:
    settings = kwargs["settings"]
    # choice: a restarted actor must not replay its predecessor's episodes (ALE is deterministic)
    return dict(kwargs, settings=dataclasses.replace(settings,
                                                     seed=settings.seed + 1_000_003 * restarts))


def start_actors(supervisor: Supervisor, experiment: Experiment, replay_address: str) -> None:
    for i in range(experiment.num_actors):
        settings = dataclasses.replace(
            experiment.actor, seed=experiment.actor.seed + i * experiment.actor.num_envs)
        supervisor.start(f"actor_{i}", acting.run_actor,
                         dict(settings=settings, make_policy=experiment.make_policy,
                              replay_address=replay_address,
                              intra_op_threads=experiment.actor_threads),
                         reseed=_reseed_actor)


# ------------------------------------------------------------------------------------------------
# Roles


class _Terminated(Exception):
    """SIGTERM, turned into an exception so that shutdown checkpoints like Ctrl-C does."""


def _handle_stop_signals() -> None:
    """Ctrl-C raises KeyboardInterrupt (even if started with SIGINT ignored, as `nohup` and
    background jobs are); SIGTERM raises _Terminated. Both end in the same clean shutdown."""
    def terminate(signum, frame):
        raise _Terminated()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, terminate)


def build_learner(experiment: Experiment, spec: EnvSpec, replay_address: str
                  ) -> learning.Learner:
    acting.configure_threads(experiment.learner_threads)
    parts = experiment.make_learner(spec)
    client = replay.connect(replay_address)
    return learning.Learner(experiment.learner, parts.network, parts.train_step,
                            parts.checkpointables, client, replay_address,
                            unroll_signature(experiment, spec))


def run_learner_with_children(experiment: Experiment, spec: EnvSpec, replay_address: str,
                              with_actors: bool) -> None:
    """The learner in this process, with actors (local role) and the evaluator as children."""
    learner = build_learner(experiment, spec, replay_address)
    if learner.done:
        print(f"[launch] {experiment.learner.logdir} already reached its frame budget "
              f"({int(learner.frames.numpy())} frames); nothing to do", flush=True)
        learner.close()
        return
    supervisor = Supervisor()
    finished = supervisor.event()
    try:
        if with_actors:
            start_actors(supervisor, experiment, replay_address)
        if experiment.evaluator is not None:
            supervisor.start("evaluator", acting.run_evaluator, dict(
                settings=experiment.evaluator, make_policy=experiment.make_policy,
                replay_address=replay_address, logdir=experiment.learner.logdir,
                finished=finished, start_time=time.time() - float(learner.elapsed_s.numpy()),
                intra_op_threads=experiment.actor_threads))
        learner.run(on_idle=supervisor.restart_dead)
        if learner.done and experiment.evaluator is not None:
            print("[launch] frame budget reached: final evaluation "
                  f"({experiment.evaluator.final_episodes} episodes)", flush=True)
            learner.publish()  # the final weights, whatever the publish interval
            finished.set()
            supervisor.process("evaluator").join()
    finally:
        supervisor.stop()
        learner.close()


def run(experiment: Experiment, role: str = "local", replay_address: str | None = None) -> None:
    """Runs `role` of the experiment (module docstring) until done or Ctrl-C / SIGTERM."""
    if role not in ROLES:
        raise ValueError(f"--role={role!r} is not one of {', '.join(ROLES)}")
    if role in ("learner", "actor") and not replay_address:
        raise ValueError(f"--role={role} needs --replay_address=host:port of the replay role")
    _handle_stop_signals()
    try:
        if role in ("learner", "actor"):
            replay.connect(replay_address, timeout_s=5.0)  # fail fast on a wrong address
        spec = probe_env(experiment.actor.env, experiment.actor.protocol)
        if role == "actor":
            _run_actor_fleet(experiment, replay_address)
        elif role == "learner":
            run_learner_with_children(experiment, spec, replay_address, with_actors=False)
        else:
            port = experiment.replay_port if role == "replay" else None
            server = replay.start_server(make_tables(experiment, spec), port=port)
            try:
                if role == "replay":
                    print(f"[replay] serving on port {server.port}; connect learner and actors "
                          f"with --replay_address=<this host>:{server.port}", flush=True)
                    server.wait()
                else:
                    run_learner_with_children(experiment, spec, replay.address_of(server),
                                              with_actors=True)
            finally:
                server.stop()
    except (KeyboardInterrupt, _Terminated):
        print(f"[launch] {role} interrupted; shut down", flush=True)


def _run_actor_fleet(experiment: Experiment, replay_address: str,
                     give_up_after_s: float = 60.0) -> None:
    """Actors against a remote Reverb server until Ctrl-C or it stays unreachable."""
    supervisor = Supervisor()
    start_actors(supervisor, experiment, replay_address)
    print(f"[actor] {experiment.num_actors} actors x {experiment.actor.num_envs} envs writing to "
          f"{replay_address}", flush=True)
    unreachable_since = None
    try:
        while True:
            time.sleep(5.0)
            try:
                replay.connect(replay_address, timeout_s=5.0)
                unreachable_since = None
            except ConnectionError:
                unreachable_since = unreachable_since or time.monotonic()
                if time.monotonic() - unreachable_since > give_up_after_s:
                    print(f"[actor] {replay_address} unreachable for {give_up_after_s:.0f} s; "
                          "stopping", flush=True)
                    return
            supervisor.restart_dead()
    finally:
        supervisor.stop()

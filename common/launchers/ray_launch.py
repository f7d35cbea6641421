"""`--launcher=ray`: the processes of `--role=local` placed as Ray actors on a Ray cluster
(docs/guides/several_machines.md; docs/architecture.md#processes-and-roles-commonlauncherslaunchpy).

`run(experiment, address)` joins the cluster at `address` (`host:port` of its head, or `auto`),
or starts one on this machine (None), and places:

- `_Learner`: the Reverb server (`launch.start_server`) and the learner, with the evaluator as
  its child (`launch.run_learner_with_children`), on the driver's node, or on a GPU node when the
  cluster has a GPU (the learner then asks for one);
- `_Actor` i, for i in 0..num_actors-1: `acting.run_actor` with `launch.actor_kwargs` (its seed
  and behaviour state file from `launch.actor_settings`), spread over the nodes by their CPU
  requests.

The learner and the Reverb server share one process, so they share a node; the actors reach the
server at the learner node's IP address (`ray.util.get_node_ip_address()`), on the port Reverb
picked. The evaluator is the learner's child process, as under the local launcher (its final
round waits on an event of the learner's process).

Restarts: an actor whose process or node is lost is restarted by Ray (`ACTOR_OPTIONS`:
`max_restarts=-1`) wherever its CPU request fits, and the driver starts its loop again with the
same index, so it continues the same behaviour state file and gets new env seeds
(`launch.reseed_actor`), as the local launcher's supervisor restarts a crashed actor. The learner
is not restarted by Ray: its process holds the Reverb server every actor writes to, and a new one
would serve on another address. A lost learner ends the run with one line; the same command
resumes it from its last checkpoint (and replay checkpoint), as it does today.

Storage: the learner writes the logdir (checkpoints, replay checkpoints, episodes.csv, eval.csv,
TensorBoard) on its node; it need not be shared, but since the learner is placed on the driver's
node it lands where the command was typed. Each actor writes its behaviour state
(`<logdir>/behaviour/actor_<i>.npz`, DiCE, GDI and LBC) on the node it runs on, and reads it there
when it restarts, and the evaluator reads the first actor's on the learner's node. So for the
agents with behaviour state the logdir must be on storage every node mounts at the same path
(NFS, a cluster file system); otherwise an actor that moves to another node starts new bandits
and the evaluator sees none. IMPALA and Reactor actors write nothing. The logdir is made absolute
(`common.experiments.cli.run_one`) because Ray's workers do not run in the driver's directory.

Actor indices: the driver claims actors 0..num_actors-1 on the Reverb server
(`actor_range.ActorRange.held`), so an actor host started by hand against this run's server
(`--role=actor --replay_address=<the address printed>`) must take --first_actor=num_actors or
above, as it must against any other actor host.

Shutdown: Ctrl-C or SIGTERM of the driver (or the learner's frame budget) stops the learner, which
checkpoints as under the local launcher, then every actor (their stop events; they save their
behaviour state), then the Reverb server; every wait has a timeout, after which the Ray actor is
killed. A cluster this module started is shut down with it.
"""

import contextlib
import signal
import threading
from typing import Any

import ray

from common.runtime import acting
from common.launchers import actor_range
from common.launchers import launch
from common.runtime.agent import probe_env

# choice: -1 (unlimited), as the local launcher's supervisor restarts an actor however often it
# dies: an actor holds no state but its behaviour file, and a cluster loses nodes routinely.
# The driver starts an actor's loop again at most once per POLL_S, so a crash loop cannot spin.
ACTOR_OPTIONS = dict(max_restarts=-1, max_task_retries=0, scheduling_strategy="SPREAD")
# choice: 2 concurrent calls per Ray actor: the long one that runs the role, and `stop`.
MAX_CONCURRENCY = 2
POLL_S = 1.0  # choice: the driver's loop; restarts and stop signals wait at most this
# choice: an actor's stop event is polled once per actor step, and about once a second while it
# waits for the learner's first weights; after this many polls it is acting, not waiting.
ACTING_POLLS = 500
LEARNER_STOP_S = 180.0  # choice: a checkpoint of a large replay on a loaded machine
ACTOR_STOP_S = 60.0  # choice: an actor flushes its writer and saves its behaviour state


class LearnerLostError(ConnectionError):
    """The learner's Ray actor (and with it the Reverb server) died: one line, exit status 1
    (`common.experiments.cli.run_one`)."""


def learner_options(experiment: launch.Experiment, cluster_resources: dict, node_id: str) -> dict:
    """The Ray options of the learner: its threads' CPUs, one GPU when the cluster has one, and
    the driver's node `node_id` (soft: a GPU elsewhere wins)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    options: dict[str, Any] = dict(num_cpus=experiment.learner_threads, max_restarts=0)
    if cluster_resources.get("GPU", 0) >= 1:
        options["num_gpus"] = 1
    # choice: the driver's node, so the logdir is written where the command was typed.
    options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id, soft=True)
    return options


def local_cpus(experiment: launch.Experiment) -> int:
    """The CPUs a Ray cluster started on this machine offers: what its processes ask for.
    choice: as many as the local launcher starts threads for, however many cores the machine
    has, so the same flags run under either launcher (the OS shares the cores, as it does
    for the local launcher)."""
    return experiment.learner_threads + experiment.num_actors * experiment.actor_threads


def _concurrent_actor(cls: type) -> Any:
    """`cls` as a Ray actor class whose methods run MAX_CONCURRENCY calls at a time."""
    return ray.remote(  # type: ignore[call-overload]  # Ray's stubs omit the actor options
        max_concurrency=MAX_CONCURRENCY
    )(cls)


def actor_options(experiment: launch.Experiment) -> dict:
    """The Ray options of an actor: its threads' CPUs, spread over the nodes, restarted."""
    return dict(ACTOR_OPTIONS, num_cpus=experiment.actor_threads)


class _Learner:
    """The Reverb server and the learner in one Ray actor process."""

    def __init__(self, experiment: launch.Experiment):
        self._experiment = experiment
        self._stop = threading.Event()
        self._spec = probe_env(experiment.actor.env, experiment.actor.protocol)
        self._server = launch.start_server(experiment, self._spec)

    def where(self) -> tuple[str, str]:
        """This node's Ray id, and the address where actors on other nodes reach the server."""
        node = ray.get_runtime_context().get_node_id()
        return node, f"{ray.util.get_node_ip_address()}:{self._server.port}"

    def run(self) -> None:
        launch.run_learner_with_children(
            self._experiment,
            self._spec,
            f"localhost:{self._server.port}",
            with_actors=False,
            should_stop=self._stop.is_set,
        )

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self._server.stop()


class _Stop(threading.Event):
    """An actor's stop event that counts how often the actor loop asked it (`ACTING_POLLS`)."""

    def __init__(self):
        super().__init__()
        self.polls = 0

    def is_set(self) -> bool:
        self.polls += 1
        return super().is_set()


class _Actor:
    """Actor `index` of the experiment in a Ray actor process."""

    def __init__(self, experiment: launch.Experiment, index: int, replay_address: str):
        self._kwargs = launch.actor_kwargs(experiment, index, replay_address)
        self._stop = _Stop()

    def node_if_acting(self) -> str | None:
        """This node's Ray id once the actor loop is acting (`ACTING_POLLS`), else None."""
        if self._stop.polls < ACTING_POLLS:
            return None
        return ray.get_runtime_context().get_node_id()

    def run(self, restarts: int) -> dict:
        kwargs = launch.reseed_actor(self._kwargs, restarts) if restarts else self._kwargs
        self._stop.polls = 0
        return acting.run_actor(**kwargs, stop=self._stop)

    def stop(self) -> None:
        self._stop.set()


class _Fleet:
    """The driver's view of the actors: each one's loop, its restarts, and what it reported."""

    def __init__(self, experiment: launch.Experiment, replay_address: str):
        remote = _concurrent_actor(_Actor)
        options = actor_options(experiment)
        self.handles = [
            remote.options(**options).remote(experiment, i, replay_address)
            for i in range(experiment.num_actors)
        ]
        self.restarts = [0] * experiment.num_actors
        self.runs = [handle.run.remote(0) for handle in self.handles]
        # Per actor: its pending `node_if_acting` call; None once it was announced.
        self._where = [handle.node_if_acting.remote() for handle in self.handles]

    def _start(self, i: int, why: str) -> None:
        self.restarts[i] += 1
        print(
            f"[ray] actor_{i} {why}; starting it again (start {self.restarts[i] + 1})", flush=True
        )
        self.runs[i] = self.handles[i].run.remote(self.restarts[i])
        self._where[i] = self.handles[i].node_if_acting.remote()

    def poll(self) -> None:
        """Starts the loop of every actor whose loop ended (its process or node was lost: Ray
        restarts the process first), and announces where each one acts."""
        for i, run in enumerate(self.runs):
            if ray.wait([run], timeout=0)[0]:
                try:
                    ray.get(run)
                    why = "returned"
                except ray.exceptions.RayActorError as error:
                    why = f"was lost ({type(error).__name__})"
                except ray.exceptions.RayTaskError as error:
                    why = f"failed ({error.cause!r})"
                self._start(i, why)
            if self._where[i] is None or not ray.wait([self._where[i]], timeout=0)[0]:
                continue
            try:
                node = ray.get(self._where[i])
            except ray.exceptions.RayActorError:
                node = None  # lost: its run's failure starts it again
            if node is None:
                self._where[i] = self.handles[i].node_if_acting.remote()
            else:
                print(f"[ray] actor_{i} acting on node {node}", flush=True)
                self._where[i] = None

    def stop(self) -> None:
        """Stops every actor (each saves its behaviour state), then kills what is left."""
        for handle in self.handles:
            handle.stop.remote()
        done, _ = ray.wait(self.runs, num_returns=len(self.runs), timeout=ACTOR_STOP_S)
        for i, run in enumerate(self.runs):
            if run in done:
                try:
                    counters = ray.get(run)
                    print(
                        f"[ray] actor_{i} stopped: {counters['steps']} steps since its last start",
                        flush=True,
                    )
                except ray.exceptions.RayError as error:
                    print(f"[ray] actor_{i} stopped: {type(error).__name__}", flush=True)
        for handle in self.handles:
            ray.kill(handle, no_restart=True)


def run(experiment: launch.Experiment, address: str | None = None) -> None:
    """Trains `experiment` on the Ray cluster at `address` (None: a new one on this machine)
    until its frame budget, Ctrl-C or SIGTERM (module docstring)."""
    started_here = address is None
    # choice: no dashboard: it needs packages beyond Ray core, and a port of its own.
    if started_here:
        ray.init(include_dashboard=False, num_cpus=local_cpus(experiment))
    else:
        ray.init(address=address, include_dashboard=False)
    # A stop signal only sets a flag, which the driver's waits look at every POLL_S: an
    # exception raised inside Ray's own waits comes out as a SystemError.
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):  # after ray.init, which installs its own
        signal.signal(signum, lambda *_: stopping.set())
    learner = learning = fleet = None
    claims = contextlib.ExitStack()  # the fleet's claim on actors 0..num_actors-1
    try:
        options = learner_options(
            experiment, ray.cluster_resources(), ray.get_runtime_context().get_node_id()
        )
        remote = _concurrent_actor(_Learner)
        learner = remote.options(**options).remote(experiment)
        where = learner.where.remote()
        if not _wait(where, stopping):
            return
        learner_node, replay_address = _get_learner(where)
        print(
            f"[ray] Reverb server and learner on node {learner_node}, serving {replay_address}",
            flush=True,
        )
        learning = learner.run.remote()
        claim = claims.enter_context(
            actor_range.ActorRange(replay_address, 0, experiment.num_actors).held()
        )
        fleet = _Fleet(experiment, replay_address)

        def poll() -> None:
            fleet.poll()
            if claim.lost is not None:
                stopping.set()

        if _wait(learning, stopping, poll):
            _get_learner(learning)
            return
        why = "interrupted" if claim.lost is None else "another host took actors of this run"
        print(f"[ray] {why}; shutting down", flush=True)
        learner.stop.remote()  # the learner checkpoints on its way out
        ray.wait([learning], timeout=LEARNER_STOP_S)
        if claim.lost is not None:
            raise actor_range.ActorRangeError(claim.lost)
    finally:
        if fleet is not None:
            fleet.stop()
        claims.close()  # before the server stops with the learner
        if learner is not None:
            try:
                ray.get(learner.close.remote(), timeout=ACTOR_STOP_S)
            except ray.exceptions.RayError:
                pass  # the learner is gone: so is its server
            ray.kill(learner, no_restart=True)
        if started_here:
            ray.shutdown()


def _wait(ref, stopping: threading.Event, on_poll=lambda: None) -> bool:
    """Waits for `ref` to be ready (True) or `stopping` to be set (False)."""
    while not stopping.is_set():
        if ray.wait([ref], timeout=POLL_S)[0]:
            return True
        on_poll()
    return False


def _get_learner(ref):
    try:
        return ray.get(ref)
    except ray.exceptions.RayActorError as error:
        raise LearnerLostError(
            f"--launcher=ray: the learner was lost ({type(error).__name__}); run the same "
            "command again to resume from its last checkpoint"
        ) from None

"""Processes of one run: embedded Reverb, the actor fleet, the learner and the evaluator.

`run(experiment, role, replay_address)`
(docs/architecture.md#processes-and-roles-commonlauncherslaunchpy):

| role      | this process                                  | children (spawned)        |
|-----------|-----------------------------------------------|---------------------------|
| `local`   | Reverb server (embedded) + learner            | actors, evaluator         |
| `replay`  | Reverb server only, until Ctrl-C              |                           |
| `learner` | learner on a remote `--replay_address`        | evaluator                 |
| `actor`   | supervisor of actors on `--replay_address`    | actors `--first_actor`..  |
| `evaluate`| the final evaluation protocol on the latest checkpoint, into `<logdir>/evaluate/` |    |

Children are started with the multiprocessing 'spawn' context (never fork after TensorFlow is
imported), ignore Ctrl-C (the parent shuts them down in order), and exit on their own when their
parent dies (between steps, and through the kernel's parent-death signal wherever they are
blocked). A child that dies while the run goes on is restarted (with fresh env seeds). Every wait
has a timeout: writers flush in short slices, the learner samples with a timeout, and shutdown
escalates from a stop event to SIGTERM to SIGKILL.
"""

import contextlib
import dataclasses
import os
import time
from typing import TYPE_CHECKING, Any, Callable

import reverb

from common.environments import env_names
from common.runtime import acting

from common.runtime import evaluation
from common.launchers import actor_range
from common.control import behaviour as behaviour_lib
from common.runtime import learning
from common.replay import patterns
from common.launchers import private_network
from common.launchers.supervisor import Supervisor
from common.replay import replay
from common.replay import parameters
from common.runtime import runlog as run_logging
from common.runtime import stop_signals
from common.runtime.agent import Agent, EnvSpec, probe_env

if TYPE_CHECKING:
    from common.environments import recording

ROLES = ("local", "replay", "learner", "actor", "evaluate")

# Where `--role=evaluate` writes (eval.csv, TensorBoard, its copy of the behaviour state).
EVALUATE_DIR = "evaluate"


class CheckpointError(Exception):
    """`--role=evaluate` found no checkpoint, or one that does not hold the flags' agent."""


@dataclasses.dataclass(frozen=True)
class Experiment:
    """A paper's agent plus the run settings of its processes."""

    agent: Agent
    actor: acting.ActorSettings  # per actor process; actor i offsets the seed
    num_actors: int
    learner: learning.LearnerSettings
    # The evaluation protocol; the learner runs it every interval_s > 0 and at the end.
    evaluator: evaluation.EvaluatorSettings | None = None
    replay_port: int | None = None  # None: any free port (local); the `replay` role needs one
    actor_threads: int = 1  # TF intra-op threads per actor process
    learner_threads: int = 2  # TF intra-op threads of the learner process (`--learner_threads`)


def experiment_from_config(
    config: Any,  # a paper's config dataclass
    agent: Agent,
    logdir: str,
    replay_port: int | None,
    *,
    protocol: Any,  # a common.environments.protocols name or protocol object
    frames_per_learner_step: int,
    name: str,
    eval_protocol: Any = None,
    greedy_evaluation: bool = False,
    publish_lag: int = 0,
    evaluate: bool = True,
) -> Experiment:
    """The `Experiment` of a paper config (`common.experiments.builder.build_experiment` calls it
    with the pieces of the paper's builder) with the run fields every paper's config has (env, seed,
    num_actors, envs_per_actor, params_pull_interval, total_frames, batch_size, publish_interval,
    eval_episodes and `common.settings.config.ProcessSettings`'s). The evaluator plays
    `eval_protocol` (default: the training protocol) and finds a behaviour selector's saved state
    under `logdir`; it runs during training when eval_interval_s > 0, and on a checkpoint
    with `--role=evaluate`; `evaluate=False`: the paper has none."""
    evaluator = None
    if evaluate:
        eval_envs = min(config.eval_round_episodes, config.envs_per_actor)
        games = len(env_names.games(config.env))
        if games > 1:  # a multi-task run: the same environments per game, so the same episodes
            eval_envs = games * max(1, eval_envs // games)
        evaluator = evaluation.EvaluatorSettings(
            env=config.env,
            protocol=protocol if eval_protocol is None else eval_protocol,
            num_envs=eval_envs,
            round_episodes=config.eval_round_episodes,
            final_episodes=config.eval_episodes,
            interval_s=config.eval_interval_s,
            greedy=greedy_evaluation,
            seed=config.seed + 10_000,  # choice: evaluation seeds differ from the actors'
            niceness=config.actor_niceness,
            state_dir=logdir,
        )
    return Experiment(
        agent=agent,
        actor=acting.ActorSettings(
            env=config.env,
            num_envs=config.envs_per_actor,
            seed=config.seed,
            params_pull_interval=config.params_pull_interval,
            protocol=protocol,
            state_dir=logdir,
            state_save_interval_s=min(behaviour_lib.SAVE_INTERVAL_S, config.checkpoint_interval_s),
            niceness=config.actor_niceness,
        ),
        num_actors=config.num_actors,
        learner=learning.LearnerSettings(
            logdir=logdir,
            total_frames=config.total_frames,
            frames_per_learner_step=frames_per_learner_step,
            batch_size=config.batch_size,
            publish_interval=config.publish_interval,
            publish_lag=publish_lag,
            checkpoint_interval_s=config.checkpoint_interval_s,
            log_interval_s=config.log_interval_s,
            name=name,
            games=env_names.games(config.env),
        ),
        evaluator=evaluator,
        replay_port=replay_port,
        learner_threads=config.learner_threads,
    )


def replay_checkpoint_dir(experiment: Experiment) -> str | None:
    """Where Reverb checkpoints replay whose contents matter (None for a queue)."""
    if not experiment.agent.replay.checkpointed:
        return None
    return os.path.join(experiment.learner.logdir, "replay")


def start_server(experiment: Experiment, spec: EnvSpec, port: int | None = None) -> reverb.Server:
    """The Reverb server with every table of the run and the table where actor hosts claim their
    indices (`common.launchers.actor_range`; on every server, so that a logdir whose replay one role
    checkpointed resumes under any other), restored from the run's replay checkpoint
    if there is one; prints the experience table's capacity and estimated memory."""
    agent = experiment.agent
    pattern = agent.replay
    signature = agent.signature(spec)
    gib = patterns.estimated_bytes(pattern, signature) / 2**30
    print(
        f"[replay] {pattern.kind}: {pattern.capacity:,} items of {pattern.item_length} steps "
        f"(~{pattern.unique_steps():,} distinct steps when full, {pattern.stored_steps():,} "
        f"stored, {gib:.2f} GiB before Reverb's compression)",
        flush=True,
    )
    tables = list(agent.tables(spec))
    tables.append(parameters.params_table(actor_range.ACTOR_CLAIMS_TABLE))
    return replay.start_server(tables, port=port, checkpoint_dir=replay_checkpoint_dir(experiment))


# ------------------------------------------------------------------------------------------------
# Actors


def reseed_actor(kwargs: dict, restarts: int) -> dict:
    """The kwargs of an actor's `restarts`-th restart: its env seeds moved on."""
    settings = kwargs["settings"]
    # choice: a restarted actor must not replay its predecessor's episodes (ALE is deterministic)
    return dict(
        kwargs, settings=dataclasses.replace(settings, seed=settings.seed + 1_000_003 * restarts)
    )


def actor_settings(experiment: Experiment, index: int) -> acting.ActorSettings:
    """The settings of the actor with cluster-wide index `index`: its seed (one per env, distinct
    across the cluster) and its behaviour state file (`actor_<index>.npz`)."""
    base = experiment.actor
    return dataclasses.replace(base, seed=base.seed + index * base.num_envs, actor_id=index)


def actor_kwargs(experiment: Experiment, index: int, replay_address: str) -> dict:
    """The arguments of `acting.run_actor` (but `stop`) for actor `index` of the experiment."""
    return dict(
        settings=actor_settings(experiment, index),
        make_policy=experiment.agent.make_policy,
        pattern=experiment.agent.replay,
        replay_address=replay_address,
        behaviour=experiment.agent.behaviour,
        intra_op_threads=experiment.actor_threads,
    )


def start_actors(
    supervisor: Supervisor, experiment: Experiment, replay_address: str, first_actor: int = 0
) -> None:
    """Starts actors `first_actor` .. `first_actor + num_actors - 1` (cluster-wide indices: the
    local launcher's are 0..n-1, a hand-started actor host's `--first_actor` on), named
    `actor_<index>`."""
    if first_actor < 0:
        raise ValueError(f"--first_actor={first_actor} must be >= 0")
    for i in range(first_actor, first_actor + experiment.num_actors):
        supervisor.start(
            f"actor_{i}",
            acting.run_actor,
            actor_kwargs(experiment, i, replay_address),
            reseed=reseed_actor,
        )


# ------------------------------------------------------------------------------------------------
# Roles


THREADS_NOT_SET = "TensorFlow had started before the learner: its thread pools stay as they were"


def build_learner(experiment: Experiment, spec: EnvSpec, replay_address: str) -> learning.Learner:
    if not acting.configure_threads(experiment.learner_threads):
        print(
            f"[{experiment.learner.name}] --learner_threads={experiment.learner_threads}: "
            f"{THREADS_NOT_SET}",
            flush=True,
        )
    agent = experiment.agent
    parts = agent.make_learner(spec)
    client = replay.connect(replay_address)
    return learning.Learner(
        experiment.learner,
        parts,
        client,
        replay_address,
        agent.replay,
        agent.signature(spec),
        agent.behaviour_names,
    )


def _final_evaluation_unfinished(learner: learning.Learner, experiment: Experiment) -> bool:
    """Whether a run at its budget was stopped before its final evaluation logged all of its
    games; if so, the games it did log are dropped (eval.csv rows and TensorBoard points at the
    budget's frames), so that it is played again whole."""
    assert experiment.evaluator is not None  # called only where the run evaluates
    logdir, frames = experiment.learner.logdir, int(learner.frames.numpy())
    games = experiment.evaluator.final_episodes
    logged = run_logging.rows_at(os.path.join(logdir, run_logging.EVAL_CSV), frames)
    if logged >= games:
        return False
    run_logging.rewind_evaluation(logdir, frames - 1)
    print(
        f"[launch] {logdir} reached its frame budget ({frames} frames) but its final "
        f"evaluation was stopped after {logged} of {games} games: playing it again",
        flush=True,
    )
    return True


def run_learner_with_children(
    experiment: Experiment,
    spec: EnvSpec,
    replay_address: str,
    with_actors: bool,
    should_stop: Callable[[], bool] = lambda: False,
    record: "recording.RecordSettings | None" = None,
) -> None:
    """The learner in this process, with actors (local role) and the evaluator as children,
    until the frame budget, Ctrl-C / SIGTERM, or `should_stop()` (`common.launchers.ray_launch`).
    `record` (`common.environments.recording.RecordSettings`): GIFs of the final evaluation's first
    games."""
    if record is not None:
        from common.environments import recording

        if experiment.evaluator is None:
            raise ValueError(
                "--record_dir records a final evaluation, which this run does not play"
            )
        recording.check_env(experiment.evaluator.env)  # before anything is trained
    learner = build_learner(experiment, spec, replay_address)
    evaluating = experiment.evaluator is not None and experiment.evaluator.interval_s > 0
    if learner.done and not (evaluating and _final_evaluation_unfinished(learner, experiment)):
        print(
            f"[launch] {experiment.learner.logdir} already reached its frame budget "
            f"({int(learner.frames.numpy())} frames); nothing to do",
            flush=True,
        )
        learner.close()
        return
    supervisor = Supervisor()
    finished = supervisor.event()
    # The local role's actors are 0..num_actors-1: claimed on the server like an actor host's.
    claim = actor_range.ActorRange(replay_address, 0, experiment.num_actors)
    try:
        with claim.held() if with_actors else contextlib.nullcontext():
            if with_actors and not learner.done:
                start_actors(supervisor, experiment, replay_address)
            if evaluating:
                supervisor.start(
                    "evaluator",
                    evaluation.run_evaluator,
                    dict(
                        settings=experiment.evaluator,
                        make_policy=experiment.agent.make_policy,
                        replay_address=replay_address,
                        logdir=experiment.learner.logdir,
                        behaviour=experiment.agent.behaviour,
                        finished=finished,
                        start_time=time.time() - float(learner.elapsed_s.numpy()),
                        intra_op_threads=experiment.actor_threads,
                        record=record,
                    ),
                )
            actors = [name for name in supervisor.names() if name.startswith("actor_")]
            with stop_signals.recorded_only():
                if not learner.done:  # else only its final evaluation is left to play
                    learner.run(
                        lambda: (
                            should_stop() or claim.lost is not None or bool(stop_signals.received)
                        ),
                        on_idle=supervisor.restart_dead,
                        # Its actors stop (saving their behaviour state) before the last
                        # checkpoint, which then holds every game they played and the bandits
                        # that saw them.
                        before_final_save=lambda: supervisor.stop(names=actors),
                    )
            stop_signals.raise_recorded()  # learner.run has checkpointed
            if claim.lost is not None:
                raise actor_range.ActorRangeError(claim.lost)
            if learner.done and evaluating:
                assert experiment.evaluator is not None  # `evaluating` says so
                games = experiment.evaluator.final_episodes
                recorded = (
                    ""
                    if record is None
                    else f"; the first {min(record.games, games)} as GIFs into {record.directory}"
                )
                print(
                    f"[launch] frame budget reached: final evaluation ({games} episodes{recorded})",
                    flush=True,
                )
                # The final weights, whatever the publish interval and publish_lag: the
                # evaluation is of the policy at the budget, logged at the budget's frames.
                learner.publish(latest=True)
                finished.set()
                supervisor.process("evaluator").join()
    finally:
        supervisor.stop()
        learner.close()


def evaluate_checkpoint(
    experiment: Experiment, spec: EnvSpec, record: "recording.RecordSettings | None" = None
) -> list[float]:
    """`--role=evaluate`: the final evaluation protocol (eval_episodes games, the evaluator's
    behaviour) with the acting weights of the latest checkpoint under the logdir, in this
    process; eval.csv and TensorBoard go to `<logdir>/evaluate/`. The run's behaviour state is
    copied there first, so an evaluator with its own bandits starts from the run's evaluator's
    and the run's files are left as they were. `record`
    (`common.environments.recording.RecordSettings`,
    `--record_dir`) writes the evaluation's first `record.games` games as GIFs into
    `record.directory`. Returns the scores."""
    import shutil

    import tensorflow as tf

    logdir = experiment.learner.logdir
    if experiment.evaluator is None:
        raise CheckpointError(
            "--role=evaluate: these flags evaluate nothing (LBC's "
            "--eval_policy=training_episodes reports the training games)"
        )
    if record is not None:
        from common.environments import recording

        recording.check_env(experiment.evaluator.env)  # before anything is written
    path = tf.train.latest_checkpoint(os.path.join(logdir, "checkpoints"))
    if path is None:
        raise CheckpointError(f"--role=evaluate: no checkpoint under {logdir}/checkpoints")
    acting.configure_threads(experiment.learner_threads)
    parts = experiment.agent.make_learner(spec)
    step = tf.Variable(0, dtype=tf.int64)
    frames = tf.Variable(0, dtype=tf.int64)  # the learner's frame count: eval.csv's x-axis
    checkpoint = tf.train.Checkpoint(step=step, frames=frames, **parts.checkpointables)
    try:  # the optimizer's slots may not exist yet: only what exists must match
        checkpoint.read(path).expect_partial().assert_existing_objects_matched()
    except (AssertionError, ValueError) as error:  # a missing object; a shape that differs
        first_line = str(error).splitlines()[0]
        # The half-restored checkpoint warns about every value when collected: the error line
        # below says it all.
        tf.get_logger().setLevel("ERROR")
        raise CheckpointError(
            f"--role=evaluate: {path} does not hold the agent these flags build (train and "
            f"evaluate with the same flags): {first_line}"
        ) from None
    out = os.path.join(logdir, EVALUATE_DIR)
    behaviour_dir = os.path.join(logdir, "behaviour")
    if os.path.isdir(behaviour_dir):
        shutil.rmtree(os.path.join(out, "behaviour"), ignore_errors=True)
        shutil.copytree(behaviour_dir, os.path.join(out, "behaviour"))
    settings = dataclasses.replace(experiment.evaluator, state_dir=out)
    print(
        f"[evaluate] {path} (step {int(step.numpy())}, {int(frames.numpy())} frames): "
        f"{settings.final_episodes} episodes -> {out}",
        flush=True,
    )
    if record is not None:
        print(
            f"[evaluate] recording the first {min(record.games, settings.final_episodes)} "
            f"games as GIFs into {record.directory}",
            flush=True,
        )
    evaluator = evaluation.Evaluator(
        settings, experiment.agent.make_policy, out, experiment.agent.behaviour
    )
    try:
        return evaluator.play(
            int(frames.numpy()),
            [v.numpy() for v in parts.acting_variables],
            settings.final_episodes,
            record=record,
        )
    finally:
        evaluator.close()


def run(
    experiment: Experiment,
    role: str = "local",
    replay_address: str | None = None,
    record: "recording.RecordSettings | None" = None,
    first_actor: int = 0,
    open_because: str | None = None,
) -> None:
    """Runs `role` of the experiment (module docstring) until done or Ctrl-C / SIGTERM.
    `open_because`: why a local run's Reverb server is reachable from the network where it is
    not in a network of its own (`common.launchers.private_network`), for its console line.
    `record` (`common.environments.recording.RecordSettings`): GIFs of the final evaluation's first
    games (`--role=evaluate`'s, or the training run's when it reaches its budget).
    `first_actor`: the cluster-wide index of an actor host's first actor (`start_actors`)."""
    if role not in ROLES:
        raise ValueError(f"--role={role!r} is not one of {', '.join(ROLES)}")
    if record is not None and role not in ("local", "learner", "evaluate"):
        raise ValueError(
            f"--record_dir records a final evaluation, which --role={role} does not play"
        )
    if role in ("learner", "actor") and not replay_address:
        raise ValueError(f"--role={role} needs --replay_address=host:port of the replay role")
    if first_actor and role != "actor":
        raise ValueError(f"--first_actor={first_actor} numbers --role=actor's actors, not {role}'s")
    stop_signals.install()
    try:
        if role in ("learner", "actor"):
            assert replay_address is not None  # checked above
            replay.connect(replay_address, timeout_s=5.0)  # fail fast on a wrong address
        spec = probe_env(experiment.actor.env, experiment.actor.protocol)
        stop_signals.raise_recorded()
        if role == "evaluate":
            evaluate_checkpoint(experiment, spec, record)
        elif role == "actor":
            assert replay_address is not None
            _run_actor_fleet(experiment, replay_address, first_actor)
        elif role == "learner":
            assert replay_address is not None
            run_learner_with_children(
                experiment, spec, replay_address, with_actors=False, record=record
            )
        else:
            port = experiment.replay_port if role == "replay" else None
            server = start_server(experiment, spec, port)
            try:
                if role == "replay":
                    print(
                        f"[replay] serving on port {server.port}; connect learner and actors "
                        f"with --replay_address=<this host>:{server.port}",
                        flush=True,
                    )
                    server.wait()
                else:
                    print(
                        _server_line(server.port, experiment.num_actors, open_because), flush=True
                    )
                    run_learner_with_children(
                        experiment, spec, replay.address_of(server), with_actors=True, record=record
                    )
            finally:
                server.stop()
    except (KeyboardInterrupt, stop_signals.Terminated):
        print(f"[launch] {role} interrupted; shut down", flush=True)
    except Exception:
        # A stop signal that arrives inside TensorFlow's C++ can come out of pybind11 as another
        # exception: "RuntimeError: ... MISMATCH of original and normalized active exception
        # types" as an error status turns into an exception (the sample timeout of a learner
        # whose actors are gone), "AttributeError: 'GlorotUniform' object has no attribute
        # 'keys'" from `tf.nest.flatten` while a Keras layer is built. The run was asked to stop
        # all the same, and a learner that was running has checkpointed on its way out.
        if not stop_signals.received:
            raise
        print(f"[launch] {role} interrupted; shut down", flush=True)


def _server_line(port: int, num_actors: int, open_because: str | None) -> str:
    """The local run's console line on who can reach its Reverb server."""
    if private_network.entered():
        return (
            f"[launch] Reverb server on port {port}, reachable from this run only (a network of "
            "its own, loopback only; --open_port lets actor hosts join)"
        )
    return (
        f"[launch] Reverb server on port {port} of every network interface, without "
        f"authentication ({open_because or 'started outside the command line'}; "
        "docs/guides/several_machines.md says how to fence it); more "
        f"actor hosts join with --role=actor --replay_address=<this host>:{port} "
        f"--first_actor={num_actors} (or above)"
    )


def _run_actor_fleet(
    experiment: Experiment, replay_address: str, first_actor: int, give_up_after_s: float = 60.0
) -> None:
    """Actors first_actor.. against a remote Reverb server, once their range is claimed
    (`actor_range.ActorRange`), until Ctrl-C, the server stays unreachable, or another host wins
    the range (`actor_range.ActorRangeError`)."""
    claim = actor_range.ActorRange(replay_address, first_actor, experiment.num_actors)
    supervisor = Supervisor()
    unreachable_since = None
    try:
        claim.acquire()
        start_actors(supervisor, experiment, replay_address, first_actor)
        print(
            f"[actor] actors {first_actor}..{first_actor + experiment.num_actors - 1} x "
            f"{experiment.actor.num_envs} envs writing to {replay_address}",
            flush=True,
        )
        for i in range(first_actor, first_actor + experiment.num_actors):
            _print_actor(experiment, i)
        while True:
            stop_signals.raise_recorded()
            time.sleep(actor_range.CLAIM_HEARTBEAT_S)
            try:
                claim.heartbeat()
                unreachable_since = None
            except (ConnectionError, reverb.DeadlineExceededError):
                unreachable_since = unreachable_since or time.monotonic()
                if time.monotonic() - unreachable_since > give_up_after_s:
                    print(
                        f"[actor] {replay_address} unreachable for {give_up_after_s:.0f} s; "
                        "stopping",
                        flush=True,
                    )
                    return
            supervisor.restart_dead()
    finally:
        supervisor.stop()
        claim.release()


def _print_actor(experiment: Experiment, index: int) -> None:
    """The actor host's line about one actor: its name, seed and behaviour state file."""
    settings = actor_settings(experiment, index)
    line = f"[actor] actor_{index}: seed {settings.seed}"
    if experiment.agent.behaviour is not None and settings.state_dir is not None:
        path = behaviour_lib.state_path(settings.state_dir, index)
        line += f", behaviour state {path} ({'restored' if os.path.exists(path) else 'new'})"
    print(line, flush=True)

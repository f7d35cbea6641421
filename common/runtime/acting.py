"""Actors: batched envs -> one batched policy call per step -> Reverb (the evaluator is
`common.runtime.evaluation`).

An actor (docs/architecture.md#data-flow) steps `num_envs` environments together, makes one
compiled policy call per step for all of them, and appends each batched step to the writer of the
agent's replay pattern (`common.replay.patterns`: unrolls, prioritised sequences or burn-in
sequences, with the core state at each item's first step). It pulls the latest parameters from the
params table every `params_pull_interval` steps, and reports each finished game and the frames it
produced through the reports table (`common.replay.reports`), so that the learner logs every game
exactly once whatever the replay does with the steps.

Per-step record (every field batched over envs), time index t:
  observation x_t, prev_action a_{t-1}, prev_reward r_{t-1} (zeros where `reset`), reset (x_t is
  the first observation of an episode), action a_t, reward r_t (the protocol's, e.g. clipped),
  params_step (the learner step of the weights that chose a_t), truncation_value, the policy's
  extras (e.g. IMPALA's `behaviour_logits`, for its mu(a_t|x_t), §3) and, for agents with a
  behaviour selector, `behaviour`: the parameters of the game being played
  (`common.control.behaviour`).
An extra named `BEHAVIOUR_ENTROPY` (H[mu(.|x_t)], [B]) is not stored: the actor averages it over
each game and reports the mean with the game, which the learner logs as `behaviour/entropy`
(the behaviour entropy per episode that LBC §5.3 plots in Fig. 4).

Time-limit truncation bootstraps (docs/architecture.md#conventions) although the auto-reset
replaces the final observation x_final by the next game's first one: where step t was truncated
(and not terminated), `truncation_value` holds the policy's `bootstrap_value` of x_final (for
IMPALA V(x_final), from the actor's copy of the weights), else 0. The learner, which sees an
episode boundary after step t, folds it into the reward: r_t + gamma * truncation_value_t with the
bootstrap cut. This is the usual remedy (e.g. Stable-Baselines3's on-policy buffers); its one
approximation is that the actor's weights may lag the learner's by a few updates.

`run_actor` is the body of a spawned process (`common.launchers.launch`): it takes picklable
settings and a picklable policy factory, and returns when `stop` is set, when the parent process
dies, or after `max_steps`.
"""

import dataclasses
import os
import time
from collections.abc import Sequence
from typing import Any, Callable, Mapping, NamedTuple, Protocol

import numpy as np
import reverb
import tensorflow as tf

from common.control import behaviour as behaviour_lib
from common.environments import envs as envs_lib
from common.environments import multitask
from common.environments import protocols
from common.replay import patterns
from common.equations import policies
from common.replay import replay
from common.replay import parameters
from common.replay import reports

PARAMS_TABLE = "params"
CORE_STATE = "core_state"
BEHAVIOUR = "behaviour"
BEHAVIOUR_ENTROPY = "behaviour_entropy"


class Policy(Protocol):
    """What an actor needs from a paper's agent."""

    def initial_state(self, batch_size: int) -> Any: ...

    def step(
        self,
        observation: np.ndarray,
        prev_action: np.ndarray,
        prev_reward: np.ndarray,
        reset: np.ndarray,
        state: Any,
        behaviour: Mapping[str, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray], Any]:
        """(actions [B] int32, extras {name: [B, ...]}, new core state). `behaviour` holds the
        per-env behaviour parameters of agents that have a selector (else None)."""

    def bootstrap_value(
        self, observation: np.ndarray, prev_action: np.ndarray, prev_reward: np.ndarray, state: Any
    ) -> np.ndarray:
        """[B] float32: the value a truncated episode bootstraps from at `observation` (its final
        observation, continuing the episode from `state`)."""

    def set_weights(self, weights: list[np.ndarray]) -> None: ...


# (num_actions, observation_shape, observation_dtype, seed, greedy) -> Policy
PolicyFactory = Callable[[int, tuple, np.dtype, int, bool], Policy]


class CategoricalPolicy:
    """a_t ~ softmax(logits) (or argmax with `greedy`) of a network with ActorCriticNet's `step`
    API.

    One compiled call per batched step (`tf.function`, optionally XLA); actions are drawn by
    `common.equations.policies.sample_actions` with a stateless seed from the policy's own
    generator, which also compiles under XLA on CPU. Extras: `behaviour_logits` [B, A], the
    behaviour policy mu the learner's V-trace needs (IMPALA §4.1). `bootstrap_value` is the
    network's baseline V(x).
    """

    def __init__(
        self,
        network: tf.keras.layers.Layer,
        observation_shape: tuple,
        observation_dtype: Any,  # numpy or TensorFlow dtype
        seed: int,
        greedy: bool = False,
        jit_compile: bool = False,
    ) -> None:
        network.create_variables(observation_shape, observation_dtype)
        self.network = network
        self.greedy = greedy
        self._rng = tf.random.Generator.from_seed(seed)
        self._step = CompiledCall(self._step_graph, jit_compile)
        self._value = CompiledCall(self._value_graph, jit_compile)

    @staticmethod
    def extras_spec(num_actions: int) -> dict:
        """Per-step spec of what `step` returns besides the action (the record's extras)."""
        return {"behaviour_logits": tf.TensorSpec([num_actions], tf.float32)}

    def initial_state(self, batch_size: int) -> Any:
        return tf.nest.map_structure(lambda x: x.numpy(), self.network.initial_state(batch_size))

    def _step_graph(self, observation, prev_action, prev_reward, reset, state):
        (logits, _), new_state = self.network.step(
            observation, prev_action, prev_reward, reset, state
        )
        if self.greedy:
            return tf.argmax(logits, -1, output_type=tf.int32), logits, new_state
        seed = tf.cast(self._rng.make_seeds(1)[:, 0], tf.int32)
        return policies.sample_actions(logits=logits, seed=seed), logits, new_state

    def _value_graph(self, observation, prev_action, prev_reward, state):
        reset = tf.zeros(tf.shape(prev_action), tf.bool)
        (_, value), _ = self.network.step(observation, prev_action, prev_reward, reset, state)
        return value

    def bootstrap_value(
        self,
        observation: np.ndarray,
        prev_action: np.ndarray,
        prev_reward: np.ndarray,
        state: Any,
    ) -> np.ndarray:
        return self._value(observation, prev_action, prev_reward, state).numpy()

    def step(
        self,
        observation: np.ndarray,
        prev_action: np.ndarray,
        prev_reward: np.ndarray,
        reset: np.ndarray,
        state: Any,
        behaviour: Mapping[str, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray], Any]:
        actions, logits, new_state = self._step(observation, prev_action, prev_reward, reset, state)
        return (
            actions.numpy(),
            {"behaviour_logits": logits.numpy()},
            tf.nest.map_structure(lambda x: x.numpy(), new_state),
        )

    def set_weights(self, weights: list[np.ndarray]) -> None:
        assign_weights(self.network.variables, weights)


class CompiledCall:
    """`graph` as a `tf.function` (optionally XLA), called through the concrete function traced
    for each input signature.

    An actor calls its policy once a step with the same shapes every time, so it skips
    tf.function's matching of every call's arguments against its traces and converts the
    numpy inputs itself: on a MinAtar step of 16 environments that matching and conversion
    took about as long as the graph's own ops (docs/guides/minatar.md#throughput-on-this-machine)."""

    def __init__(self, graph: Callable, jit_compile: bool = False) -> None:
        self._function = tf.function(graph, jit_compile=jit_compile, autograph=False)
        self._traced: dict[tuple, Any] = {}

    def __call__(self, *args: Any) -> Any:
        tensors = tf.nest.map_structure(tf.convert_to_tensor, args)
        flat = tf.nest.flatten(tensors)
        key = (len(args), *((t.dtype, tuple(t.shape)) for t in flat))
        concrete = self._traced.get(key)
        if concrete is None:
            concrete = self._traced[key] = self._function.get_concrete_function(*tensors)
        return concrete(*tensors)


def assign_weights(variables: Sequence[tf.Variable], weights: list[np.ndarray]) -> None:
    """Copies published weights into `variables` (same order), checking the shapes."""
    if len(variables) != len(weights):
        raise ValueError(f"got {len(weights)} weight arrays for {len(variables)} variables")
    for var, value in zip(variables, weights):
        if tuple(var.shape) != np.shape(value):
            raise ValueError(
                f"weight for {var.name} has shape {np.shape(value)}, expected {tuple(var.shape)}"
            )
        var.assign(value)


def step_spec(
    observation_shape: tuple,
    observation_dtype: Any,  # numpy or TensorFlow dtype
    extras_spec: Mapping[str, Any],
    behaviour_shapes: Mapping[str, tuple] | None = None,
    value_heads: int = 1,
) -> dict:
    """Per-step `tf.TensorSpec`s of the actor's record (module docstring). `truncation_value`
    is [value_heads] when a policy bootstraps several value heads (`truncation_values`)."""
    spec = {
        "observation": tf.TensorSpec(observation_shape, tf.as_dtype(observation_dtype)),
        "prev_action": tf.TensorSpec([], tf.int32),
        "prev_reward": tf.TensorSpec([], tf.float32),
        "reset": tf.TensorSpec([], tf.bool),
        "action": tf.TensorSpec([], tf.int32),
        "reward": tf.TensorSpec([], tf.float32),
        "params_step": tf.TensorSpec([], tf.int64),
        "truncation_value": tf.TensorSpec([] if value_heads == 1 else [value_heads], tf.float32),
        **extras_spec,
    }
    if behaviour_shapes:
        spec[BEHAVIOUR] = {
            name: tf.TensorSpec(shape, tf.float32) for name, shape in behaviour_shapes.items()
        }
    return spec


@dataclasses.dataclass(frozen=True)
class ActorSettings:
    """What one actor process runs (picklable)."""

    env: str
    num_envs: int
    seed: int
    params_pull_interval: int  # actor steps between parameter pulls
    protocol: Any = "impala"  # a common.environments.envs protocol name or AtariProtocol
    actor_id: int = 0  # names the behaviour state file; the launcher numbers its actors
    state_dir: str | None = None  # run directory where behaviour controllers keep their state
    state_save_interval_s: float = behaviour_lib.SAVE_INTERVAL_S  # at most this long between saves
    flush_timeout_ms: int = 1000  # choice: short waits, so a stop request is seen within ~1 s
    wait_for_params_s: float = 600.0  # choice: the learner's first publish may follow a compile
    niceness: int = 0  # os.nice increment: > 0 lets a learner on the same cores go first
    # choice: ale-py's C++ batch, the fast path; its no-op starts draw 0..noop_max-1 raw frames
    # where the papers' convention is 1..noop_max (common.environments.envs); "gym" gives the
    # latter.
    backend: str = "vector"


class StopEvent(Protocol):
    """A flag another process or thread sets: a `multiprocessing` or `threading` event."""

    def is_set(self) -> bool: ...


class ShouldStop:
    """True once `stop` is set or the parent process has died (a killed launcher)."""

    def __init__(self, stop: StopEvent | None) -> None:
        self._stop = stop
        self._parent = os.getppid()

    def __call__(self) -> bool:
        return (self._stop is not None and self._stop.is_set()) or os.getppid() != self._parent


class StepInputs(NamedTuple):
    """The policy's inputs besides x_t: whether x_t starts an episode, a_{t-1} and r_{t-1}
    (zeros at an episode start)."""

    reset: np.ndarray
    prev_action: np.ndarray
    prev_reward: np.ndarray

    @classmethod
    def first(cls, batch_size: int) -> "StepInputs":
        return cls(
            np.ones(batch_size, bool),
            np.zeros(batch_size, np.int32),
            np.zeros(batch_size, np.float32),
        )

    @classmethod
    def after(cls, result: envs_lib.StepResult, action: np.ndarray) -> "StepInputs":
        reset = result.terminated | result.truncated
        return cls(
            reset,
            np.where(reset, 0, action).astype(np.int32),
            np.where(reset, 0.0, result.reward).astype(np.float32),
        )


def configure_threads(intra_op: int, inter_op: int = 1) -> bool:
    """TensorFlow thread pools of this process; no-op once TensorFlow has started (e.g. when
    a test runs an actor in its own process). Whether the process now runs with these pools."""
    try:
        tf.config.threading.set_intra_op_parallelism_threads(intra_op)
        tf.config.threading.set_inter_op_parallelism_threads(inter_op)
    except RuntimeError:
        pass
    pools = tf.config.threading
    now = (pools.get_intra_op_parallelism_threads(), pools.get_inter_op_parallelism_threads())
    return now == (intra_op, inter_op)


def keep_on_cpu() -> None:
    """Hides accelerators from this process's TensorFlow (before its first op): actors and the
    evaluator act on the CPU in batches while the learner has the GPU to itself. choice: several
    actor processes would each claim the whole GPU's memory, and one batched call per step on a
    CPU is how the papers' actors run. No-op where TensorFlow has already started (an actor run
    inside a test process)."""
    try:
        tf.config.set_visible_devices([], "GPU")
    except RuntimeError:
        pass


def _wait_for_params(subscriber: parameters.ParamsSubscriber, should_stop, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while not should_stop() and time.monotonic() < deadline:
        latest = subscriber.latest(timeout_ms=1000)
        if latest is not None:
            return latest
        time.sleep(0.2)
    return None


def make_behaviour(
    spec: behaviour_lib.BehaviourSpec | None, settings: ActorSettings, evaluation: bool = False
) -> behaviour_lib.Behaviour | None:
    if spec is None:
        return None
    path = (
        None
        if settings.state_dir is None
        else behaviour_lib.state_path(settings.state_dir, settings.actor_id)
    )
    return behaviour_lib.Behaviour(
        spec, settings.num_envs, settings.seed, path, evaluation, settings.state_save_interval_s
    )


def run_actor(
    settings: ActorSettings,
    make_policy: PolicyFactory,
    pattern: patterns.Pattern,
    replay_address: str,
    behaviour: behaviour_lib.BehaviourSpec | None = None,
    stop: StopEvent | None = None,
    max_steps: int | None = None,
    intra_op_threads: int = 1,
) -> dict:
    """The actor loop (module docstring). Returns counters: steps, params_updates, params_step
    and the raw returns of the games it finished (in order)."""
    configure_threads(intra_op_threads)
    keep_on_cpu()
    os.nice(settings.niceness)
    should_stop = ShouldStop(stop)
    env = envs_lib.make_env(
        settings.env, settings.num_envs, settings.seed, settings.protocol, settings.backend
    )
    policy = make_policy(
        env.num_actions, env.observation_shape, env.observation_dtype, settings.seed, False
    )
    selector = make_behaviour(behaviour, settings)
    client = replay.connect(replay_address, timeout_s=30.0)
    subscriber = parameters.ParamsSubscriber(client, PARAMS_TABLE)
    params_step = -1  # -1: initial weights, no publication seen yet
    latest = _wait_for_params(subscriber, should_stop, settings.wait_for_params_s)
    if latest is not None:
        params_step = latest.step
        policy.set_weights(latest.weights)
    writer = pattern.writer(client, settings.num_envs, settings.flush_timeout_ms)
    reporter = reports.Reporter(
        client,
        settings.num_envs,
        protocols.frames_per_step(settings.env, settings.protocol),
        tasks=multitask.tasks_of(env),
    )
    B = settings.num_envs
    observation = env.reset()
    inputs = StepInputs.first(B)
    state = policy.initial_state(B)
    steps = params_updates = 0
    game_returns: list[float] = []
    game_entropy = GameMean(B)
    try:
        while not should_stop() and (max_steps is None or steps < max_steps):
            params = None if selector is None else selector.params
            action, extras, new_state = policy.step(
                observation, inputs.prev_action, inputs.prev_reward, inputs.reset, state, params
            )
            step_entropy = extras.pop(BEHAVIOUR_ENTROPY, None)
            result = env.step(action)
            record: dict[str, Any] = dict(
                observation=observation,
                **inputs._asdict(),
                action=action,
                reward=result.reward,
                params_step=np.full(B, params_step, np.int64),
                truncation_value=truncation_values(policy, result, action, new_state),
                **extras,
            )
            if params is not None:
                record[BEHAVIOUR] = {name: value.copy() for name, value in params.items()}
            core_state = {CORE_STATE: state} if tf.nest.flatten(state) else None
            _append_until_accepted(
                writer, record, core_state, result.terminated | result.truncated, should_stop
            )
            reporter.step(
                result.episode_return,
                result.episode_length,
                () if params is None else [params[k] for k in sorted(params)],
                None if step_entropy is None else game_entropy.add(step_entropy, result),
            )
            game_returns.extend(result.episode_return[~np.isnan(result.episode_return)])
            if selector is not None:
                selector.end_games(result.episode_return)
            if steps % settings.params_pull_interval == 0 and steps > 0:
                # With IMPALA's interval this follows the append that closed an unroll: it
                # returns once the queue took the unroll, so the pull sees the freshest weights
                # before the next unroll starts (IMPALA §3: "At the beginning of each trajectory").
                latest = subscriber.latest(timeout_ms=1000)
                if latest is not None and latest.step != params_step:
                    params_step = latest.step
                    policy.set_weights(latest.weights)
                    params_updates += 1
            inputs = StepInputs.after(result, action)
            observation = result.observation
            state = new_state
            steps += 1
    finally:
        reporter.heartbeat()
        reporter.close()
        writer.close(timeout_ms=1000)
        if selector is not None:
            selector.save()
        env.close()
    return dict(
        steps=steps,
        params_updates=params_updates,
        params_step=params_step,
        game_returns=game_returns,
    )


class GameMean:
    """A per-step quantity of each env averaged over its game: `add` returns, after a batched
    step, the mean over the steps of each game that ended there (garbage elsewhere)."""

    def __init__(self, num_envs: int) -> None:
        self._sums = np.zeros(num_envs)

    def add(self, values: np.ndarray, result: envs_lib.StepResult) -> np.ndarray:
        self._sums += values
        ended = ~np.isnan(result.episode_return)
        means = self._sums / np.maximum(result.episode_length, 1)
        self._sums[ended] = 0.0
        return means


def truncation_values(
    policy: Policy, result: envs_lib.StepResult, action: np.ndarray, state: Any
) -> np.ndarray:
    """[B] float32 ([B, K] for a policy with `value_heads` K > 1, e.g. one value per network):
    `policy.bootstrap_value` of the final observation where the step was truncated and not
    terminated, else 0 (module docstring). One batched call, only on the rare steps where some
    episode hit the time limit."""
    truncated = result.truncated & ~result.terminated
    heads = getattr(policy, "value_heads", 1)
    shape = truncated.shape if heads == 1 else (*truncated.shape, heads)
    if not truncated.any():
        return np.zeros(shape, np.float32)
    values = policy.bootstrap_value(
        result.final_observation, action.astype(np.int32), result.reward.astype(np.float32), state
    )
    where = truncated if heads == 1 else truncated[:, None]
    return np.where(where, values, 0.0).astype(np.float32)


def _append_until_accepted(writer, record, core_state, episode_end, should_stop) -> None:
    """Appends; while the table is full or rate-limited (learner busy or gone) waits in short
    slices."""
    try:
        writer.append(record, first_step_extras=core_state, episode_end=episode_end)
        return
    except reverb.DeadlineExceededError:
        pass
    while not should_stop():
        try:
            writer.flush(timeout_ms=1000)
            return
        except reverb.DeadlineExceededError:
            continue

"""The evaluator: the agent's policy on the paper's evaluation protocol, in rounds while it trains
and once at the end (docs/architecture.md#data-flow).

`run_evaluator` is the body of a spawned process (`common.launchers.launch`), like
`common.runtime.acting.run_actor`: it takes picklable settings and a picklable policy factory, pulls
the latest published weights before each round, and logs each round's games to eval.csv.
"""

import dataclasses
import os
import time
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from common.control import behaviour as behaviour_lib
from common.environments import envs as envs_lib
from common.environments import env_names
from common.environments import multitask
from common.equations import metrics
from common.replay import replay
from common.replay import parameters
from common.runtime import runlog as run_logging
from common.runtime.acting import (
    StopEvent,
    PARAMS_TABLE,
    PolicyFactory,
    Policy,
    ShouldStop,
    StepInputs,
    configure_threads,
    keep_on_cpu,
)

if TYPE_CHECKING:
    from common.environments import recording


@dataclasses.dataclass(frozen=True)
class EvaluatorSettings:
    """A paper's evaluation protocol plus how often to run it (picklable)."""

    env: str
    protocol: Any  # AtariProtocol of the evaluation (no-ops, cap, sticky, action set)
    num_envs: int  # episodes run side by side
    round_episodes: int  # episodes per periodic round
    final_episodes: int  # episodes of the protocol, run once when training ends
    interval_s: float  # seconds between rounds
    greedy: bool  # the evaluated policy: argmax instead of sampling
    seed: int = 10_000  # choice: evaluation seeds differ from the actors' (seed + i)
    niceness: int = 0  # os.nice increment, as ActorSettings
    # choice: gymnasium's wrappers draw the no-op starts from 1..noop_max raw frames, exactly the
    # protocol the papers evaluate with (e.g. IMPALA §5.3.2: "[1, 30]"); the C++ batch draws
    # 0..noop_max-1 and is only faster, which an evaluator of a few envs does not need.
    backend: str = "gym"
    # Agents with a behaviour selector: the run directory of the controllers' saved state
    # (the first actor's, or the evaluator's own: common.control.behaviour.evaluation_selector).
    state_dir: str | None = None


def evaluate(
    env: envs_lib.BatchedEnv,
    policy: Policy,
    num_episodes: int,
    should_stop: Callable[[], bool] = lambda: False,
    selector: behaviour_lib.Behaviour | None = None,
    recorder: "recording.GameRecorder | None" = None,
) -> list[list[float]]:
    """Raw whole-game scores of `num_episodes` episodes, a list per env.

    Env i contributes its first quota_i episodes (`episode_quotas`: even over the games of a
    multi-task batch, then over their envs), so that short episodes are not over-represented as
    they would be by taking the first to finish.
    `selector` (evaluation mode) gives agents with a behaviour selector their parameters; it
    sees every game that ends, so an "own" selector also learns from the games an env plays
    after its quota is met, while the others finish theirs.
    `recorder` (`common.environments.recording.GameRecorder`) sees the first observations (`begin`,
    with the quotas) and every step's result (`step`), and only reads them.
    """
    B = env.num_envs
    tasks = multitask.tasks_of(env)
    quotas = episode_quotas(num_episodes, np.zeros(B, int) if tasks is None else tasks)
    scores: list[list[float]] = [[] for _ in range(B)]
    observation = env.reset()
    if recorder is not None:
        recorder.begin(quotas, observation)
    inputs = StepInputs.first(B)
    state = policy.initial_state(B)
    while not should_stop() and any(len(s) < q for s, q in zip(scores, quotas)):
        action, _, state = policy.step(
            observation,
            inputs.prev_action,
            inputs.prev_reward,
            inputs.reset,
            state,
            None if selector is None else selector.params,
        )
        result = env.step(action)
        if recorder is not None:
            recorder.step(result)
        for i in np.flatnonzero(~np.isnan(result.episode_return)):
            if len(scores[i]) < quotas[i]:
                scores[i].append(float(result.episode_return[i]))
        if selector is not None:
            selector.end_games(result.episode_return)
        inputs = StepInputs.after(result, action)
        observation = result.observation
    return scores


def episode_quotas(num_episodes: int, tasks: np.ndarray) -> np.ndarray:
    """Episodes per env: `num_episodes` split evenly over the games of `tasks` (the game each env
    plays; the first games one more where it does not divide), then each game's share over its
    envs the same way."""
    quotas = np.zeros(len(tasks), np.int64)
    games = np.unique(tasks)
    for g, game in enumerate(games):
        envs = np.flatnonzero(tasks == game)
        share = num_episodes // len(games) + (g < num_episodes % len(games))
        quotas[envs] = share // len(envs) + (np.arange(len(envs)) < share % len(envs))
    return quotas


def human_normalized_or_nan(env: str, score: float) -> float:
    """HNS in percent (common.equations.metrics), NaN for an env without reference scores (CartPole,
    MinAtar: Atari Breakout's references would misread MinAtar Breakout's scores)."""
    try:
        game = env_names.hns_game(env)
        return float("nan") if game is None else float(metrics.human_normalized_score(game, score))
    except (KeyError, ValueError):
        return float("nan")


class Evaluator:
    """The evaluation protocol's envs, policy, log and behaviour selector: `play` evaluates one
    set of weights (a periodic round, the final protocol, or a checkpoint: `--role=evaluate`)."""

    def __init__(
        self,
        settings: EvaluatorSettings,
        make_policy: PolicyFactory,
        logdir: str,
        behaviour: behaviour_lib.BehaviourSpec | None = None,
        start_time: float | None = None,
    ) -> None:
        self.settings = settings
        self.env = envs_lib.make_env(
            settings.env, settings.num_envs, settings.seed, settings.protocol, settings.backend
        )
        self.policy = make_policy(
            self.env.num_actions,
            self.env.observation_shape,
            self.env.observation_dtype,
            settings.seed,
            settings.greedy,
        )
        # A multi-task batch's games, each evaluated in its environments and logged by name.
        tasks = multitask.tasks_of(self.env)
        self.games = env_names.games(settings.env) if tasks is not None else ()
        self.log = run_logging.EvalLogger(logdir, self.games)
        self.behaviour = behaviour
        self.selector: behaviour_lib.Behaviour | None = None
        self.start_time = time.time() if start_time is None else start_time

    def play(
        self,
        frames: int,
        weights: list[np.ndarray],
        episodes: int,
        should_stop: Callable[[], bool] = lambda: False,
        record: "recording.RecordSettings | None" = None,
    ) -> list[float]:
        """`episodes` games with `weights` (published when the learner had consumed `frames`),
        logged at those frames; returns their scores. `record`
        (`common.environments.recording.RecordSettings`,
        `--record_dir`) writes the first `record.games` of them as GIFs, named with those
        frames and their scores; the games played are the same either way."""
        settings = self.settings
        self.policy.set_weights(weights)
        if self.behaviour is not None:
            self.selector = behaviour_lib.evaluation_selector(
                self.behaviour, settings.num_envs, settings.seed, settings.state_dir, self.selector
            )
        if self.selector is not None:
            self.log.scalars(
                {f"bandits/{k}": v for k, v in self.selector.summary().items()}, frames
            )
        recorder = None
        if record is not None:
            from common.environments import recording

            recorder = recording.GameRecorder(record, settings.env, frames, self.env)
        per_env = evaluate(self.env, self.policy, episodes, should_stop, self.selector, recorder)
        if self.selector is not None:
            self.selector.save()  # "own" controllers only (a frozen selector writes nothing)
        tasks = multitask.tasks_of(self.env)
        games = [
            settings.env if tasks is None else self.games[tasks[i]]
            for i, env_scores in enumerate(per_env)
            for _ in env_scores
        ]
        scores = [score for env_scores in per_env for score in env_scores]
        hns = [human_normalized_or_nan(game, s) for game, s in zip(games, scores)]
        wall_time = time.time() - self.start_time  # one per round: it tells rounds apart
        for score, h, game in zip(scores, hns, games):
            self.log.episode(frames, score, h, wall_time, game)
        if scores:
            self.log.round(frames, scores, hns, games)
        return scores

    def close(self) -> None:
        self.log.close()
        self.env.close()


def run_evaluator(
    settings: EvaluatorSettings,
    make_policy: PolicyFactory,
    replay_address: str,
    logdir: str,
    behaviour: behaviour_lib.BehaviourSpec | None = None,
    stop: StopEvent | None = None,
    finished: StopEvent | None = None,
    start_time: float | None = None,
    intra_op_threads: int = 1,
    record: "recording.RecordSettings | None" = None,
) -> None:
    """Every `interval_s`, evaluates the latest published weights; when `finished` is set (the
    learner reached its budget), runs the full protocol once, recording its first games as GIFs
    with `record` (`common.environments.recording.RecordSettings`, `--record_dir`). Writes eval.csv
    + TensorBoard.
    With a `behaviour` selector, each round draws the games' parameters as `behaviour.evaluation`
    says (`common.control.behaviour.evaluation_selector`)."""
    configure_threads(intra_op_threads)
    keep_on_cpu()
    os.nice(settings.niceness)
    should_stop = ShouldStop(stop)
    evaluator = Evaluator(settings, make_policy, logdir, behaviour, start_time)
    subscriber = parameters.ParamsSubscriber(
        replay.connect(replay_address, timeout_s=30.0), PARAMS_TABLE
    )
    last_round = time.monotonic()  # choice: the first round after one interval, not at start
    try:
        while not should_stop():
            final = finished is not None and finished.is_set()
            if not final and time.monotonic() - last_round < settings.interval_s:
                time.sleep(0.5)
                continue
            latest = subscriber.latest(timeout_ms=5000)
            if latest is None:
                time.sleep(1.0)
                continue
            last_round = time.monotonic()
            episodes = settings.final_episodes if final else settings.round_episodes
            evaluator.play(
                latest.frames,
                latest.weights,
                episodes,
                should_stop,
                record=record if final else None,
            )
            if final:
                break
    finally:
        evaluator.close()

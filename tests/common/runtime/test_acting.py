"""common/runtime/acting.py and evaluation.py: the batched categorical policy, evaluation quotas,
and an actor writing real unrolls to a real Reverb server (in this process, so its records can be
checked exactly)."""

import dataclasses
import os
import threading

import numpy as np
import pytest
import tensorflow as tf

from common.runtime import acting

from common.runtime import evaluation
from common.runtime import agent as agent_lib
from common.environments import envs
from common.environments import protocols
from common.models import networks
from common.replay import patterns
from common.replay import replay
from common.replay import parameters
from common.replay import reports

PROBS = np.array([0.1, 0.2, 0.7])


class FixedLogitsNet(tf.Module):
    """The `ActorCriticNet.step` API with state-independent logits (one variable)."""

    def __init__(self, logits):
        super().__init__()
        self.logits = tf.Variable(np.asarray(logits, np.float32))

    def create_variables(self, observation_shape, observation_dtype):
        pass

    def initial_state(self, batch_size):
        return ()

    def step(self, obs, prev_action, prev_reward, reset, state):
        batch = tf.shape(obs)[0]
        return (tf.broadcast_to(self.logits, [batch, 3]), tf.zeros([batch])), ()


@pytest.mark.parametrize("jit_compile", [False, True])
def test_policy_samples_the_softmax_and_greedy_takes_the_argmax(jit_compile):
    B = 20_000
    obs = np.zeros((B, 1), np.float32)
    args = (obs, np.zeros(B, np.int32), np.zeros(B, np.float32), np.zeros(B, bool), ())
    policy = acting.CategoricalPolicy(
        FixedLogitsNet(np.log(PROBS)), (1,), np.float32, seed=1, jit_compile=jit_compile
    )
    actions, extras, state = policy.step(*args)
    assert actions.dtype == np.int32 and actions.shape == (B,) and state == ()
    frequencies = np.bincount(actions, minlength=3) / B
    np.testing.assert_allclose(frequencies, PROBS, atol=4 * np.sqrt(0.25 / B))
    np.testing.assert_allclose(extras["behaviour_logits"][0], np.log(PROBS), rtol=1e-6)
    assert not np.array_equal(actions, policy.step(*args)[0])  # fresh randomness per call
    greedy = acting.CategoricalPolicy(
        FixedLogitsNet(np.log(PROBS)),
        (1,),
        np.float32,
        seed=1,
        greedy=True,
        jit_compile=jit_compile,
    )
    np.testing.assert_array_equal(greedy.step(*args)[0], 2)


def test_set_weights_checks_count_and_shapes():
    policy = acting.CategoricalPolicy(FixedLogitsNet([0.0, 0.0, 0.0]), (1,), np.float32, seed=0)
    policy.set_weights([np.array([0.0, 5.0, 0.0], np.float32)])
    one = (
        np.zeros((1, 1), np.float32),
        np.zeros(1, np.int32),
        np.zeros(1, np.float32),
        np.zeros(1, bool),
        (),
    )
    np.testing.assert_allclose(policy.step(*one)[1]["behaviour_logits"], [[0.0, 5.0, 0.0]])
    with pytest.raises(ValueError, match="has shape \\(2,\\), expected \\(3,\\)"):
        policy.set_weights([np.zeros(2, np.float32)])
    with pytest.raises(ValueError, match="got 2 weight arrays for 1 variables"):
        policy.set_weights([np.zeros(3, np.float32)] * 2)


class CountdownEnv:
    """Env i's episodes last i + 1 steps and score i + 1 (raw), so scores identify the env."""

    observation_shape, observation_dtype, num_actions = (1,), np.float32, 3

    def __init__(self, num_envs):
        self.num_envs = num_envs
        self._t = np.zeros(num_envs, int)

    def reset(self):
        self._t[:] = 0
        return np.zeros((self.num_envs, 1), np.float32)

    def step(self, actions):
        self._t += 1
        done = self._t == np.arange(1, self.num_envs + 1)
        returns = np.where(done, self._t, np.nan).astype(np.float32)
        self._t[done] = 0
        observation = np.zeros((self.num_envs, 1), np.float32)
        return envs.StepResult(
            observation,
            observation,
            np.ones(self.num_envs),
            np.ones(self.num_envs),
            done,
            np.zeros(self.num_envs, bool),
            returns,
            np.where(done, self._t, 0),
        )


def test_game_mean_averages_each_envs_steps_over_its_own_games():
    """Env 0's games last 2 and 3 steps, env 1's one game 4 steps (a game's length counts the
    step that ended it); the sums restart after each game."""
    from types import SimpleNamespace

    nan = np.nan
    ends = [  # (episode_return, episode_length) per step, per env
        ([nan, nan], [0, 0]),
        ([1.0, nan], [2, 0]),
        ([nan, nan], [0, 0]),
        ([nan, 7.0], [0, 4]),
        ([2.0, nan], [3, 0]),
    ]
    values = np.array([[1.0, 10.0], [3.0, 20.0], [4.0, 30.0], [5.0, 40.0], [9.0, 50.0]])
    mean = acting.GameMean(2)
    got = {}
    for t, ((returns, lengths), value) in enumerate(zip(ends, values)):
        result = SimpleNamespace(episode_return=np.array(returns), episode_length=np.array(lengths))
        means = mean.add(value, result)
        for env in np.flatnonzero(~np.isnan(result.episode_return)):
            got[(t, env)] = means[env]
    assert got == {(1, 0): 2.0, (3, 1): 25.0, (4, 0): 6.0}


def test_evaluate_takes_each_envs_quota_not_the_first_to_finish():
    policy = acting.CategoricalPolicy(FixedLogitsNet(np.log(PROBS)), (1,), np.float32, seed=0)
    per_env = evaluation.evaluate(CountdownEnv(2), policy, num_episodes=5)
    assert [len(scores) for scores in per_env] == [3, 2]
    scores = [score for env_scores in per_env for score in env_scores]
    # Quotas [3, 2]: three 1-step episodes of env 0 and two 2-step episodes of env 1. Taking the
    # first five to finish would give four 1s and one 2.
    assert sorted(scores) == [1, 1, 1, 2, 2]


def test_episode_quotas_are_even_over_the_games_then_over_their_envs():
    # One game: even over the envs, the first ones one more (the quotas above).
    np.testing.assert_array_equal(evaluation.episode_quotas(5, np.zeros(2, int)), [3, 2])
    # Two games of 4 envs each: 6 episodes are 3 a game, not 6 of the first six envs.
    np.testing.assert_array_equal(
        evaluation.episode_quotas(6, np.array([0, 0, 0, 0, 1, 1, 1, 1])), [1, 1, 1, 0, 1, 1, 1, 0]
    )
    # Three games, unevenly split envs (a batch of 7: 3, 2, 2), 10 episodes: 4, 3, 3.
    quotas = evaluation.episode_quotas(10, np.array([0, 0, 0, 1, 1, 2, 2]))
    np.testing.assert_array_equal(quotas, [2, 1, 1, 2, 1, 2, 1])


# --- A real actor on CartPole against a real Reverb server --------------------------------------

UNROLL, NUM_ENVS, MAX_STEPS, PUBLISHED_STEP = 5, 2, 41, 7


LSTM_UNITS = 8


def lstm_policy(num_actions, observation_shape, observation_dtype, seed, greedy):
    net = networks.ActorCriticNet(num_actions, torso="mlp", use_lstm=True, lstm_units=LSTM_UNITS)
    return acting.CategoricalPolicy(net, observation_shape, observation_dtype, seed, greedy)


def queue_agent(make_policy, num_actions, core_state_spec=None):
    return agent_lib.Agent(
        replay=patterns.Queue(length=UNROLL, capacity=100),
        make_policy=make_policy,
        policy_extras=lambda spec: acting.CategoricalPolicy.extras_spec(num_actions),
        make_learner=None,
        core_state_spec=core_state_spec,
    )


def drain_table(client, table):
    size = client.server_info()[table].current_size
    return (
        [
            s.data
            for s in client.sample(
                table, size, emit_timesteps=False, unpack_as_table_signature=True
            )
        ]
        if size
        else []
    )


@pytest.fixture(scope="module")
def actor_run():
    agent = queue_agent(lstm_policy, 2, (tf.TensorSpec([LSTM_UNITS], tf.float32),) * 2)
    server = replay.start_server(agent.tables(agent_lib.EnvSpec(2, (4,), np.float32)))
    address = replay.address_of(server)
    client = replay.connect(address)
    reference = lstm_policy(2, (4,), np.float32, seed=3, greedy=False)
    weights = [v.numpy() for v in reference.network.variables]
    parameters.ParamsPublisher(client, acting.PARAMS_TABLE).publish(PUBLISHED_STEP, 0, weights)
    settings = acting.ActorSettings(
        env="CartPole", num_envs=NUM_ENVS, seed=0, params_pull_interval=10
    )
    counters = acting.run_actor(settings, lstm_policy, agent.replay, address, max_steps=MAX_STEPS)
    items = drain_table(client, patterns.EXPERIENCE_TABLE)
    game_reports = drain_table(client, reports.REPORTS_TABLE)
    server.stop()
    return counters, items, reference, game_reports


def test_actor_writes_overlapping_unrolls_with_consistent_inputs(actor_run):
    counters, items, _, _ = actor_run
    assert counters["steps"] == MAX_STEPS and counters["params_step"] == PUBLISHED_STEP
    # An item every UNROLL steps once UNROLL + 1 steps exist: starts 0, 5, ..., 35 per env.
    assert len(items) == NUM_ENVS * 8
    steps = [item[replay.STEPS] for item in items]
    episodes_ended = 0
    for s in steps:
        assert s["observation"].shape == (UNROLL + 1, 4)
        np.testing.assert_array_equal(s["params_step"], PUBLISHED_STEP)
        for t in range(UNROLL):
            if s["reset"][t + 1]:
                assert s["prev_action"][t + 1] == 0 and s["prev_reward"][t + 1] == 0
                episodes_ended += 1
            else:
                assert s["prev_action"][t + 1] == s["action"][t]
                assert s["prev_reward"][t + 1] == s["reward"][t] == 1.0
    assert episodes_ended > 0  # random CartPole episodes last ~20 steps
    first_steps = {s["observation"][0].tobytes() for s in steps}
    last_steps = [s["observation"][-1].tobytes() for s in steps]
    # Consecutive unrolls overlap by one step: all but the final unroll of each env end where
    # another begins.
    assert sum(last in first_steps for last in last_steps) == len(steps) - NUM_ENVS


def test_learner_unroll_from_the_stored_state_reproduces_the_actor(actor_run):
    # The learner's view of an item (its T+1 steps from the stored core state, with the stored
    # resets and previous actions/rewards) must give back the actor's logits exactly: this checks
    # the published weights, the core state at the unroll start and the recurrent inputs.
    _, items, reference, _ = actor_run
    for item in items:
        s = item[replay.STEPS]
        state = item[replay.FIRST_STEP_EXTRAS][acting.CORE_STATE]
        batch = lambda x: np.asarray(x)[:, None]  # [T+1] -> [T+1, 1]
        (logits, _), _ = reference.network.unroll(
            batch(s["observation"]),
            batch(s["prev_action"]),
            batch(s["prev_reward"]),
            batch(s["reset"]),
            tuple(np.asarray(h)[None] for h in state),
        )
        np.testing.assert_allclose(
            logits.numpy()[:, 0], s["behaviour_logits"], rtol=1e-5, atol=1e-5
        )
    # The first unroll of each env starts from the zero state; later ones do not.
    states = [np.asarray(item[replay.FIRST_STEP_EXTRAS][acting.CORE_STATE][0]) for item in items]
    assert sum(not s.any() for s in states) == NUM_ENVS


def test_actor_reports_each_game_once_and_every_frame_it_produced(actor_run):
    counters, _, _, report_items = actor_run
    # One item per step that finished games, a return per env (NaN where none ended).
    assert all(np.shape(item[1]) == (NUM_ENVS,) for item in report_items)
    game_reports = [report for item in report_items for report in reports.reports_in(item)]
    frames = [report.frames for report in game_reports]
    games = [(r.episode_return, r.episode_length) for r in game_reports if r.is_game]
    # CartPole pays 1 per step, so a game's raw return is its length; each game reported once.
    assert [ret for ret, _ in games] == counters["game_returns"] and games
    assert all(ret == length for ret, length in games)
    # Heartbeats and game reports together carry every frame (CartPole: 1 frame per env step).
    assert sum(frames) == MAX_STEPS * NUM_ENVS


def test_evaluator_runs_the_protocol_on_the_published_weights(tmp_path):
    server = replay.start_server([parameters.params_table(acting.PARAMS_TABLE)])
    address = replay.address_of(server)
    try:
        weights = [v.numpy() for v in lstm_policy(2, (4,), np.float32, 0, False).network.variables]
        # Step 5's weights when the learner had consumed 437 frames: with padded items (only
        # real steps count) a step does not give the frames, so the rows carry the published ones.
        publisher = parameters.ParamsPublisher(replay.connect(address), acting.PARAMS_TABLE)
        publisher.publish(5, 437, weights)
        settings = evaluation.EvaluatorSettings(
            env="CartPole",
            protocol="impala",
            num_envs=3,
            round_episodes=2,
            final_episodes=7,
            interval_s=1e9,
            greedy=False,
        )
        finished = threading.Event()
        finished.set()  # training is over: one run of the full protocol, then return
        evaluation.run_evaluator(settings, lstm_policy, address, str(tmp_path), finished=finished)
    finally:
        server.stop()
    rows = open(tmp_path / "eval.csv").read().splitlines()
    assert rows[0] == "frames,episode_return,hns,wall_time"
    assert len(rows) == 1 + 7
    for row in rows[1:]:
        frames, episode_return, hns, _ = row.split(",")
        assert frames == "437" and float(episode_return) >= 8 and hns == "nan"
    assert os.listdir(tmp_path / "eval")  # TensorBoard events


# --- Time-limit truncation: the actor stores V(x_final) for the learner's bootstrap ------------

CAP_STEPS, TRUNCATION_RUN_STEPS = 6, 26  # Pong capped at 6 agent steps: truncations at 5, 11, ..


def shallow_policy(num_actions, observation_shape, observation_dtype, seed, greedy):
    net = networks.ActorCriticNet(num_actions, torso="shallow", use_lstm=False)
    return acting.CategoricalPolicy(net, observation_shape, observation_dtype, seed, greedy)


def test_actor_stores_the_value_of_the_final_observation_where_time_ran_out():
    protocol = dataclasses.replace(
        protocols.PROTOCOLS["impala"], noop_max=0, max_episode_frames=4 * CAP_STEPS
    )
    agent = queue_agent(shallow_policy, 6)
    server = replay.start_server(agent.tables(agent_lib.EnvSpec(6, (84, 84, 4), np.uint8)))
    try:
        address = replay.address_of(server)
        client = replay.connect(address)
        reference = shallow_policy(6, (84, 84, 4), np.uint8, seed=0, greedy=False)
        parameters.ParamsPublisher(client, acting.PARAMS_TABLE).publish(
            1, 0, [v.numpy() for v in reference.network.variables]
        )
        settings = acting.ActorSettings(
            env="Pong", num_envs=1, seed=5, params_pull_interval=100, protocol=protocol
        )
        acting.run_actor(
            settings, shallow_policy, agent.replay, address, max_steps=TRUNCATION_RUN_STEPS
        )
        items = [item[replay.STEPS] for item in drain_table(client, patterns.EXPERIENCE_TABLE)]
    finally:
        server.stop()
    # One env: the FIFO items are consecutive unrolls of one stream.
    stream = {
        key: np.concatenate([np.asarray(item[key])[:UNROLL] for item in items])
        for key in ("action", "truncation_value", "reset")
    }
    assert len(stream["action"]) == TRUNCATION_RUN_STEPS - 1
    # Replay the same game with the same actions to recover each final observation.
    env = envs.make_env("Pong", 1, settings.seed, protocol)
    env.reset()
    truncated_steps = []
    for t, action in enumerate(stream["action"]):
        result = env.step(action[None])
        if result.truncated[0]:
            truncated_steps.append(t)
            (_, value), _ = reference.network.step(
                result.final_observation, action[None], result.reward, np.zeros(1, bool), ()
            )
            assert stream["truncation_value"][t] != 0.0
            np.testing.assert_allclose(
                stream["truncation_value"][t], value.numpy()[0], rtol=1e-5, atol=1e-6
            )
    env.close()
    assert truncated_steps == [5, 11, 17, 23]
    np.testing.assert_array_equal(np.flatnonzero(stream["reset"][1:]), truncated_steps)
    others = np.setdiff1d(np.arange(len(stream["action"])), truncated_steps)
    np.testing.assert_array_equal(stream["truncation_value"][others], 0.0)

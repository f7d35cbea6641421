"""The Reactor train step: compiled equals eager, the target network is copied every
`target_update_period` steps and never otherwise, IS weights come from Reverb's probabilities,
priorities are written with the uniform-mixing fold, and the new-key estimate is the
Horvitz-Thompson mean of the first-sampled keys (`lazy`) or of all (`lazy_global`), as the numpy
twin `reactor.priorities.PriorityEstimates` computes it. The written priorities are §3.3's, computed
again in numpy from the same batch and the networks' outputs."""

import numpy as np
import pytest
import tensorflow as tf

from reactor import config as config_lib
from reactor import learning
from reactor import networks
from reactor import priorities
from tests import oracles

T, B, A = 6, 3, 2


def make_config(**overrides):
    values = dict(config_lib.CARTPOLE_OVERRIDES, env="CartPole", sequence_length=T + 1)
    values.update(overrides)
    return config_lib.ReactorConfig(**values).validate()


def make_batch(seed=0, learner_step=0):
    rng = np.random.default_rng(seed)
    mu = rng.dirichlet(np.ones(A), size=(T + 1, B)).astype(np.float32)
    reset = np.zeros((T + 1, B), bool)
    reset[3, 1] = True  # an episode starts inside one sequence
    return {
        "observation": tf.constant(rng.normal(size=(T + 1, B, 4)), tf.float32),
        "reset": tf.constant(reset),
        "action": tf.constant(rng.integers(A, size=(T + 1, B)), tf.int32),
        "reward": tf.constant(rng.integers(0, 2, size=(T + 1, B)), tf.float32),
        "truncation_value": tf.zeros([T + 1, B]),
        "behaviour_probs": tf.constant(mu),
        "core_state": tuple(tf.constant(rng.normal(size=(B, 128)), tf.float32) for _ in range(4)),
        "info": {
            "probability": tf.constant([0.01, 0.02, 0.005], tf.float64),
            "table_size": tf.constant([100, 100, 100], tf.int64),
            "times_sampled": tf.constant([1, 3, 1], tf.int32),  # keys 0 and 2 were unassigned
        },
        "learner_step": tf.constant(learner_step, tf.int64),
    }


def make_parts(config, seed=0):
    tf.random.set_seed(seed)
    network = networks.make_network(config, A)
    target = networks.make_network(config, A)
    for net in (network, target):
        net.create_variables((4,), tf.float32)
    learning.copy_variables(network, target)
    optimizer = learning.make_optimizer(config)
    state = learning.PriorityState()
    step = learning.make_train_step(network, target, optimizer, state, config)
    return network, target, state, step


def weights(net):
    return [v.numpy().copy() for v in net.variables]


@pytest.mark.parametrize("overrides", [{}, dict(distributional=False, policy_gradient="tislr")])
def test_compiled_step_equals_eager(overrides):
    config = make_config(**overrides)
    compiled = make_parts(config)
    eager = make_parts(config)
    before = weights(compiled[0])
    for i in range(2):  # the same initial weights in both
        learning.copy_variables(compiled[i], eager[i])
    for i in range(2):
        batch = make_batch(seed=i, learner_step=i)
        stats_c = compiled[3](batch, tf.constant(0, tf.int64))
        stats_e = eager[3].python_function(batch, tf.constant(0, tf.int64))
        np.testing.assert_allclose(stats_c["loss/total"], stats_e["loss/total"], rtol=1e-4)
        np.testing.assert_allclose(stats_c["priorities"], stats_e["priorities"], rtol=1e-4)
    # Adam with beta1 = 0 moves each weight by about lr * sign(g) per step, so an element whose
    # gradient is ~0 can step either way under XLA's and eager's rounding: every element agrees
    # to within those two steps, and all but a few in 10^3 to 1e-5.
    compiled_weights, eager_weights = weights(compiled[0]), weights(eager[0])
    for a, b in zip(compiled_weights, eager_weights):
        np.testing.assert_allclose(a, b, atol=2 * 2 * config.learning_rate)
    differing = sum(np.sum(np.abs(a - b) > 1e-5) for a, b in zip(compiled_weights, eager_weights))
    assert differing <= 1e-3 * sum(a.size for a in compiled_weights)
    assert any(np.any(a != b) for a, b in zip(before, compiled_weights))  # it learned


def test_target_network_copied_every_period_only():
    config = make_config(target_update_period=3)
    network, target, _, step = make_parts(config)
    initial = weights(target)
    for learner_step in range(5):
        step(make_batch(learner_step, learner_step), tf.constant(0, tf.int64))
        updates = learner_step + 1
        if updates == 3:
            copied = weights(network)
            for a, b in zip(weights(target), copied):
                np.testing.assert_array_equal(a, b)
        elif updates < 3:
            for a, b in zip(weights(target), initial):
                np.testing.assert_array_equal(a, b)
        else:  # updates 4, 5: the copy of step 3, while the online net moved on
            for a, b in zip(weights(target), copied):
                np.testing.assert_array_equal(a, b)
            assert any(np.any(a != b) for a, b in zip(weights(network), copied))


def test_importance_weights_use_reverb_s_probability():
    info = make_batch()["info"]
    np.testing.assert_allclose(
        learning.importance_weights(info, 1.0, normalise=False), [1.0, 0.5, 2.0]
    )
    np.testing.assert_allclose(
        learning.importance_weights(info, 1.0, normalise=True),
        priorities.importance_weights([0.01, 0.02, 0.005], 100),
    )


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def numpy_priorities(config, network, target, batch) -> np.ndarray:
    """[B] Reactor §3.3 (footnote 3, no ½; docs/papers/reactor.md#equations-in-code) in numpy:
    each sequence's priority is the mean over its steps of the total variation
    sum_i |q*_i(x_t, a_t) - q_i(x_t, a_t)| between the Distributional Retrace target (from the
    target network's distributions and pi, tests/oracles.py) and the online network's
    prediction for the taken action. Only the two networks' outputs come from TensorFlow."""
    state = tuple(batch["core_state"])  # replay_lstm_state="stored"
    online, _ = network.unroll(batch["observation"][:-1], batch["reset"][:-1], state)
    trace, _ = target.unroll(batch["observation"], batch["reset"], state)
    online_q = softmax(online.q.numpy().astype(np.float64))  # [T, B, A, N]
    target_q = softmax(trace.q.numpy().astype(np.float64))  # [T+1, B, A, N]
    pi = trace.policy_probs.numpy().astype(np.float64)  # trace_policy="target"
    actions = batch["action"].numpy()
    mu = np.take_along_axis(batch["behaviour_probs"].numpy()[:-1], actions[:-1, :, None], -1)
    rewards = np.clip(batch["reward"].numpy()[:-1], -1.0, 1.0)  # reward_shaping="clip"
    discounts = config.discount * (1.0 - batch["reset"].numpy()[1:])  # no bootstrap into resets
    z = config.v_min + np.arange(config.num_atoms) * (
        (config.v_max - config.v_min) / (config.num_atoms - 1)
    )
    priorities = []
    for b in range(B):
        q_star = oracles.distributional_retrace_sum(
            rewards[:, b],
            discounts[:, b],
            actions[:-1, b],
            mu[:, b, 0],
            pi[:, b],
            target_q[:, b],
            z,
            config.retrace_lambda,
        )
        predicted = online_q[np.arange(T), b, actions[:-1, b]]
        priorities.append(np.abs(q_star - predicted).sum(-1).mean())
    return np.array(priorities)


@pytest.mark.parametrize("prioritisation", ["lazy", "lazy_global"])
def test_written_priorities_and_new_key_estimate(prioritisation):
    config = make_config(
        prioritisation=prioritisation, priority_estimate_rate=1.0, replay_uniform_epsilon=0.1
    )
    assert config.trace_policy == "target" and config.replay_lstm_state == "stored"
    assert config.reward_shaping == "clip" and config.priority_exponent == 1.0
    network, target, state, step = make_parts(config)
    batch = make_batch()
    expected = numpy_priorities(config, network, target, batch)  # before the step's update
    stats = step(batch, tf.constant(0, tf.int64))
    # The priority of each sequence, floored, then folded with the uniform mixing.
    raw = stats["priority/mean"].numpy()
    assert stats["priority/first_sampled"].numpy() == pytest.approx(2 / 3)
    mean = state.mean_weight.numpy()  # rate 1: this batch's Horvitz-Thompson mean
    folded = np.asarray(stats["priorities"])
    unfolded = folded - 0.1 / 0.9 * mean
    np.testing.assert_allclose(unfolded, expected + config.priority_floor, rtol=1e-4, atol=1e-5)
    assert np.all(unfolded > 0) and unfolded.mean() == pytest.approx(raw, rel=1e-4)
    probabilities = [0.01, 0.02, 0.005]
    assert mean == pytest.approx(
        priorities.horvitz_thompson_mean(unfolded, probabilities, 100), rel=1e-4
    )
    # lazy: the new-key estimate is the mean over the two first-sampled keys; lazy_global: over
    # all three; either plus the uniform share 0.1 / 0.9 * mean.
    first = [0, 2]
    level = (
        priorities.horvitz_thompson_mean(unfolded[first], np.take(probabilities, first), 100)
        if prioritisation == "lazy"
        else mean
    )
    assert state.insert_priority.numpy() == pytest.approx(level + 0.1 / 0.9 * mean, rel=1e-4)


@pytest.mark.parametrize("prioritisation", config_lib.PRIORITISATIONS)
@pytest.mark.parametrize("exponent", [1.0, 0.5])
def test_priority_state_follows_its_numpy_twin(prioritisation, exponent):
    """`update_priority_state` (TensorFlow, in the train step) and `PriorityEstimates` (numpy, in
    the benchmark and the Reverb test) write the same priorities and publish the same estimate
    over batches with and without first samples."""
    config = make_config(
        prioritisation=prioritisation,
        priority_exponent=exponent,
        priority_estimate_rate=0.3,
        replay_uniform_epsilon=0.05,
    )
    state = learning.PriorityState()
    twin = priorities.PriorityEstimates(prioritisation, 0.05, 0.3, exponent)
    rng = np.random.default_rng(0)
    for i in range(6):
        new = rng.uniform(0.01, 4.0, size=4)
        info = {
            "probability": rng.uniform(0.001, 0.02, size=4),
            "table_size": np.full(4, 300, np.int64),
            "times_sampled": np.array([1, 2, 1, 5] if i % 3 else [2, 2, 3, 4], np.int32),
        }
        written = learning.update_priority_state(
            state,
            tf.constant(new, tf.float32),
            {k: tf.constant(v) for k, v in info.items()},
            config,
        )
        expected = twin.update(
            new, info["probability"], info["table_size"], info["times_sampled"] == 1
        )
        np.testing.assert_allclose(written, expected, rtol=1e-5)
        assert state.insert_priority.numpy() == pytest.approx(twin.insert_priority, rel=1e-5)
        assert state.mean_weight.numpy() == pytest.approx(twin.mean_weight, rel=1e-5)


def test_max_priority_and_uniform_variants():
    _, _, state, step = make_parts(make_config(prioritisation="max"))
    stats = step(make_batch(), tf.constant(0, tf.int64))
    assert state.insert_priority.numpy() == pytest.approx(
        max(1.0, float(np.max(stats["priorities"])))
    )
    _, _, state, step = make_parts(make_config(prioritisation="uniform"))
    stats = step(make_batch(), tf.constant(0, tf.int64))
    assert state.insert_priority.numpy() == 1.0  # nothing to estimate: sampling is uniform
    # Written as they are: priority ** 0 samples uniformly whatever they are.
    assert np.mean(stats["priorities"]) == pytest.approx(float(stats["priority/mean"]), rel=1e-5)


def test_zero_lstm_state_ignores_the_stored_state():
    batch = make_batch()
    changed = dict(batch, core_state=tuple(s * 0 + 5 for s in batch["core_state"]))
    losses = {}
    for mode in ("zero", "stored"):
        config = make_config(replay_lstm_state=mode)
        network, target, _, step = make_parts(config)
        values = []
        for b in (batch, changed):
            copy = make_parts(config)
            learning.copy_variables(network, copy[0])
            learning.copy_variables(target, copy[1])
            values.append(float(copy[3].python_function(b, tf.constant(0, tf.int64))["loss/total"]))
        losses[mode] = values
    assert losses["zero"][0] == pytest.approx(losses["zero"][1], rel=1e-6)
    assert losses["stored"][0] != pytest.approx(losses["stored"][1], rel=1e-3)

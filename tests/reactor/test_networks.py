"""Table 3's network against Tests 10-12 of docs/papers/reactor.md#worked-test-numbers: shapes,
908,235 parameters, the policy's uniform mixing, the dueling head's invariances and §3.4.1's
gradient blocking."""

import numpy as np
import pytest
import tensorflow as tf

from reactor import networks


@pytest.fixture(scope="module")
def net():
    network = networks.ReactorNet(18, 51)
    network.create_variables((84, 84, 1))
    return network


def count(network) -> int:
    return sum(int(np.prod(v.shape)) for v in network.trainable_variables)


def test_parameter_counts():
    for actions, expected in ((18, 908_235), (4, 860_915), (6, 867_675)):
        network = networks.ReactorNet(actions, 51)
        network.create_variables((84, 84, 1))
        assert count(network) == expected


def test_minatar_torso_is_one_relu_convolution_under_the_shared_layer():
    # MinAtar's conv 3x3/1 x16 (10 -> 8, ReLU) on unscaled 0/1 channels, then Table 3's shared
    # linear 128 + CReLU: 4*9*16 + 16 = 592 and 1,024*128 + 128 = 131,200 parameters.
    network = networks.ReactorNet(6, 51, torso="minatar")
    network.create_variables((10, 10, 4))
    (conv,) = network.convs
    assert conv.kernel.shape == (3, 3, 4, 16) and network.shared.kernel.shape == (1024, 128)
    obs = np.random.default_rng(3).integers(0, 2, (5, 10, 10, 4)).astype(np.uint8)
    hidden = tf.nn.relu(conv(tf.cast(obs, tf.float32)))  # no 1/255 scaling
    shared = network.shared(tf.reshape(hidden, [5, -1]))
    expected = tf.concat([tf.nn.relu(shared), tf.nn.relu(-shared)], -1)
    np.testing.assert_allclose(network.features(obs), expected, rtol=1e-6, atol=1e-6)
    assert count(network) - count_without_torso(network) == 592 + 131_200


def count_without_torso(network) -> int:
    torso = [*network.convs, network.shared]
    torso_ids = {id(v) for layer in torso for v in layer.trainable_variables}
    return sum(int(np.prod(v.shape)) for v in network.trainable_variables if id(v) not in torso_ids)


def test_shapes_and_distributions(net):
    obs = tf.random.uniform([3, 2, 84, 84, 1], 0, 255, tf.int32)
    x = tf.cast(obs, tf.uint8)
    features = net.features(tf.reshape(x, [-1, 84, 84, 1]))
    assert features.shape == (6, 256)
    conv = tf.zeros([1, 84, 84, 1])
    shapes = []
    for layer in net.convs:
        conv = layer(conv)
        shapes.append(tuple(conv.shape[1:]))
        conv = networks.crelu(conv)
    assert shapes == [(20, 20, 16), (9, 9, 32), (7, 7, 32)]
    outputs, state = net.unroll(x, tf.zeros([3, 2], tf.bool), net.initial_state(2))
    assert outputs.policy_probs.shape == (3, 2, 18)
    assert outputs.q.shape == (3, 2, 18, 51)
    assert [s.shape for s in state] == [(2, 128)] * 4
    np.testing.assert_allclose(tf.reduce_sum(outputs.policy_probs, -1), 1.0, atol=1e-6)
    assert np.all(outputs.policy_probs.numpy() >= 0.01 / 18 - 1e-8)
    np.testing.assert_allclose(tf.reduce_sum(net.q_probs(outputs.q), -1), 1.0, atol=1e-5)


def test_unroll_equals_steps_and_resets_zero_the_state(net):
    x = tf.cast(tf.random.uniform([4, 2, 84, 84, 1], 0, 255, tf.int32), tf.uint8)
    reset = tf.constant([[False, False], [False, True], [False, False], [True, False]])
    state = tuple(tf.random.normal([2, 128]) for _ in range(4))
    unrolled, final = net.unroll(x, reset, state)
    for t in range(4):
        stepped, state = net.step(x[t], reset[t], state)
        np.testing.assert_allclose(stepped.q, unrolled.q[t], atol=1e-4)
        np.testing.assert_allclose(stepped.policy_probs, unrolled.policy_probs[t], atol=1e-5)
    for a, b in zip(state, final):
        np.testing.assert_allclose(a, b, atol=1e-5)
    # A reset forgets the state: the output equals a fresh start's.
    fresh, _ = net.step(x[1, 1:], tf.constant([True]), net.initial_state(1))
    np.testing.assert_allclose(fresh.q[0], unrolled.q[1, 1], atol=1e-4)


def test_policy_mixing_test_10():
    net = networks.ReactorNet(18, 51, policy_epsilon=0.01)
    one_hot = net.policy_epsilon / 18 + (1 - net.policy_epsilon) * np.eye(18)[0]
    assert one_hot[0] == pytest.approx(0.990556, abs=1e-6)
    assert one_hot[1] == pytest.approx(0.000556, abs=1e-6)


def test_dueling_head_invariances_test_12(net):
    hidden = tf.random.normal([2, 128])
    q = net.heads(hidden, hidden).q
    bias = net.advantage_out.bias
    original = bias.numpy()
    try:
        # The same per-bin vector added to every action's advantage logits changes nothing.
        bias.assign(original + np.tile(np.random.randn(51).astype(np.float32), 18))
        np.testing.assert_allclose(net.q_probs(net.heads(hidden, hidden).q), net.q_probs(q), 1e-5)
    finally:
        bias.assign(original)
    value_bias = net.value_out.bias
    value_original = value_bias.numpy()
    try:
        value_bias.assign(value_original + 3.0)  # a constant on all value logits
        np.testing.assert_allclose(net.q_probs(net.heads(hidden, hidden).q), net.q_probs(q), 1e-5)
    finally:
        value_bias.assign(value_original)
    probs = net.q_probs(q).numpy()
    np.testing.assert_allclose(probs, tf.nn.softmax(q).numpy(), rtol=1e-6)


def _names(variables):
    return {v.name for v in variables}


def test_gradient_blocking(net):
    x = tf.cast(tf.random.uniform([3, 2, 84, 84, 1], 0, 255, tf.int32), tf.uint8)
    reset = tf.zeros([3, 2], tf.bool)
    with tf.GradientTape(persistent=True) as tape:
        outputs, _ = net.unroll(x, reset, net.initial_state(2))
        policy_loss = tf.reduce_sum(tf.math.log(outputs.policy_probs) * tf.random.normal([18]))
        critic_loss = tf.reduce_sum(outputs.q * tf.random.normal([51]))
    policy_side = (
        net.policy_core.trainable_variables
        + net.policy_hidden.trainable_variables
        + net.policy_out.trainable_variables
    )
    critic_side = [v for v in net.trainable_variables if v.name not in _names(policy_side)]
    for var, grad in zip(critic_side, tape.gradient(policy_loss, critic_side)):
        assert grad is None or not np.any(grad.numpy()), var.name  # torso, shared, Q side
    for var, grad in zip(policy_side, tape.gradient(critic_loss, policy_side)):
        assert grad is None or not np.any(grad.numpy()), var.name
    # ... while each loss does reach its own side.
    assert all(g is not None for g in tape.gradient(policy_loss, policy_side))
    assert all(g is not None for g in tape.gradient(critic_loss, critic_side))


def test_nd_head_is_scalar_dueling():
    net = networks.ReactorNet(4, distributional=False, torso="mlp")
    net.create_variables((4,), tf.float32)
    outputs, _ = net.step(tf.zeros([2, 4]), tf.ones([2], tf.bool), net.initial_state(2))
    assert outputs.q.shape == (2, 4)
    assert net.q_values(outputs.q, None) is outputs.q


def test_stacked_cores_equal_the_two_keras_cells(net):
    # The unroll steps both LSTMs as one stacked computation (hoisted input projections, one
    # batched matmul a step); it must be the two Keras LSTMCells it takes its weights from,
    # with the policy LSTM's input stop-gradient, values and gradients alike.
    rng = np.random.default_rng(5)
    x = tf.cast(rng.integers(0, 256, [3, 2, 84, 84, 1]), tf.uint8)
    reset = tf.constant([[False, True], [False, False], [True, False]])
    state = tuple(tf.constant(rng.normal(size=[2, 128]), tf.float32) for _ in range(4))
    weights = [*net.policy_core.trainable_variables, *net.q_core.trainable_variables]
    weights += net.shared.trainable_variables

    def keras_cells():
        features = tf.reshape(net.features(tf.reshape(x, [6, 84, 84, 1])), [3, 2, 256])
        policy, q, hidden = state[:2], state[2:], []
        for t in range(3):
            keep = 1.0 - tf.cast(reset[t], tf.float32)[:, None]
            policy = [s * keep for s in policy]
            q = [s * keep for s in q]
            policy_h, policy = net.policy_core(tf.stop_gradient(features[t]), policy)
            q_h, q = net.q_core(features[t], q)
            hidden.append((policy_h, q_h))
        return net.heads(tf.stack([h[0] for h in hidden]), tf.stack([h[1] for h in hidden]))

    def outputs_and_gradients(unroll):
        with tf.GradientTape() as tape:
            outputs = unroll()
            loss = tf.reduce_sum(outputs.q * tf.sin(tf.range(51.0)))
            loss += tf.reduce_sum(tf.math.log(outputs.policy_probs))
        return outputs, tape.gradient(loss, weights)

    expected, expected_grads = outputs_and_gradients(keras_cells)
    outputs, grads = outputs_and_gradients(lambda: net.unroll(x, reset, state)[0])
    np.testing.assert_allclose(outputs.q, expected.q, atol=1e-5)
    np.testing.assert_allclose(outputs.policy_probs, expected.policy_probs, atol=1e-6)
    for grad, want, var in zip(grads, expected_grads, weights):
        np.testing.assert_allclose(grad, want, rtol=1e-4, atol=1e-4, err_msg=var.name)

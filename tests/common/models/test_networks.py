"""Tests for common/models/networks.py: parameter counts (IMPALA Fig. 3 and Test 14 of
docs/papers/impala.md#worked-test-numbers), shapes, unroll == step, LSTM reset semantics,
compiled == eager, gradient flow."""

import numpy as np
import pytest
import tensorflow as tf

from common.settings import config
from common.models import networks
from common.models import recurrent
from common.models.networks import (
    ActorCriticNet,
    DeepTorso,
    MinAtarTorso,
    ShallowTorso,
    instruction_tokens,
)

ATARI = (84, 84, 4)
DMLAB = (72, 96, 3)  # IMPALA Table D.3: RGB 72x96


def _count(variables):
    return sum(int(np.prod(v.shape)) for v in variables)


def _built(observation_shape, dtype=tf.uint8, **kwargs):
    net = ActorCriticNet(**kwargs)
    net.create_variables(observation_shape, dtype, instruction_length=4)
    return net


@pytest.mark.parametrize(
    "kwargs, observation_shape, expected",
    [
        # docs/papers/impala.md#worked-test-numbers (Test 14): DMLab nets with the language channel
        # (1,000 hash buckets), 9 actions; Fig. 3's "1.2 million" and "1.6 million".
        (dict(num_actions=9, torso="shallow", instruction_vocab=1000), DMLAB, 1_230_426),
        (dict(num_actions=9, torso="deep", instruction_vocab=1000), DMLAB, 1_628_010),
        # Test 14: Atari deep feed-forward net (IMPALA §5.3.2: no LSTM), 18 actions.
        (dict(num_actions=18, torso="deep", use_lstm=False), ATARI, 1_094_115),
        # docs/papers/dice.md#worked-test-numbers (Test 15): IMPALA-deep + LSTM-256 with previous
        # action and reward inputs.
        (dict(num_actions=18, torso="deep"), ATARI, 1_638_883),
        # ... with LBC's Dense 512-ReLU heads (R2D2/Agent57 style, our reading of LBC App. L;
        # docs/papers/lbc.md#departures-from-the-paper): linear heads (4,883) replaced by
        # policy 256*512+512 + 512*18+18 and value 256*512+512 + 512+1 (272,915).
        (dict(num_actions=18, torso="deep", head_hidden=512), ATARI, 1_906_915),
        # IMPALA §5.3.2's "three convolutional layers" read as DQN's Nature net, about 1.69M: Nature
        # torso 8,224 + 32,832 + 36,928 conv, 3136*512+512 FC, heads 512*18+18 + 512+1.
        (dict(num_actions=18, torso="nature", use_lstm=False), ATARI, 1_693_875),
    ],
)
def test_parameter_counts_match_the_specs(kwargs, observation_shape, expected):
    assert _count(_built(observation_shape, **kwargs).trainable_variables) == expected


def test_torso_layouts():
    # Shallow convs 11,312 params, flatten 2,240 (7x10x32); deep convs 97,600,
    # flatten 3,456 (9x12x32) from 72x96 -> 36x48 -> 18x24 -> 9x12; Atari 84 -> 11: 3,872.
    shallow, deep, atari = ShallowTorso(), DeepTorso(), DeepTorso()
    shallow(tf.zeros([1, *DMLAB], tf.uint8))
    deep(tf.zeros([1, *DMLAB], tf.uint8))
    atari(tf.zeros([1, *ATARI], tf.uint8))
    convs = lambda torso: [m for m in torso.submodules if isinstance(m, tf.keras.layers.Conv2D)]
    assert _count(v for c in convs(shallow) for v in c.trainable_variables) == 11_312
    assert _count(v for c in convs(deep) for v in c.trainable_variables) == 97_600
    assert len(convs(deep)) == 15  # Fig. 3 caption: 15 conv layers
    assert shallow._fc.kernel.shape == (2_240, 256)
    assert deep._fc.kernel.shape == (3_456, 256)
    assert atari._fc.kernel.shape == (3_872, 256)


def test_minatar_torso_is_the_published_network_on_unscaled_channels():
    # The MinAtar examples' torso: conv 3x3/1 x16 VALID (10x10 -> 8x8x16 = 1,024), ReLU, FC 128,
    # ReLU; Breakout's 4 channels: 4*9*16 + 16 = 592 conv + 1,024*128 + 128 = 131,200 FC.
    torso = MinAtarTorso()
    rng = np.random.default_rng(7)
    obs = rng.integers(0, 2, (3, 10, 10, 4)).astype(np.uint8)
    features = torso(obs).numpy()
    assert features.shape == (3, 128) and torso.output_units == 128
    assert _count(torso.trainable_variables) == 592 + 131_200
    conv, fc = torso._convs[0], torso._fc
    kernel, bias = conv.kernel.numpy(), conv.bias.numpy()
    x = obs.astype(np.float64)  # binary channels enter as 0 / 1, not / 255
    hidden = np.zeros((3, 8, 8, 16))
    for i in range(8):
        for j in range(8):
            patch = x[:, i : i + 3, j : j + 3, :]
            hidden[:, i, j] = np.einsum("bhwc,hwcf->bf", patch, kernel) + bias
    flat = np.maximum(hidden, 0).reshape(3, -1)
    expected = np.maximum(flat @ fc.kernel.numpy() + fc.bias.numpy(), 0)
    np.testing.assert_allclose(features, expected, rtol=1e-5, atol=1e-5)


def _inputs(rng, T, B, num_actions, observation_shape=ATARI, reset_prob=0.3):
    obs = rng.integers(0, 256, (T, B, *observation_shape)).astype(np.uint8)
    prev_action = rng.integers(0, num_actions, (T, B)).astype(np.int32)
    prev_reward = rng.normal(0, 2, (T, B)).astype(np.float32)  # crosses the [-1, 1] clip
    reset = rng.random((T, B)) < reset_prob
    return obs, prev_action, prev_reward, reset


def _random_state(rng, B, units=256):
    return tuple(tf.constant(rng.normal(0, 1, (B, units)), tf.float32) for _ in range(2))


def test_step_and_unroll_shapes():
    net = _built(ATARI, num_actions=6, torso="deep")
    state = net.initial_state(3)
    assert [s.shape for s in state] == [(3, 256), (3, 256)]
    obs, a, r, reset = _inputs(np.random.default_rng(0), 5, 3, 6)
    (logits, value), new_state = net.step(obs[0], a[0], r[0], reset[0], state)
    assert logits.shape == (3, 6) and value.shape == (3,)
    assert [s.shape for s in new_state] == [(3, 256), (3, 256)]
    (logits, values), final = net.unroll(obs, a, r, reset, state)
    assert logits.shape == (5, 3, 6) and values.shape == (5, 3)
    assert [s.shape for s in final] == [(3, 256), (3, 256)]


def test_feed_forward_net_has_no_state_and_ignores_previous_action_and_reward():
    net = _built(ATARI, num_actions=6, torso="deep", use_lstm=False)  # IMPALA §5.3.2
    assert net.initial_state(2) == ()
    obs, a, r, reset = _inputs(np.random.default_rng(1), 4, 2, 6)
    (logits, values), final = net.unroll(obs, a, r, reset, ())
    (logits2, values2), _ = net.unroll(obs, (a + 1) % 6, r + 3, ~reset, ())
    assert final == () and logits.shape == (4, 2, 6)
    np.testing.assert_array_equal(logits, logits2)
    np.testing.assert_array_equal(values, values2)


@pytest.mark.parametrize(
    "torso, observation_shape, dtype",
    [("deep", ATARI, np.uint8), ("minatar", (10, 10, 4), np.uint8), ("mlp", (4,), np.float32)],
)
def test_unroll_equals_a_loop_of_steps(torso, observation_shape, dtype):
    # Time folding (IMPALA §3.1): the torso on [T*B, ...] and the scanned core equal T separate
    # steps, including resets in the middle of the unroll and a non-zero initial state.
    rng = np.random.default_rng(2)
    net = _built(observation_shape, tf.as_dtype(dtype), num_actions=5, torso=torso)
    obs, a, r, reset = _inputs(rng, 6, 3, 5, observation_shape)
    obs = obs.astype(dtype) if dtype == np.uint8 else rng.normal(0, 1, obs.shape).astype(dtype)
    if torso == "minatar":
        obs %= 2  # binary channels
    state = _random_state(rng, 3)
    (logits, values), final = net.unroll(obs, a, r, reset, state)
    step_state = state
    for t in range(6):
        (step_logits, step_value), step_state = net.step(obs[t], a[t], r[t], reset[t], step_state)
        np.testing.assert_allclose(logits[t], step_logits, atol=1e-5)
        np.testing.assert_allclose(values[t], step_value, atol=1e-5)
    for s, s_step in zip(final, step_state):
        np.testing.assert_allclose(s, s_step, atol=1e-5)


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_the_core_is_the_keras_lstm_cell_it_takes_its_weights_from(precision):
    # The unroll projects the inputs of all steps in one matmul and steps the recurrence with
    # `recurrent.lstm_step`; it must compute the Keras LSTMCell whose weights it holds (a state
    # zeroed at resets, carried in float32 between steps), values and gradients alike.
    rng = np.random.default_rng(4)
    T, B, units = 5, 3, 16

    def build():
        return ActorCriticNet(4, torso="minatar", lstm_units=units)

    net = networks.build_in_precision(precision, build)
    net.create_variables((10, 10, 4))
    obs, a, r, reset = _inputs(rng, T, B, 4, (10, 10, 4))
    obs %= 2
    state = _random_state(rng, B, units)
    weights = net.core.trainable_variables
    dtype = net.core.compute_dtype

    def keras_cell():
        features = networks.torso_outputs([net], obs, time_major=True)[0]
        inputs = net._core_inputs(features, a, r, reset, None)
        h, c, outputs = *state, []
        for t in range(T):
            keep = 1.0 - tf.cast(reset[t], tf.float32)[:, None]
            out, (h, c) = net.core(inputs[t], [tf.cast(h * keep, dtype), tf.cast(c * keep, dtype)])
            h, c = tf.cast(h, tf.float32), tf.cast(c, tf.float32)
            outputs.append(out)
        return net._heads(tf.stack(outputs)), (h, c)

    def outputs_and_gradients(unroll):
        with tf.GradientTape() as tape:
            (logits, values), final = unroll()
            loss = tf.reduce_sum(logits * tf.sin(tf.range(4.0))) + tf.reduce_sum(values**2)
        return (logits, values, *final), tape.gradient(loss, weights)

    expected, expected_grads = outputs_and_gradients(keras_cell)
    got, grads = outputs_and_gradients(lambda: net.unroll(obs, a, r, reset, state))
    tolerance = 1e-5 if precision == "float32" else 0.05
    for value, want in zip(got, expected):
        np.testing.assert_allclose(value, want, rtol=tolerance, atol=tolerance)
    for grad, want, var in zip(grads, expected_grads, weights):
        scale = 1.0 if precision == "float32" else float(tf.reduce_max(tf.abs(want)))
        np.testing.assert_allclose(grad, want, rtol=1e-4, atol=tolerance * scale, err_msg=var.name)


@pytest.mark.parametrize("leading", [(), (3,)])
@pytest.mark.parametrize("compiled", [False, True])
def test_lstm_unroll_has_the_gradient_of_the_loop_of_steps(leading, compiled):
    # `lstm_unroll`'s hand-written gradient against autodiff of `lstm_step` in a Python loop:
    # every input's gradient (projected inputs, start state, recurrent kernel), with resets in
    # the middle and at the first step, several LSTMs on a leading axis, and a loss that reads
    # every step's h and c and the final c (the burn-in's and the final state's uses).
    rng = np.random.default_rng(7)
    T, B, U = 6, 4, 5
    projected = tf.constant(rng.normal(size=(T, *leading, B, 4 * U)), tf.float32)
    reset = np.zeros((T, B, 1), np.float32)
    reset[0, 1] = reset[3, 0] = reset[3, 2] = reset[5, 3] = 1.0
    keep = tf.constant(1.0 - reset)
    h0, c0 = (tf.constant(rng.normal(size=(*leading, B, U)), tf.float32) for _ in range(2))
    kernel = tf.constant(rng.normal(size=(*leading, U, 4 * U)) * 0.5, tf.float32)
    weights_h, weights_c = (
        tf.constant(rng.normal(size=(T, *leading, B, U)), tf.float32) for _ in range(2)
    )

    def loop(projected, h, c, kernel):
        hs, cs = [], []
        for t in range(T):
            h, c = recurrent.lstm_step(projected[t], keep[t], h, c, kernel)
            hs.append(h)
            cs.append(c)
        return tf.stack(hs), tf.stack(cs)

    def loss_and_gradients(unroll):
        inputs = [projected, h0, c0, kernel]
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            hs, cs = unroll(projected, h0, c0, kernel)
            loss = (
                tf.reduce_sum(tf.sin(hs) * weights_h)
                + tf.reduce_sum(cs[:-1] * weights_c[:-1])
                + tf.reduce_sum(cs[-1] ** 2)
            )
        return hs, cs, tape.gradient(loss, inputs)

    def by_hand(projected, h, c, kernel):
        return recurrent.lstm_unroll(projected, keep, h, c, kernel)

    run = tf.function(loss_and_gradients) if compiled else loss_and_gradients
    want_h, want_c, want = loss_and_gradients(loop)
    got_h, got_c, got = run(by_hand)
    np.testing.assert_allclose(got_h, want_h, atol=1e-6)
    np.testing.assert_allclose(got_c, want_c, atol=1e-6)
    for name, g, w in zip(["projected", "h0", "c0", "kernel"], got, want):
        assert float(tf.reduce_max(tf.abs(w))) > 0.1, name  # each input's gradient is not nil
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)
    # A start state zeroed at the first step gets no gradient in that environment.
    np.testing.assert_array_equal(got[1][..., 1, :], 0.0)


def test_networks_unrolled_together_equal_their_own_unrolls():
    # Three networks' LSTM cores stepped as one batched matmul a step: the outputs, the final
    # states and the gradients of each network's own unroll (GDI's two networks, LBC's three).
    rng = np.random.default_rng(6)
    T, B = 5, 3
    nets = [_built((4,), tf.float32, num_actions=3, torso="mlp", lstm_units=16) for _ in range(3)]
    obs, a, r, reset = _inputs(rng, T, B, 3, (4,))
    obs = rng.normal(size=obs.shape).astype(np.float32)
    states = [_random_state(rng, B, 16) for _ in nets]
    weights = [v for net in nets for v in net.trainable_variables]

    def features():
        return [networks.torso_outputs([net], obs, time_major=True)[0] for net in nets]

    def outputs_and_gradients(unroll):
        with tf.GradientTape() as tape:
            outputs, finals = unroll()
            loss = sum(tf.reduce_sum(o[0] * tf.sin(tf.range(3.0))) for o in outputs)
            loss += sum(tf.reduce_sum(o[1] ** 2) + tf.reduce_sum(o[2]) for o in outputs)
        return tf.nest.flatten((outputs, finals)), tape.gradient(loss, weights)

    def apart():
        unrolled = [
            net.unroll(None, a, r, reset, s, return_features=True, features=f)
            for net, s, f in zip(nets, states, features())
        ]
        return [u[0] for u in unrolled], [u[1] for u in unrolled]

    expected, expected_grads = outputs_and_gradients(apart)
    got, grads = outputs_and_gradients(
        lambda: recurrent.unroll_together(nets, features(), a, r, reset, states, True)
    )
    for value, want in zip(got, expected, strict=True):
        np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5)
    for grad, want in zip(grads, expected_grads, strict=True):
        np.testing.assert_allclose(grad, want, rtol=1e-4, atol=1e-5)


def test_reset_zeroes_the_state_and_the_previous_action_and_reward():
    # At an episode start the output equals that of a fresh zero state with no
    # previous action or reward, whatever stale values are passed in.
    rng = np.random.default_rng(3)
    net = _built(ATARI, num_actions=4, torso="deep")
    obs, a, r, _ = _inputs(rng, 1, 2, 4)
    stale = _random_state(rng, 2)
    reset = np.array([True, False])
    (logits, value), state = net.step(obs[0], a[0], r[0] + 3.0, reset, stale)
    (fresh_logits, fresh_value), fresh_state = net.step(
        obs[0],
        np.zeros(2, np.int32),
        np.zeros(2, np.float32),
        np.ones(2, bool),
        net.initial_state(2),
    )
    np.testing.assert_allclose(logits[0], fresh_logits[0], atol=1e-6)
    np.testing.assert_allclose(value[0], fresh_value[0], atol=1e-6)
    np.testing.assert_allclose(state[0][0], fresh_state[0][0], atol=1e-6)
    # Without the reset the stale state and previous inputs do matter.
    assert np.abs(logits[1] - fresh_logits[1]).max() > 1e-4


def test_previous_reward_is_clipped_inside_the_net():
    rng = np.random.default_rng(4)
    obs, a, _, _ = _inputs(rng, 1, 1, 3)
    no_reset = np.zeros(1, bool)
    outputs = {}
    for clip in (1.0, None):  # IMPALA: [-1, 1]; None for DiCE/GDI/LBC's shaped rewards
        net = _built(ATARI, num_actions=3, torso="shallow", prev_reward_clip=clip)
        state = _random_state(rng, 1)
        outputs[clip] = [
            net.step(obs[0], a[0], np.array([r], np.float32), no_reset, state)[0][1]
            for r in (1.0, 5.0, 0.5)
        ]
    at_one, at_five, at_half = outputs[1.0]
    np.testing.assert_array_equal(at_one, at_five)
    assert abs(float(at_one[0] - at_half[0])) > 1e-6
    unclipped_one, unclipped_five, _ = outputs[None]
    assert abs(float(unclipped_one[0] - unclipped_five[0])) > 1e-6


def test_compiled_equals_eager():
    rng = np.random.default_rng(5)
    net = _built(ATARI, num_actions=6, torso="deep")
    obs, a, r, reset = _inputs(rng, 4, 2, 6)
    state = _random_state(rng, 2)
    eager = net.unroll(obs, a, r, reset, state)
    compiled = tf.function(net.unroll, jit_compile=True)(obs, a, r, reset, state)
    tf.nest.map_structure(lambda x, y: np.testing.assert_allclose(x, y, atol=1e-4), eager, compiled)
    eager_step = net.step(obs[0], a[0], r[0], reset[0], state)
    compiled_step = tf.function(net.step, jit_compile=True)(obs[0], a[0], r[0], reset[0], state)
    tf.nest.map_structure(
        lambda x, y: np.testing.assert_allclose(x, y, atol=1e-4), eager_step, compiled_step
    )


def test_gradients_reach_every_variable():
    rng = np.random.default_rng(6)
    net = _built(DMLAB, num_actions=9, torso="deep", instruction_vocab=1000)
    obs, a, r, reset = _inputs(rng, 3, 2, 9, DMLAB, reset_prob=0.0)
    instruction = np.stack([instruction_tokens(["go to the red hat", "pick the key"], 4)] * 3)
    with tf.GradientTape() as tape:
        (logits, values), _ = net.unroll(obs, a, r, reset, _random_state(rng, 2), instruction)
        loss = tf.reduce_sum(tf.nn.log_softmax(logits)[..., 0]) + tf.reduce_sum(values**2)
    grads = tape.gradient(loss, net.trainable_variables)
    for variable, grad in zip(net.trainable_variables, grads):
        assert grad is not None, variable.name
        assert float(tf.norm(tf.convert_to_tensor(grad))) > 0, variable.name


def test_instruction_channel():
    # Words hash into buckets 1..999, 0 pads; padding does not change the encoding and an
    # empty instruction encodes to zeros.
    tokens = instruction_tokens(["Go to the red hat", ""], max_length=6)
    assert tokens.shape == (2, 6) and tokens.dtype == np.int32
    assert (tokens[0, :5] >= 1).all() and (tokens[0, :5] < 1000).all()
    assert (tokens[0, 5:] == 0).all() and (tokens[1] == 0).all()
    np.testing.assert_array_equal(tokens, instruction_tokens(["Go to the red hat", ""], 6))
    net = _built(DMLAB, num_actions=9, torso="shallow", instruction_vocab=1000)
    encoder = net.instruction_encoder
    encoded = encoder(tokens)
    np.testing.assert_allclose(encoded[0], encoder(tokens[:1, :5])[0], atol=1e-6)
    np.testing.assert_array_equal(encoded[1], np.zeros(64))
    assert np.abs(encoded[0]).max() > 0


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="unknown torso 'resnet'.*deep.*mlp.*nature.*shallow"):
        ActorCriticNet(4, torso="resnet")
    net = _built(DMLAB, num_actions=9, torso="shallow", instruction_vocab=1000)
    obs, a, r, reset = _inputs(np.random.default_rng(7), 1, 1, 9, DMLAB)
    with pytest.raises(ValueError, match="instruction"):
        net.step(obs[0], a[0], r[0], reset[0], net.initial_state(1))


@pytest.mark.parametrize(
    "torso, use_lstm, observation_shape, observation_dtype",
    [
        ("deep", False, (84, 84, 4), np.uint8),  # IMPALA's Atari actor
        ("mlp", True, (4,), np.float32),  # a recurrent core: its state stays float32 outside
    ],
)
def test_bfloat16_acting_network_follows_the_float32_one(
    torso, use_lstm, observation_shape, observation_dtype
):
    def build():
        return networks.ActorCriticNet(6, torso=torso, use_lstm=use_lstm, lstm_units=16)

    full = build()
    half = networks.build_in_precision("bfloat16", build)
    assert tf.keras.mixed_precision.global_policy().name == "float32"  # restored
    for net in (full, half):
        net.create_variables(observation_shape, observation_dtype)
    for mine, theirs in zip(half.variables, full.variables):
        assert mine.dtype == tf.float32  # the learner's float32 weights load unchanged
        mine.assign(theirs)
    rng = np.random.default_rng(0)
    B = 8
    states = [full.initial_state(B), half.initial_state(B)]
    for t in range(3):
        high = 255 if observation_dtype == np.uint8 else 1
        obs = rng.uniform(0, high, (B, *observation_shape)).astype(observation_dtype)
        inputs = (
            obs,
            rng.integers(0, 6, B).astype(np.int32),
            rng.normal(size=B).astype(np.float32),
            np.full(B, t == 0),
        )
        (logits, value), states[0] = full.step(*inputs, states[0])
        (half_logits, half_value), states[1] = half.step(*inputs, states[1])
        assert half_logits.dtype == half_value.dtype == tf.float32
        assert all(s.dtype == tf.float32 for s in tf.nest.flatten(states[1]))
        # bfloat16 keeps 8 significant bits: close, yet really computed in bfloat16.
        np.testing.assert_allclose(half_logits, logits, atol=0.03 + 0.03 * np.abs(logits).max())
        np.testing.assert_allclose(half_value, value, atol=0.03 + 0.03 * np.abs(value).max())
        assert not np.array_equal(half_logits.numpy(), logits.numpy())
    with pytest.raises(ValueError, match="precision 'float16' is not one of float32, bfloat16"):
        networks.build_in_precision("float16", build)


def test_torso_names_are_the_light_list_configs_validate_against():
    assert tuple(networks.TORSOS) == config.TORSOS
    assert set(config.ATARI_TORSOS) <= set(config.TORSOS)


def test_a_shared_torso_runs_once_and_its_variables_count_once():
    """GDI-H3's shared-torso option (not the paper's default:
    docs/papers/gdi.md#departures-from-the-paper): network b built on a's torso layer gets a's
    torso output itself from `torso_outputs` (one pass), its own LSTM and heads, and the torso's
    variables appear once in `unique_variables`; a separate net's torso runs on its own."""
    a = _built(ATARI, num_actions=18, torso="deep")
    b = _built(ATARI, num_actions=18, torso=a.torso)
    c = _built(ATARI, num_actions=18, torso="deep")
    assert b.torso is a.torso and b.core is not a.core
    obs = tf.constant(np.random.default_rng(0).integers(0, 255, (2, 3, *ATARI)), tf.uint8)
    out_a, out_b, out_c = networks.torso_outputs([a, b, c], obs, time_major=True)
    assert out_a is out_b and out_c is not out_a
    assert out_a.shape == (2, 3, 256)
    np.testing.assert_allclose(out_a[1, 2], a.torso(obs[1])[2], rtol=1e-5, atol=1e-6)
    # 1,638,883 per net (DiCE's network), of which the IMPALA-deep torso is 1,089,232.
    assert _count(a.torso.trainable_variables) == 1_089_232
    assert _count(networks.unique_variables([*a.variables, *b.variables])) == (
        1_089_232 + 2 * (1_638_883 - 1_089_232)
    )
    assert _count(networks.unique_variables([*a.variables, *c.variables])) == 2 * 1_638_883
    # The precomputed features give what the net computes from the frames.
    state = b.initial_state(3)
    zeros, reset = tf.zeros([2, 3], tf.int32), tf.zeros([2, 3], tf.bool)
    (logits, values), _ = b.unroll(obs, zeros, tf.zeros([2, 3]), reset, state)
    (logits_f, values_f), _ = b.unroll(None, zeros, tf.zeros([2, 3]), reset, state, features=out_b)
    np.testing.assert_allclose(logits, logits_f, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values, values_f, rtol=1e-5, atol=1e-6)

"""GDI's train step (gdi/learning.py) and acting policy (gdi/acting.py): compiled equals eager
for I3 and H3, burn-in equals an unbroken unroll, H3 trains both networks in one step with
RS1 / RS2, the auxiliary dynamics losses against numpy, and the actor's stored log mu equals
Eq. (2) under the networks' advantages."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from common.burn_in import burn_in_learning
from common.burn_in import dynamics
from common.replay import replay
from common.equations import schedules
from common.equations import sequences
from common.equations import transforms
from gdi import acting
from gdi import config as config_lib
from gdi import learning
from gdi import losses
from gdi import networks
from tests.common import padding

NUM_ACTIONS = 3
BURN_IN, LENGTH, BATCH = 4, 6, 3

CONFIG = config_lib.GdiConfig(
    env="CartPole",
    network="mlp",
    lstm_units=8,
    aux_hidden=8,
    burn_in=BURN_IN,
    sequence_length=LENGTH,
    batch_size=BATCH,
    learner_microbatches=1,
    total_frames=10_000,
    warmup_steps=2,
    learning_rate=1e-3,
    discount=0.99,
).validate()
H3_CONFIG = dataclasses.replace(CONFIG, variant="h3")
SHARED_CONFIG = dataclasses.replace(H3_CONFIG, shared_torso=True)  # our option, not the paper's
VARIANTS = dict(argvalues=[CONFIG, H3_CONFIG, SHARED_CONFIG], ids=["i3", "h3", "h3_shared_torso"])


def make_models(config=CONFIG, seed=0):
    tf.keras.utils.set_random_seed(seed)
    nets = networks.make_networks(config, NUM_ACTIONS)
    for net in nets:
        net.create_variables((4,), np.float32)
    return nets, networks.make_dynamics(config, NUM_ACTIONS, nets)


def make_batch(config=CONFIG, seed=0):
    """Sample-k items as the learner receives them ([L, B, ...], L = 4 + 6 + 1): item 0 starts a
    game at step 6, item 1 has its burn-in as padding, item 2 was truncated at step 8."""
    rng = np.random.default_rng(seed)
    L = BURN_IN + LENGTH + 1
    heads = len(config.reward_shapings)
    reset = np.zeros((L, BATCH), bool)
    reset[6, 0] = True
    mask = np.ones((L, BATCH), np.float32)
    mask[:BURN_IN, 1] = 0.0
    reset[BURN_IN, 1] = True
    reset[9, 2] = True
    truncation = np.zeros((L, BATCH, heads) if heads > 1 else (L, BATCH), np.float32)
    truncation[8, 2] = rng.normal(size=truncation.shape[2:])
    f32 = lambda x: tf.constant(x, tf.float32)
    return {
        "observation": f32(rng.normal(size=(L, BATCH, 4))),
        "prev_action": tf.constant(rng.integers(0, NUM_ACTIONS, (L, BATCH)), tf.int32),
        "prev_reward": f32(rng.normal(size=(L, BATCH))),
        "reset": tf.constant(reset),
        "action": tf.constant(rng.integers(0, NUM_ACTIONS, (L, BATCH)), tf.int32),
        "reward": f32(rng.normal(scale=3.0, size=(L, BATCH))),
        "truncation_value": f32(truncation),
        "behaviour_log_prob": f32(np.log(rng.uniform(0.2, 0.6, (L, BATCH)))),
        "behaviour": {
            "eta1": f32(rng.uniform(0, 5, (L, BATCH))),
            "eta2": f32(rng.uniform(0, 5, (L, BATCH))),
            "epsilon": f32(rng.uniform(0, 1, (L, BATCH))),
        },
        replay.MASK: f32(mask),
        "core_state": tuple(
            tuple(f32(rng.normal(size=(BATCH, 8))) for _ in range(2)) for _ in range(heads)
        ),
    }


@pytest.mark.parametrize("config", **VARIANTS)
def test_burn_in_reaches_the_state_of_an_unbroken_unroll(config):
    """The loss after burn-in from the stored states equals the loss on the trained part of one
    unroll over the whole item, with each network's reward shaping and truncation bootstrap."""
    nets, heads = make_models(config)
    batch = make_batch(config)
    loss, stats = learning.make_loss_fn(nets, heads, config)(batch)
    inputs = [batch[k] for k in burn_in_learning.UNROLL_INPUTS]
    t = {k: batch[k][BURN_IN:] for k in ("reset", "action", "reward", replay.MASK)}
    advs, values, rewards, aux = [], [], [], 0.0
    shapings = config.reward_shapings
    for i, (net, state) in enumerate(zip(nets, batch["core_state"])):
        # Sequences 0 and 2 unrolled from step 0; sequence 1 (burn-in all padding) starts at its
        # first real step from the stored state.
        (adv_all, v_all, e_all), _ = net.unroll(*inputs, state, return_features=True)
        # The features are the torso's embeddings of the observations.
        torso = net.torso(tf.reshape(batch["observation"], [-1, 4]))
        np.testing.assert_allclose(tf.reshape(e_all, torso.shape), torso, rtol=1e-6)
        (adv_1, v_1, e_1), _ = net.unroll(
            *[x[BURN_IN:] for x in inputs], state, return_features=True
        )
        join = lambda whole, part: tf.concat(
            [whole[BURN_IN:, :1], part[:, 1:2], whole[BURN_IN:, 2:]], 1
        )
        advs.append(join(adv_all, adv_1))
        values.append(join(v_all, v_1))
        truncation = batch["truncation_value"][BURN_IN:-1]
        if len(shapings) > 1:
            truncation = truncation[..., i]
        shaped = transforms.reward_transform(shapings[i])(t["reward"][:-1])
        rewards.append(shaped + config.discount * truncation)
        if i >= len(heads):  # the shared torso's one head set reads network 1's embeddings
            continue
        forward, inverse = heads[i].losses(
            join(e_all, e_1),
            t["action"],
            dynamics.pair_mask(t["reset"], t[replay.MASK]),
            t[replay.MASK][:-1],
        )
        aux += forward + inverse
    etas, weights = losses.lambda_mixture(
        tf.nest.map_structure(lambda x: x[BURN_IN:], batch["behaviour"])
    )
    expected, _ = losses.gdi_loss(
        losses.LossHyperparameters.from_config(config),
        advs,
        values,
        networks.component_networks(config),
        etas,
        weights,
        t["action"],
        batch["behaviour_log_prob"][BURN_IN:],
        rewards,
        sequences.discounts_from_resets(t["reset"], config.discount, t[replay.MASK]),
        t[replay.MASK][:-1],
    )
    assert float(loss) == pytest.approx(float(expected + aux), rel=1e-5)
    assert float(stats["loss/total"]) == pytest.approx(float(loss))


@pytest.mark.parametrize("config", **VARIANTS)
def test_cutting_the_padding_after_every_game_changes_no_loss_and_no_update(config):
    """A batch whose games all end 4 positions early trains the same without the padding
    after its new bootstrap position (`--trim_padding`)."""
    frames = tf.constant(2 * config.frames_per_learner_step, tf.int64)  # past the warm-up

    def train(batch):
        nets, heads = make_models(config)
        step = learning.make_train_step(nets, heads, learning.make_optimizer(config), config)
        stats = step.python_function(batch, frames)
        return stats, [v.numpy() for v in learning.trainable_variables(nets, heads)]

    stats = padding.check_the_cut_changes_nothing(train, make_batch(config), BURN_IN, LENGTH)
    assert float(stats["optimizer/grad_norm"]) > 0


@pytest.mark.parametrize("config", [H3_CONFIG, SHARED_CONFIG], ids=["h3", "h3_shared_torso"])
def test_compiled_step_equals_eager_and_follows_the_schedule(config):
    """On GDI-H3 (the I3 step is the same code with one network; the burn-in test covers it);
    compiling takes most of this test's time on a shared CPU."""
    # Without the cut in the step (--trim_padding): it is the shared learner's code around the
    # loss, compiled in tests/dice/test_learning.py and tests/common/burn_in (and run by the
    # system tests), and it traces the loss and its gradient three times (the batch whole or in
    # two halves), which took ~4 times the CPU here.
    config = dataclasses.replace(config, trim_padding=False)
    weights = {}
    for compiled in (False, True):
        nets, heads = make_models(config)
        optimizer = learning.make_optimizer(config)
        step = learning.make_train_step(nets, heads, optimizer, config)
        run = step if compiled else step.python_function
        # A full batch a step: the learner's frames before step k are k steps' worth.
        frames = [tf.constant(k * config.frames_per_learner_step, tf.int64) for k in range(3)]
        stats = [run(make_batch(config, k), frames[k]) for k in range(3)]
        weights[compiled] = [v.numpy() for v in learning.trainable_variables(nets, heads)]
        # Table 6: linear warm-up, then linear decay to 0 at the last update; WD annealed.
        for k, s in enumerate(stats):
            lr = float(schedules.warmup_linear_decay(k, 1e-3, 2, config.gradient_updates))
            assert float(s["optimizer/learning_rate"]) == pytest.approx(lr, rel=1e-5)
        assert int(optimizer.iterations.numpy()) == 3
    for eager, compiled in zip(weights[False], weights[True]):
        np.testing.assert_allclose(eager, compiled, rtol=1e-4, atol=1e-6)
    # Every network and every dynamics head moved (H3: both networks in one step), and each
    # variable is trained once (a shared torso's too).
    nets, heads = make_models(config)
    variables = learning.trainable_variables(nets, heads)
    assert len({v.ref() for v in variables}) == len(variables) == len(weights[True])
    after = {v.ref(): w for v, w in zip(variables, weights[True])}
    for model in (*nets, *heads):
        moved = [not np.allclose(v.numpy(), after[v.ref()]) for v in model.trainable_variables]
        assert any(moved), model.name
    if config.shared_torso:
        assert nets[1].torso is nets[0].torso and len(heads) == 1


def test_micro_batches_give_the_whole_batch_s_update():
    """--learner_microbatches=3 (one sequence each) takes exactly the update of the whole batch,
    the auxiliary losses included (eager: the arithmetic is the same compiled)."""
    weights, stats = [], []
    for parts in (1, 3):
        config = dataclasses.replace(H3_CONFIG, learner_microbatches=parts)
        nets, heads = make_models(config)
        optimizer = learning.make_optimizer(config)
        step = learning.make_train_step(nets, heads, optimizer, config).python_function
        # Past the warm-up's zero learning rate, so that the weights move.
        frames = tf.constant(2 * config.frames_per_learner_step, tf.int64)
        stats.append([step(make_batch(config, seed), frames) for seed in range(3)])
        weights.append([v.numpy() for v in learning.trainable_variables(nets, heads)])
    for whole, sliced in zip(*stats):
        # The gradient's norm (before the clip) is sensitive to how the slices are weighted.
        for key in ("optimizer/grad_norm", "loss/total", "loss/inverse_dynamics_2"):
            assert float(whole[key]) == pytest.approx(float(sliced[key]), rel=1e-4), key
    for whole, sliced in zip(*weights):
        np.testing.assert_allclose(whole, sliced, rtol=1e-4, atol=1e-6)
    nets, heads = make_models(H3_CONFIG)
    initial = [v.numpy() for v in learning.trainable_variables(nets, heads)]
    assert any(not np.allclose(a, b) for a, b in zip(initial, weights[1]))


def test_h3_networks_see_their_own_reward_shaping():
    """Table 6: network 1 learns from RS1 (and reads it as its previous reward), network 2 from
    RS2; the values of docs/papers/gdi.md#worked-test-numbers (Test 3)."""
    nets, _ = make_models(H3_CONFIG)
    r = tf.constant([-10.0, -1.0, 0.0, 1.0, 10.0, 100.0])
    np.testing.assert_allclose(
        nets[0].prev_reward_transform(r),
        [-2.397895, -0.693147, 0, 1.386294, 4.795791, 9.230241],
        atol=1e-5,
    )
    np.testing.assert_allclose(
        nets[1].prev_reward_transform(r),
        [-0.831160, -0.190207, 0, 0.190207, 0.831160, 2.270154],
        atol=1e-5,
    )
    steps = burn_in_learning.trained_steps(make_batch(H3_CONFIG), BURN_IN)
    rs1, rs2 = learning.shaped_rewards(steps, H3_CONFIG)
    reward = steps["reward"][:-1]
    np.testing.assert_allclose(rs1[:4, 0], nets[0].prev_reward_transform(reward[:4, 0]), 1e-6)
    np.testing.assert_allclose(rs2[:4, 0], nets[1].prev_reward_transform(reward[:4, 0]), 1e-6)


def test_dynamics_losses_against_numpy():
    rng = np.random.default_rng(0)
    T, B, D = 4, 2, 5
    head = dynamics.DynamicsHeads(NUM_ACTIONS, D, hidden=6)
    features = rng.normal(size=(T + 1, B, D)).astype(np.float32)
    actions = rng.integers(0, NUM_ACTIONS, (T + 1, B))
    resets = np.zeros((T + 1, B), bool)
    resets[2, 0] = True  # x_2 of env 0 starts a new episode: (x_1, a_1, x_2) is no transition
    mask = np.ones((T + 1, B), np.float32)
    mask[4, 1] = 0.0  # padding
    pairs = dynamics.pair_mask(resets, mask).numpy()
    np.testing.assert_array_equal(pairs, [[1, 1], [0, 1], [1, 1], [1, 0]])
    steps = mask[:-1]  # every step t < T is real here
    forward, inverse = head.losses(tf.constant(features), tf.constant(actions), pairs, steps)

    def mlp(model, x):
        (w1, b1), (w2, b2) = [(layer.kernel.numpy(), layer.bias.numpy()) for layer in model.layers]
        return np.maximum(x @ w1 + b1, 0) @ w2 + b2

    logits = mlp(head.inverse_model, np.concatenate([features[:-1], features[1:]], -1))
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    ce = -np.take_along_axis(log_p, actions[:-1, :, None], -1)[..., 0]
    predicted = mlp(
        head.forward_model, np.concatenate([features[:-1], np.eye(NUM_ACTIONS)[actions[:-1]]], -1)
    )
    sq = 0.5 * ((predicted - features[1:]) ** 2).sum(-1)
    assert float(inverse) == pytest.approx((ce * pairs).sum() / steps.sum(), rel=1e-5)
    assert float(forward) == pytest.approx((sq * pairs).sum() / steps.sum(), rel=1e-5)
    # LBC's reading (docs/papers/lbc.md#departures-from-the-paper): the mean squared error over
    # the D features, D/2 times smaller.
    mse_head = dynamics.DynamicsHeads(NUM_ACTIONS, D, hidden=6, forward_loss="mse")
    mse_head.set_weights(head.get_weights())
    mse, _ = mse_head.losses(tf.constant(features), tf.constant(actions), pairs, steps)
    assert float(mse) == pytest.approx((sq * 2 / D * pairs).sum() / steps.sum(), rel=1e-5)
    with pytest.raises(ValueError, match="forward_loss='l1' must be one of"):
        dynamics.DynamicsHeads(NUM_ACTIONS, D, forward_loss="l1")
    # The forward target is stop-gradient: e_{t+1} gets gradient from the inverse task only.
    e = tf.Variable(features)
    with tf.GradientTape() as tape:
        forward, _ = head.losses(e, tf.constant(actions), pairs, steps)
    grad = tape.gradient(forward, e).numpy()
    assert np.all(grad[4] == 0) and np.any(grad[0] != 0)


@pytest.mark.parametrize("config", **VARIANTS)
def test_actor_stores_log_mu_of_eq_2(config):
    policy = acting.make_policy(config)(NUM_ACTIONS, (4,), np.float32, seed=0, greedy=False)
    assert policy.value_heads == len(config.reward_shapings)
    B = 4
    rng = np.random.default_rng(1)
    obs = rng.normal(size=(B, 4)).astype(np.float32)
    prev_action, prev_reward = np.zeros(B, np.int32), np.zeros(B, np.float32)
    reset = np.ones(B, bool)
    params = {
        "eta1": np.array([0.0, 1.0, 3.0, 1.0]),
        "eta2": np.array([2.0, 0.0, 1e4, 1.0]),
        "epsilon": np.array([0.3, 1.0, 0.0, 0.5]),
    }
    state = policy.initial_state(B)
    actions, extras, _ = policy.step(obs, prev_action, prev_reward, reset, state, params)
    advantages = [
        net.step(obs, prev_action, prev_reward, reset, s)[0][0].numpy()
        for net, s in zip(policy.networks, state)
    ]
    a1, a2 = advantages[0], advantages[-1]

    def softmax(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    eps = params["epsilon"][:, None]
    mu = eps * softmax(params["eta1"][:, None] * a1) + (1 - eps) * softmax(
        params["eta2"][:, None] * a2
    )
    expected = np.log(mu[np.arange(B), actions])
    np.testing.assert_allclose(extras["behaviour_log_prob"], expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("config", [H3_CONFIG, SHARED_CONFIG], ids=["h3", "h3_shared_torso"])
def test_h3_learner_checkpoint_restores_both_networks_their_heads_and_adamw(config, tmp_path):
    """What the launcher checkpoints and resumes for GDI-H3 (the resume itself runs end to end
    in the DiCE and LBC system tests, through the same launcher)."""
    from common.runtime.agent import EnvSpec

    spec = EnvSpec(NUM_ACTIONS, (4,), np.dtype(np.float32))
    parts = learning.make_learner_parts(config, spec)
    saved = parts.checkpointables
    heads = ["dynamics_1"] if config.shared_torso else ["dynamics_1", "dynamics_2"]
    assert sorted(saved) == [*heads, "network_1", "network_2", "optimizer"]
    nets = [saved["network_1"], saved["network_2"]]
    # The actors receive each variable once, in the order their own networks list them.
    policy = acting.make_policy(config)(NUM_ACTIONS, (4,), np.float32, seed=0, greedy=False)
    assert [v.shape for v in parts.acting_variables] == [v.shape for v in policy.variables]
    assert len(parts.acting_variables) == len({v.ref() for v in parts.acting_variables})
    shared = len(nets[0].torso.variables) if config.shared_torso else 0
    assert len(parts.acting_variables) == len(nets[0].variables) + len(nets[1].variables) - shared
    rng = np.random.default_rng(0)
    for part in saved.values():
        for v in part.variables:  # moved away from the (seeded) initial values
            v.assign_add(rng.normal(size=v.shape).astype(v.dtype.as_numpy_dtype) + 1)
    path = tf.train.Checkpoint(**saved).save(str(tmp_path / "ckpt"))
    restored = learning.make_learner_parts(config, spec).checkpointables
    tf.train.Checkpoint(**restored).restore(path).assert_consumed()
    if config.shared_torso:  # restored into one torso, still under both networks
        assert restored["network_2"].torso is restored["network_1"].torso
    for name, part in saved.items():
        assert len(part.variables) == len(restored[name].variables) > 0, name
        for a, b in zip(part.variables, restored[name].variables):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("epsilon", [1.0, 0.0])
def test_shared_torso_policy_loss_of_set_i_reaches_theta_i_and_the_torso(epsilon):
    """Our shared-torso option (docs/papers/gdi.md#options-and-readings-that-are-not-departures):
    with the critics and auxiliary tasks off, eps = 1 (only
    component 1 of Eq. (2), on network 1) trains network 1's LSTM and heads and the shared
    torso, not network 2's; eps = 0 the other way round."""
    config = dataclasses.replace(
        SHARED_CONFIG,
        v_loss_scale=0.0,
        q_loss_scale=0.0,
        aux_forward_weight=0.0,
        aux_inverse_weight=0.0,
    )
    nets, heads = make_models(config)
    batch = make_batch(config)
    batch["behaviour"]["epsilon"] = tf.fill(batch["mask"].shape, epsilon)
    with tf.GradientTape() as tape:
        loss, _ = learning.make_loss_fn(nets, heads, config)(batch)
    torso = nets[0].torso.trainable_variables
    shared = {v.ref() for v in torso}
    own, other = [
        [v for v in net.trainable_variables if v.ref() not in shared]
        for net in (nets if epsilon == 1.0 else nets[::-1])
    ]
    moves = lambda g: g is not None and np.any(g.numpy() != 0)
    grads = tape.gradient(loss, [torso, own, other])
    assert any(moves(g) for g in grads[0]) and any(moves(g) for g in grads[1])
    assert not any(moves(g) for g in grads[2])

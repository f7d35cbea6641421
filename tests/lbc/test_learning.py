"""LBC's train step (lbc/learning.py): each network's losses reach only its own network, each
network is updated by its own AdamW (own clip, checkpointed), compiled equals eager, per-network
rewards and discounts (RS_i, gamma_i, truncation bootstraps with V_i), the auxiliary tasks train
the torso, and the networks as we read App. L (docs/papers/lbc.md#departures-from-the-paper).
(Burn-in and the dynamics losses are tested in common.)"""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from common.replay import replay
from common.equations import schedules
from common.equations import transforms
from lbc import config as config_lib
from lbc import learning
from lbc import networks
from tests.common import padding

NUM_ACTIONS = 3
BURN_IN, LENGTH, BATCH, UNITS = 4, 6, 3, 8
L = BURN_IN + LENGTH + 1

CONFIG = config_lib.LbcConfig(
    env="CartPole",
    network="mlp",
    lstm_units=UNITS,
    head_hidden=8,
    aux_hidden=8,
    burn_in=BURN_IN,
    sequence_length=LENGTH,
    batch_size=BATCH,
    replay_capacity=BATCH,
    total_frames=10_000,
    warmup_steps=2,
    learning_rate=1e-3,
).validate()


def make_learner_parts(config=CONFIG, seed=0):
    tf.keras.utils.set_random_seed(seed)
    population = networks.make_population(config, NUM_ACTIONS)
    for network in population:
        network.create_variables((4,), np.float32)
    dynamics = [networks.make_dynamics_heads(config, n, i) for i, n in enumerate(population)]
    return population, dynamics


def make_batch(seed=0, heads=3):
    """Sample-k items as the learner receives them ([L, B, ...]): item 0 starts a game at step 6,
    item 1 has its burn-in as padding, item 2 is truncated at step 7 (V_i stored per network)."""
    rng = np.random.default_rng(seed)
    reset = np.zeros((L, BATCH), bool)
    reset[6, 0] = True
    reset[BURN_IN, 1] = True
    reset[8, 2] = True
    mask = np.ones((L, BATCH), np.float32)
    mask[:BURN_IN, 1] = 0.0
    truncation = np.zeros((L, BATCH, heads), np.float32)
    truncation[7, 2] = rng.normal(size=heads)
    omega = rng.uniform(size=(L, BATCH, 3))
    return {
        "observation": tf.constant(rng.normal(size=(L, BATCH, 4)), tf.float32),
        "prev_action": tf.constant(rng.integers(0, NUM_ACTIONS, (L, BATCH)), tf.int32),
        "prev_reward": tf.constant(rng.normal(size=(L, BATCH)), tf.float32),
        "reset": tf.constant(reset),
        "action": tf.constant(rng.integers(0, NUM_ACTIONS, (L, BATCH)), tf.int32),
        "reward": tf.constant(rng.normal(size=(L, BATCH)) * 3, tf.float32),
        "truncation_value": tf.constant(truncation if heads > 1 else truncation[..., 0]),
        "behaviour_log_prob": tf.constant(np.log(rng.uniform(0.2, 0.6, (L, BATCH))), tf.float32),
        "behaviour": {
            "eta": tf.constant(rng.uniform(0, 50, (L, BATCH, 3)), tf.float32),
            "omega": tf.constant(omega / omega.sum(-1, keepdims=True), tf.float32),
        },
        replay.MASK: tf.constant(mask),
        "core_state": tuple(
            tuple(tf.constant(rng.normal(size=(BATCH, UNITS)), tf.float32) for _ in range(2))
            for _ in range(heads)
        ),
    }


def test_each_network_s_losses_reach_only_its_own_network():
    population, dynamics = make_learner_parts()
    # aux_forward_loss, our choice (docs/papers/lbc.md#departures-from-the-paper; GDI: 1/2 sum).
    assert [d.forward_loss for d in dynamics] == ["mse"] * 3
    loss_fn = learning.make_loss_fn(population, dynamics, CONFIG)
    groups = learning.trained_variables(population, dynamics, CONFIG)
    with tf.GradientTape(persistent=True) as tape:
        total, stats = loss_fn(make_batch())
    assert float(total) == pytest.approx(sum(float(stats[f"loss/total_{i}"]) for i in (1, 2, 3)))
    for i in range(3):
        own = stats[f"loss/total_{i + 1}"]
        for j, group in enumerate(groups):
            gradients = tape.gradient(own, group)
            reached = [g is not None and float(tf.reduce_max(tf.abs(g))) > 0 for g in gradients]
            # Network i and its aux heads get every gradient; the others get none at all.
            assert all(reached) if i == j else not any(reached), (i, j)
    # The auxiliary losses train the torso and their heads, not the A / V heads.
    aux = [stats["loss/aux_inverse_1"], stats["loss/aux_forward_1"]]  # summed by the tape
    head_grads = tape.gradient(aux, population[0].policy_head.trainable_variables)
    assert all(g is None for g in head_grads)
    torso_grads = tape.gradient(aux, population[0].torso.trainable_variables)
    assert all(g is not None for g in torso_grads)


def test_rewards_and_discounts_are_each_network_s_own():
    batch = make_batch()
    steps = {k: batch[k][BURN_IN:] for k in ("reward", "truncation_value", "reset", replay.MASK)}
    rewards, discounts = learning.population_rewards_and_discounts(steps, CONFIG)
    r = batch["reward"][BURN_IN:-1].numpy()
    for i, (gamma, name) in enumerate(zip(CONFIG.discounts, CONFIG.reward_shapings)):
        shaped = transforms.reward_transform(name)(r).numpy()
        shaped[7 - BURN_IN, 2] += gamma * batch["truncation_value"][7, 2, i].numpy()
        np.testing.assert_allclose(rewards[..., i], shaped, rtol=1e-6)
        expected = np.full((LENGTH, BATCH), gamma, np.float32)
        expected[6 - 1 - BURN_IN, 0] = 0.0  # step 5 ends item 0's game
        expected[7 - BURN_IN, 2] = 0.0  # the truncation: its bootstrap is in the reward
        np.testing.assert_allclose(discounts[..., i], expected, rtol=1e-7)
    # Reducing H: one value head stores [L, B] truncation values.
    one = dataclasses.replace(
        CONFIG, **dict(discounts=(0.997,), reward_shapings=("value_rescaling",))
    )
    batch = make_batch(heads=1)
    steps = {k: batch[k][BURN_IN:] for k in ("reward", "truncation_value", "reset", replay.MASK)}
    rewards, discounts = learning.population_rewards_and_discounts(steps, one)
    assert rewards.shape == discounts.shape == (LENGTH, BATCH, 1)


def test_compiled_step_equals_eager_and_each_network_has_its_own_adamw():
    # Without the cut in the step (--trim_padding): it is the shared learner's code around the
    # loss, compiled in tests/dice/test_learning.py and tests/common/burn_in (and run by the
    # system test), and it traces the three networks' losses and gradients three times (the
    # batch whole or in two halves), which took ~4 times the CPU here.
    config = dataclasses.replace(CONFIG, trim_padding=False)
    weights = {}
    for compiled in (False, True):
        population, dynamics = make_learner_parts(config)
        optimizer = learning.PopulationOptimizer(
            config, learning.trained_variables(population, dynamics, config)
        )
        step = learning.make_train_step(population, dynamics, optimizer, config)
        run = step if compiled else step.python_function
        # A full batch a step: the learner's frames before step k are k steps' worth.
        frames = [tf.constant(k * config.frames_per_learner_step, tf.int64) for k in range(3)]
        stats = [run(make_batch(k), frames[k]) for k in range(3)]
        weights[compiled] = [v.numpy() for n in population for v in n.trainable_variables]
        total = config.gradient_updates
        for k, s in enumerate(stats):
            lr = float(schedules.warmup_linear_decay(k, 1e-3, 2, total))
            assert float(s["optimizer/learning_rate"]) == pytest.approx(lr, rel=1e-5)
            assert float(s["optimizer/weight_decay"]) == pytest.approx(0.01 * (1 - k / total))
            # Three learners, three clip norms: each network's own gradient norm.
            assert len({float(s[f"optimizer/grad_norm_{i}"]) for i in (1, 2, 3)}) == 3
        assert [int(o.iterations.numpy()) for o in optimizer.optimizers] == [3, 3, 3]
    for eager, compiled in zip(weights[False], weights[True]):
        np.testing.assert_allclose(eager, compiled, rtol=1e-4, atol=1e-6)


def test_cutting_the_padding_after_every_game_changes_no_loss_and_no_update():
    """A batch whose games all end 4 positions early trains the same without the padding
    after its new bootstrap position (`--trim_padding`), each network's update included."""
    frames = tf.constant(2 * CONFIG.frames_per_learner_step, tf.int64)  # past the warm-up

    def train(batch):
        population, dynamics = make_learner_parts()
        optimizer = learning.PopulationOptimizer(
            CONFIG, learning.trained_variables(population, dynamics, CONFIG)
        )
        step = learning.make_train_step(population, dynamics, optimizer, CONFIG)
        stats = step.python_function(batch, frames)
        return stats, [v.numpy() for n in population for v in n.trainable_variables]

    stats = padding.check_the_cut_changes_nothing(train, make_batch(), BURN_IN, LENGTH)
    assert all(float(stats[f"optimizer/grad_norm_{i}"]) > 0 for i in (1, 2, 3))


def test_a_network_s_clip_does_not_scale_another_s_update():
    """Table 3's clip at 50 per learner: a huge gradient in network 1 is clipped on its own and
    leaves network 2's AdamW step as it would be alone."""
    groups = [[tf.Variable([0.0, 0.0])], [tf.Variable([0.0])]]
    config = dataclasses.replace(CONFIG, max_grad_norm=1.0, weight_decay=0.0)
    optimizer = learning.PopulationOptimizer(config, groups)
    variables = [v for g in groups for v in g]
    optimizer.build(variables)
    stats = optimizer.apply([tf.constant([300.0, 400.0]), tf.constant([0.5])], variables, 1.0)
    assert float(stats["optimizer/grad_norm_1"]) == pytest.approx(500.0)
    assert float(stats["optimizer/grad_norm_2"]) == pytest.approx(0.5)
    assert float(stats["optimizer/grad_norm_clipped_1"]) == pytest.approx(1.0)
    assert [float(stats[f"optimizer/clipped_{i}"]) for i in (1, 2)] == [1.0, 0.0]
    # Adam's first step moves each parameter by about the learning rate, whatever its gradient.
    lr = float(stats["optimizer/learning_rate"])
    assert lr == pytest.approx(0.5e-3)  # half-way through the warm-up
    assert float(stats["optimizer/mean_step_2"]) == pytest.approx(lr, rel=1e-3)
    assert optimizer.optimizers[1].first_moments[0].numpy()[0] == pytest.approx(0.1 * 0.5)
    assert optimizer.optimizers[0].first_moments[0].numpy() == pytest.approx([0.06, 0.08])


def test_population_is_three_separate_networks_of_lbc_md_3():
    config = config_lib.LbcConfig()
    population = networks.make_population(config, 18)
    for network in population:
        network.create_variables((84, 84, 4), np.uint8)
    counts = [sum(int(np.prod(v.shape)) for v in n.trainable_variables) for n in population]
    # Nature torso (conv 32/64/64 + FC 512), LSTM 256 on 512 + 1 + 18 inputs, dueling streams
    # Dense 512 - ReLU - Dense (App. L; the sizes are our choice, see
    # docs/papers/lbc.md#departures-from-the-paper).
    torso = (8 * 8 * 4 * 32 + 32) + (4 * 4 * 32 * 64 + 64) + (3 * 3 * 64 * 64 + 64)
    torso += 3136 * 512 + 512
    lstm = 4 * 256 * (512 + 1 + 18 + 256) + 4 * 256
    heads = (256 * 512 + 512 + 512 * 18 + 18) + (256 * 512 + 512 + 512 + 1)
    assert counts == [torso + lstm + heads] * 3
    ids = [{id(v) for v in n.variables} for n in population]
    assert not (ids[0] & ids[1] or ids[1] & ids[2] or ids[0] & ids[2])
    # Each LSTM reads its own RS_i of the previous reward (the LSTM-inputs row of
    # docs/papers/lbc.md#departures-from-the-paper).
    assert [n.prev_reward_transform for n in population] == [
        transforms.reward_transform(name) for name in config.reward_shapings
    ]


def test_population_optimizer_state_is_checkpointed(tmp_path):
    """A resume restores every network's AdamW (moments and update count)."""

    def make():
        groups = [[tf.Variable([1.0, 2.0])], [tf.Variable([3.0])]]
        optimizer = learning.PopulationOptimizer(CONFIG, groups)
        optimizer.build([v for g in groups for v in g])
        return groups, optimizer

    groups, optimizer = make()
    variables = [v for g in groups for v in g]
    optimizer.apply([tf.constant([0.5, -1.0]), tf.constant([2.0])], variables)
    path = tf.train.Checkpoint(optimizer=optimizer).save(str(tmp_path / "ckpt"))
    _, restored = make()
    tf.train.Checkpoint(optimizer=restored).restore(path).assert_consumed()
    for saved, loaded in zip(optimizer.optimizers, restored.optimizers):
        assert int(loaded.iterations.numpy()) == 1
        np.testing.assert_array_equal(
            saved.first_moments[0].numpy(), loaded.first_moments[0].numpy()
        )
        np.testing.assert_array_equal(
            saved.second_moments[0].numpy(), loaded.second_moments[0].numpy()
        )

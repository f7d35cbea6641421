"""DiCE's train step (dice/learning.py): burn-in equals an unbroken unroll, compiled equals
eager, the AdamW schedule of Table 5 (its horizon is ours), both readings of Table 5's "Sample
Reuse 2", and the network's size (docs/papers/dice.md#worked-test-numbers, Test 15)."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from common.burn_in import burn_in_learning
from common.experiments import builder as builder_lib
from common.models import networks as common_networks
from common.replay import replay
from common.equations import schedules
from common.equations import sequences
from common.equations import transforms
from dice import builder
from dice import config as config_lib
from dice import learning
from dice import losses
from dice import networks
from tests.common import padding

NUM_ACTIONS = 3
BURN_IN, LENGTH, BATCH = 4, 6, 3

CONFIG = config_lib.DiceConfig(
    env="CartPole",
    network="mlp",
    lstm_units=8,
    burn_in=BURN_IN,
    sequence_length=LENGTH,
    batch_size=BATCH,
    learner_microbatches=1,
    total_frames=10_000,
    warmup_steps=2,
    learning_rate=1e-3,
    discount=0.99,
).validate()


def make_network(config=CONFIG, seed=0):
    tf.keras.utils.set_random_seed(seed)
    net = networks.make_network(config, NUM_ACTIONS)
    net.create_variables((4,), np.float32)
    return net


def make_batch(seed=0):
    """A batch of sample-k items as the learner receives them ([L, B, ...], L = 4 + 6 + 1):
    item 0 starts a game at step 6, item 1 has its burn-in as padding, item 2 ends padded."""
    rng = np.random.default_rng(seed)
    L = BURN_IN + LENGTH + 1
    reset = np.zeros((L, BATCH), bool)
    reset[6, 0] = True
    mask = np.ones((L, BATCH), np.float32)
    mask[:BURN_IN, 1] = 0.0
    mask[-4:, 2] = 0.0  # item 2's game ended: its last trained steps are padding
    reset[BURN_IN, 1] = True
    return {
        "observation": tf.constant(rng.normal(size=(L, BATCH, 4)), tf.float32),
        "prev_action": tf.constant(rng.integers(0, NUM_ACTIONS, (L, BATCH)), tf.int32),
        "prev_reward": tf.constant(rng.normal(size=(L, BATCH)), tf.float32),
        "reset": tf.constant(reset),
        "action": tf.constant(rng.integers(0, NUM_ACTIONS, (L, BATCH)), tf.int32),
        "reward": tf.constant(rng.normal(size=(L, BATCH)), tf.float32),
        "truncation_value": tf.zeros((L, BATCH)),
        "behaviour_log_prob": tf.constant(np.log(rng.uniform(0.2, 0.6, (L, BATCH))), tf.float32),
        "behaviour": {"eta": tf.constant(rng.uniform(0, 5, (L, BATCH)), tf.float32)},
        replay.MASK: tf.constant(mask),
        "core_state": (
            tuple(tf.constant(rng.normal(size=(BATCH, 8)), tf.float32) for _ in range(2)),
        ),
    }


def test_burn_in_reaches_the_state_of_an_unbroken_unroll():
    """The loss after burn-in from the stored state equals the loss on the trained part of one
    unroll over the whole item (padding holds the stored state, as the writer stores it)."""
    net = make_network()
    batch = make_batch()
    loss, _ = learning.make_loss_fn(net, CONFIG)(batch)
    # Unbroken reference: sequences 0 and 2 unrolled from step 0; sequence 1 (burn-in all
    # padding) starts at its first real step from the stored state.
    (state,) = batch["core_state"]
    inputs = [batch[k] for k in burn_in_learning.UNROLL_INPUTS]
    (adv_all, v_all), _ = net.unroll(*inputs, state)
    (adv_1, v_1), _ = net.unroll(*[x[BURN_IN:] for x in inputs], state)
    adv = tf.concat([adv_all[BURN_IN:, :1], adv_1[:, 1:2], adv_all[BURN_IN:, 2:]], 1)
    v = tf.concat([v_all[BURN_IN:, :1], v_1[:, 1:2], v_all[BURN_IN:, 2:]], 1)
    t = {k: batch[k][BURN_IN:] for k in ("reset", "action", "reward", replay.MASK)}
    shaping = transforms.reward_transform(CONFIG.reward_shaping)
    expected, _ = losses.dice_loss(
        losses.LossHyperparameters.from_config(CONFIG),
        adv,
        v,
        batch["behaviour"]["eta"][BURN_IN:],
        t["action"],
        batch["behaviour_log_prob"][BURN_IN:],
        shaping(t["reward"][:-1]),
        sequences.discounts_from_resets(t["reset"], CONFIG.discount, t[replay.MASK]),
        t[replay.MASK][:-1],
    )
    assert float(loss) == pytest.approx(float(expected), rel=1e-5)


def test_compiled_step_equals_eager_and_follows_the_schedule():
    weights = {}
    for compiled in (False, True):
        net = make_network()
        optimizer = learning.make_optimizer(CONFIG)
        step = learning.make_train_step(net, optimizer, CONFIG)
        run = step if compiled else step.python_function
        # A full batch a step: the learner's frames before step k are k steps' worth.
        frames = [tf.constant(k * CONFIG.frames_per_learner_step, tf.int64) for k in range(3)]
        stats = [run(make_batch(k), frames[k]) for k in range(3)]
        weights[compiled] = [v.numpy() for v in net.trainable_variables]
        # Table 5: linear warm-up over 2 updates, then linear decay to 0 at the last one (the
        # horizon: docs/papers/dice.md#departures-from-the-paper).
        total = CONFIG.gradient_updates
        for k, s in enumerate(stats):
            lr = float(schedules.warmup_linear_decay(k, 1e-3, 2, total))
            assert float(s["optimizer/learning_rate"]) == pytest.approx(lr, rel=1e-5)
            assert float(s["optimizer/weight_decay"]) == pytest.approx(0.01 * (1 - k / total))
        assert int(optimizer.iterations.numpy()) == 3
    for eager, compiled in zip(weights[False], weights[True]):
        np.testing.assert_allclose(eager, compiled, rtol=1e-4, atol=1e-6)
    initial = [v.numpy() for v in make_network().trainable_variables]
    assert any(not np.allclose(a, b) for a, b in zip(initial, weights[True]))


def test_repeat_mode_takes_k_updates_per_batch():
    """reuse_mode=repeat: one compiled learner step takes 2 AdamW updates on its batch, the
    second from the weights the first left: the updates of two learner steps of the default
    mode on that batch."""
    # Without the cut in the step (--trim_padding): the repeats run the same gradient code
    # either way, and the compiled cut is tested in
    # test_compiled_step_equals_eager_and_follows_the_schedule. With it each repeat traces its
    # gradient three times (the batch whole or in two halves), which took ~4 times the CPU.
    config = dataclasses.replace(CONFIG, reuse_mode="repeat", trim_padding=False)
    net = make_network(config)
    optimizer = learning.make_optimizer(config)
    step = learning.make_train_step(net, optimizer, config)
    # At one update's frames: the first update already moves the weights (lr > 0 past update 0).
    per_update = CONFIG.frames_per_learner_step
    stats = step(make_batch(), tf.constant(per_update, tf.int64))
    assert int(optimizer.iterations.numpy()) == 2
    # The second update reads the schedules one update on (the stats are the last update's).
    lr = float(schedules.warmup_linear_decay(2, 1e-3, 2, config.gradient_updates))
    assert float(stats["optimizer/learning_rate"]) == pytest.approx(lr, rel=1e-5)
    reference = make_network()
    one_update = learning.make_train_step(reference, learning.make_optimizer(CONFIG), CONFIG)
    for k in (1, 2):
        one_update.python_function(make_batch(), tf.constant(k * per_update, tf.int64))
    for a, b in zip(reference.trainable_variables, net.trainable_variables):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
    initial = [v.numpy() for v in make_network().trainable_variables]
    assert any(not np.allclose(a, b) for a, b in zip(initial, net.trainable_variables))
    # A learner step then trains one batch of new frames (not half of one).
    assert config.frames_per_learner_step == 2 * CONFIG.frames_per_learner_step


def test_the_schedules_follow_the_frames_consumed_not_the_update_count():
    """Items padded at episode ends consume fewer frames than a full batch
    (common.runtime.learning), so a run takes more updates than `gradient_updates`; the schedules
    are read at the frames consumed, in full updates' worth, and so still reach 0 at the frame
    budget."""
    net = make_network()
    optimizer = learning.make_optimizer(CONFIG)
    step = learning.make_train_step(net, optimizer, CONFIG).python_function
    per_update = CONFIG.frames_per_learner_step
    total = CONFIG.gradient_updates
    for frames in (4, 3 * per_update + 2, CONFIG.total_frames):  # a part update, 3 and a part
        position = frames / per_update
        stats = step(make_batch(), tf.constant(frames, tf.int64))
        if frames == CONFIG.total_frames:  # the budget: both schedules are done
            assert float(stats["optimizer/learning_rate"]) == 0.0
            assert float(stats["optimizer/weight_decay"]) == 0.0
            continue
        lr = float(schedules.warmup_linear_decay(position, 1e-3, 2, total))
        assert float(stats["optimizer/learning_rate"]) == pytest.approx(lr, rel=1e-6)
        wd = 0.01 * (1 - position / total)
        assert float(stats["optimizer/weight_decay"]) == pytest.approx(wd, rel=1e-6)
    assert int(optimizer.iterations.numpy()) == 3  # the bias correction still counts updates


def test_network_is_dices():
    config = config_lib.DiceConfig()
    net = networks.make_network(config, 18)
    net.create_variables((84, 84, 4), np.uint8)
    # 1,638,883 with the previous action and reward as LSTM inputs
    # (docs/papers/dice.md#worked-test-numbers, Test 15).
    assert sum(int(np.prod(v.shape)) for v in net.trainable_variables) == 1_638_883
    # Our choice: the previous reward enters shaped, f(1) = 2 log 2 (Test 1), and unclipped.
    plain = common_networks.ActorCriticNet(
        18, torso="deep", prev_reward_clip=None, prev_reward_transform="none"
    )
    plain.create_variables((84, 84, 4), np.uint8)
    for source, target in zip(net.variables, plain.variables):
        target.assign(source)
    obs = tf.constant(np.random.default_rng(0).integers(0, 255, (2, 84, 84, 4)), tf.uint8)
    prev_action, no_reset = tf.constant([1, 2]), tf.constant([False, False])
    state = net.initial_state(2)
    (a_shaped, _), _ = net.step(obs, prev_action, tf.constant([1.0, -3.0]), no_reset, state)
    shaped = tf.constant([2 * np.log(2.0), -np.log(4.0)], tf.float32)
    (a_plain, _), _ = plain.step(obs, prev_action, shaped, no_reset, state)
    np.testing.assert_allclose(a_shaped, a_plain, rtol=1e-5, atol=1e-6)


def test_microbatches_give_the_whole_batch_gradient():
    """Three slices of one sequence, each weighted by its real trained steps (6, 6 and 3 of
    15; the short one cut after its last real step, 8 positions of 11), update the weights
    exactly as the whole batch does (eager: the arithmetic is the same compiled; the compiled
    slices and their order are tested in tests/common/burn_in/test_burn_in_learning.py)."""
    frames = tf.constant(2 * CONFIG.frames_per_learner_step, tf.int64)  # past the warm-up's lr 0
    weights, stats = {}, {}
    for parts in (1, 3):
        config = dataclasses.replace(CONFIG, learner_microbatches=parts).validate()
        net = make_network(config)
        step = learning.make_train_step(net, learning.make_optimizer(config), config)
        stats[parts] = step.python_function(make_batch(), frames)
        weights[parts] = [v.numpy() for v in net.trainable_variables]
    for whole, sliced in zip(weights[1], weights[3]):
        np.testing.assert_allclose(whole, sliced, rtol=1e-4, atol=1e-6)
    initial = [v.numpy() for v in make_network().trainable_variables]
    assert any(not np.allclose(a, b) for a, b in zip(initial, weights[3]))  # the update moved
    for key in ("loss/total", "loss/v", "loss/q", "loss/pi", "optimizer/grad_norm"):
        assert float(stats[3][key]) == pytest.approx(float(stats[1][key]), rel=1e-5)
    with pytest.raises(ValueError, match="--learner_microbatches=2 must divide --batch_size=3"):
        dataclasses.replace(CONFIG, learner_microbatches=2).validate()


def test_cutting_the_padding_after_every_game_changes_no_loss_and_no_update():
    """A batch whose games all end 4 positions early trains the same without the padding
    after its new bootstrap position (`--trim_padding`)."""
    frames = tf.constant(2 * CONFIG.frames_per_learner_step, tf.int64)  # past the warm-up

    def train(batch):
        net = make_network()
        step = learning.make_train_step(net, learning.make_optimizer(CONFIG), CONFIG)
        stats = step.python_function(batch, frames)
        return stats, [v.numpy() for v in net.trainable_variables]

    stats = padding.check_the_cut_changes_nothing(train, make_batch(), BURN_IN, LENGTH)
    assert float(stats["optimizer/grad_norm"]) > 0


def test_greedy_evaluation_plays_argmax_a(tmp_path):
    """--eval_policy=greedy: the evaluator acts on argmax_a A(x, a) (the tau -> 0+ member of the
    family) whatever the best tile's eta > 0; the actors still sample softmax(eta · A)."""
    from dice import acting

    config = dataclasses.replace(CONFIG, eval_policy="greedy").validate()
    assert acting.behaviour_spec(config).evaluation == "best"
    # The evaluator the experiment describes is greedy; by default it plays the best region.
    experiment = builder_lib.build_experiment(builder.DiceBuilder(config), str(tmp_path))
    assert experiment.evaluator.greedy
    assert config_lib.DiceConfig(env="CartPole", network="mlp").eval_policy == "best_region"
    B = 64
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(B, 4)).astype(np.float32)
    prev_action, prev_reward = np.zeros(B, np.int32), np.zeros(B, np.float32)
    reset = np.ones(B, bool)
    eta = {"eta": np.geomspace(1e-3, 50.0, B).astype(np.float32)}
    make_policy = acting.make_policy(config)
    greedy, sampling = (
        make_policy(NUM_ACTIONS, (4,), np.float32, 0, flag) for flag in (True, False)
    )
    sampling.set_weights([v.numpy() for v in greedy.variables])
    state = greedy.initial_state(B)
    (advantage, _), _ = greedy.networks[0].step(obs, prev_action, prev_reward, reset, state[0])
    actions, _, _ = greedy.step(obs, prev_action, prev_reward, reset, state, eta)
    np.testing.assert_array_equal(actions, advantage.numpy().argmax(-1))
    sampled, _, _ = sampling.step(obs, prev_action, prev_reward, reset, state, eta)
    assert (sampled != actions).any()  # at eta near 0 the actors' softmax is near uniform

"""The DiCE train step (dice.md §2.5, Algorithm 3): sample-k items in, AdamW step out.

Per batch of items (burn-in + sequence + 1 bootstrap step, `common.patterns.SampleK`):
1. burn-in from the stored LSTM state without gradient (`common.sequences.burn_in_unroll`);
2. unroll the trained steps with gradient -> A(x_t, .), V(x_t);
3-8. `dice.losses.dice_loss` with each step's own eta, shaped rewards (Table 5) and the
   discounts of episode ends and padding;
9. AdamW with linear warm-up then linear decay of the learning rate, weight decay annealed to 0,
   global-norm clip (Table 5, A17-A18; `common.schedules.AdamW`).

`reuse_mode="repeat"` (dice.md A11's other reading) takes `times_sampled` optimiser steps on each
batch instead of sampling each item `times_sampled` times.
"""

import functools
from typing import Callable

import tensorflow as tf

from common import advantage_policy
from common import replay
from common import schedules
from common import sequences
from common import transforms
from dice import config as config_lib
from dice import losses

UNROLL_INPUTS = ("observation", "prev_action", "prev_reward", "reset")
TRAINED_FIELDS = ("reset", "action", "reward", "truncation_value", replay.MASK)


def make_optimizer(config: config_lib.DiceConfig) -> schedules.AdamW:
    """Table 5's AdamW; both schedules end at the run's last update (A18)."""
    total = config.gradient_updates
    return schedules.AdamW(
        learning_rate=functools.partial(
            schedules.warmup_linear_decay,
            peak_value=config.learning_rate,
            warmup_steps=config.warmup_steps,
            total_steps=total,
        ),
        weight_decay=functools.partial(
            schedules.linear_anneal, initial_value=config.weight_decay, total_steps=total
        ),
        beta_1=config.adam_beta1,
        beta_2=config.adam_beta2,
        epsilon=config.adam_epsilon,
        clip_norm=config.max_grad_norm or None,
    )


def make_loss_fn(network, config: config_lib.DiceConfig) -> Callable[[dict], tuple]:
    """batch -> (loss, stats): steps 1-8 for one batch of sample-k items."""
    hparams = losses.LossHyperparameters.from_config(config)
    shaping = transforms.reward_transform(config.reward_shaping)
    burn_in = config.burn_in

    def loss_fn(batch: dict):
        (core_state,) = batch["core_state"]
        (advantages, values), _ = sequences.burn_in_unroll(
            network.unroll,
            [batch[name] for name in UNROLL_INPUTS],
            core_state,
            burn_in,
            batch[replay.MASK],
        )
        trained = {name: batch[name][burn_in:] for name in TRAINED_FIELDS}
        etas = batch["behaviour"]["eta"][burn_in:]
        mask = trained[replay.MASK]
        return losses.dice_loss(
            hparams,
            advantages,
            values,
            etas,
            trained["action"],
            batch[advantage_policy.BEHAVIOUR_LOG_PROB][burn_in:],
            sequences.bootstrapped_rewards(
                trained["reward"][:-1], trained["truncation_value"][:-1], config.discount, shaping
            ),
            sequences.discounts_from_resets(trained["reset"], config.discount, mask),
            mask[:-1],
        )

    return loss_fn


def make_train_step(
    network, optimizer: schedules.AdamW, config: config_lib.DiceConfig
) -> Callable[[dict, tf.Tensor], dict]:
    """The compiled learner step `step(batch, frames) -> stats` (one tf.function). The schedules
    follow the optimiser's own update count, so `frames` is not used."""
    loss_fn = make_loss_fn(network, config)
    variables = network.trainable_variables
    optimizer.build(variables)
    repeats = config.times_sampled if config.reuse_mode == "repeat" else 1

    def step(batch: dict, frames: tf.Tensor) -> dict:
        del frames
        for _ in range(repeats):
            with tf.GradientTape() as tape:
                loss, stats = loss_fn(batch)
            optimizer_stats = optimizer.apply(tape.gradient(loss, variables), variables)
        return dict(stats, **{f"optimizer/{k}": v for k, v in optimizer_stats.items()})

    return tf.function(step, jit_compile=config.jit_compile)

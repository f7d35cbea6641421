"""The DiCE train step (App. B, Algorithm 3) on the shared burn-in learner
(`common.burn_in.burn_in_learning`): burn-in from the stored LSTM state without gradient, unroll the
trained steps, then `dice.losses.dice_loss` with each step's own eta, Table 5's reward shaping and
the discounts of episode ends and padding; AdamW with Table 5's schedules.
"""

from typing import TYPE_CHECKING, Callable

import tensorflow as tf

from common.burn_in import advantage_policy
from common.burn_in import burn_in_learning
from common.runtime import learning as common_learning
from common.models import networks as networks_lib
from common.replay import replay
from common.equations import sequences
from common.equations import transforms
from dice import config as config_lib
from dice import losses
from dice import networks

if TYPE_CHECKING:
    from common.runtime.agent import EnvSpec

make_optimizer = burn_in_learning.make_optimizer


def make_loss_fn(
    network: networks_lib.ActorCriticNet, config: config_lib.DiceConfig
) -> Callable[[dict], tuple]:
    """batch -> (loss, stats): steps 1-8 for one batch of sample-k items."""
    hparams = losses.LossHyperparameters.from_config(config)
    shaping = transforms.reward_transform(config.reward_shaping)

    def loss_fn(batch: dict):
        ((advantages, values),) = burn_in_learning.unroll_trained([network], batch, config.burn_in)
        steps = burn_in_learning.trained_steps(batch, config.burn_in)
        mask = steps[replay.MASK]
        return losses.dice_loss(
            hparams,
            advantages,
            values,
            steps["behaviour"]["eta"],
            steps["action"],
            steps[advantage_policy.BEHAVIOUR_LOG_PROB],
            sequences.bootstrapped_rewards(
                steps["reward"][:-1], steps["truncation_value"][:-1], config.discount, shaping
            ),
            sequences.discounts_from_resets(steps["reset"], config.discount, mask),
            mask[:-1],
        )

    return loss_fn


def make_train_step(
    network: networks_lib.ActorCriticNet,
    optimizer: burn_in_learning.Optimizer,
    config: config_lib.DiceConfig,
) -> Callable[[dict, tf.Tensor], dict]:
    """The compiled learner step `step(batch, frames) -> stats`."""
    return burn_in_learning.make_train_step(
        make_loss_fn(network, config), network.trainable_variables, optimizer, config
    )


def make_learner_parts(
    config: config_lib.DiceConfig, spec: "EnvSpec"
) -> common_learning.LearnerParts:
    """Network, compiled train step and AdamW of the learner process."""
    tf.random.set_seed(config.seed)
    network = networks.make_network(config, spec.num_actions)
    network.create_variables(spec.observation_shape, spec.observation_dtype)
    optimizer = make_optimizer(config)
    return common_learning.LearnerParts(
        train_step=make_train_step(network, optimizer, config),
        checkpointables={"network": network, "optimizer": optimizer},
        acting_variables=network.variables,
    )

"""The GDI train step (Algorithms 2-3, App. B) on the shared burn-in learner
(`common.burn_in.burn_in_learning`): burn-in from each network's stored LSTM state without gradient,
unroll the trained steps, then `gdi.losses.gdi_loss` with each step's own lambda and each
network's reward shaping (Table 6), plus the auxiliary forward and inverse dynamics losses of
each network (Table 6; their form: docs/papers/gdi.md#departures-from-the-paper); AdamW with
Table 6's schedules. GDI-H3 trains both networks on the same batch in one compiled step.
"""

from typing import TYPE_CHECKING, Any, Callable, Sequence

import tensorflow as tf

from common.burn_in import advantage_policy
from common.burn_in import burn_in_learning
from common.burn_in import dynamics
from common.runtime import learning as common_learning
from common.models import networks as networks_lib
from common.replay import replay
from common.equations import sequences
from common.equations import transforms
from gdi import config as config_lib
from gdi import losses
from gdi import networks as gdi_networks

if TYPE_CHECKING:
    from common.runtime.agent import EnvSpec

make_optimizer = burn_in_learning.make_optimizer


def shaped_rewards(steps: dict, config: config_lib.GdiConfig) -> list[tf.Tensor]:
    """Per network, [T, B] rewards in its shaping (RS1; RS2 for H3's second network) with each
    truncation's bootstrap V_i(x_final) folded in (one stored value per network)."""
    shapings = [transforms.reward_transform(name) for name in config.reward_shapings]
    rewards = sequences.bootstrapped_rewards(
        steps["reward"][:-1],
        steps["truncation_value"][:-1],
        config.discount,
        shapings if len(shapings) > 1 else shapings[0],
    )
    return tf.unstack(rewards, axis=-1) if len(shapings) > 1 else [rewards]


def make_loss_fn(nets: Sequence, heads: Sequence, config: config_lib.GdiConfig) -> Callable:
    """batch -> (loss, stats) for one batch of sample-k items."""
    hparams = losses.LossHyperparameters.from_config(config)
    components = gdi_networks.component_networks(config)

    def loss_fn(batch: dict):
        outputs = burn_in_learning.unroll_trained(nets, batch, config.burn_in, return_features=True)
        steps = burn_in_learning.trained_steps(batch, config.burn_in)
        mask = steps[replay.MASK]
        etas, weights = losses.lambda_mixture(steps["behaviour"])
        total, stats = losses.gdi_loss(
            hparams,
            [advantages for advantages, _, _ in outputs],
            [values for _, values, _ in outputs],
            components,
            etas,
            weights,
            steps["action"],
            steps[advantage_policy.BEHAVIOUR_LOG_PROB],
            shaped_rewards(steps, config),
            sequences.discounts_from_resets(steps["reset"], config.discount, mask),
            mask[:-1],
        )
        pairs = dynamics.pair_mask(steps["reset"], mask)
        # One head set per torso: with --shared_torso the only one reads network 1's embeddings.
        for i, (head, (_, _, features)) in enumerate(zip(heads, outputs), start=1):
            forward, inverse = head.losses(features, steps["action"], pairs, mask[:-1])
            total += config.aux_forward_weight * forward + config.aux_inverse_weight * inverse
            stats[f"loss/forward_dynamics_{i}"] = forward
            stats[f"loss/inverse_dynamics_{i}"] = inverse
        stats["loss/total"] = total
        return total, stats

    return loss_fn


def trainable_variables(nets: Sequence, heads: Sequence) -> list[tf.Variable]:
    """theta_1 (and theta_2): each network's variables (a shared torso's once), then the
    dynamics heads'."""
    return networks_lib.unique_variables(
        v for model in (*nets, *heads) for v in model.trainable_variables
    )


def make_train_step(
    nets: Sequence,
    heads: Sequence,
    optimizer: burn_in_learning.Optimizer,
    config: config_lib.GdiConfig,
) -> Callable[[dict, tf.Tensor], dict]:
    """The compiled learner step `step(batch, frames) -> stats`."""
    return burn_in_learning.make_train_step(
        make_loss_fn(nets, heads, config), trainable_variables(nets, heads), optimizer, config
    )


def make_learner_parts(
    config: config_lib.GdiConfig, spec: "EnvSpec"
) -> common_learning.LearnerParts:
    """Networks, dynamics heads, compiled train step and AdamW of the learner process."""
    tf.random.set_seed(config.seed)
    nets = gdi_networks.make_networks(config, spec.num_actions)
    for net in nets:
        net.create_variables(spec.observation_shape, spec.observation_dtype)
    heads = gdi_networks.make_dynamics(config, spec.num_actions, nets)
    optimizer = make_optimizer(config)
    checkpointables: dict[str, Any] = {"optimizer": optimizer}
    for i, net in enumerate(nets, start=1):
        checkpointables[f"network_{i}"] = net  # a shared torso is saved once, restored to both
    for i, head in enumerate(heads, start=1):
        checkpointables[f"dynamics_{i}"] = head
    return common_learning.LearnerParts(
        train_step=make_train_step(nets, heads, optimizer, config),
        checkpointables=checkpointables,
        # The order of AdvantageMixturePolicy.set_weights: network by network.
        acting_variables=networks_lib.unique_variables(v for net in nets for v in net.variables),
    )

"""The Reactor train step (§3.2-§3.4; docs/papers/reactor.md#equations-in-code): a batch of
sequences in; Adam step, target-network copy, new priorities and the new-key estimate out.

The loop around it (sampling, writing priorities back, publishing, checkpoints) is
`common.runtime.learning`. One step, for sequences x_0..x_T (T = 32) sampled with probability P(k)
from a replay of N sequences:

1. The online network unrolls over x_0..x_{T-1}, the target network over x_0..x_T, both from the
   actor's stored LSTM state at x_0 (§3.4 unrolls the target over frames 2-33 from the state at
   frame 2; the replay stores the state at each item's first step only, so the target starts one
   frame earlier and drops its first output: docs/papers/reactor.md#departures-from-the-paper).
2. Traces, Retrace targets and the policy gradient (`reactor.losses`), each sequence's loss times
   its importance weight (1 / (N P(k))) ** importance_exponent, divided by the batch maximum.
3. Adam (lr 5e-5, beta1 = 0, §3.4.1) on the online network; every `target_update_period`
   learner steps the target network becomes a copy of it (§4.1: T_update = 1000).
4. Priorities p + floor, folded with the replay's uniform mixing (`reactor.priorities`), go back to
   Reverb; their Horvitz-Thompson means move the estimate new keys are inserted with
   (`update_priority_state`, whose numpy twin is `reactor.priorities.PriorityEstimates`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import tensorflow as tf

from common.runtime import acting
from common.equations import distributional
from common.equations import instruments
from common.equations import sequences
from common.equations import transforms
from reactor import config as config_lib
from reactor import losses
from reactor import priorities as priorities_lib

if TYPE_CHECKING:
    from reactor import networks


def make_optimizer(config: config_lib.ReactorConfig) -> tf.keras.optimizers.Optimizer:
    """Adam with the paper's zero momentum (§3.4.1) and the library's beta2 and epsilon."""
    return tf.keras.optimizers.Adam(
        learning_rate=config.learning_rate,
        beta_1=config.adam_beta1,
        beta_2=config.adam_beta2,
        epsilon=config.adam_epsilon,
    )


class PriorityState(tf.Module):
    """The learner's side of lazy prioritisation (reactor/priorities.py): `mean_weight`, the
    estimated mean of priority ** alpha over the replay; `unassigned_sum / unassigned_count`, the
    estimated mean of priority ** alpha over the keys not yet assigned one; `insert_priority`, what
    actors insert new keys with (published with the acting weights). All are checkpointed; a
    checkpoint written before the unassigned estimate existed resumes it from its initial value."""

    def __init__(self, initial_priority: float = 1.0) -> None:
        super().__init__(name="priority_state")

        def scalar(value):
            return tf.Variable(value, trainable=False, dtype=tf.float32)

        self.mean_weight = scalar(initial_priority)
        self.unassigned_sum = scalar(initial_priority)
        self.unassigned_count = scalar(1.0)
        self.insert_priority = scalar(initial_priority)


def update_priority_state(
    state: PriorityState, priorities: tf.Tensor, info: dict, config: config_lib.ReactorConfig
) -> tf.Tensor:
    """The priorities to write to Reverb for a batch's keys, given their new `priorities` [B]
    (floored), and the new estimates (`reactor.priorities.PriorityEstimates` is the numpy twin).

    Each key's Horvitz-Thompson weight 1 / (N P(k)) uses Reverb's N and P(k). A key is being
    assigned for the first time when Reverb counts this sample as its first (`times_sampled` 1);
    `lazy` averages only those keys' priorities, so new keys enter at the mean priority of the
    keys still unassigned, the level the tree's estimates give them (§3.3; module docstring of
    reactor/priorities.py); `lazy_global` averages every key's.
    """
    alpha, epsilon = config.priority_exponent, config.replay_uniform_epsilon
    if config.prioritisation == "uniform" or alpha == 0:
        return priorities  # sampled with priority ** 0: nothing to estimate
    rate = config.priority_estimate_rate
    weights = priorities**alpha
    ht = importance_weights(info, 1.0, normalise=False)
    mean_weight = state.mean_weight
    mean_weight.assign_add(rate * (tf.reduce_sum(ht * weights) / tf.reduce_sum(ht) - mean_weight))
    first = tf.cast(tf.equal(info["times_sampled"], 1), tf.float32)
    total, count = state.unassigned_sum, state.unassigned_count
    total.assign_add(rate * (tf.reduce_sum(first * ht * weights) - total))
    count.assign_add(rate * (tf.reduce_sum(first * ht) - count))
    written = priorities_lib.sampling_priorities(priorities, mean_weight, epsilon, alpha)
    if config.prioritisation == "max":  # PER: new keys at the largest priority written so far
        state.insert_priority.assign(tf.maximum(state.insert_priority, tf.reduce_max(written)))
        return written
    level = mean_weight.read_value()
    if config.prioritisation == "lazy":  # no first samples for ~1e4 batches: fall back
        level = tf.where(count > 0, total / tf.maximum(count, 1e-30), level)
    # A new key's weight is its estimate plus the uniform share, as every written key's.
    state.insert_priority.assign(
        priorities_lib.sampling_priorities(level ** (1 / alpha), mean_weight, epsilon, alpha)
    )
    return written


def importance_weights(info: dict, exponent: float, normalise: bool) -> tf.Tensor:
    """w = (1 / (N P(k))) ** exponent with Reverb's actual P(k) and N (§3.3), [B] float32."""
    size = tf.cast(info["table_size"], tf.float64)
    weights = (1.0 / (size * tf.cast(info["probability"], tf.float64))) ** exponent
    if normalise:
        weights = weights / tf.reduce_max(weights)
    return tf.cast(weights, tf.float32)


def copy_variables(source: tf.Module, destination: tf.Module) -> tf.Operation:
    return tf.group([dst.assign(src) for src, dst in zip(source.variables, destination.variables)])


def make_train_step(
    network: networks.ReactorNet,
    target_network: networks.ReactorNet,
    optimizer: tf.keras.optimizers.Optimizer,
    priority_state: PriorityState,
    config: config_lib.ReactorConfig,
) -> Callable[[dict, tf.Tensor], dict]:
    """`step(batch, frames) -> stats` as one tf.function (see the module docstring). `batch`
    holds the items' steps [T+1, B, ...], `core_state` [B, ...] x4, `info` and `learner_step`."""
    hparams = losses.LossHyperparameters.from_config(config)
    support = distributional.make_support(config.num_atoms, config.v_min, config.v_max)
    shaping = transforms.reward_transform(config.reward_shaping)
    variables = network.trainable_variables
    optimizer.build(variables)

    def step(batch: dict, frames: tf.Tensor) -> dict:
        del frames  # no schedule: the paper's learning rate is constant
        observation, reset = batch["observation"], batch["reset"]
        batch_size = tf.shape(batch["reward"])[1]
        if config.replay_lstm_state == "stored":
            state = tuple(batch[acting.CORE_STATE])
        else:
            state = network.initial_state(batch_size)
        target, _ = target_network.unroll(observation, reset, state)
        rewards = sequences.bootstrapped_rewards(
            batch["reward"][:-1], batch["truncation_value"][:-1], config.discount, shaping
        )
        discounts = sequences.discounts_from_resets(reset, config.discount)
        weights = importance_weights(
            batch["info"], config.importance_exponent, config.normalise_importance_weights
        )
        with tf.GradientTape() as tape:
            online, _ = network.unroll(observation[:-1], reset[:-1], state)
            if config.trace_policy == "target":
                trace_probs = target.policy_probs
            else:  # online pi on x_1..x_{T-1}; only the target net sees x_T (§3.4)
                trace_probs = tf.concat([online.policy_probs, target.policy_probs[-1:]], 0)
            outputs = losses.reactor_loss(
                hparams,
                online,
                target,
                tf.stop_gradient(trace_probs),
                batch["action"],
                batch["behaviour_probs"][:-1],
                rewards,
                discounts,
                weights,
                support,
            )
        gradients, clip_stats = instruments.clip_by_global_norm(
            tape.gradient(outputs.loss, variables), config.max_grad_norm
        )
        before = instruments.snapshot(variables)
        optimizer.apply_gradients(zip(gradients, variables))
        updates = batch["learner_step"] + 1
        tf.cond(
            updates % config.target_update_period == 0,
            lambda: copy_variables(network, target_network),
            tf.no_op,
        )

        new_priorities = outputs.priorities + config.priority_floor
        written = update_priority_state(priority_state, new_priorities, batch["info"], config)
        return dict(
            outputs.stats,
            **{
                "priorities": written,
                "priority/mean": tf.reduce_mean(new_priorities),
                "priority/insert": priority_state.insert_priority.read_value(),
                "priority/first_sampled": tf.reduce_mean(
                    tf.cast(tf.equal(batch["info"]["times_sampled"], 1), tf.float32)
                ),
                "replay/min_importance_weight": tf.reduce_min(weights),
                **clip_stats,
                **instruments.mean_step(before, variables),
            },
        )

    return tf.function(step, jit_compile=config.jit_compile, autograph=False)

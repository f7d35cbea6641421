"""The IMPALA train step: unroll batch in, V-trace loss, clipped gradients, RMSProp step out.

The generic loop (sampling, publishing, checkpoints, logging) is `common.runtime.learning`; this
module supplies what is IMPALA's: the optimiser with TF1 semantics (our choice,
docs/papers/impala.md#departures-from-the-paper) and the step itself (the §4.2 loss of
`impala.losses`). The shared pieces it uses live in `common`: the linear learning-rate anneal (Table
G.1) in `common.equations.schedules`, discounts from episode starts and truncation bootstraps in
`common.equations.sequences`.
"""

from typing import Callable, Sequence

import tensorflow as tf

from common.models import networks as common_networks
from common.equations import instruments
from common.replay import replay
from common.equations import schedules
from common.equations import sequences
from impala import config as config_lib
from impala import losses


class RMSProp(tf.Module):
    """RMSProp as TF1's `tf.compat.v1.train.RMSPropOptimizer` (uncentred) computes it:

        ms  <- ms + (1 - decay) (g^2 - ms)
        mom <- momentum mom + lr g / sqrt(ms + epsilon)
        w   <- w - mom

    with `ms` initialised to `initial_mean_square`. TF1 starts it at 1.0 (our default,
    `--optimizer=rmsprop_tf1`), which damps the first updates; Keras 2.15's `RMSprop` computes the
    same update from 0.0 (its epsilon is also inside the square root), so `initial_mean_square=0`
    reproduces Keras.
    """

    def __init__(
        self,
        decay: float,
        momentum: float,
        epsilon: float,
        initial_mean_square: float = 1.0,
        name: str = "rmsprop",
    ) -> None:
        super().__init__(name=name)
        self.decay = decay
        self.momentum = momentum
        self.epsilon = epsilon
        self.initial_mean_square = initial_mean_square
        self.mean_squares: list[tf.Variable] = []
        self.moments: list[tf.Variable] = []

    def build(self, variables: Sequence[tf.Variable]) -> None:
        """Creates the slots eagerly (once), so the update can run under XLA."""
        if self.mean_squares:
            return
        for var in variables:
            name = var.name.split(":")[0]
            self.mean_squares.append(
                tf.Variable(
                    tf.fill(var.shape, tf.constant(self.initial_mean_square, var.dtype)),
                    trainable=False,
                    name=f"{name}/ms",
                )
            )
            self.moments.append(
                tf.Variable(tf.zeros_like(var), trainable=False, name=f"{name}/mom")
            )

    def apply(
        self,
        gradients: Sequence[tf.Tensor],
        variables: Sequence[tf.Variable],
        learning_rate: tf.Tensor,
    ) -> None:
        """One update of every variable with its gradient (`build` must have run)."""
        if len(self.mean_squares) != len(variables):
            raise ValueError(
                f"optimizer built for {len(self.mean_squares)} variables, "
                f"got {len(variables)}; call build(variables) first"
            )
        for grad, var, ms, mom in zip(gradients, variables, self.mean_squares, self.moments):
            lr = tf.cast(learning_rate, var.dtype)
            ms.assign_add((1.0 - self.decay) * (tf.square(grad) - ms))
            mom.assign(self.momentum * mom + lr * grad * tf.math.rsqrt(ms + self.epsilon))
            var.assign_sub(mom)


def make_optimizer(config: config_lib.ImpalaConfig) -> RMSProp:
    """The optimiser named by `config.optimizer` with the Table G.1 coefficients."""
    initial = {"rmsprop_tf1": 1.0, "rmsprop_keras": 0.0}[config.optimizer]
    return RMSProp(
        decay=config.rmsprop_decay,
        momentum=config.rmsprop_momentum,
        epsilon=config.rmsprop_epsilon,
        initial_mean_square=initial,
    )


def make_train_step(
    network: common_networks.ActorCriticNet, optimizer: RMSProp, config: config_lib.ImpalaConfig
) -> Callable[[dict, tf.Tensor], dict]:
    """The compiled learner step `step(batch, frames) -> stats` (one tf.function).

    `batch` is an unroll batch from the queue table: time-major [T+1, B, ...] arrays
    `observation, prev_action, prev_reward, reset, action, behaviour_logits, reward,
    truncation_value` (step T only
    provides the bootstrap observation), plus `core_state` at step 0 when the network is
    recurrent. `frames` is the frame count before this step; it sets the learning rate.
    """
    hparams = losses.LossHyperparameters.from_config(config)
    variables = network.trainable_variables
    optimizer.build(variables)

    def step(batch: dict, frames: tf.Tensor) -> dict:
        if config.lr_anneal:
            learning_rate = schedules.linear_anneal(
                frames, config.learning_rate, config.total_frames
            )
        else:
            learning_rate = tf.constant(config.learning_rate, tf.float32)
        core_state = batch.get("core_state")
        if core_state is None:
            core_state = network.initial_state(tf.shape(batch["reward"])[1])
        # Items of the sample-k pattern: burn-in steps first (no gradient), padding masked out.
        mask = batch.get(replay.MASK)
        burn_in = config.burn_in if mask is not None else 0
        trained = {
            key: value[burn_in:]
            for key, value in batch.items()
            if key
            in ("reset", "action", "behaviour_logits", "reward", "truncation_value", replay.MASK)
        }
        if mask is not None:
            mask = trained[replay.MASK][:-1]
        with tf.GradientTape() as tape:
            (logits, values), _ = sequences.burn_in_unroll(
                network.unroll,
                (batch["observation"], batch["prev_action"], batch["prev_reward"], batch["reset"]),
                core_state,
                burn_in,
                batch.get(replay.MASK),
            )
            loss, stats = losses.impala_loss(
                hparams,
                target_logits=logits[:-1],
                values=values[:-1],
                bootstrap_value=values[-1],
                behaviour_logits=trained["behaviour_logits"][:-1],
                actions=trained["action"][:-1],
                rewards=sequences.bootstrapped_rewards(
                    trained["reward"][:-1], trained["truncation_value"][:-1], config.discount
                ),
                discounts=sequences.discounts_from_resets(
                    trained["reset"],
                    config.discount,
                    None if mask is None else trained[replay.MASK],
                ),
                mask=mask,
            )
        gradients, clip_stats = instruments.clip_by_global_norm(
            tape.gradient(loss, variables), config.max_grad_norm
        )
        before = instruments.snapshot(variables)
        optimizer.apply(gradients, variables, learning_rate)
        return dict(
            stats,
            **clip_stats,
            **instruments.mean_step(before, variables),
            **{"optimizer/learning_rate": learning_rate},
        )

    return tf.function(step, jit_compile=config.jit_compile, autograph=False)

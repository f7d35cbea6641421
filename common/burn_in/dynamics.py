"""Auxiliary forward and inverse dynamics tasks on a network's torso embeddings (GDI Table 6
"Auxiliary Forward Dynamic Task Yes", "Auxiliary Inverse Dynamic Task Yes"; LBC Table 3 lists the
same).

The papers name the tasks only; their form is our choice
(docs/papers/gdi.md#departures-from-the-paper, docs/papers/lbc.md#departures-from-the-paper):
- inverse dynamics: an MLP of [e_t, e_{t+1}] gives logits of a_t; cross-entropy with a_t;
- forward dynamics: an MLP of [e_t, one-hot a_t] predicts e_{t+1}, scored by
  ½‖ê_{t+1} − sg(e_{t+1})‖² (`half_sum_squares`, GDI's) or by the mean over the D features of
  (ê_{t+1} − sg(e_{t+1}))² (`mse`, LBC's): the same direction, D/2 times smaller.
Each is summed over the transitions (t, t+1) between real steps of one episode and divided by
the number of real steps t, the denominator of the RL losses: a batch's mean is then exactly
the weighted sum of its slices' means (`common.burn_in.burn_in_learning`'s micro-batches). The heads
are separate from the acting network: actors never need them, so they are trained and checkpointed
with the learner only.
"""

from typing import Any

import tensorflow as tf

from common.equations import sequences
from common.settings.config import FORWARD_LOSSES


def _mlp(hidden: int, outputs: int, inputs: int) -> tf.keras.Sequential:
    model = tf.keras.Sequential(
        [tf.keras.layers.Dense(hidden, activation="relu"), tf.keras.layers.Dense(outputs)]
    )
    # Built now: the optimiser is built from the variables before the first traced step.
    model.build((None, inputs))
    return model


class DynamicsHeads(tf.keras.Model):
    """The two auxiliary heads of one network; `hidden` = 256 is our choice (GDI's torso width)."""

    def __init__(
        self,
        num_actions: int,
        feature_units: int,
        hidden: int = 256,
        forward_loss: str = "half_sum_squares",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if forward_loss not in FORWARD_LOSSES:
            raise ValueError(f"forward_loss={forward_loss!r} must be one of {FORWARD_LOSSES}")
        self.num_actions = num_actions
        self.forward_loss = forward_loss
        self.inverse_model = _mlp(hidden, num_actions, 2 * feature_units)
        self.forward_model = _mlp(hidden, feature_units, feature_units + num_actions)

    def losses(
        self, features: tf.Tensor, actions: tf.Tensor, pair_mask: tf.Tensor, step_mask: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """(forward loss, inverse loss) per real step (module docstring).

        Args:
          features: [T+1, B, D] torso embeddings e_t, with gradient.
          actions: [T+1, B] a_t (row T is unused).
          pair_mask: [T, B] 1 where steps t and t+1 are real steps of one episode (`pair_mask`).
          step_mask: [T, B] 1 where step t is real (the RL losses' mask).
        """
        current, following = features[:-1], features[1:]
        taken = actions[:-1]
        logits = self.inverse_model(tf.concat([current, following], -1))
        inverse = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=taken, logits=logits)
        one_hot = tf.one_hot(taken, self.num_actions, dtype=current.dtype)
        predicted = self.forward_model(tf.concat([current, one_hot], -1))
        squares = tf.square(predicted - tf.stop_gradient(following))
        if self.forward_loss == "mse":
            forward = tf.reduce_mean(squares, -1)
        else:
            forward = 0.5 * tf.reduce_sum(squares, -1)
        pair_mask = tf.cast(pair_mask, forward.dtype)
        return (
            sequences.masked_mean(forward * pair_mask, step_mask),
            sequences.masked_mean(inverse * pair_mask, step_mask),
        )


def pair_mask(resets: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """[T, B] 1 where (x_t, a_t, x_{t+1}) is a real transition: both steps real (mask [T+1, B])
    and x_{t+1} not the first step of a new episode (resets [T+1, B])."""
    mask = tf.cast(mask, tf.float32)
    return mask[:-1] * mask[1:] * (1.0 - tf.cast(resets[1:], tf.float32))

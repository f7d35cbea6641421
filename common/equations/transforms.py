"""Reward clipping, reward shaping and value rescaling, one function per printed formula.

Every function is elementwise, takes anything `tf.convert_to_tensor` accepts and returns a tensor of
the input's float dtype (integer rewards become float32). Which paper uses which transform:

- `clip_rewards`: clip(r, -1, 1). IMPALA Atari and single-task DMLab (Tables D.3, G.1); Reactor
  (a choice: Reactor prints no reward processing beyond reusing DQN's;
  docs/papers/reactor.md#departures-from-the-paper).
- `optimistic_asymmetric_clipping`: 0.3 min(tanh r, 0) + 5 max(tanh r, 0). IMPALA DMLab-30 (Fig.
  D.1); LBC RS3 (Table 3).
- `soft_asymmetric_clipping`: 5 tanh(r/5) for r >= 0, 1.5 tanh(r/5) for r < 0. IMPALA's released
  code as we recall it; not the paper's formula.
- `asymmetric_log_shaping`: log(|r|+1)(2·1{r>=0} − 1{r<0}). DiCE (Table 5); GDI-I3 and GDI-H3 shape
  1 (Table 6); LBC RS2 (Table 3).
- `fourth_root_shaping`: sign(r)((|r|+1)^0.25 − 1) + 0.001 r. GDI-H3 shape 2 (Table 6).
- `value_rescaling`: h(x) = sign(x)(sqrt(|x|+1) − 1) + eps x (Pohlen et al. 2018). LBC RS1 is h with
  eps = 0.001 applied to rewards (Table 3).
- `inverse_value_rescaling`: h^-1 in exact closed form (Pohlen et al. 2018), for agents that learn
  in h-space.

DiCE, GDI and LBC use no value rescaling of their targets (none is printed in DiCE Table 5, GDI
Table 6 or LBC Table 3): in LBC h appears only as a reward shaping. `REWARD_TRANSFORMS` maps the
names a config uses to these functions.
"""

from typing import Callable

import tensorflow as tf

# LBC Table 3, RS1: sign(x)(sqrt(|x|+1) - 1) + 0.001 x. GDI Table 6 uses the same 0.001 in shape 2.
VALUE_RESCALING_EPSILON = 1e-3


def _as_float(x) -> tf.Tensor:
    x = tf.convert_to_tensor(x)
    return x if x.dtype.is_floating else tf.cast(x, tf.float32)


def _check_epsilon(epsilon: float) -> None:
    # h is strictly increasing (hence invertible) only for eps >= 0.
    if not epsilon >= 0.0:
        raise ValueError(f"epsilon must be >= 0 for h to be invertible, got epsilon={epsilon!r}")


def clip_rewards(rewards: tf.Tensor, low: float = -1.0, high: float = 1.0) -> tf.Tensor:
    """Clip to [low, high]; default [-1, 1] (IMPALA Table D.3 and Table G.1)."""
    if not low < high:
        raise ValueError(f"clip_rewards needs low < high, got low={low!r}, high={high!r}")
    return tf.clip_by_value(_as_float(rewards), low, high)


def optimistic_asymmetric_clipping(rewards: tf.Tensor) -> tf.Tensor:
    """0.3·min(tanh r, 0) + 5.0·max(tanh r, 0): IMPALA Fig. D.1 (DMLab-30), LBC Table 3 RS3.

    Saturates at -0.3 and +5: a positive reward weighs up to 5/0.3 times more than a negative one.
    """
    squashed = tf.tanh(_as_float(rewards))
    return 0.3 * tf.minimum(squashed, 0.0) + 5.0 * tf.maximum(squashed, 0.0)


def soft_asymmetric_clipping(rewards: tf.Tensor) -> tf.Tensor:
    """5·tanh(r/5) for r >= 0, 1.5·tanh(r/5) for r < 0.

    Not the paper's formula (Fig. D.1): it is recalled from the released IMPALA code (not checked
    against it) and offered as the option `soft_asymmetric_code` next to the paper's
    `optimistic_asymmetric_clipping`.
    """
    rewards = _as_float(rewards)
    squashed = tf.tanh(rewards / 5.0)
    return tf.where(rewards >= 0.0, 5.0 * squashed, 1.5 * squashed)


def asymmetric_log_shaping(rewards: tf.Tensor) -> tf.Tensor:
    """log(|r| + 1)·(2·1{r >= 0} − 1{r < 0}): DiCE Table 5, GDI Table 6, LBC Table 3 RS2.

    Positive rewards become 2·log(1 + r) and negative ones −log(1 + |r|): not an odd function.
    LBC prints the second indicator as 1{r <= 0}; at r = 0 the factor log(1) = 0 makes both readings
    equal, so one function serves all three papers.
    """
    rewards = _as_float(rewards)
    magnitude = tf.math.log1p(tf.abs(rewards))
    return tf.where(rewards >= 0.0, 2.0 * magnitude, -magnitude)


def fourth_root_shaping(rewards: tf.Tensor) -> tf.Tensor:
    """sign(r)·((|r| + 1)^0.25 − 1) + 0.001·r: GDI Table 6, "GDI-H3 reward shape 2".

    (|r| + 1)^0.25 − 1 is evaluated as expm1(log1p(|r|) / 4), which keeps its digits for small |r|.
    """
    rewards = _as_float(rewards)
    compressed = tf.math.expm1(0.25 * tf.math.log1p(tf.abs(rewards)))
    return tf.sign(rewards) * compressed + 0.001 * rewards  # Table 6: 0.001·r


def value_rescaling(x: tf.Tensor, epsilon: float = VALUE_RESCALING_EPSILON) -> tf.Tensor:
    """h(x) = sign(x)(sqrt(|x| + 1) − 1) + eps·x (Pohlen et al. 2018; LBC Table 3 RS1 with eps =
    0.001).

    Evaluated as x / (1 + sqrt(1 + |x|)) + eps·x, the same value (multiply sqrt(|x|+1) − 1 by its
    conjugate) without cancellation near 0 and with the right derivative 1/2 + eps at x = 0.
    """
    _check_epsilon(epsilon)
    x = _as_float(x)
    return x / (1.0 + tf.sqrt(1.0 + tf.abs(x))) + epsilon * x


def inverse_value_rescaling(x: tf.Tensor, epsilon: float = VALUE_RESCALING_EPSILON) -> tf.Tensor:
    """h^-1(x) = sign(x)·(((sqrt(1 + 4 eps (|x| + 1 + eps)) − 1) / (2 eps))² − 1) (Pohlen et al.
    2018).

    The printed form divides by eps and subtracts nearly equal numbers. Write D = 1 + 2 eps + s with
    s = sqrt((1 + 2 eps)² + 4 eps |x|) (the same square root: 1 + 4 eps (|x| + 1 + eps) equals
    (1 + 2 eps)² + 4 eps |x|). Rationalising, the bracket equals 1 + d with d = 2|x| / D, so
    h^-1(x) = sign(x)·d·(d + 2) = (2x / D)·(d + 2) exactly. This form is finite at eps = 0 (where it
    gives sign(x)((|x| + 1)² − 1)), loses no digits near x = 0 and has the right derivative there.
    """
    _check_epsilon(epsilon)
    x = _as_float(x)
    abs_x = tf.abs(x)
    denominator = 1.0 + 2.0 * epsilon + tf.sqrt((1.0 + 2.0 * epsilon) ** 2 + 4.0 * epsilon * abs_x)
    d = 2.0 * abs_x / denominator
    return 2.0 * x / denominator * (d + 2.0)


def identity(rewards: tf.Tensor) -> tf.Tensor:
    """No transform ("Reward Clip: No" with no shaping)."""
    return _as_float(rewards)


# Keyed by common.settings.config.REWARD_TRANSFORMS, in its order (tests assert they are equal), so
# that configs validate the names without importing TensorFlow.
REWARD_TRANSFORMS: dict[str, Callable[..., tf.Tensor]] = {
    "none": identity,
    "clip": clip_rewards,
    "optimistic_asymmetric": optimistic_asymmetric_clipping,
    "soft_asymmetric_code": soft_asymmetric_clipping,
    "asymmetric_log": asymmetric_log_shaping,
    "fourth_root": fourth_root_shaping,
    "value_rescaling": value_rescaling,
}


def reward_transform(name: str) -> Callable[..., tf.Tensor]:
    """The reward transform a config names, e.g. `reward_transform("asymmetric_log")`."""
    try:
        return REWARD_TRANSFORMS[name]
    except KeyError:
        raise ValueError(
            f"unknown reward transform {name!r}; allowed: {sorted(REWARD_TRANSFORMS)}"
        ) from None

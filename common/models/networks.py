"""IMPALA's networks (§5, Fig. 3): torsos, the LSTM core with its reset mask, and the heads.

`ActorCriticNet` serves both sides of the actor-learner split with the same weights:
- `step`: one time step for a batch of envs (actors);
- `unroll`: T steps (learner). The torso runs once on the time-folded batch [T*B, ...] (IMPALA §3.1:
  the convolutional network runs on all inputs in parallel, time folded into batch), the LSTM steps
  over T with `tf.scan`, zeroing its state where an episode starts.

Everything is channels-last (NHWC), the layout CPU convolutions want; Atari frames arrive as uint8
and are scaled by 1/255 inside the torso (a choice: the papers do not give the scaling).
"""

from __future__ import annotations

import zlib
from typing import Any, Callable, Iterable, Sequence, TypeVar

import numpy as np
import tensorflow as tf

from common.equations import transforms
from common.models import recurrent
from common.settings.config import PRECISIONS

LSTMState = tuple[tf.Tensor, ...]  # (h, c) of the core, or () without one
_Built = TypeVar("_Built")


def build_in_precision(precision: str, build: Callable[[], _Built]) -> _Built:
    """Calls `build` under the Keras dtype policy of `precision`; the layers it creates keep it.

    "bfloat16" is Keras' "mixed_bfloat16": float32 variables (the learner's weights load as they
    are), bfloat16 arithmetic. Outputs and the recurrent state stay float32 at the network's
    boundary (`ActorCriticNet`), so callers see the same dtypes either way.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    previous = tf.keras.mixed_precision.global_policy()
    tf.keras.mixed_precision.set_global_policy(
        "mixed_bfloat16" if precision == "bfloat16" else "float32"
    )
    try:
        return build()
    finally:
        tf.keras.mixed_precision.set_global_policy(previous)


def _kernel_initializer() -> tf.keras.initializers.Initializer:
    # choice (no paper gives an initialisation): truncated normal with std 1/sqrt(fan_in)
    # (Sonnet-1's default), zero biases.
    # A fresh instance per layer: Keras repeats the values of a reused unseeded initializer.
    return tf.keras.initializers.VarianceScaling(1.0, "fan_in", "truncated_normal")


def _conv(filters: int, kernel: int, stride: int, padding: str) -> tf.keras.layers.Conv2D:
    return tf.keras.layers.Conv2D(
        filters, kernel, stride, padding, kernel_initializer=_kernel_initializer()
    )


def _dense(units: int, activation: str | None = None) -> tf.keras.layers.Dense:
    return tf.keras.layers.Dense(units, activation, kernel_initializer=_kernel_initializer())


def _scale_frames(frames: tf.Tensor) -> tf.Tensor:
    """uint8 pixels -> float32 in [0, 1] (choice: /255)."""
    return tf.cast(frames, tf.float32) / 255.0


def _flatten(x: tf.Tensor) -> tf.Tensor:
    """[N, H, W, C] -> [N, H*W*C] with the static size, as the FC layer needs."""
    return tf.reshape(x, [-1, int(np.prod(x.shape[1:]))])


class ConvTorso(tf.keras.layers.Layer):
    """A stack of VALID ReLU convolutions, then a ReLU fully connected layer."""

    def __init__(
        self,
        convs: Sequence[tuple[int, int, int]],
        output_units: int,
        pixels: bool = True,
        **kwargs: Any,
    ) -> None:
        """`convs`: (filters, kernel size, stride) of each convolution, input first. `pixels`:
        the input is uint8 pixels, scaled by 1/255; otherwise it is used as it is."""
        super().__init__(**kwargs)
        self.output_units = output_units
        self._pixels = pixels
        self._convs = [_conv(filters, kernel, stride, "valid") for filters, kernel, stride in convs]
        self._fc = _dense(output_units, "relu")

    def call(self, frames: tf.Tensor) -> tf.Tensor:
        x = _scale_frames(frames) if self._pixels else tf.cast(frames, tf.float32)
        for conv in self._convs:
            x = tf.nn.relu(conv(x))
        return self._fc(_flatten(x))


class ShallowTorso(ConvTorso):
    """IMPALA's shallow torso (Fig. 3 left; A3C's feed-forward net): conv 8x8/4 16, conv 4x4/2 32
    (VALID), FC 256.

    VALID padding is what reproduces the caption's 1.2M parameters (Test 14 in
    docs/papers/impala.md#worked-test-numbers).
    """

    def __init__(self, output_units: int = 256, **kwargs: Any) -> None:  # Fig. 3 (left): FC 256
        super().__init__([(16, 8, 4), (32, 4, 2)], output_units, **kwargs)  # Fig. 3 (left)


class ResidualBlock(tf.keras.layers.Layer):
    """IMPALA's pre-activation residual block (Fig. 3 right): x + conv(relu(conv(relu(x)))), 3x3
    SAME convs."""

    def __init__(self, channels: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._conv_a = _conv(channels, 3, 1, "same")
        self._conv_b = _conv(channels, 3, 1, "same")

    def call(self, x: tf.Tensor) -> tf.Tensor:
        return x + self._conv_b(tf.nn.relu(self._conv_a(tf.nn.relu(x))))


def _turn_off_the_remapper_for_residual_sums() -> None:
    """Turn off Grappler's remapper (op fusion) in this process, for graphs with residual sums.

    With TensorFlow's oneDNN kernels on (common/__init__.py turns them on), the remapper fuses
    Conv2D + BiasAdd + Add + Relu into one op even when the Add (a residual block's output) also
    feeds the next block's skip connection. The rewrite then deletes a node that is still used,
    Grappler logs "remapper failed: INVALID_ARGUMENT ... Mutation::Apply error" at error level,
    and throws the whole remapping of that graph away. The deep torso's graphs were therefore never
    remapped; turning the pass off skips the failing attempt and changes nothing that runs
    (measured: a training step of the deep torso takes the same time either way). The other
    torsos have no residual sums, fuse without error, and keep the remapper unless a deep torso
    is built in the same process.
    """
    tf.config.optimizer.set_experimental_options({"remapping": False})


class DeepTorso(tf.keras.layers.Layer):
    """IMPALA's deep residual torso (Fig. 3 right): 3 sections (conv 3x3, max-pool 3x3/2 SAME, 2
    residual blocks), then ReLU, flatten, FC 256 ReLU. 15 conv layers; SAME pooling gives the
    caption's 1.6M (Test 14 in docs/papers/impala.md#worked-test-numbers).
    """

    def __init__(
        self,
        channels: Sequence[int] = (16, 32, 32),  # IMPALA Fig. 3 (right)
        blocks_per_section: int = 2,  # IMPALA Fig. 3 (right)
        output_units: int = 256,  # IMPALA Fig. 3 (right): FC 256
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        _turn_off_the_remapper_for_residual_sums()
        self.output_units = output_units
        self._sections = [
            (
                _conv(ch, 3, 1, "same"),
                tf.keras.layers.MaxPool2D(3, 2, "same"),
                [ResidualBlock(ch) for _ in range(blocks_per_section)],
            )
            for ch in channels
        ]
        self._fc = _dense(output_units, "relu")

    def call(self, frames: tf.Tensor) -> tf.Tensor:
        x = _scale_frames(frames)
        for conv, pool, blocks in self._sections:
            x = pool(conv(x))
            for block in blocks:
                x = block(x)
        return self._fc(_flatten(tf.nn.relu(x)))


class NatureTorso(ConvTorso):
    """The Nature-DQN torso (IMPALA §5.3.2's shallow Atari net "features three convolutional
    layers", docs/papers/impala.md#departures-from-the-paper; LBC App. L's torso "the same as"
    Agent57's): conv 8x8/4 32, conv 4x4/2 64, conv 3x3/1 64 (VALID), FC 512.
    """

    def __init__(self, output_units: int = 512, **kwargs: Any) -> None:  # Nature DQN: FC 512
        super().__init__([(32, 8, 4), (64, 4, 2), (64, 3, 1)], output_units, **kwargs)


class MinAtarTorso(ConvTorso):
    """The published MinAtar agents' torso (Young & Tian 2019; the MinAtar repository's DQN and
    AC(lambda) examples): conv 3x3/1 16 (VALID, 10x10 -> 8x8), FC 128, ReLU. Its inputs are
    binary channels, used unscaled."""

    def __init__(self, output_units: int = 128, **kwargs: Any) -> None:  # MinAtar examples: FC 128
        super().__init__([(16, 3, 1)], output_units, pixels=False, **kwargs)


class MLPTorso(tf.keras.layers.Layer):
    """Float vector observations (CartPole): ReLU MLP. choice: 2 x 64 units, small and fast."""

    def __init__(self, hidden_units: Sequence[int] = (64, 64), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.output_units = hidden_units[-1]
        self._layers = [_dense(units, "relu") for units in hidden_units]

    def call(self, observations: tf.Tensor) -> tf.Tensor:
        x = tf.cast(observations, tf.float32)
        for layer in self._layers:
            x = layer(x)
        return x


TORSOS = {
    "deep": DeepTorso,
    "shallow": ShallowTorso,
    "nature": NatureTorso,
    "minatar": MinAtarTorso,
    "mlp": MLPTorso,
}


def instruction_tokens(
    instructions: Sequence[str], max_length: int, vocab_size: int = 1000
) -> np.ndarray:
    """Whitespace words hashed into buckets 1..vocab_size-1 (a choice); 0 pads. [N, max_length].

    crc32 (not Python's `hash`) so that every process maps a word to the same bucket.
    """
    tokens = np.zeros((len(instructions), max_length), np.int32)
    for i, text in enumerate(instructions):
        words = text.split()[:max_length]
        tokens[i, : len(words)] = [1 + zlib.crc32(w.encode()) % (vocab_size - 1) for w in words]
    return tokens


class InstructionEncoder(tf.keras.layers.Layer):
    """IMPALA's language channel (§5, Fig. 3): embedding 20 -> LSTM 64 -> output after the last
    word.

    Padding tokens (0) leave the LSTM state unchanged, so an empty instruction encodes to zeros.
    """

    def __init__(
        self,
        vocab_size: int = 1000,  # choice: 1,000 hash buckets
        embedding_dim: int = 20,  # IMPALA Fig. 3
        units: int = 64,  # IMPALA Fig. 3
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.units = units
        self._embed = tf.keras.layers.Embedding(vocab_size, embedding_dim)
        self._cell = tf.keras.layers.LSTMCell(units)
        self._cell.build((None, embedding_dim))

    def call(self, tokens: tf.Tensor) -> tf.Tensor:
        words = tf.transpose(self._embed(tokens), [1, 0, 2])  # [L, N, E]: scan over words
        is_word = tf.transpose(tokens > 0)  # [L, N]
        zeros = tf.zeros([tf.shape(tokens)[0], self.units])

        def read(state, inputs):
            word, valid = inputs
            _, new_state = self._cell(word, list(state))
            return tuple(tf.where(valid[:, None], new, old) for new, old in zip(new_state, state))

        hidden, _ = tf.foldl(read, (words, is_word), initializer=(zeros, zeros))
        return hidden


def _fold_time(fn, x: tf.Tensor) -> tf.Tensor:
    """Applies fn to [T*B, ...] and restores [T, B, ...] (IMPALA §3.1: one torso call per
    unroll)."""
    outer = tf.shape(x)[:2]
    y = fn(tf.reshape(x, [-1, *x.shape[2:]]))
    return tf.reshape(y, tf.concat([outer, tf.shape(y)[1:]], 0))


def torso_outputs(networks: Sequence, observation: tf.Tensor, time_major: bool = False) -> list:
    """Each network's torso output on `observation` ([B, ...], or [T, B, ...] with
    `time_major`), one pass per distinct torso: networks built on one torso layer (GDI-H3's
    shared-torso option) get the same tensor, so acting and learning pay for the torso once."""
    outputs = {}
    for network in networks:
        if id(network.torso) not in outputs:
            torso = network.torso
            outputs[id(torso)] = (
                _fold_time(torso, observation) if time_major else torso(observation)
            )
    return [outputs[id(network.torso)] for network in networks]


def unique_variables(variables: Iterable[tf.Variable]) -> list[tf.Variable]:
    """`variables` in order, each once (a shared torso's belong to two networks)."""
    seen = set()
    unique = []
    for variable in variables:
        if variable.ref() not in seen:
            seen.add(variable.ref())
            unique.append(variable)
    return unique


def _head(units: int, hidden: int | None) -> tf.keras.layers.Layer:
    """Linear (IMPALA Fig. 3), or Dense(hidden)-ReLU-Dense when `hidden` is set (LBC's heads,
    docs/papers/lbc.md#departures-from-the-paper)."""
    if hidden is None:
        return _dense(units)
    return tf.keras.Sequential([_dense(hidden, "relu"), _dense(units)])


class ActorCriticNet(tf.keras.Model):
    """The actor-critic network of IMPALA (§5, Fig. 3) and of DiCE, GDI and LBC (their A head is the
    logits head): torso -> [LSTM core] -> policy logits and value.

    Core input (IMPALA Fig. 3): concat[torso output, previous reward clipped to [-1, 1], one-hot
    previous action, (instruction encoding)]. Where `reset` marks the first step of an episode, the
    core state, the previous action and the previous reward are zeroed before the step (a choice:
    docs/papers/impala.md#departures-from-the-paper). Without the LSTM (IMPALA's feed-forward Atari
    nets, App. G) the previous action and reward are not inputs and the heads read the torso
    directly.

    Args:
      num_actions: size of the policy.
      torso: "deep" (IMPALA Fig. 3 right), "shallow" (Fig. 3 left), "nature" (IMPALA §5.3.2's
        three-conv Atari net), "minatar" (MinAtar's) or "mlp" (vector inputs), or a torso layer of
        another network to share it (GDI-H3's shared-torso option,
        docs/papers/gdi.md#departures-from-the-paper; `torso_outputs` then runs it once for both).
      use_lstm: the LSTM core (IMPALA's DMLab nets; DiCE/GDI/LBC); False for IMPALA's
        feed-forward Atari nets (App. G).
      lstm_units: 256 (IMPALA Fig. 3; DiCE Table 5, GDI Table 6, LBC Table 3).
      prev_reward_clip: 1.0 (Fig. 3's "clipped reward"); None feeds the previous reward
        unclipped.
      prev_reward_transform: a `common.equations.transforms` reward transform name applied to the
      previous
        reward before any clip: DiCE, GDI and LBC feed their shaped reward (their papers do not say;
        docs/papers/dice.md#departures-from-the-paper).
      instruction_vocab: if set, adds IMPALA's language channel (hash buckets; 1,000 by choice), and
        `step` / `unroll` take `instruction` tokens (see `instruction_tokens`).
      head_hidden: if set, each head is Dense(head_hidden)-ReLU-Dense (LBC's Agent57-style
        heads, App. L) instead of linear (IMPALA Fig. 3).
    """

    def __init__(
        self,
        num_actions: int,
        torso: str | tf.keras.layers.Layer = "deep",
        use_lstm: bool = True,
        lstm_units: int = 256,
        prev_reward_clip: float | None = 1.0,
        prev_reward_transform: str = "none",
        instruction_vocab: int | None = None,
        head_hidden: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(torso, tf.keras.layers.Layer) and torso not in TORSOS:
            raise ValueError(f"unknown torso {torso!r}: use one of {sorted(TORSOS)}")
        if num_actions < 1:
            raise ValueError(f"num_actions must be >= 1, got {num_actions}")
        self.num_actions = num_actions
        self.use_lstm = use_lstm
        self.lstm_units = lstm_units
        self.prev_reward_clip = prev_reward_clip
        self.prev_reward_transform = transforms.reward_transform(prev_reward_transform)
        self.torso = torso if isinstance(torso, tf.keras.layers.Layer) else TORSOS[torso]()
        self.instruction_encoder = (
            InstructionEncoder(instruction_vocab) if instruction_vocab is not None else None
        )
        if use_lstm:
            # unit_forget_bias: forget-gate bias +1 (a choice)
            self.core = tf.keras.layers.LSTMCell(lstm_units)
            # Built here, not on first use: variables cannot be created inside tf.scan.
            core_input_units = (
                self.torso.output_units
                + 1
                + num_actions
                + (self.instruction_encoder.units if self.instruction_encoder is not None else 0)
            )
            self.core.build((None, core_input_units))
        self.policy_head = _head(num_actions, head_hidden)
        self.value_head = _head(1, head_hidden)

    def initial_state(self, batch_size: int) -> LSTMState:
        """Zero (h, c) for `batch_size` envs; () without an LSTM."""
        if not self.use_lstm:
            return ()
        zeros = tf.zeros([batch_size, self.lstm_units])
        return (zeros, zeros)

    def _core_inputs(self, features, prev_action, prev_reward, reset, instruction):
        """concat[features, clipped prev reward, one-hot prev action, instruction] ([..., D])."""
        keep = 1.0 - tf.cast(reset, tf.float32)[..., None]  # zero the previous step at a reset
        prev_reward = self.prev_reward_transform(tf.cast(prev_reward, tf.float32))[..., None]
        if self.prev_reward_clip is not None:
            prev_reward = tf.clip_by_value(
                prev_reward, -self.prev_reward_clip, self.prev_reward_clip
            )
        parts = [features, keep * prev_reward, keep * tf.one_hot(prev_action, self.num_actions)]
        if self.instruction_encoder is not None:
            if instruction is None:
                raise ValueError("this network has a language channel: pass `instruction`")
            parts.append(instruction)
        return tf.concat([tf.cast(part, features.dtype) for part in parts], -1)

    def _projected(self, inputs: tf.Tensor) -> tf.Tensor:
        """x W + b of the core's gates ([..., 4U], compute dtype) for core inputs [..., D]: for an
        unroll one matmul for all its steps, out of the recurrence."""
        dtype = self.core.compute_dtype
        kernel, bias = (tf.cast(w, dtype) for w in (self.core.kernel, self.core.bias))
        return tf.tensordot(tf.cast(inputs, dtype), kernel, 1) + bias

    def _core_step(self, projected, reset, state):
        """One LSTM step (Keras' LSTMCell on the core's weights) from the projected inputs; the
        state of envs whose episode starts here is zeroed first. The state crosses steps in
        float32, as it leaves the network."""
        dtype = self.core.compute_dtype
        keep = 1.0 - tf.cast(reset, dtype)[:, None]
        return recurrent.cell(projected, keep, state, tf.cast(self.core.recurrent_kernel, dtype))

    def _heads(self, x):
        return (
            tf.cast(self.policy_head(x), tf.float32),
            tf.cast(tf.squeeze(self.value_head(x), -1), tf.float32),
        )

    def step(
        self,
        obs: tf.Tensor | None,
        prev_action: tf.Tensor,
        prev_reward: tf.Tensor,
        reset: tf.Tensor,
        state: Any,
        instruction: tf.Tensor | None = None,
        features: tf.Tensor | None = None,
    ) -> tuple[tuple[tf.Tensor, tf.Tensor], Any]:
        """One step for B envs (actors).

        obs [B, ...]; prev_action [B] int32; prev_reward [B] float32; reset [B] bool (the episode
        starts at this step); state from `initial_state` or the previous step; instruction
        [B, L] int32 tokens when the net has a language channel; `features`, the torso's output
        on obs if already computed (`torso_outputs`; obs is then not read).
        Returns ((logits [B, A], value [B]), new_state).
        """
        if features is None:
            features = self.torso(obs)
        if not self.use_lstm:
            return self._heads(features), ()
        if self.instruction_encoder is not None and instruction is not None:
            instruction = self.instruction_encoder(instruction)
        inputs = self._core_inputs(features, prev_action, prev_reward, reset, instruction)
        output, state = self._core_step(self._projected(inputs), reset, state)
        return self._heads(output), state

    def unroll(
        self,
        obs: tf.Tensor | None,
        prev_action: tf.Tensor,
        prev_reward: tf.Tensor,
        reset: tf.Tensor,
        state: Any,
        instruction: tf.Tensor | None = None,
        return_features: bool = False,
        features: tf.Tensor | None = None,
    ) -> tuple[tuple, Any]:
        """T steps for B envs (learner); equals T calls of `step`.

        obs [T, B, ...]; prev_action, prev_reward, reset [T, B]; state at the unroll's start;
        instruction [T, B, L] tokens when the net has a language channel.
        Returns ((logits [T, B, A], values [T, B]), final_state); with `return_features` the
        outputs are (logits, values, torso embeddings [T, B, D]), which GDI's auxiliary dynamics
        tasks read (`common.burn_in.dynamics`) without a second torso pass. `features` [T, B, D] is
        the torso's output on obs if already computed (`torso_outputs`; obs is then not read).
        """
        if features is None:
            features = _fold_time(self.torso, obs)
        if not self.use_lstm:
            outputs, final_state = features, ()
        else:
            if self.instruction_encoder is not None and instruction is not None:
                instruction = _fold_time(self.instruction_encoder, instruction)
            inputs = self._core_inputs(features, prev_action, prev_reward, reset, instruction)
            outputs, (final_state,) = recurrent.scan_cores(
                [self], [self._projected(inputs)], reset, [state]
            )
            outputs = outputs[:, 0]
        return self._outputs(outputs, features, return_features), final_state

    def _outputs(self, hidden, features, return_features: bool) -> tuple:
        """The heads on the core's outputs, and the torso's features with `return_features`."""
        heads = self._heads(hidden)
        return (*heads, tf.cast(features, tf.float32)) if return_features else heads

    def create_variables(
        self,
        observation_shape: Sequence[int],
        observation_dtype: tf.DType = tf.uint8,
        instruction_length: int = 1,
    ) -> None:
        """Builds every weight by running one step on zeros (e.g. before publishing weights)."""
        instruction = (
            tf.zeros([1, instruction_length], tf.int32)
            if self.instruction_encoder is not None
            else None
        )
        self.step(
            tf.zeros([1, *observation_shape], observation_dtype),
            tf.zeros([1], tf.int32),
            tf.zeros([1]),
            tf.ones([1], tf.bool),
            self.initial_state(1),
            instruction,
        )

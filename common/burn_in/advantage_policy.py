"""Acting with Boltzmann policies over advantage heads: DiCE, GDI and LBC.

These agents have no logits head. Their behaviour policy is a mixture of softmaxes of the
advantage heads A_i of one or more networks, each at its own inverse temperature:

    mu(.|x) = sum_n w_n softmax(eta_n · A_{i(n)}(x))

- DiCE (§3.1): one component, w = 1, eta = 1/tau of the episode.
- GDI-I3 (§4.1, Eqs. (9)-(10)): two components on the same network's A, weights (eps, 1 − eps).
- GDI-H3 (Eqs. (11)-(12)): two components on two networks.
- LBC (§4.1, Eq. (10)): N components on N networks, weights omega.

`mixture(behaviour)` turns the game's behaviour parameters (`common.control.behaviour`, numpy [B,
...]) into `(etas [B, N], weights [B, N])`; `component_networks[n]` is the network component n
reads. The actor stores log mu(a_t|x_t) of the action it took (`behaviour_log_prob`): the learner's
importance ratios need only that number, and the log keeps it finite where eta · A makes mu(a)
smaller than float32 can hold. Each step also returns H[mu(.|x_t)] (`acting.BEHAVIOUR_ENTROPY`,
not stored), whose per-game mean the learner logs (LBC §5.3, Fig. 4). The core state is a tuple
with one entry per network.
"""

import functools
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf

from common.runtime import acting
from common.models import networks as networks_lib
from common.equations import policies

if TYPE_CHECKING:
    from common.runtime.agent import EnvSpec

BEHAVIOUR_LOG_PROB = "behaviour_log_prob"

# behaviour {name: [B, ...]} -> (etas [B, N], weights [B, N])
Mixture = Callable[[Mapping[str, np.ndarray]], tuple[np.ndarray, np.ndarray]]


class AdvantageMixturePolicy:
    """a_t ~ mu(.|x_t) of the module docstring (or its argmax with `greedy`), one compiled call
    per batched step for all networks. `bootstrap_value` is V(x) of each network ([B] for one
    network, [B, N] for N: `value_heads`), each in its own reward shaping's units."""

    def __init__(
        self,
        networks: Sequence,
        mixture: Mixture,
        component_networks: Sequence[int],
        observation_shape: tuple,
        observation_dtype: np.dtype,
        seed: int,
        greedy: bool = False,
        jit_compile: bool = False,
    ) -> None:
        if not networks:
            raise ValueError("AdvantageMixturePolicy needs at least one network")
        if any(not 0 <= i < len(networks) for i in component_networks):
            raise ValueError(
                f"component_networks {list(component_networks)} must index the "
                f"{len(networks)} networks"
            )
        for network in networks:
            network.create_variables(observation_shape, observation_dtype)
        self.networks = list(networks)
        self.value_heads = len(self.networks)
        self.mixture = mixture
        self.component_networks = list(component_networks)
        self.greedy = greedy
        self._rng = tf.random.Generator.from_seed(seed)
        self._step = acting.CompiledCall(self._step_graph, jit_compile)
        self._value = acting.CompiledCall(self._value_graph, jit_compile)

    @staticmethod
    def extras_spec() -> dict:
        """Per-step spec of what `step` stores besides the action."""
        return {BEHAVIOUR_LOG_PROB: tf.TensorSpec([], tf.float32)}

    @property
    def variables(self) -> list[tf.Variable]:
        """Every network's variables, network by network (a shared torso's once): the order
        `set_weights` takes."""
        return networks_lib.unique_variables(v for net in self.networks for v in net.variables)

    def initial_state(self, batch_size: int) -> tuple:
        return tuple(
            tf.nest.map_structure(lambda x: x.numpy(), network.initial_state(batch_size))
            for network in self.networks
        )

    def _step_graph(self, observation, prev_action, prev_reward, reset, state, etas, weights):
        advantages, new_state = [], []
        features = networks_lib.torso_outputs(self.networks, observation)
        for network, network_state, torso_output in zip(self.networks, state, features):
            (advantage, _), next_state = network.step(
                None, prev_action, prev_reward, reset, network_state, features=torso_output
            )
            advantages.append(advantage)
            new_state.append(next_state)
        logits = tf.stack([advantages[i] for i in self.component_networks], axis=1)  # [B, N, A]
        log_mu = policies.mixture_log_policy(logits, etas, weights)
        if self.greedy:
            actions = tf.argmax(log_mu, -1, output_type=tf.int32)
        else:
            seed = tf.cast(self._rng.make_seeds(1)[:, 0], tf.int32)
            actions = policies.sample_actions(logits=log_mu, seed=seed)
        taken = tf.gather(log_mu, actions, batch_dims=1)
        # mu(a) log mu(a) -> 0 where mu(a) underflows (log mu(a) = -inf would make 0 · inf).
        entropy = -tf.reduce_sum(tf.math.multiply_no_nan(log_mu, tf.exp(log_mu)), -1)
        return actions, taken, entropy, tuple(new_state)

    def _value_graph(self, observation, prev_action, prev_reward, state):
        reset = tf.zeros(tf.shape(prev_action), tf.bool)
        features = networks_lib.torso_outputs(self.networks, observation)
        values = [
            network.step(None, prev_action, prev_reward, reset, s, features=f)[0][1]
            for network, s, f in zip(self.networks, state, features)
        ]
        return values[0] if len(values) == 1 else tf.stack(values, -1)

    def bootstrap_value(
        self, observation: np.ndarray, prev_action: np.ndarray, prev_reward: np.ndarray, state: Any
    ) -> np.ndarray:
        return self._value(observation, prev_action, prev_reward, state).numpy()

    def step(
        self,
        observation: np.ndarray,
        prev_action: np.ndarray,
        prev_reward: np.ndarray,
        reset: np.ndarray,
        state: Any,
        behaviour: Mapping[str, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray], Any]:
        if behaviour is None:
            raise ValueError("AdvantageMixturePolicy acts with the game's behaviour parameters")
        etas, weights = self.mixture(behaviour)
        actions, log_mu, entropy, new_state = self._step(
            observation,
            prev_action,
            prev_reward,
            reset,
            state,
            np.asarray(etas, np.float32),
            np.asarray(weights, np.float32),
        )
        return (
            actions.numpy(),
            {BEHAVIOUR_LOG_PROB: log_mu.numpy(), acting.BEHAVIOUR_ENTROPY: entropy.numpy()},
            tf.nest.map_structure(lambda x: x.numpy(), new_state),
        )

    def set_weights(self, weights: list[np.ndarray]) -> None:
        acting.assign_weights(self.variables, weights)


def policy_extras(spec: "EnvSpec") -> dict:
    """`Agent.policy_extras` of every agent acting with `AdvantageMixturePolicy`."""
    del spec  # log mu(a|x) is one number whatever the env
    return AdvantageMixturePolicy.extras_spec()


def policy_factory(
    make_networks: Callable[[int], Sequence],
    mixture: Mixture,
    component_networks: Sequence[int],
    jit_compile: bool,
) -> Callable[..., AdvantageMixturePolicy]:
    """A picklable `common.runtime.acting.PolicyFactory`: `make_networks(num_actions)` builds the
    networks, the rest is `AdvantageMixturePolicy`'s."""
    return functools.partial(
        _make_policy, make_networks, mixture, tuple(component_networks), jit_compile
    )


def _make_policy(make_networks, mixture, components, jit_compile, num_actions, *args, **kw):
    return AdvantageMixturePolicy(
        make_networks(num_actions),
        mixture,
        components,
        *args,
        jit_compile=jit_compile,
        **kw,
    )

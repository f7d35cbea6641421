"""The LBC train step (§5.1.2, App. B, Algorithm 2) on the shared burn-in learner
(`common.burn_in.burn_in_learning`).

Algorithm 2 runs one learner per network, each on its own GPU, all sampling the shared replay.
choice (2-core machine, `lbc.config`): one compiled step trains the whole population on each batch.
Each network i burns in from its own stored LSTM state, computes `lbc.losses.policy_loss` with
RS_i, gamma_i and its own pi_i (plus the auxiliary tasks on its torso), and is updated by its own
AdamW (`PopulationOptimizer`): its own moments and its own global-norm clip at 50, as a separate
learner would. The step differentiates the sum of the networks' losses; since no network's loss
reads another's weights, each network's gradient is that of its own loss.
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
from lbc import config as config_lib
from lbc import losses
from lbc import networks

if TYPE_CHECKING:
    from common.runtime.agent import EnvSpec


class PopulationOptimizer(tf.Module):
    """One Table 3 AdamW per network, behind the one-optimiser interface `make_train_step` uses
    (`build`, `apply`, `iterations`). `groups[i]` are the variables network i trains."""

    def __init__(
        self, config: config_lib.LbcConfig, groups: Sequence[Sequence[tf.Variable]]
    ) -> None:
        super().__init__(name="population_optimizer")
        self.optimizers = [burn_in_learning.make_optimizer(config) for _ in groups]
        self._sizes = [len(group) for group in groups]

    @property
    def iterations(self) -> tf.Variable:
        return self.optimizers[0].iterations

    def _split(self, values: Sequence) -> list:
        if len(values) != sum(self._sizes):
            raise ValueError(f"expected {sum(self._sizes)} entries, got {len(values)}")
        parts, start = [], 0
        for size in self._sizes:
            parts.append(list(values[start : start + size]))
            start += size
        return parts

    def build(self, variables: Sequence[tf.Variable]) -> None:
        for optimizer, group in zip(self.optimizers, self._split(variables)):
            optimizer.build(group)

    @tf.autograph.experimental.do_not_convert  # static Python only, as `make_loss_fn`'s
    def apply(
        self,
        gradients: Sequence[tf.Tensor | None],
        variables: Sequence[tf.Variable],
        schedule_step: tf.Tensor | None = None,
    ) -> dict:
        """Each network's update; the schedules' values (equal for all) and each network's
        instruments, suffixed with its index."""
        stats = {}
        shared = ("optimizer/learning_rate", "optimizer/weight_decay")
        for i, (optimizer, grads, group) in enumerate(
            zip(self.optimizers, self._split(gradients), self._split(variables))
        ):
            own = optimizer.apply(grads, group, schedule_step)
            stats.update({k: own[k] for k in shared})
            stats.update({f"{k}_{i + 1}": v for k, v in own.items() if k not in shared})
        return stats


def population_rewards_and_discounts(
    steps: dict, config: config_lib.LbcConfig
) -> tuple[tf.Tensor, tf.Tensor]:
    """RS_i(r_t) with truncations bootstrapped by V_i, and gamma_i cut at episode ends and
    padding: two [T, B, K] tensors, one column per network (h_i of Table 3)."""
    gammas = tf.constant(config.discounts, tf.float32)
    truncation = steps["truncation_value"][:-1]
    if config.num_networks == 1:  # one value head stores [T, B] (common.runtime.acting.step_spec)
        truncation = truncation[..., None]
    shapings = [transforms.reward_transform(name) for name in config.reward_shapings]
    rewards = sequences.bootstrapped_rewards(steps["reward"][:-1], truncation, gammas, shapings)
    discounts = sequences.discounts_from_resets(
        steps["reset"], gammas[None, None, :], steps[replay.MASK]
    )
    return rewards, discounts


def make_loss_fn(
    population: Sequence, aux_heads: Sequence, config: config_lib.LbcConfig
) -> Callable[[dict], tuple]:
    """batch -> (sum of the networks' losses, stats with each network's parts suffixed _i)."""
    hparams = losses.LossHyperparameters.from_config(config)
    use_aux = config.aux_forward_weight > 0 or config.aux_inverse_weight > 0

    def loss_fn(batch: dict):
        outputs = burn_in_learning.unroll_trained(
            population, batch, config.burn_in, return_features=use_aux
        )
        steps = burn_in_learning.trained_steps(batch, config.burn_in)
        mask = steps[replay.MASK]
        rewards, discounts = population_rewards_and_discounts(steps, config)
        pairs = dynamics.pair_mask(steps["reset"], mask)  # x_t -> x_{t+1} in one episode
        total, stats = 0.0, {}
        for i, (heads, (advantages, values, *features)) in enumerate(zip(aux_heads, outputs)):
            loss, parts = losses.policy_loss(
                hparams,
                advantages,
                values,
                steps["action"],
                steps[advantage_policy.BEHAVIOUR_LOG_PROB],
                rewards[..., i],
                discounts[..., i],
                mask[:-1],
            )
            if use_aux:
                forward, inverse = heads.losses(features[0], steps["action"], pairs, mask[:-1])
                loss += config.aux_inverse_weight * inverse + config.aux_forward_weight * forward
                parts.update({"loss/aux_inverse": inverse, "loss/aux_forward": forward})
            parts["loss/total"] = loss
            stats.update({f"{name}_{i + 1}": value for name, value in parts.items()})
            total += loss
        stats["loss/total"] = total
        return total, stats

    # choice: traced as written, without AutoGraph: nothing in it branches on a tensor (the
    # burn-in's tf.cond is explicit), and converting the three networks' loss code was most of a
    # ~60 s first trace on this machine (compiled-equals-eager test, tests/lbc/test_learning.py).
    return tf.autograph.experimental.do_not_convert(loss_fn)


def trained_variables(
    population: Sequence, aux_heads: Sequence, config: config_lib.LbcConfig
) -> list[list[tf.Variable]]:
    """Network i's variables and its auxiliary heads' (when an auxiliary loss is on), one group
    per network: every variable listed gets a gradient."""
    use_aux = config.aux_forward_weight > 0 or config.aux_inverse_weight > 0
    return [
        list(network.trainable_variables) + (list(heads.trainable_variables) if use_aux else [])
        for network, heads in zip(population, aux_heads)
    ]


def make_train_step(
    population: Sequence[networks_lib.ActorCriticNet],
    aux_heads: Sequence[dynamics.DynamicsHeads],
    optimizer: burn_in_learning.Optimizer,
    config: config_lib.LbcConfig,
) -> Callable[[dict, tf.Tensor], dict]:
    """The compiled learner step `step(batch, frames) -> stats` for the whole population."""
    variables = [v for group in trained_variables(population, aux_heads, config) for v in group]
    return burn_in_learning.make_train_step(
        make_loss_fn(population, aux_heads, config), variables, optimizer, config
    )


def make_learner_parts(
    config: config_lib.LbcConfig, spec: "EnvSpec"
) -> common_learning.LearnerParts:
    """The population, its auxiliary heads, the compiled train step and one AdamW per network."""
    tf.random.set_seed(config.seed)
    population = networks.make_population(config, spec.num_actions)
    for network in population:
        network.create_variables(spec.observation_shape, spec.observation_dtype)
    aux_heads = [
        networks.make_dynamics_heads(config, network, i) for i, network in enumerate(population)
    ]
    optimizer = PopulationOptimizer(config, trained_variables(population, aux_heads, config))
    checkpointables: dict[str, Any] = {"optimizer": optimizer}
    for i, (network, heads) in enumerate(zip(population, aux_heads)):
        checkpointables.update({f"network_{i + 1}": network, f"dynamics_{i + 1}": heads})
    return common_learning.LearnerParts(
        train_step=make_train_step(population, aux_heads, optimizer, config),
        checkpointables=checkpointables,
        # The order AdvantageMixturePolicy.set_weights takes: network by network.
        acting_variables=[v for network in population for v in network.variables],
    )

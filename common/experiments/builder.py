"""What a paper supplies, as one typed object: its `Builder`
(docs/architecture.md#what-a-paper-supplies).

Every paper package has a `builder.py` with a `Builder` for its config (the model is Acme's agent
builders: one object per agent that makes each of its pieces). The builder class is the paper:
its class attributes say what the command line needs to know (`name`, `config_class`,
`ablations`, `default_ablation`, `env_defaults`, `cartpole`, `multitask`): the command line
(`common.experiments.cli.main`) and the benchmarks take the class, the ablation runner its
`module()`. The code that assembles the pieces is written once, here: `build_agent` turns a
builder into the `common.runtime.agent.Agent` the actors and the learner run, and
`build_experiment` adds the run settings of the config (`common.launchers.launch.Experiment`). A
paper's builder states only its own pieces; the methods with a default (`behaviour`, `value_heads`, `evaluation`,
`frames_per_learner_step`, `publish_lag`) are stated by the papers that need another. DiCE, GDI
and LBC share their replay and policy extras through `BurnInBuilder`.

A builder is made from a validated config (`ImpalaBuilder(config)`) and is cheap: making one, and
`describe()`, import nothing heavy, so the command line checks the flags and prints the startup
line before TensorFlow loads. Every other method may import TensorFlow, Reverb or gymnasium, and
does so inside the method. Builders are frozen dataclasses of their config, so the factories they
hand out (`policy_factory()`, `make_learner`) pickle with the config into spawned processes.

Importing this module imports nothing heavier than `typing`.
"""

from __future__ import annotations

import abc
import dataclasses
import importlib
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from common.runtime import acting, learning
    from common.control import behaviour
    from common.environments import protocols
    from common.launchers import launch
    from common.replay import patterns
    from common.runtime.agent import Agent, EnvSpec
    from common.settings.burn_in_settings import BurnInLearnerSettings


class PaperConfig(Protocol):
    """What the assembly reads of a paper's config itself (the run fields every config has
    are `common.launchers.launch.experiment_from_config`'s)."""

    @property
    def frames_per_learner_step(self) -> int: ...


ConfigT = TypeVar("ConfigT", bound=PaperConfig)
BurnInConfigT = TypeVar("BurnInConfigT", bound="BurnInLearnerSettings")


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """How a paper's evaluator plays (`common.runtime.evaluation.EvaluatorSettings`; it runs every
    `eval_interval_s` during training, at the end, and on a checkpoint with `--role=evaluate`)."""

    # False: this config evaluates nothing (LBC's --eval_policy=training_episodes reports the
    # training games instead).
    enabled: bool = True
    # The evaluation protocol (`common.environments.protocols.AtariProtocol`); None: the training
    # protocol.
    protocol: Any = None
    # Greedy actions (the policy's argmax) instead of samples from it.
    greedy: bool = False


@runtime_checkable
class Builder(Protocol[ConfigT]):
    """The pieces of one paper's agent for one config.

    The class attributes describe the paper to the command line (`common.experiments.cli`). Of
    the methods, the first seven make the `common.runtime.agent.Agent` (`build_agent`), the rest
    the run's `common.launchers.launch.Experiment` (`build_experiment`). A paper's builder is a
    frozen dataclass with the one field `config` that subclasses this protocol and sets `name` and
    `config_class`, so that it inherits the defaults and cannot be made without the abstract
    methods; `isinstance(x, Builder)` checks any object's members.
    """

    # ------------------------------------------------------------------------------ the paper

    # Short name: `python -m <name>.main`, logdirs `runs/<name>_<env>...`, the console prefix.
    name: ClassVar[str]
    # The frozen config dataclass; its field names are the flag names, it has `env` and `seed`
    # fields, and `validate()` returns it or raises ValueError naming the flag.
    config_class: ClassVar[type]
    # Named variants: {name: {field: value}} (the paper's ablations.py).
    ablations: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    # The variant that runs of several --seeds without --ablation(s) are (None: they need one).
    default_ablation: ClassVar[str | None] = None
    # Defaults of particular envs over the paper's, keyed by canonical env name or by an env
    # family's key (`common.experiments.cli.ENV_FAMILY_KEYS`: "MinAtar" for every MinAtar game);
    # an env takes its family's, then its own name's (`common.experiments.cli.env_defaults_for`).
    env_defaults: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    # Whether --env=CartPole is allowed besides Atari and MinAtar games.
    cartpole: ClassVar[bool] = False
    # Whether --env may list several games, comma-separated, for one agent trained on all of them
    # (common.environments.multitask; IMPALA's multi-task agent, §5.3).
    multitask: ClassVar[bool] = False

    config: ConfigT

    def __init__(self, config: ConfigT) -> None:
        """The builder of a validated `config` (cheap: imports nothing heavy). The papers'
        builders are frozen dataclasses, whose generated `__init__` this is."""

    @classmethod
    def module(cls) -> str:
        """The module an ablation run starts as `python -m <module>`."""
        return f"{cls.name}.main"

    # ------------------------------------------------------------------------------ the agent

    @abc.abstractmethod
    def replay(self) -> patterns.Pattern:
        """The replay pattern (`common.replay.patterns`: tables, writer, learner batches)."""

    @abc.abstractmethod
    def policy_factory(self) -> acting.PolicyFactory:
        """The acting policy of one actor or evaluator process, as a picklable
        `common.runtime.acting.PolicyFactory` (`(num_actions, observation_shape, observation_dtype,
        seed, greedy) -> Policy`)."""

    @abc.abstractmethod
    def policy_extras(self, spec: EnvSpec) -> dict:
        """{name: tf.TensorSpec} of the per-step extras the policy returns (IMPALA's behaviour
        logits, the behaviour log-probability of DiCE, GDI and LBC), stored with every step."""

    @abc.abstractmethod
    def make_learner(self, spec: EnvSpec) -> learning.LearnerParts:
        """The learner's parts (train step, checkpointables, acting variables); runs in the
        learner process (and in `--role=evaluate`, to restore a checkpoint)."""

    @abc.abstractmethod
    def core_state_spec(self) -> Any:
        """Per-env spec of the recurrent state stored at each item's first step (None:
        feed-forward)."""

    def behaviour(self) -> behaviour.BehaviourSpec | None:
        """The per-game behaviour selector (`common.control.behaviour`); None: the policy has no
        parameters to pick."""
        return None

    def value_heads(self) -> int:
        """Values a truncated step stores: one per network, each in its own reward shaping's
        units (the policy's `bootstrap_value` returns as many)."""
        return 1

    # -------------------------------------------------------------------------------- the run

    @abc.abstractmethod
    def protocol(self) -> protocols.AtariProtocol:
        """The training protocol (`common.environments.protocols`: preprocessing, action repeats,
        episode cap)."""

    def evaluation(self) -> Evaluation:
        """How the evaluator plays: by default the training protocol, sampling the policy."""
        return Evaluation()

    def frames_per_learner_step(self) -> int:
        """New frames one learner step counts (the frame budget and the schedules run on it): the
        config's `frames_per_learner_step`, which every paper's config defines."""
        return self.config.frames_per_learner_step

    def publish_lag(self) -> int:
        """Learner steps the published acting weights lag behind (IMPALA App. E.1)."""
        return 0

    @abc.abstractmethod
    def run_name(self) -> str:
        """The run's name on the learner's console lines, e.g. "impala Pong"."""

    @abc.abstractmethod
    def describe(self) -> str:
        """One phrase about the config for the startup line, e.g. "2 actors x 16 envs, deep
        net, ..."; imports nothing heavy."""


class BurnInBuilder(Builder[BurnInConfigT]):
    """The pieces DiCE, GDI and LBC share: burn-in sequences, each sampled `times_sampled` times
    (`common.burn_in.burn_in_learning.sample_k_replay`), and the behaviour log-probability stored
    with every step (`common.burn_in.advantage_policy`). Their configs compose
    `common.settings.burn_in_settings.BurnInLearnerSettings`."""

    def replay(self) -> patterns.Pattern:
        from common.burn_in import burn_in_learning

        return burn_in_learning.sample_k_replay(self.config)

    def policy_extras(self, spec: EnvSpec) -> dict:
        from common.burn_in import advantage_policy

        return advantage_policy.policy_extras(spec)


def paper_builder(paper: str) -> type[Builder]:
    """The `Builder` class of the paper named `paper`: the one `<paper>/builder.py` defines with
    that `name` (imports the paper's builder module, nothing heavy)."""
    module = importlib.import_module(f"{paper}.builder")
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and value.__module__ == module.__name__
            and Builder in value.__mro__
            and getattr(value, "name", None) == paper
        ):
            return value
    raise ValueError(f"{module.__name__} defines no Builder named {paper!r}")


def build_agent(builder: Builder) -> Agent:
    """The `common.runtime.agent.Agent` of `builder` (imports TensorFlow and Reverb)."""
    from common.runtime import agent

    return agent.Agent(
        replay=builder.replay(),
        make_policy=builder.policy_factory(),
        policy_extras=builder.policy_extras,
        make_learner=builder.make_learner,
        core_state_spec=builder.core_state_spec(),
        behaviour=builder.behaviour(),
        value_heads=builder.value_heads(),
    )


def build_experiment(
    builder: Builder, logdir: str, replay_port: int | None = None
) -> launch.Experiment:
    """The launcher's description of a run of `builder`'s agent: the agent plus the actor,
    learner and evaluator settings of its config's run fields (`common.launchers.launch`; imports
    TensorFlow and Reverb)."""
    from common.launchers import launch

    evaluation = builder.evaluation()
    return launch.experiment_from_config(
        builder.config,
        build_agent(builder),
        logdir,
        replay_port,
        protocol=builder.protocol(),
        eval_protocol=evaluation.protocol,
        greedy_evaluation=evaluation.greedy,
        evaluate=evaluation.enabled,
        frames_per_learner_step=builder.frames_per_learner_step(),
        publish_lag=builder.publish_lag(),
        name=builder.run_name(),
    )

"""What every paper's config shares: fields that carry their help text and their check, the
parts several papers compose their configs from, and the pass-through of field groups to the
objects they configure.

A config is a frozen dataclass whose field names are the absl flag names (`common.experiments.cli`).
Each field is made with `field(default, help, check)`: the help text is the flag's, and `check`
(e.g. `positive`, `unit_interval`, `one_of(TORSOS)`) is the rule the field's value must follow on
its own. `Config.validate()` checks every field by its rule, raising an error that names the flag
(`--batch_size=0 must be > 0`); a config's own `validate()` adds only the rules that relate several
fields, after `super().validate()`.

The parts: `ProcessSettings` (every paper: how the processes run on this machine),
`RunSettings` (every paper: the game, budget, actors, batch, weight transfer, evaluation and
seed), `DiscountSettings` (every paper but LBC), and for the burn-in agents DiCE, GDI and LBC
those of `common.settings.burn_in_settings`.
A part owns its fields' help text and checks, and their defaults where the papers share one. A
paper's config inherits the parts and declares only what is its own: its own fields, and the
shared fields whose default is the paper's own value, re-declared as `name: type = value` with
the paper's table cited (their help text and check stay the part's).

This module imports nothing heavy, so flags are validated in milliseconds.
"""

import dataclasses
import inspect
import math
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Self

# The names configs choose from and TensorFlow modules implement, here so that a config validates
# without importing TensorFlow. The TensorFlow side keys its objects by these names, and tests
# assert both agree.

# Arithmetic of a network that only acts (common.models.networks.build_in_precision).
PRECISIONS = ("float32", "bfloat16")
# Keys of common.equations.transforms.REWARD_TRANSFORMS: reward clipping and shaping by name.
REWARD_TRANSFORMS = (
    "none",
    "clip",
    "optimistic_asymmetric",
    "soft_asymmetric_code",
    "asymmetric_log",
    "fourth_root",
    "value_rescaling",
)
# common.equations.returns.retrace: "expected" bootstraps on E_pi Q(x', .) (Munos et al., Reactor),
# "sampled" on Q(x', a') (as printed in DiCE Eq. (2), GDI Eq. (3), LBC App. B.3);
# docs/architecture.md#conventions.
RETRACE_FORMS = ("expected", "sampled")
# common.burn_in.critics.dueling_q: Q from V and A ("policy_mean" is GDI Eq. (9), "none" DiCE §3.1).
Q_CENTERINGS = ("policy_mean", "policy_mean_grad", "none", "uniform_mean")
# Keys of common.models.networks.TORSOS; the Atari papers' convolutional ones first.
TORSOS = ("deep", "shallow", "nature", "minatar", "mlp")
ATARI_TORSOS = ("deep", "shallow", "nature")
# How the burn-in learner of DiCE, GDI and LBC reads "sample reuse k" (the `reuse_mode` row of
# docs/papers/dice.md#departures-from-the-paper): each item sampled k times, or each batch trained
# on k times; and where a behaviour controller lives.
REUSE_MODES = ("replay", "repeat")
CONTROLLER_SCOPES = ("per_env", "global")
# common.control.bandits.SELECTIONS: how the behaviour parameters are chosen (a test asserts both
# agree).
BANDIT_SELECTIONS = ("bandits", "uniform", "uniform_coordinate")
# common.control.bandits.SPACES: the coordinate DiCE's and GDI's bandits tile (a test asserts both
# agree).
BANDIT_SPACES = ("log1p", "inv_tau", "exp_literal")
# How `common.burn_in.dynamics` scores the forward-dynamics prediction (GDI, LBC).
FORWARD_LOSSES = ("half_sum_squares", "mse")


# ----------------------------------------------------------------------------- checks of a field


@dataclasses.dataclass(frozen=True)
class Check:
    """The rule one field's value must follow: `ok(value)`, or ValueError with
    `error(name, value)`, which names the flag (e.g. "--batch_size=0 must be > 0")."""

    ok: Callable[[Any], bool]
    error: Callable[[str, Any], str]

    def __call__(self, name: str, value) -> None:
        if not self.ok(value):
            raise ValueError(self.error(name, value))


def must_be(requirement: str, ok: Callable[[Any], bool]) -> Check:
    """`--name=value must be <requirement>`, e.g. must_be("> 0", lambda v: v > 0)."""
    return Check(ok, lambda name, value: f"--{name}={value} must be {requirement}")


def at_least(low: float) -> Check:
    return must_be(f">= {low}", lambda value: value >= low)


def interval(text: str) -> Check:
    """A value in the interval `text`, written as in mathematics: "[0, 1)" is 0 <= value < 1."""
    low, high = (float(bound) for bound in text[1:-1].split(","))

    def ok(value) -> bool:
        above = value > low if text[0] == "(" else value >= low
        below = value < high if text[-1] == ")" else value <= high
        return above and below

    return must_be(f"in {text}", ok)


positive = must_be("> 0", lambda value: value > 0)
non_negative = must_be(">= 0", lambda value: value >= 0)
unit_interval = interval("[0, 1]")


def all_of(*checks: Check) -> Check:
    """Every one of `checks`; the error is the first failing one's."""

    def error(name: str, value) -> str:
        failed = next(check for check in checks if not check.ok(value))
        return failed.error(name, value)

    return Check(lambda value: all(check.ok(value) for check in checks), error)


def one_of(allowed: tuple) -> Check:
    """`--name='value' is not one of a, b, c` for a value outside `allowed`."""
    return Check(
        lambda value: value in allowed,
        lambda name, value: f"--{name}={value!r} is not one of {', '.join(map(str, allowed))}",
    )


def tuple_of(requirement: str, ok: Callable[[Any], bool]) -> Check:
    """A non-empty tuple whose every element passes `ok`; `requirement` names them."""
    return Check(
        lambda values: isinstance(values, tuple) and bool(values) and all(map(ok, values)),
        lambda name, values: f"--{name}={values!r} must be a non-empty tuple of {requirement}",
    )


positive_int_tuple = tuple_of("positive integers", lambda v: isinstance(v, int) and v > 0)


def satisfies(condition: str, ok: Callable[[Any], bool]) -> Check:
    """`--name=value must satisfy <condition>`, for a rule about the parts of one value."""
    return Check(ok, lambda name, value: f"--{name}={value!r} must satisfy {condition}")


def ordered_pair(below: float = math.inf) -> Check:
    """A (low, high) range with 0 <= low <= high (< `below`, if given)."""
    bound = f" < {below:g}" if below < math.inf else ""
    return satisfies(
        f"0 <= low <= high{bound}",
        lambda pair: len(pair) == 2 and 0 <= pair[0] <= pair[1] < below,
    )


def check_choice(name: str, value: Any, allowed: tuple) -> None:
    """Raises ValueError naming the flag unless `value` is one of `allowed`."""
    one_of(allowed)(name, value)


def check_all(
    config: object, requirement: str, ok: Callable[[Any], bool], names: tuple[str, ...]
) -> None:
    """Raises naming the first of `names` whose value fails `ok`; `requirement` says what is allowed
    (for settings whose fields declare no check, e.g. `common.experiments.cli.RunSettings`)."""
    for name in names:
        must_be(requirement, ok)(name, getattr(config, name))


# ---------------------------------------------------------------------------------- fields


def field(default: Any, doc: str | None = None, check: Check | None = None) -> Any:
    """A config field: its default, its flag help text and the rule its value must follow.
    A config re-declaring a field of a part it inherits (to give the paper's own default) leaves
    out `doc` and `check` where the part's say it (`Config.__init_subclass__` copies them)."""
    metadata: dict[str, Any] = {}
    if doc is not None:
        metadata["help"] = doc
    if check is not None:
        metadata["check"] = check
    return dataclasses.field(default=default, metadata=metadata)


class Config:
    """Base of the configs and their parts: `validate()` checks each field by the rule its
    `field(..., check=...)` declares, in field order. A config that has rules relating several
    fields overrides `validate()`, calls `super().validate()` first and returns `self`."""

    if TYPE_CHECKING:  # every config and part is a dataclass
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A field re-declared with a new default keeps the help text and check of the part that
        owns it, unless it gives its own."""
        super().__init_subclass__(**kwargs)
        inherited: dict[str, dataclasses.Field] = {}
        for base in reversed(cls.__mro__[1:]):
            if dataclasses.is_dataclass(base):
                inherited.update({f.name: f for f in dataclasses.fields(base)})
        for name in inspect.get_annotations(cls):
            if name not in inherited:
                continue
            value = cls.__dict__.get(name, dataclasses.MISSING)
            own = value if isinstance(value, dataclasses.Field) else field(value)
            metadata = {**inherited[name].metadata, **own.metadata}
            setattr(cls, name, dataclasses.field(default=own.default, metadata=metadata))

    def validate(self) -> Self:
        """Raises ValueError naming the first field whose value breaks its declared check."""
        for f in dataclasses.fields(self):
            check = f.metadata.get("check")
            if check is not None:
                check(f.name, getattr(self, f.name))
        return self


def prefixed_kwargs(config: Config, prefix: str) -> dict[str, Any]:
    """Fields named `<prefix><arg>` as keyword arguments `{arg: value}` (e.g. the bandit's)."""
    return {
        f.name.removeprefix(prefix): getattr(config, f.name)
        for f in dataclasses.fields(config)
        if f.name.startswith(prefix)
    }


def atari_protocol_overrides(config: Any) -> dict[str, Any]:
    """`common.environments.protocols.AtariProtocol` fields set by a config's `full_action_set`,
    `noop_max`, `max_episode_frames` and `sticky_action_probability` (training and evaluation
    share them)."""
    return dict(
        full_action_space=config.full_action_set,
        noop_max=config.noop_max,
        max_episode_frames=config.max_episode_frames,
        repeat_action_probability=config.sticky_action_probability,
    )


# ------------------------------------------------------------------------------------ parts


@dataclasses.dataclass(frozen=True)
class ProcessSettings(Config):
    """Run fields every agent's config shares (a base class: its fields come first). They say
    how the processes run on this machine, not what the paper trains."""

    actor_niceness: int = field(
        19, "nice increment of actor and evaluator processes.", interval("[0, 19]")
    )
    # choice: actors outpace the learner on a shared 2-core machine; niced, they use the CPU the
    # learner leaves. benchmarks/throughput.py, IMPALA deep net, oneDNN, AMD EPYC 2-core AVX2,
    # 60 s each: nice 0 / 10 / 19 -> 687 / 784 / 839 frames/s of full training.
    jit_compile: bool = field(False, "XLA-compile the train step and the actor policy.")
    # choice: benchmarks/throughput.py measures both; XLA's CPU convolutions are slower here.
    learner_threads: int = field(2, "TensorFlow intra-op threads of the learner process.", positive)
    # choice: one per core of the 2-core machines this is sized for; the actors run at one each.
    checkpoint_interval_s: float = field(300.0, "Seconds between checkpoints.", positive)  # choice
    log_interval_s: float = field(10.0, "Seconds between console lines / summaries.", positive)
    # choice
    eval_interval_s: float = field(
        600.0, "Seconds between evaluation rounds (0: no evaluation during the run).", non_negative
    )
    # choice: the evaluator shares 2 cores with training, so it runs rarely.
    eval_round_episodes: int = field(
        8, "Episodes per periodic round; the last round runs all.", positive
    )
    # choice: a periodic round of a paper's full evaluation would starve training on 2 cores.


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunSettings(ProcessSettings):
    """What every paper's run is: the game and its budget, the actors that play it, the learner's
    batch, how weights move between them, the evaluation and the seed. Help text and checks are
    declared here once; a field without a default here has none every paper shares, so each
    config gives its paper's own, cited there (keyword-only: a config that leaves one out fails
    when it is built)."""

    env: str = field("Pong", "Atari game (e.g. Pong, Breakout), MinAtar game or CartPole.")
    # choice: a quick smoke game, every paper's.
    total_frames: int = field(
        200_000_000, "Environment frames (action repeats included).", positive
    )
    # IMPALA §5.3.2, Reactor §4.1, DiCE Table 5, GDI Table 6: 200M (LBC declares its own).
    seed: int = field(0, "Seed of environments, networks and behaviour controllers.", non_negative)
    # choice: 0, every paper's (Reactor §4.1: "a fixed random seed across all games").
    num_actors: int = field(2, "Actor processes.", positive)
    # choice: one per core on 2 cores, every paper's.
    envs_per_actor: int = field(
        dataclasses.MISSING, "Environments one actor steps together (one policy call).", positive
    )
    params_pull_interval: int = field(
        dataclasses.MISSING, "Actor steps between parameter pulls.", positive
    )
    publish_interval: int = field(
        dataclasses.MISSING, "Learner steps between parameter publications.", positive
    )
    batch_size: int = field(
        dataclasses.MISSING,
        "Items per learner batch (IMPALA's unrolls, the others' sequences).",
        positive,
    )
    eval_episodes: int = field(dataclasses.MISSING, "Episodes per evaluation.", positive)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DiscountSettings(Config):
    """The one discount of a paper whose returns all share it: IMPALA's, Reactor's, DiCE's and
    GDI's (LBC learns with one per network, its own `discounts`). Each gives its own default."""

    discount: float = field(dataclasses.MISSING, "Discount gamma.", unit_interval)


@dataclasses.dataclass(frozen=True)
class AtariSettings(Config):
    """The Atari protocol's knobs that a run trains and evaluates under alike
    (`atari_protocol_overrides`): Reactor's, DiCE's, GDI's and LBC's (IMPALA evaluates under
    its own). A default the papers print alike cites each; the others re-declare theirs."""

    full_action_set: bool = field(True, "All 18 Atari actions, not the game's minimal set.")
    # DiCE Table 5, GDI Table 5, LBC Table 3: "Action Space Full". Reactor: its own.
    noop_max: int = field(
        30, "Random no-ops at episode start (training and evaluation).", non_negative
    )
    # DiCE Table 5 "Random No-ops 30"; GDI Table 5, LBC Table 3 "Random noops range 30"; Reactor
    # §4.1: evaluated with "30 random no-op starts" (training: choice, not stated).
    max_episode_frames: int = field(
        108_000, "Episode cap in frames (a truncation, not an end).", positive
    )
    # LBC Table 3 "Max episode length 30 min" = 108,000 frames (App. H.2 says 100K: errata in
    # docs/papers/lbc.md#errata); DiCE and Reactor: choice (not printed), 30 minutes of play, the
    # usual Atari cap. GDI: its own.
    sticky_action_probability: float = field(0.0, "Sticky-action probability.", unit_interval)
    # GDI Table 5, LBC Table 3; DiCE: choice (not printed), as GDI's Table 5 states for the same
    # agent; Reactor: choice, the 2017 no-op protocol predates sticky actions (as IMPALA's:
    # docs/papers/impala.md#departures-from-the-paper).


@dataclasses.dataclass(frozen=True)
class AdamSettings(Config):
    """Adam's moment decays and epsilon: the burn-in papers' AdamW's, Reactor's Adam's."""

    adam_beta1: float = field(0.9, "Adam(W) beta1 ('momentum').", unit_interval)
    # DiCE Table 5, GDI Table 6, LBC Table 3. Reactor: its own.
    adam_beta2: float = field(0.98, "Adam(W) beta2.", unit_interval)
    # DiCE Table 5, GDI Table 6, LBC Table 3. Reactor: its own.
    adam_epsilon: float = field(1e-6, "Adam(W) epsilon.", positive)
    # DiCE Table 5, GDI Table 6, LBC Table 3. Reactor: its own.


class Derived:
    """An env default computed from the run's final config (`resolve(config)`), after the flags
    given on the command line: `common.experiments.cli.make_config` resolves it unless the flag is
    given."""

    def resolve(self, config: Any) -> Any:
        raise NotImplementedError

"""What every paper's config shares: documented fields, validation with flag-named errors, and the
pass-through of field groups to the objects they configure.

A config is a frozen dataclass whose field names are the absl flag names; this module imports
nothing heavy, so flags are validated in milliseconds.
"""

import dataclasses
from typing import Any, Callable

# The names configs choose from and TensorFlow modules implement, here so that a config validates
# without importing TensorFlow. The TensorFlow side keys its objects by these names, and tests
# assert both agree.

# Arithmetic of a network that only acts (common.networks.build_in_precision).
PRECISIONS = ("float32", "bfloat16")
# Keys of common.transforms.REWARD_TRANSFORMS: reward clipping and shaping by name.
REWARD_TRANSFORMS = (
    "none",
    "clip",
    "optimistic_asymmetric",
    "soft_asymmetric_code",
    "asymmetric_log",
    "fourth_root",
    "value_rescaling",
)
# common.returns.retrace: "expected" bootstraps on E_pi Q(x', .) (Munos et al., Reactor),
# "sampled" on Q(x', a') (as printed in DiCE, GDI, LBC); DESIGN.md §3.
RETRACE_FORMS = ("expected", "sampled")
# common.critics.dueling_q: Q from V and A (dice.md A4).
Q_CENTERINGS = ("policy_mean", "none", "uniform_mean")
# Keys of common.networks.TORSOS; the Atari papers' convolutional ones first.
TORSOS = ("deep", "shallow", "nature", "mlp")
ATARI_TORSOS = ("deep", "shallow", "nature")


def field(default, doc: str):
    """A dataclass field with its flag help text."""
    return dataclasses.field(default=default, metadata={"help": doc})


def check_choice(name: str, value, allowed: tuple) -> None:
    if value not in allowed:
        raise ValueError(f"--{name}={value!r} is not one of {', '.join(map(str, allowed))}")


def check_all(config, requirement: str, ok: Callable[[Any], bool], names: tuple[str, ...]) -> None:
    """Raises naming the first of `names` whose value fails `ok`; `requirement` says what is allowed."""
    for name in names:
        if not ok(getattr(config, name)):
            raise ValueError(f"--{name}={getattr(config, name)} must be {requirement}")


def check_tuple(config, name: str, requirement: str, ok: Callable[[Any], bool]) -> None:
    values = getattr(config, name)
    if not (isinstance(values, tuple) and values and all(ok(v) for v in values)):
        raise ValueError(f"--{name}={values!r} must be a non-empty tuple of {requirement}")


def prefixed_kwargs(config, prefix: str) -> dict[str, Any]:
    """Fields named `<prefix><arg>` as keyword arguments `{arg: value}` (e.g. the bandit's)."""
    return {
        f.name.removeprefix(prefix): getattr(config, f.name)
        for f in dataclasses.fields(config)
        if f.name.startswith(prefix)
    }


def atari_protocol_overrides(config) -> dict[str, Any]:
    """`common.envs.AtariProtocol` fields set by a config's `full_action_set`, `noop_max`,
    `max_episode_frames` and `sticky_action_probability` (training and evaluation share them)."""
    return dict(
        full_action_space=config.full_action_set,
        noop_max=config.noop_max,
        max_episode_frames=config.max_episode_frames,
        repeat_action_probability=config.sticky_action_probability,
    )


@dataclasses.dataclass(frozen=True)
class ProcessSettings:
    """Run fields every agent's config shares (a base class: its fields come first). They say
    how the processes run on this machine, not what the paper trains."""

    actor_niceness: int = field(19, "nice increment of actor and evaluator processes.")
    # choice: actors outpace the learner on a shared 2-core machine; niced, they use the CPU the
    # learner leaves. benchmarks/throughput.py, IMPALA deep net, oneDNN, AMD EPYC 2-core AVX2,
    # 60 s each: nice 0 / 10 / 19 -> 687 / 784 / 839 frames/s of full training.
    jit_compile: bool = field(False, "XLA-compile the train step and the actor policy.")
    # choice: benchmarks/throughput.py measures both; XLA's CPU convolutions are slower here.
    checkpoint_interval_s: float = field(300.0, "Seconds between checkpoints.")  # choice
    log_interval_s: float = field(10.0, "Seconds between console lines / summaries.")  # choice
    eval_interval_s: float = field(600.0, "Seconds between evaluation rounds (0: no evaluator).")
    # choice: the evaluator shares 2 cores with training, so it runs rarely.
    eval_round_episodes: int = field(8, "Episodes per periodic round; the last round runs all.")
    # choice: a periodic round of a paper's full evaluation would starve training on 2 cores.

    def check_process_settings(self) -> None:
        check_all(
            self,
            "> 0",
            lambda v: v > 0,
            ("checkpoint_interval_s", "log_interval_s", "eval_round_episodes"),
        )
        check_all(self, ">= 0", lambda v: v >= 0, ("eval_interval_s",))
        check_all(self, "in [0, 19]", lambda v: 0 <= v <= 19, ("actor_niceness",))

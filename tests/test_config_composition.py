"""The configs are composed from `common.settings.config`'s shared parts, and every field declares
its help text and its check.

- A shared field is declared once, by the part that owns it: a paper config re-declares one only
  to give its own default (never the shared one), and keeps the part's check.
- Nothing all three burn-in papers (DiCE, GDI, LBC) declare alike is left outside the parts.
- Every field has help text (the flag's), and every field with a declared check rejects a bad
  value with an error that names the flag, through the config's `validate()`.

No TensorFlow is imported.
"""

import dataclasses
import inspect
import itertools
import re
import typing

import pytest

from common.settings import config as common_config

from common.settings import burn_in_settings
from dice import config as dice_config
from gdi import config as gdi_config
from impala import config as impala_config
from lbc import config as lbc_config
from reactor import config as reactor_config

PARTS = (
    common_config.ProcessSettings,
    common_config.RunSettings,
    common_config.AtariSettings,
    common_config.AdamSettings,
    common_config.DiscountSettings,
    burn_in_settings.BurnInLearnerSettings,
    burn_in_settings.BanditSettings,
    burn_in_settings.BanditEnsembleSettings,
    burn_in_settings.DynamicsSettings,
)
CONFIGS = (
    impala_config.ImpalaConfig,
    reactor_config.ReactorConfig,
    dice_config.DiceConfig,
    gdi_config.GdiConfig,
    lbc_config.LbcConfig,
)
BURN_IN_CONFIGS = (dice_config.DiceConfig, gdi_config.GdiConfig, lbc_config.LbcConfig)


def _name(cls) -> str:
    return cls.__name__


def own_fields(cls) -> list[str]:
    """The fields `cls`'s own body declares (not the ones it inherits unchanged)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return [name for name in inspect.get_annotations(cls) if name in names]


def fields_of(cls) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def owner(cls, name: str) -> type | None:
    """The shared part among `cls`'s bases that declares field `name`, if any."""
    for part in PARTS:
        if issubclass(cls, part) and name in own_fields(part):
            return part
    return None


# ----------------------------------------------------------------------------------- composition


def test_every_config_has_the_process_settings():
    process = set(own_fields(common_config.ProcessSettings))
    assert process == {
        "actor_niceness",
        "jit_compile",
        "learner_threads",
        "checkpoint_interval_s",
        "log_interval_s",
        "eval_interval_s",
        "eval_round_episodes",
    }
    for cls in CONFIGS:
        assert issubclass(cls, common_config.ProcessSettings), cls.__name__
        assert process <= set(fields_of(cls)), cls.__name__
    for cls in BURN_IN_CONFIGS:
        assert issubclass(cls, burn_in_settings.BurnInLearnerSettings)
        assert issubclass(cls, burn_in_settings.BanditSettings)


def test_every_config_composes_the_run_settings():
    run = set(own_fields(common_config.RunSettings))
    assert run == {
        "env",
        "total_frames",
        "seed",
        "num_actors",
        "envs_per_actor",
        "params_pull_interval",
        "publish_interval",
        "batch_size",
        "eval_episodes",
    }
    shared = fields_of(common_config.RunSettings)
    for cls in CONFIGS:
        assert issubclass(cls, common_config.RunSettings), cls.__name__
        for name in run:  # the part's help and check, whatever default the paper gives
            assert fields_of(cls)[name].metadata == shared[name].metadata, (cls.__name__, name)


def declared(cls) -> set[str]:
    """The fields `cls` declares that no part among its bases owns (a paper's own fields, or a
    part's)."""
    return {
        name
        for name in own_fields(cls)
        if not any(p is not cls and issubclass(cls, p) and name in own_fields(p) for p in PARTS)
    }


# Fields that two or more configs or parts declare each with help text of its own, because they
# share a name but not a meaning or a source: each paper's `eval_policy` chooses among its own
# policies and its `network` among its own torsos; IMPALA's RMSProp `learning_rate` is not
# Reactor's Adam one; IMPALA's sample-k `burn_in` and `times_sampled` serve its replay variant, the
# burn-in papers' their learner; DiCE's `fixed_behaviour` switch is not GDI's three values. Two mean
# the same everywhere but live in parts that a paper does not compose whole: `full_action_set`
# (IMPALA evaluates under its own Atari protocol, not `AtariSettings`) and `max_grad_norm` (a
# field of each paper's optimiser). A name leaves the list when a part takes it; none joins it.
DECLARED_PER_PAPER = frozenset(
    "bandit_eta_acc bandit_factorized "
    "burn_in clip_c_threshold clip_rho_threshold entropy_cost eval_policy "
    "fixed_behaviour full_action_set learning_rate lstm_units max_grad_norm network "
    "replay_capacity retrace_form reward_shaping sequence_length times_sampled".split()
)


@pytest.mark.parametrize(
    "first, second",
    list(itertools.combinations(CONFIGS + PARTS, 2)),
    ids=lambda cls: cls.__name__,
)
def test_no_two_configs_declare_the_same_field(first, second):
    assert declared(first) & declared(second) <= DECLARED_PER_PAPER


def test_the_fields_declared_per_paper_are_still_declared_twice():
    # An entry that a part has since absorbed leaves the list with it.
    twice = set()
    for first, second in itertools.combinations(CONFIGS + PARTS, 2):
        twice |= declared(first) & declared(second)
    assert DECLARED_PER_PAPER <= twice


def test_each_shared_field_has_one_owner():
    owners = {}
    for part in PARTS:
        for name in declared(part):  # a part may give another's field its own default
            assert name not in owners, f"{name}: {owners[name].__name__} and {part.__name__}"
            owners[name] = part


@pytest.mark.parametrize("cls", CONFIGS, ids=_name)
def test_a_paper_re_declares_a_shared_field_only_with_its_own_default(cls):
    """A re-declared shared field has the paper's own default (the shared one would be a second
    declaration of the same thing), the part's check, and help text."""
    for name in own_fields(cls):
        part = owner(cls, name)
        if part is None:
            continue
        shared, own = fields_of(part)[name], fields_of(cls)[name]
        assert own.default != shared.default, (
            f"{cls.__name__}.{name} re-declares {part.__name__}'s default {shared.default!r}"
        )
        assert own.metadata.get("check") is shared.metadata.get("check"), f"{cls.__name__}.{name}"
        assert own.metadata.get("help"), f"{cls.__name__}.{name}"


def test_nothing_the_three_burn_in_papers_declare_alike_is_left_outside_the_parts():
    declared = [set(own_fields(cls)) for cls in BURN_IN_CONFIGS]
    for name in set.intersection(*declared):
        defaults = {repr(fields_of(cls)[name].default) for cls in BURN_IN_CONFIGS}
        assert len(defaults) > 1, f"{name}: {defaults.pop()} in DiCE, GDI and LBC"


def test_the_shared_defaults_are_what_the_papers_print():
    """The parts' defaults where DiCE Table 5, GDI Table 6 and LBC Table 3 agree; each paper's
    own values where they do not."""
    dice, gdi, lbc = (cls() for cls in BURN_IN_CONFIGS)
    for config in (dice, gdi, lbc):
        assert (config.lstm_units, config.batch_size, config.burn_in, config.sequence_length) == (
            256,
            64,
            40,
            80,
        )
        assert (config.times_sampled, config.warmup_steps, config.max_grad_norm) == (2, 4000, 50.0)
        assert (config.adam_beta1, config.adam_beta2, config.adam_epsilon) == (0.9, 0.98, 1e-6)
        assert (config.clip_rho_threshold, config.clip_c_threshold) == (1.05, 1.05)
        assert (config.params_pull_interval, config.publish_interval, config.num_envs) == (
            64,
            25,
            160,
        )
        assert config.bandit_num_bandits == 7 and config.eval_episodes == 32
    assert (dice.q_centering, gdi.q_centering, lbc.q_centering) == (
        "none",
        "policy_mean",
        "policy_mean_grad",
    )
    assert (dice.max_episode_frames, gdi.max_episode_frames, lbc.max_episode_frames) == (
        108_000,
        100_000,  # GDI Table 5
        108_000,
    )
    assert (lbc.total_frames, lbc.learning_rate, lbc.q_loss_scale, lbc.pi_loss_scale) == (
        1_000_000_000,
        5.3e-4,
        5.0,
        5.0,
    )
    assert (lbc.network, lbc.head_hidden, dice.network, gdi.network) == (
        "nature",
        512,
        "deep",
        "deep",
    )


def test_reactor_process_settings_keep_their_defaults():
    """Reactor's run fields before it took `ProcessSettings`, and its new --jit_compile (off)."""
    config = reactor_config.ReactorConfig()
    assert (config.actor_niceness, config.checkpoint_interval_s, config.log_interval_s) == (
        19,
        300.0,
        10.0,
    )
    assert (config.eval_interval_s, config.eval_round_episodes, config.jit_compile) == (
        600.0,
        8,
        False,
    )


# ---------------------------------------------------------------------------- help and checks


@pytest.mark.parametrize("cls", CONFIGS + PARTS, ids=_name)
def test_every_field_has_help(cls):
    for f in dataclasses.fields(cls):
        assert f.metadata.get("help"), f"{cls.__name__}.{f.name} has no help text"


def checked_fields(kinds: tuple[type, ...], tuples: bool = False):
    """(config class, field name, element type) of every field with a declared check whose
    type (or element type, for tuples) is one of `kinds`."""
    cases = []
    for cls in CONFIGS:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if "check" not in f.metadata:
                continue
            hint = hints[f.name]
            is_tuple = typing.get_origin(hint) is tuple
            element = typing.get_args(hint)[0] if is_tuple else hint
            if is_tuple == tuples and element in kinds:
                cases.append(pytest.param(cls, f.name, element, id=f"{cls.__name__}.{f.name}"))
    return cases


BAD_NUMBERS = {int: (-1, 0, 1, 2, 20, 10**9), float: (-1.0, -1e-9, 0.0, 1.0, 1.5, 20.0)}


@pytest.mark.parametrize("cls, name, kind", checked_fields((int, float)))
def test_every_checked_number_rejects_a_bad_value_naming_the_flag(cls, name, kind):
    check = fields_of(cls)[name].metadata["check"]
    assert check.ok(getattr(cls(), name)), "the default passes its own check"
    rejected = [value for value in BAD_NUMBERS[kind] if not check.ok(value)]
    assert rejected, f"{cls.__name__}.{name}: no candidate breaks the check"
    for value in rejected:
        with pytest.raises(ValueError, match=f"^--{name}={re.escape(str(value))} must be "):
            cls(**{name: value}).validate()


@pytest.mark.parametrize("cls, name, kind", checked_fields((str,)))
def test_every_checked_name_rejects_an_unknown_one_naming_the_flag(cls, name, kind):
    with pytest.raises(ValueError, match=f"^--{name}='bogus' is not one of "):
        cls(**{name: "bogus"}).validate()


@pytest.mark.parametrize("cls, name, kind", checked_fields((int, float, str), tuples=True))
def test_every_checked_tuple_rejects_an_empty_one_naming_the_flag(cls, name, kind):
    with pytest.raises(ValueError, match=rf"^--{name}=\(\) must "):
        cls(**{name: ()}).validate()


def test_checks_read_as_the_messages_say():
    """The helpers' messages, as the tests of each paper's flags assert them."""
    cases = [
        (common_config.positive, "batch_size", 0, "--batch_size=0 must be > 0"),
        (common_config.non_negative, "burn_in", -1, "--burn_in=-1 must be >= 0"),
        (common_config.unit_interval, "discount", 1.5, "--discount=1.5 must be in [0, 1]"),
        (common_config.interval("[0, 1)"), "e", 1.0, "--e=1.0 must be in [0, 1)"),
        (common_config.interval("(0, 1]"), "r", 0.0, "--r=0.0 must be in (0, 1]"),
        (common_config.at_least(1), "c", 0.5, "--c=0.5 must be >= 1"),
        (common_config.one_of(("a", "b")), "x", "c", "--x='c' is not one of a, b"),
        (
            common_config.positive_int_tuple,
            "widths",
            (1, 0),
            "--widths=(1, 0) must be a non-empty tuple of positive integers",
        ),
        (
            common_config.ordered_pair(below=100),
            "offsets",
            (60.0, 0.0),
            "--offsets=(60.0, 0.0) must satisfy 0 <= low <= high < 100",
        ),
        (
            common_config.all_of(common_config.positive, common_config.unit_interval),
            "acc",
            0.0,
            "--acc=0.0 must be > 0",
        ),
    ]
    for check, name, value, message in cases:
        with pytest.raises(ValueError) as error:
            check(name, value)
        assert str(error.value) == message

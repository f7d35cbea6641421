"""The Reactor, DiCE, GDI and LBC configs: validation, agreement with `common`, derived numbers.

No TensorFlow is imported: the names a config chooses from (reward transforms, Retrace forms,
torsos) come from `common.settings.config`, whose agreement with the TensorFlow modules is asserted
in tests/common/equations/test_transforms.py, test_returns.py and test_networks.py.
"""

import dataclasses
import inspect
import math
import subprocess
import sys

import pytest

from common.control import bandits
from common.environments import protocols
from common.settings import config as common_config
from dice import config as dice_config
from dice import controller as dice_controller
from gdi import config as gdi_config
from gdi import controller as gdi_controller
from lbc import config as lbc_config
from lbc import controller as lbc_controller
from reactor import config as reactor_config

MODULES = (reactor_config, dice_config, gdi_config, lbc_config)
CONFIGS = {
    reactor_config: reactor_config.ReactorConfig,
    dice_config: dice_config.DiceConfig,
    gdi_config: gdi_config.GdiConfig,
    lbc_config: lbc_config.LbcConfig,
}
CONTROLLERS = {
    dice_config.DiceConfig: dice_controller.DiceController,
    gdi_config.GdiConfig: gdi_controller.GdiController,
    lbc_config.LbcConfig: lbc_controller.LbcController,
}


def _module_id(module) -> str:
    return module.__name__.split(".")[0]


@pytest.fixture(params=MODULES, ids=_module_id)
def module(request):
    return request.param


# ----------------------------------------------------------------------------- defaults and flags


def test_defaults_validate_and_every_field_has_help(module):
    config = CONFIGS[module]()
    assert config.validate() is config
    for field in dataclasses.fields(config):
        assert field.metadata.get("help"), f"{module.__name__}.{field.name} has no help"


def test_configs_import_without_tensorflow_or_gymnasium():
    code = (
        "import sys, reactor.config, dice.config, gdi.config, lbc.config; "
        "print(sorted(m for m in ('tensorflow', 'gymnasium', 'ale_py') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "config_class, overrides, message",
    [
        (
            reactor_config.ReactorConfig,
            dict(retrace_form="munos"),
            "--retrace_form='munos' is not one",
        ),
        (reactor_config.ReactorConfig, dict(v_min=10.0), "--v_min=10.0 must be < --v_max=10.0"),
        (reactor_config.ReactorConfig, dict(beta_loo_c=0.5), "--beta_loo_c=0.5 must be >= 1"),
        (reactor_config.ReactorConfig, dict(prioritisation="per"), "--prioritisation='per'"),
        (reactor_config.ReactorConfig, dict(sequence_stride=33), "--sequence_stride=33 must be <="),
        (
            reactor_config.ReactorConfig,
            dict(replay_uniform_epsilon=2.0),
            "--replay_uniform_epsilon=2.0 must be in",
        ),
        (dice_config.DiceConfig, dict(reward_shaping="log"), "--reward_shaping='log' is not one"),
        (dice_config.DiceConfig, dict(discount=1.5), "--discount=1.5 must be in"),
        (
            dice_config.DiceConfig,
            dict(bandit_num_candidates=51),
            "--bandit_num_candidates=51 must be <= --bandit_num_blocks=50",
        ),
        (dice_config.DiceConfig, dict(bandit_widths=()), "--bandit_widths=.. must be a non-empty"),
        (
            dice_config.DiceConfig,
            dict(bandit_selection="uniform"),
            "--eval_policy=best_region needs bandits that learn",
        ),
        (dice_config.DiceConfig, dict(replay_capacity=32), "--replay_capacity=32 must be >="),
        (gdi_config.GdiConfig, dict(variant="h4"), "--variant='h4' is not one of i3, h3"),
        (gdi_config.GdiConfig, dict(reward_shaping_2="quartic"), "--reward_shaping_2='quartic'"),
        (
            gdi_config.GdiConfig,
            dict(bandit_num_candidates=11),
            r"--bandit_num_candidates=11 exceeds the blocks of an axis: \(50, 50, 10\)",
        ),
        (
            gdi_config.GdiConfig,
            dict(bandit_tile_offset_percent=(60.0, 0.0)),
            "--bandit_tile_offset_percent=",
        ),
        (gdi_config.GdiConfig, dict(fixed_epsilon=-0.1), "--fixed_epsilon=-0.1 must be in"),
        (
            lbc_config.LbcConfig,
            dict(discounts=(0.997, 0.999)),
            "--reward_shapings=.* needs one entry per --discounts",
        ),
        (
            lbc_config.LbcConfig,
            dict(discounts=(0.99,) * 2, reward_shapings=("clip",) * 2),
            "--discounts=.* must have 1 entry .Reducing H. or --bandit_num_policies=3",
        ),
        (lbc_config.LbcConfig, dict(reward_shapings=("h", "clip", "clip")), "--reward_shapings="),
        (
            lbc_config.LbcConfig,
            dict(bandit_top_d=11),
            r"--bandit_top_d=11 exceeds the arms of an axis: \(20, 10\)",
        ),
        (lbc_config.LbcConfig, dict(bandit_ucb_range=(1.5, 0.5)), "--bandit_ucb_range="),
        (
            lbc_config.LbcConfig,
            dict(bandit_replace_every=0),
            "--bandit_replace_every=0 must be > 0",
        ),
    ],
)
def test_validate_names_the_flag(config_class, overrides, message):
    with pytest.raises(ValueError, match=message):
        config_class(**overrides).validate()


# ------------------------------------------------------------------------- agreement with common

# The fields that name a reward transform, a Retrace form or a torso, per config; each must accept
# exactly the names common.settings.config lists (the ones the TensorFlow modules implement).
NAMED_FIELDS = {
    reactor_config: dict(
        reward_shaping=common_config.REWARD_TRANSFORMS, retrace_form=common_config.RETRACE_FORMS
    ),
    dice_config: dict(
        reward_shaping=common_config.REWARD_TRANSFORMS,
        retrace_form=common_config.RETRACE_FORMS,
        network=common_config.ATARI_TORSOS,
    ),
    gdi_config: dict(
        reward_shaping=common_config.REWARD_TRANSFORMS,
        reward_shaping_2=common_config.REWARD_TRANSFORMS,
        retrace_form=common_config.RETRACE_FORMS,
        network=common_config.ATARI_TORSOS,
    ),
    lbc_config: dict(retrace_form=common_config.RETRACE_FORMS, network=common_config.ATARI_TORSOS),
}


def test_choice_fields_accept_exactly_the_names_common_defines(module):
    config_class = CONFIGS[module]
    for name, allowed in NAMED_FIELDS[module].items():
        for value in allowed:
            config_class(**{name: value}).validate()
        with pytest.raises(ValueError, match=f"--{name}='bogus' is not one of {allowed[0]}"):
            config_class(**{name: "bogus"}).validate()
    if module is lbc_config:  # one reward transform per network
        for value in common_config.REWARD_TRANSFORMS:
            lbc_config.LbcConfig(reward_shapings=(value,) * 3).validate()
        with pytest.raises(ValueError, match="--reward_shapings="):
            lbc_config.LbcConfig(reward_shapings=("bogus",) * 3).validate()
    assert common_config.BANDIT_SELECTIONS == bandits.SELECTIONS
    assert common_config.BANDIT_SPACES == bandits.SPACES


def test_defaults_use_each_paper_s_reward_shaping_and_retrace_form():
    used = {
        reactor_config.ReactorConfig().reward_shaping,
        dice_config.DiceConfig().reward_shaping,
        *gdi_config.GdiConfig(variant="h3").reward_shapings,
        *lbc_config.LbcConfig().reward_shapings,
    }
    assert used <= set(common_config.REWARD_TRANSFORMS)
    # Each paper's own Retrace form: Reactor bootstraps on E_pi Q (its Eq. (3)); DiCE (Eq. (2)),
    # GDI (Eq. (3)) and LBC (App. B.3) print Q(x', a').
    assert reactor_config.ReactorConfig().retrace_form == "expected"
    assert {CONFIGS[m]().retrace_form for m in (dice_config, gdi_config, lbc_config)} == {"sampled"}


def test_gdi_variant_chooses_one_or_two_networks():
    assert gdi_config.GdiConfig(variant="i3").reward_shapings == ("asymmetric_log",)
    assert gdi_config.GdiConfig(variant="h3").reward_shapings == ("asymmetric_log", "fourth_root")


# Where each paper's protocol departs from the shared one in common.environments.envs (all else must
# agree).
PROTOCOL_DEPARTURES = {
    # Reactor: one frame (Table 3); the minimal action set is our choice
    # (docs/papers/reactor.md#departures-from-the-paper).
    reactor_config: dict(frame_stack=1, full_action_space=False),
    dice_config: {},
    gdi_config: dict(max_episode_frames=100_000),  # GDI Table 5
    lbc_config: {},
}


def test_protocol_is_the_shared_one_with_the_paper_s_departures(module):
    base = protocols.PROTOCOLS[module.PROTOCOL]
    assert module.ACTION_REPEAT == base.frame_skip
    protocol = dataclasses.replace(base, **CONFIGS[module]().protocol_overrides())
    base_fields, fields = dataclasses.asdict(base), dataclasses.asdict(protocol)
    changed = {key: value for key, value in fields.items() if base_fields[key] != value}
    assert changed == PROTOCOL_DEPARTURES[module]


@pytest.mark.parametrize("config_class", CONTROLLERS, ids=lambda c: c.__name__)
def test_bandit_fields_pass_through_to_the_controller(config_class):
    controller_class = CONTROLLERS[config_class]
    parameters = set(inspect.signature(controller_class).parameters) - {"seed"}
    kwargs = config_class().bandit_kwargs()
    assert set(kwargs) == parameters
    controller = controller_class(**kwargs, seed=0)
    params = controller.propose()
    controller.update(params, episode_return=1.0)


def test_dice_best_region_evaluation_runs_on_the_config_s_controller():
    controller = dice_controller.DiceController(**dice_config.DiceConfig().bandit_kwargs(), seed=0)
    for episode_return in (3.0, 1.0):
        controller.update(controller.propose(), episode_return)
    assert 0.0 <= controller.propose_best()["eta"] <= 50.0  # Table 5: 1/tau in [0, 50]


@pytest.mark.parametrize(
    "overrides, num_policies",
    [
        (dict(discounts=(0.997,), reward_shapings=("value_rescaling",)), 3),  # Table 12 Reducing H
        (dict(discounts=(0.997,), reward_shapings=("value_rescaling",), bandit_num_policies=1), 1),
    ],
)
def test_lbc_ablations_validate_and_build_their_controller(overrides, num_policies):
    config = lbc_config.LbcConfig(**overrides).validate()
    params = lbc_controller.LbcController(**config.bandit_kwargs(), seed=0).propose()
    assert len(params["eta"]) == len(params["omega"]) == num_policies
    assert math.isclose(sum(params["omega"]), 1.0)


# ----------------------------------------------------------------------------- derived quantities


def test_reactor_replay_ratio_and_learner_steps():
    # Reactor §3.4: "typically" 4-6 acting steps per learning step give 128/6-128/4 = 21.3-32
    # trained transitions per acted transition and 50M/6-50M/4 = 8.3M-12.5M learner steps in 200M
    # frames.
    fast, slow = (
        dataclasses.replace(reactor_config.ReactorConfig(), acting_steps_per_learner_step=k)
        for k in (4.0, 6.0)
    )
    assert fast.replay_ratio == 32.0 and slow.replay_ratio == pytest.approx(21.33, abs=0.01)
    assert fast.learner_steps == 12_500_000 and slow.learner_steps == 8_333_333
    # Target refreshes over training: 12.5k and 8.3k.
    assert fast.learner_steps // fast.target_update_period == 12_500
    assert slow.learner_steps // slow.target_update_period == 8_333
    # Our 5 acting steps per learning step (docs/papers/reactor.md#departures-from-the-paper) is
    # samples_per_insert 0.8.
    assert reactor_config.ReactorConfig().samples_per_insert == pytest.approx(0.8)


def test_dice_derived_quantities():
    c = dice_config.DiceConfig()
    agent_steps = c.total_frames // dice_config.ACTION_REPEAT
    assert agent_steps // c.num_envs == 312_500  # DiCE Table 5: 160 envs
    assert c.gradient_updates == 19_531  # 50M * 2 / 5120 (Table 5: reuse 2, 64 x 80)
    assert c.warmup_steps / c.gradient_updates == pytest.approx(0.20, abs=0.01)  # "about 20%"
    # Policy lag (Table 5 pushes every 25 updates): 25 updates consume 64,000 new agent steps,
    # 400 per env.
    steps_per_publish = c.publish_interval * c.frames_per_learner_step // dice_config.ACTION_REPEAT
    assert steps_per_publish == 64_000 and steps_per_publish // c.num_envs == 400
    # App. A's x = log(1 + 1/tau) on Table 5's [0, 50] is [0, ln 51], in 50 tiles of 0.0786365 (the
    # tile count is ours: docs/papers/dice.md#departures-from-the-paper).
    (axis,) = dice_controller.DiceController(**c.bandit_kwargs(), seed=0).axes
    assert (axis.hi, axis.acc, axis.num_blocks) == pytest.approx((3.931826, 0.0786365, 50))


def test_gdi_derived_quantities():
    c = gdi_config.GdiConfig()
    assert c.gradient_updates == 19_531  # GDI Table 6: 50M agent steps * 2 / (64 * 80)
    assert c.frames_per_learner_step == 10_240  # fresh frames per step
    assert c.item_length == 121  # Table 6: burn-in 40 + seq-length 80 + 1 bootstrap
    controller = gdi_controller.GdiController(**c.bandit_kwargs(), seed=0)
    assert tuple(axis.num_blocks for axis in controller.axes) == c.axis_blocks == (50, 50, 10)
    # App. G's literal joint grid (docs/papers/gdi.md#departures-from-the-paper).
    assert math.prod(c.axis_blocks) == 25_000


def test_lbc_derived_quantities():
    c = lbc_config.LbcConfig()
    agent_steps = c.total_frames // lbc_config.ACTION_REPEAT
    assert agent_steps == 250_000_000  # LBC's 1B frames / 4 action repeats (Table 3)
    assert agent_steps // c.sequence_length == 3_125_000  # items, written every 80 steps
    assert c.gradient_updates == 97_656  # per learner: 3,125,000 items * 2 / 64
    assert c.item_length == 121
    assert c.max_episode_frames // lbc_config.ACTION_REPEAT == 27_000  # 30 min of agent steps
    # LBC Table 3's ranges and accuracies: 20 tau arms and 10 omega arms (log1p, our reading:
    # docs/papers/lbc.md#departures-from-the-paper); 273 tau arms read linearly; the joint
    # 6-D grid would have 20^3 * 10^3 = 8,000,000 arms.
    for space, arms in (("log1p", (20, 10)), ("linear", (273, 10))):
        config = dataclasses.replace(c, bandit_eta_space=space)
        controller = lbc_controller.LbcController(**config.bandit_kwargs(), seed=0)
        blocks = tuple(axis.num_blocks for axis in controller.axes)
        assert config.axis_arms == arms and blocks == (arms[0],) * 3 + (arms[1],) * 3
    assert c.axis_arms[0] ** 3 * c.axis_arms[1] ** 3 == 8_000_000

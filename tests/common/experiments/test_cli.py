"""common.experiments.cli: flags from every paper's config, env names, config precedence, one-line
errors, and no TensorFlow before the flags are validated."""

import dataclasses
import json
import subprocess
import sys
import typing

import pytest
from absl import flags

from common.experiments import builder as builder_lib
from common.experiments import cli

from common.experiments import dataclass_flags
from dice import config as dice_config
from gdi import config as gdi_config
from impala import ablations as impala_ablations
from impala import config as impala_config
from impala import builder as impala_builder
from lbc import config as lbc_config
from reactor import config as reactor_config

CONFIG_CLASSES = (
    impala_config.ImpalaConfig,
    reactor_config.ReactorConfig,
    dice_config.DiceConfig,
    gdi_config.GdiConfig,
    lbc_config.LbcConfig,
)


class _NoBuilder(builder_lib.Builder):
    """A paper for the tests of the command line alone: making its builder fails."""

    def __new__(cls, *args, **kwargs):
        raise AssertionError("a test of the command line built an agent")


def _paper(config_class, **kwargs) -> type[builder_lib.Builder]:
    """A paper of `config_class`, named after it, with the class attributes `kwargs` (the
    `common.experiments.builder.Builder` defaults for the others)."""
    attributes = dict(name=config_class.__name__.lower(), config_class=config_class, **kwargs)
    return type(f"{config_class.__name__}Builder", (_NoBuilder,), attributes)


def _parsed(paper: type[builder_lib.Builder], *argv: str) -> tuple[flags.FlagValues, list[str]]:
    """A fresh FlagValues with `paper`'s flags, parsed from `argv`."""
    flag_values = flags.FlagValues()
    cli.define_flags(paper, flag_values)
    return flag_values, dataclass_flags.parse_flags(["prog", *argv], flag_values)


def _plan(paper: type[builder_lib.Builder], *argv: str) -> cli.Plan:
    flag_values, rest = _parsed(paper, *argv)
    return cli.plan_from_flags(paper, rest, flag_values)


# ------------------------------------------------------------------------------- flag per field


@pytest.mark.parametrize("config_class", CONFIG_CLASSES, ids=lambda c: c.__name__)
def test_every_config_field_and_run_setting_is_a_flag(config_class):
    flag_values, rest = _parsed(_paper(config_class))
    assert rest == ["prog"]
    help_text = flag_values.get_help()
    for data_class in (config_class, cli.RunSettings):
        for field in dataclasses.fields(data_class):
            flag = flag_values[field.name]
            assert flag.value is None and not flag.present  # not given: the config's default
            assert field.metadata["help"].split()[0] in flag.help
            assert f"--{field.name}:" in help_text or f"--[no]{field.name}:" in help_text
    assert dataclass_flags.given_values(config_class, flag_values) == {}


def test_defining_a_paper_s_flags_twice_defines_them_once():
    flag_values = flags.FlagValues()
    paper = _paper(impala_config.ImpalaConfig)
    cli.define_flags(paper, flag_values)
    cli.define_flags(paper, flag_values)  # idempotent
    assert dataclass_flags.parse_flags(["prog", "--batch_size=3"], flag_values) == ["prog"]
    assert flag_values["batch_size"].value == 3
    # Papers share flag names: another paper's flags need a FlagValues of their own.
    with pytest.raises(ValueError, match="the flags of impalaconfig are already defined"):
        cli.define_flags(_paper(dice_config.DiceConfig), flag_values)


@pytest.mark.parametrize("config_class", CONFIG_CLASSES, ids=lambda c: c.__name__)
def test_every_default_round_trips_through_its_flag(config_class):
    # Each field written as a user would (tuples as comma lists), parsed back, equals the default.
    flag_values = flags.FlagValues()
    cli.define_flags(_paper(config_class), flag_values)
    argv = ["prog"]
    for field in dataclasses.fields(config_class):
        flag = flag_values[field.name]
        flag.value = field.default
        argv.append(flag.serialize())
        flag.value = None
    fresh, _ = _parsed(_paper(config_class), *argv[1:])
    given = dataclass_flags.given_values(config_class, fresh)
    defaults = {f.name: f.default for f in dataclasses.fields(config_class)}
    assert given == defaults
    for name, value in given.items():
        assert type(value) is type(defaults[name]), name  # 1.0 stays a float, (1, 2) ints


def test_tuple_fields_are_comma_lists_of_their_element_type():
    paper = _paper(dice_config.DiceConfig)
    flag_values, _ = _parsed(
        paper, "--bandit_widths=4, 5,6", "--bandit_learning_rates=0.5,1", "--env=Breakout"
    )
    config = cli.config_from_flags(paper, flag_values)
    assert config.bandit_widths == (4, 5, 6) and config.bandit_learning_rates == (0.5, 1.0)
    assert all(type(v) is float for v in config.bandit_learning_rates)
    flag_values, _ = _parsed(
        _paper(lbc_config.LbcConfig),
        "--reward_shapings=clip,none,asymmetric_log",
        "--bandit_ucb_range=0,2",
    )
    assert flag_values["reward_shapings"].value == ("clip", "none", "asymmetric_log")
    assert flag_values["bandit_ucb_range"].value == (0.0, 2.0)
    assert flag_values["reward_shapings"].serialize() == (
        "--reward_shapings=clip,none,asymmetric_log"
    )


@pytest.mark.parametrize(
    "config_class, argv, message",
    [
        (
            dice_config.DiceConfig,
            "--bandit_widths=1,x",
            "--bandit_widths=1,x must be a comma list of integers (e.g. 1,2,3)",
        ),
        (
            dice_config.DiceConfig,
            "--bandit_learning_rates=0.1,,0.2",
            "--bandit_learning_rates=0.1,,0.2 must be a comma list of numbers (e.g. 0.05,0.1,0.2)",
        ),
        (
            lbc_config.LbcConfig,
            "--bandit_ucb_range=0.5",
            "--bandit_ucb_range=0.5 must be 2 numbers separated by commas (e.g. 0.5,1.5)",
        ),
        (
            impala_config.ImpalaConfig,
            "--learning_rat=0.1",
            "unknown flag --learning_rat (did you mean --learning_rate?)",
        ),
        (impala_config.ImpalaConfig, "--batch_size=3.5", "--batch_size=3.5 must be an integer"),
        (impala_config.ImpalaConfig, "--seeds=one", "--seeds=one must be a comma list of integers"),
        (
            impala_config.ImpalaConfig,
            "--use_lstm=perhaps",
            "--use_lstm=perhaps must be true or false",
        ),
    ],
)
def test_unparsable_values_are_one_line_naming_the_flag(config_class, argv, message):
    with pytest.raises(dataclass_flags.FlagError) as raised:
        _parsed(_paper(config_class), argv)
    assert str(raised.value) == message


def test_numbers_and_booleans_as_people_write_them():
    flag_values, _ = _parsed(
        impala_builder.ImpalaBuilder,
        "--total_frames=2e6",
        "--nouse_lstm",
        "--lr_anneal=false",
        "--learning_rate=1e-3",
    )
    assert flag_values["total_frames"].value == 2_000_000
    assert type(flag_values["total_frames"].value) is int
    assert flag_values["use_lstm"].value is False and flag_values["lr_anneal"].value is False
    assert flag_values["learning_rate"].value == 1e-3


def test_flag_types_cover_every_paper_field():
    for config_class in CONFIG_CLASSES:
        hints = typing.get_type_hints(config_class)
        for config_field in dataclasses.fields(config_class):  # flags; ClassVars are not fields
            dataclass_flags.kind_of(
                hints[config_field.name]
            )  # raises for a type with no command-line syntax
    with pytest.raises(TypeError, match="no command-line syntax"):
        dataclass_flags.kind_of(dict[str, int])


# -------------------------------------------------------------------------------- env names


@pytest.mark.parametrize(
    "config_module, config_class",
    [
        (dice_config, dice_config.DiceConfig),
        (gdi_config, gdi_config.GdiConfig),
        (lbc_config, lbc_config.LbcConfig),
    ],
    ids=["dice", "gdi", "lbc"],
)
def test_a_minatar_warm_up_keeps_its_atari_share_of_any_budget_s_updates(
    config_module, config_class
):
    """The burn-in papers' MinAtar warm-up is a `WarmupShare`: the share of its run's updates
    that the table's warm-up takes on Atari (DiCE: 4,000 of 19,531), at 5M frames and at the
    shorter budgets a grid runs (whose updates a fixed 5M-frame warm-up would outnumber);
    --warmup_steps given on the command line wins. A batch of 64 items of 80 steps, each trained
    twice, is an update per 2,560 frames; DiCE's and GDI's MinAtar batch of 8 (the protocol's) one
    per 320."""
    batch_of_8 = config_module in (dice_config, gdi_config)
    paper = _paper(config_class, env_defaults={"MinAtar": config_module.MINATAR_OVERRIDES})
    atari = _plan(paper, "--env=Pong").config
    share = atari.warmup_steps / atari.gradient_updates
    per_update = 320 if batch_of_8 else 2560
    budgets = {5_000_000: (15625, 1953), 1_000_000: (3125, 390), 300_000: (937, 117)}
    for frames, both in budgets.items():
        updates = both[0] if batch_of_8 else both[1]
        assert updates == frames // per_update
        config = _plan(paper, "--env=MinAtar/Breakout-v0", f"--total_frames={frames}").config
        assert config.gradient_updates == updates
        assert config.warmup_steps == round(share * updates)
    default_warmup = {lbc_config: 80, dice_config: 3200, gdi_config: 3200}[config_module]
    assert _plan(paper, "--env=minatar:breakout").config.warmup_steps == default_warmup
    given = _plan(paper, "--env=minatar:breakout", "--total_frames=1e6", "--warmup_steps=7")
    assert given.config.warmup_steps == 7
    at_1m = budgets[1_000_000][0 if batch_of_8 else 1]
    with pytest.raises(
        dataclass_flags.FlagError, match=f"--warmup_steps={at_1m} must be < the {at_1m} optimiser"
    ):
        _plan(paper, "--env=minatar:breakout", "--total_frames=1e6", f"--warmup_steps={at_1m}")


@pytest.mark.parametrize(
    "written, canonical",
    [
        ("CartPole-v1", "CartPole"),
        ("CartPole", "CartPole"),
        ("cartpole", "CartPole"),
        ("ALE/Pong-v5", "Pong"),
        ("PongNoFrameskip-v4", "Pong"),
        ("Pong-v4", "Pong"),
        ("Pong", "Pong"),
        ("pong", "Pong"),
        ("ms_pacman", "MsPacman"),
        ("MsPacman", "MsPacman"),
        ("ALE/MsPacman-v5", "MsPacman"),
        ("BreakoutDeterministic-v4", "Breakout"),
    ],
)
def test_env_names_as_users_write_them(written, canonical):
    assert cli.normalise_env(written) == canonical
    plan = _plan(impala_builder.ImpalaBuilder, f"--env={written}")
    assert plan.config.env == canonical
    assert plan.config.network == ("mlp" if canonical == "CartPole" else "deep")


def test_unknown_envs_and_cartpole_where_the_paper_has_no_cartpole():
    with pytest.raises(
        dataclass_flags.FlagError,
        match=r"^--env='Pongo' is not CartPole or an Atari game "
        r"\(e\.g\. Pong, Breakout, .*\) or a MinAtar game \(e\.g\. MinAtar/Breakout-v0, ",
    ):
        cli.normalise_env("Pongo")
    with pytest.raises(
        dataclass_flags.FlagError, match="--env='cartpole' is not an Atari game .* or a MinAtar"
    ):
        _plan(_paper(dice_config.DiceConfig), "--env=cartpole")
    assert _plan(_paper(dice_config.DiceConfig), "--env=seaquest").config.env == "Seaquest"
    # Every paper runs MinAtar, CartPole or not.
    dice = _plan(_paper(dice_config.DiceConfig), "--env=minatar:seaquest").config
    assert dice.env == "MinAtar/Seaquest-v0"


@pytest.mark.parametrize(
    "written, canonical",
    [
        ("MinAtar/Breakout-v0", "MinAtar/Breakout-v0"),
        ("MinAtar/Breakout-v1", "MinAtar/Breakout-v1"),
        ("breakout-minatar", "MinAtar/Breakout-v0"),
        ("Breakout-MinAtar", "MinAtar/Breakout-v0"),
        ("minatar:breakout", "MinAtar/Breakout-v0"),
        ("minatar/breakout", "MinAtar/Breakout-v0"),
        ("minatar-space_invaders", "MinAtar/SpaceInvaders-v0"),
        ("MinAtar/space_invaders", "MinAtar/SpaceInvaders-v0"),
        ("MinAtar/SpaceInvaders-v1", "MinAtar/SpaceInvaders-v1"),
        ("minatar:asterix-v1", "MinAtar/Asterix-v1"),
        ("Freeway-MinAtar", "MinAtar/Freeway-v0"),
    ],
)
def test_minatar_names_as_users_write_them(written, canonical):
    assert cli.normalise_env(written) == canonical
    plan = _plan(impala_builder.ImpalaBuilder, f"--env={written}")
    assert plan.config.env == canonical
    assert plan.config.network == "minatar"  # IMPALA's "MinAtar" env defaults, for every game
    assert plan.config.frames_per_step == 1  # MinAtar repeats no action
    # One directory per run, not runs/impala_MinAtar/<game>.
    assert (
        cli.default_logdir(impala_builder.ImpalaBuilder, plan)
        == f"runs/impala_{canonical.replace('/', '_')}"
    )


def test_bad_minatar_names_are_one_flag_error_listing_the_games():
    for name in ("MinAtar/Pong-v0", "pong-minatar", "MinAtar/Breakout-v3"):
        with pytest.raises(dataclass_flags.FlagError) as error:
            cli.normalise_env(name)
        message = str(error.value)
        assert message.startswith(f"--env={name!r} is not a MinAtar env: the games are ")
        assert "asterix, breakout, freeway, seaquest, space_invaders" in message
        assert "\n" not in message


# ------------------------------------------------------------------------------- precedence


def test_defaults_then_env_then_ablation_then_flags():
    paper = _paper(
        impala_config.ImpalaConfig,
        cartpole=True,
        env_defaults={"CartPole": dict(learning_rate=1e-2, network="mlp", num_actors=1)},
        ablations={"slow": dict(learning_rate=1e-3, correction="no_correction")},
    )
    pong = _plan(paper).config
    assert (pong.env, pong.learning_rate, pong.network, pong.num_actors, pong.correction) == (
        "Pong",
        6e-4,
        "deep",
        2,
        "vtrace",
    )  # the paper's defaults
    cartpole = _plan(paper, "--env=CartPole-v1").config
    assert (cartpole.learning_rate, cartpole.network, cartpole.num_actors) == (1e-2, "mlp", 1)
    slow = _plan(paper, "--env=CartPole", "--ablation=slow").config
    assert (slow.learning_rate, slow.network, slow.correction) == (1e-3, "mlp", "no_correction")
    given = _plan(
        paper,
        "--env=cartpole",
        "--ablation=slow",
        "--learning_rate=5e-3",
        "--network=deep",
        "--num_actors=3",
    ).config
    assert (given.learning_rate, given.network, given.num_actors, given.correction) == (
        5e-3,
        "deep",
        3,
        "no_correction",
    )
    # A flag given with the default's value still beats the env's and the ablation's.
    assert (
        _plan(
            paper, "--env=CartPole", "--ablation=slow", "--learning_rate=6e-4"
        ).config.learning_rate
        == 6e-4
    )
    assert cli.make_config(paper, {"env": "cartpole", "use_lstm": True}, "slow") == (
        dataclasses.replace(slow, use_lstm=True)
    )


def test_env_defaults_by_exact_name_over_the_family_key():
    paper = _paper(
        impala_config.ImpalaConfig,
        cartpole=True,
        env_defaults={
            "CartPole": {"learning_rate": 1e-2, "network": "mlp"},
            "MinAtar": {"learning_rate": 2e-3, "network": "minatar", "num_actors": 3},
            "MinAtar/Freeway-v1": {"learning_rate": 5e-3},
        },
        ablations={"slow": {"learning_rate": 1e-3}},
    )
    # The family key holds the defaults of all five games, either version.
    for env in ("breakout-minatar", "MinAtar/SpaceInvaders-v1", "minatar:freeway"):
        config = _plan(paper, f"--env={env}").config
        assert (config.learning_rate, config.network, config.num_actors) == (2e-3, "minatar", 3)
    # An exact name's defaults go over its family's; ablations and flags over both.
    freeway = _plan(paper, "--env=MinAtar/Freeway-v1").config
    assert (freeway.learning_rate, freeway.network, freeway.num_actors) == (5e-3, "minatar", 3)
    assert _plan(paper, "--env=breakout-minatar", "--ablation=slow").config.learning_rate == 1e-3
    assert _plan(paper, "--env=breakout-minatar", "--num_actors=1").config.num_actors == 1
    # Other families are untouched.
    assert _plan(paper, "--env=CartPole").config.network == "mlp"
    pong = _plan(paper, "--env=Pong").config
    assert (pong.learning_rate, pong.network) == (6e-4, "deep")
    assert cli.env_defaults_for(paper.env_defaults, "Pong") == {}
    assert cli.env_defaults_for(paper.env_defaults, "CartPole") == paper.env_defaults["CartPole"]
    # --help names the family's defaults, and the --env spellings.
    flag_values = flags.FlagValues()
    cli.define_flags(paper, flag_values)
    assert "(default 0.0006; CartPole: 0.01; MinAtar games: 0.002; MinAtar/Freeway-v1: 0.005)" in (
        flag_values["learning_rate"].help
    )
    assert "MinAtar/Breakout-v1 (the game's minimal action set)" in flag_values["env"].help


def test_impala_cartpole_is_the_config_module_s_cartpole():
    assert _plan(impala_builder.ImpalaBuilder, "--env=CartPole", "--batch_size=16").config == (
        impala_config.default_config("CartPole", batch_size=16)
    )
    assert _plan(impala_builder.ImpalaBuilder).config == impala_config.ImpalaConfig()


def test_validation_errors_name_the_flag():
    with pytest.raises(dataclass_flags.FlagError, match=r"^--discount=1.5 must be in \[0, 1\]$"):
        _plan(impala_builder.ImpalaBuilder, "--discount=1.5")
    with pytest.raises(
        dataclass_flags.FlagError, match="^--bandit_widths=.. must be a non-empty tuple"
    ):
        _plan(_paper(dice_config.DiceConfig), "--bandit_widths=")
    with pytest.raises(dataclass_flags.FlagError, match=r"^--variant='h4' is not one of i3, h3$"):
        _plan(_paper(gdi_config.GdiConfig), "--variant=h4")


# ------------------------------------------------------------------------- runs and ablations


def test_seeds_flag_is_a_count_or_a_list():
    assert cli.parse_seeds((3,)) == [0, 1, 2]
    assert cli.parse_seeds((4, 9)) == [4, 9]
    assert cli.parse_seeds(()) == [0] and cli.parse_seeds((), default=5) == [5]
    for seeds, message in (((0,), "--seeds=0 must be >= 1"), ((2, 2), "--seeds=2,2 must be")):
        with pytest.raises(dataclass_flags.FlagError, match=message):
            cli.parse_seeds(seeds)


def test_one_run_of_a_variant_and_a_seed():
    plan = _plan(impala_builder.ImpalaBuilder)
    assert not plan.several_runs and plan.ablation is None and plan.seeds == (0,)
    assert cli.default_logdir(impala_builder.ImpalaBuilder, plan) == "runs/impala_Pong"
    plan = _plan(
        impala_builder.ImpalaBuilder,
        "--ablations=no_correction",
        "--seeds=1",
        "--seed=7",
        "--env=breakout",
    )
    assert not plan.several_runs and plan.ablation == "no_correction"
    assert (plan.config.correction, plan.config.seed) == ("no_correction", 0)  # --seeds wins
    assert (
        cli.default_logdir(impala_builder.ImpalaBuilder, plan)
        == "runs/impala_Breakout_no_correction"
    )
    plan = _plan(impala_builder.ImpalaBuilder, "--seed=4", "--role=learner", "--replay_address=a:1")
    assert plan.seeds == (4,) and plan.config.seed == 4 and plan.settings.role == "learner"
    assert plan.settings.first_actor == 0
    plan = _plan(
        impala_builder.ImpalaBuilder, "--role=actor", "--replay_address=a:1", "--first_actor=4"
    )
    assert plan.settings.first_actor == 4


def test_several_runs_go_to_the_ablation_runner(monkeypatch):
    argv = (
        "--env=pong",
        "--ablations=vtrace,no_correction",
        "--seeds=2",
        "--parallel=2",
        "--total_frames=1000",
        "--nouse_lstm",
        "--logdir=/tmp/x",
        "--entropy_cost=0.02",
    )
    flag_values, rest = _parsed(impala_builder.ImpalaBuilder, *argv)
    plan = cli.plan_from_flags(impala_builder.ImpalaBuilder, rest, flag_values)
    assert plan.several_runs and plan.variants == ("vtrace", "no_correction")
    assert plan.seeds == (0, 1)
    from common.experiments import ablation_runner

    calls = []
    monkeypatch.setattr(ablation_runner, "run_ablations", lambda *a, **k: calls.append((a, k)))
    cli.run_several(impala_builder.ImpalaBuilder, plan, flag_values)
    ((args, kwargs),) = calls
    assert args == (
        "impala.main",
        ["vtrace", "no_correction"],
        [0, 1],
        "/tmp/x",
        ["--env=Pong", "--total_frames=1000", "--nouse_lstm", "--entropy_cost=0.02"],
    )
    assert kwargs == dict(parallel=2, game="Pong")
    # Seeds alone run the paper's default variant; CartPole has no HNS.
    plan = _plan(impala_builder.ImpalaBuilder, "--seeds=3", "--env=CartPole")
    assert plan.variants == ("vtrace",) and plan.seeds == (0, 1, 2)
    assert (
        cli.default_logdir(impala_builder.ImpalaBuilder, plan) == "runs/impala_CartPole_ablations"
    )
    # Nor has MinAtar: not Atari Breakout's HNS for MinAtar Breakout.
    calls.clear()
    flag_values, rest = _parsed(impala_builder.ImpalaBuilder, "--env=breakout-minatar", "--seeds=2")
    plan = cli.plan_from_flags(impala_builder.ImpalaBuilder, rest, flag_values)
    cli.run_several(impala_builder.ImpalaBuilder, plan, flag_values)
    ((args, kwargs),) = calls
    assert args[3] == "runs/impala_MinAtar_Breakout-v0_ablations"
    assert args[4] == ["--env=MinAtar/Breakout-v0"] and kwargs["game"] is None
    with pytest.raises(
        dataclass_flags.FlagError, match="--seeds=2 needs --ablation or --ablations"
    ):
        _plan(_paper(dice_config.DiceConfig), "--seeds=2")


def test_every_variant_is_validated_before_any_run():
    paper = _paper(
        impala_config.ImpalaConfig,
        ablations=dict(impala_ablations.ABLATIONS, broken=dict(discount=2.0)),
    )
    with pytest.raises(dataclass_flags.FlagError, match="--discount=2.0 must be in"):
        _plan(paper, "--ablations=vtrace,broken")


def test_roles_match_the_launcher():
    from common.launchers import launch  # imports TensorFlow

    assert cli.ROLES == launch.ROLES


# ------------------------------------------------------------------ subprocesses: help, imports

HEAVY = ("tensorflow", "reverb", "gymnasium", "ale_py", "numpy")


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )


def test_importing_the_command_line_imports_nothing_heavy():
    papers = ("impala", "reactor", "dice", "gdi", "lbc")
    code = (
        "import sys, json, common.experiments.cli, "
        f"{', '.join(f'{p}.main, {p}.builder' for p in papers)}; "
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


# cli.main as `python -m <paper>.main` runs it (it defines the paper's flags), for IMPALA and for
# a DiCE without CartPole (DiCE has tuple fields); after it exits, the modules it imported.
CLI_MAIN = """
import json, sys
from common.experiments import cli
from common.experiments import dataclass_flags

if sys.argv[1] == "dice":
    from dice import builder

    class DiceWithoutCartPole(builder.DiceBuilder):  # nor ablations, nor env defaults
        ablations = {}
        default_ablation = None
        env_defaults = {}
        cartpole = False

    paper = DiceWithoutCartPole
else:
    from impala import builder
    paper = builder.ImpalaBuilder
try:
    cli.main(paper, argv=["prog", *sys.argv[2:]])
except SystemExit as exit:
    status = exit.code
print(json.dumps(dict(status=status, imported=[m for m in ("tensorflow", "reverb")
                                                if m in sys.modules])))
"""


@pytest.mark.parametrize(
    "paper, argv, message",
    [
        ("impala", ["--learning_rate=-0.1"], "--learning_rate=-0.1 must be > 0"),
        ("impala", ["--env=Pongo"], "--env='Pongo' is not CartPole or an Atari game"),
        (
            "impala",
            ["--env=MinAtar/Pong-v0"],
            (
                "--env='MinAtar/Pong-v0' is not a MinAtar env: the games are asterix, breakout, "
                "freeway, seaquest, space_invaders"
            ),
        ),
        ("impala", ["--learning_rat=1"], "unknown flag --learning_rat (did you mean"),
        (
            "impala",
            ["--role=replay", "--open_port", "--ablations=vtrace,no_correction"],
            "--role=replay runs one",
        ),
        (
            "impala",
            ["--role=replay"],
            "--role=replay serves its Reverb server to other machines: add --open_port",
        ),
        (
            "impala",
            ["--role=actor", "--replay_address=a:1", "--open_port"],
            "--open_port opens the Reverb server of --role=local or replay; --role=actor starts none",
        ),
        ("impala", ["--first_actor=-1"], "--first_actor=-1 must be >= 0"),
        (
            "impala",
            ["--first_actor=4"],
            "--first_actor=4 numbers the actors of --role=actor; with --role=local it must be 0",
        ),
        (
            "impala",
            ["--role=learner", "--replay_address=a:1", "--first_actor=4"],
            "--first_actor=4 numbers the actors of --role=actor; with --role=learner it must be 0",
        ),
        ("impala", ["--role=actor", "--first_actor=4"], "--role=actor needs --replay_address"),
        ("dice", ["--bandit_widths=1,x"], "--bandit_widths=1,x must be a comma list of integers"),
        ("dice", ["--bandit_widths=1,0"], "--bandit_widths=(1, 0) must be a non-empty tuple"),
        ("dice", ["--env=CartPole"], "--env='CartPole' is not an Atari game"),
    ],
)
def test_bad_command_lines_exit_on_one_line_without_tensorflow(paper, argv, message):
    result = _python(CLI_MAIN, paper, *argv)
    outcome = json.loads(result.stdout.splitlines()[-1])
    assert outcome == dict(status=2, imported=[]), result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines


def test_valid_command_lines_are_validated_without_tensorflow():
    # A valid command line validated as cli.main does, stopping before the run.
    code = """
import json, sys
from absl import flags
from common.experiments import cli
from common.experiments import dataclass_flags
from impala import builder
cli.define_flags(builder.ImpalaBuilder)
rest = dataclass_flags.parse_flags(["prog", *sys.argv[1:]])
plan = cli.plan_from_flags(builder.ImpalaBuilder, rest)
print(json.dumps(dict(env=plan.config.env, variants=plan.variants,
                      imported=[m for m in ("tensorflow", "reverb") if m in sys.modules])))
"""
    result = _python(code, "--env=ms_pacman", "--ablations=vtrace,one_step_is", "--seeds=2")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == dict(
        env="MsPacman", variants=["vtrace", "one_step_is"], imported=[]
    )


def test_helpfull_lists_every_config_field_and_run_flag():
    result = subprocess.run(
        [sys.executable, "-m", "impala.main", "--helpfull"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    for data_class in (impala_config.ImpalaConfig, cli.RunSettings):
        for field in dataclasses.fields(data_class):
            assert f"--{field.name}:" in result.stdout or f"--[no]{field.name}:" in result.stdout, (
                field.name
            )
    assert "(default 0.0006; CartPole: 0.01;\n    MinAtar games: 0.00483)" in result.stdout

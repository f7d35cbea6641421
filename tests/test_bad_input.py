"""Bad input, tried systematically: every flag of every paper's command line given a value of the
wrong type and every out-of-range value its rule refuses, and unknown games and ablations. Each is
refused with one line that names the flag (`common.experiments.dataclass_flags.FlagError`, which
`main` prints as `error: ...` and exits 2 with, before anything is written: the last test runs the
real commands).

A flag's rule is its config field's `check` (`common.settings.config.field`), or, for a field
without one, the rule `RULES` gives here: a new field of a type with values to refuse needs one or
the other, or the first test fails naming it."""

import dataclasses
import typing

import pytest
from absl import flags

from common.experiments import cli

from common.experiments import dataclass_flags
from dice import builder as dice_builder
from gdi import builder as gdi_builder
from impala import builder as impala_builder
from lbc import builder as lbc_builder
from reactor import builder as reactor_builder
from tests.system_helpers import assert_one_line_error

PAPERS = {
    paper.name: paper
    for paper in (
        impala_builder.ImpalaBuilder,
        reactor_builder.ReactorBuilder,
        dice_builder.DiceBuilder,
        gdi_builder.GdiBuilder,
        lbc_builder.LbcBuilder,
    )
}

# Values that break a rule for the fields whose rule lives in a config's validate(), not in a
# field check (flag: values refused). Strings that name a thing: a name that is none.
RULES = {
    "first_actor": ["-1"],
    "parallel": ["0"],
    "record_games": ["0"],
    "replay_port": ["0", "65536"],
    "seeds": ["0", "1,1", "-1,2"],
    "role": ["boss"],
    "launcher": ["mpi"],
    "env": ["NoSuchGame", "MinAtar/NoSuchGame-v0"],
    "ablation": ["no_such_ablation"],
    "ablations": ["no_such_ablation"],
    "v_min": ["20"],  # above --v_max's default, 10
    "v_max": ["-20"],
}
# Fields whose every value of their type is allowed (flag: why).
FREE = {
    "logdir": "any directory",
    "record_dir": "any directory (refused only with a role that records nothing: test_recording)",
    "replay_address": "any host:port (a wrong one fails on connecting: test_cli)",
    "ray_address": "any Ray address",
}
# Out-of-range candidates a field's check is asked about, by the field's element type.
CANDIDATES = {
    int: ["-1", "0", "1000000000000"],
    float: ["-1", "0", "1.5", "1e12", "-1e12", "nan", "inf"],
    str: ["no_such_value"],
}
WRONG_TYPE = {int: ["seven", "2.5"], float: ["seven"], bool: ["maybe"]}


def fields(paper):
    for data_class in (paper.config_class, cli.RunSettings):
        hints = typing.get_type_hints(data_class)
        for field in dataclasses.fields(data_class):
            yield field, dataclass_flags.kind_of(hints[field.name])


def parsed(kind, text: str):
    element = kind.element
    if kind.is_tuple:
        return tuple(element(part) for part in text.split(","))
    return element(text) if element is not bool else text == "true"


def refused_by_check(check, kind, text: str) -> bool:
    try:
        value = parsed(kind, text)
    except ValueError:
        return False
    return not check.ok(value)


def bad_inputs(paper) -> list[tuple[str, str]]:
    """(flag, value) of every bad input tried on `paper`'s command line."""
    tried = []
    for field, kind in fields(paper):
        name = field.name
        for value in WRONG_TYPE.get(kind.element, []):
            tried.append((name, value if not kind.is_tuple else f"1,{value}"))
        check = field.metadata.get("check")
        if check is not None:
            candidates = CANDIDATES.get(kind.element, [])
            if kind.is_tuple:
                candidates = [f"{c},{c}" for c in candidates] + [""]
            tried += [(name, c) for c in candidates if refused_by_check(check, kind, c)]
        tried += [(name, value) for value in RULES.get(name, [])]
    return tried


def plan(paper, *argv: str) -> cli.Plan:
    flag_values = flags.FlagValues()
    cli.define_flags(paper, flag_values)
    rest = dataclass_flags.parse_flags(["prog", *argv], flag_values)
    return cli.plan_from_flags(paper, rest, flag_values)


@pytest.mark.parametrize("paper", PAPERS.values(), ids=PAPERS.keys())
def test_every_flag_with_values_to_refuse_has_a_rule(paper):
    ruleless = []
    for field, kind in fields(paper):
        if field.name in FREE or kind.element is bool and not kind.is_tuple:
            continue
        if "check" not in field.metadata and field.name not in RULES:
            ruleless.append(field.name)
    assert ruleless == []


@pytest.mark.parametrize("paper", PAPERS.values(), ids=PAPERS.keys())
def test_every_bad_input_is_refused_on_one_line_naming_its_flag(paper):
    tried = bad_inputs(paper)
    accepted, unnamed = [], []
    for name, value in tried:
        try:
            plan(paper, f"--{name}={value}")
        except dataclass_flags.FlagError as error:
            message = str(error)
            if f"--{name}" not in message or "\n" in message:
                unnamed.append((name, value, message))
        else:
            accepted.append((name, value))
    assert accepted == [] and unnamed == []
    # Every field with a rule had something refused: the candidates reach every rule.
    names = {name for name, _ in tried}
    ruled = {f.name for f, kind in fields(paper) if "check" in f.metadata or f.name in RULES}
    assert ruled <= names, sorted(ruled - names)


@pytest.mark.slow
@pytest.mark.parametrize("paper", PAPERS.values(), ids=PAPERS.keys())
def test_the_real_command_exits_2_on_one_line_and_writes_nothing(paper, tmp_path):
    logdir = tmp_path / "run"
    for flag in ("--batch_size=seven", "--seed=-1", "--env=NoSuchGame", "--ablation=none_such"):
        assert_one_line_error(
            f"{paper.name.split('-')[0]}.main", [f"--logdir={logdir}", flag], flag.split("=")[0]
        )
        assert not logdir.exists()

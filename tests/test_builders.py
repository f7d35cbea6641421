"""Every paper is built the same way (docs/architecture.md#what-a-paper-supplies): its package has
the same files with the same roles, its `builder.py` implements `common.experiments.builder.Builder`
in the one class that is the paper, its `main.py` only runs `common.experiments.cli.main` on that
class, and all five papers' mains and builders import into one process without defining a flag. Each builder makes its
CartPole agent (signature, tables, learner parts) and experiment in this process, without starting
one."""

import dataclasses
import importlib
import inspect
import os
import pickle

import numpy as np
import pytest
from absl import flags

from common.runtime import acting
from common.burn_in import advantage_policy
from common.experiments import builder as builder_lib
from common.experiments import cli
from common.runtime import learning
from common.replay import patterns
from common.replay import replay
from common.runtime.agent import Agent, EnvSpec

# All five in one process: importing a main or a builder defines no flag.
from dice import builder as dice_builder
from dice import main as dice_main
from gdi import builder as gdi_builder
from gdi import main as gdi_main
from impala import builder as impala_builder
from impala import main as impala_main
from lbc import builder as lbc_builder
from lbc import main as lbc_main
from reactor import builder as reactor_builder
from reactor import main as reactor_main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAPERS = ("impala", "reactor", "dice", "gdi", "lbc")
BUILDERS = dict(
    impala=impala_builder,
    reactor=reactor_builder,
    dice=dice_builder,
    gdi=gdi_builder,
    lbc=lbc_builder,
)
MAINS = dict(impala=impala_main, reactor=reactor_main, dice=dice_main, gdi=gdi_main, lbc=lbc_main)
# The paper's Builder class in each builder module.
PAPER_BUILDERS = dict(
    impala=impala_builder.ImpalaBuilder,
    reactor=reactor_builder.ReactorBuilder,
    dice=dice_builder.DiceBuilder,
    gdi=gdi_builder.GdiBuilder,
    lbc=lbc_builder.LbcBuilder,
)

# The files of every paper package, and the paper's own extras.
FILES = {
    "__init__",
    "ablations",
    "acting",
    "builder",
    "config",
    "learning",
    "losses",
    "main",
    "networks",
}
EXTRAS = dict(
    impala=set(),
    reactor={"priorities", "replay"},
    dice={"controller"},
    gdi={"controller"},
    lbc={"controller"},
)
# The mixture hook of `common.burn_in.advantage_policy` in the papers that act with it.
MIXTURE_PAPERS = ("dice", "gdi", "lbc")

CARTPOLE = EnvSpec(2, (4,), np.dtype(np.float32))


def cartpole_builder(paper: str, ablation: str | None = None) -> builder_lib.Builder:
    paper_builder = PAPER_BUILDERS[paper]
    return paper_builder(cli.make_config(paper_builder, {"env": "CartPole"}, ablation))


def protocol_methods() -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(builder_lib.Builder).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


def test_importing_every_main_and_builder_defines_no_flag():
    modules = flags.FLAGS.flags_by_module_dict()
    assert not [m for m in modules if m.endswith((".main", ".builder"))], list(modules)
    for paper in PAPERS:
        assert "config_class" not in vars(MAINS[paper])  # the paper lives in the builder
        assert MAINS[paper].builder is BUILDERS[paper]


@pytest.mark.parametrize("paper", PAPERS)
def test_each_main_only_runs_the_paper_s_command_line(paper):
    main = MAINS[paper]
    assert main.__doc__ and f"python -m {paper}.main" in main.__doc__  # --help shows it
    own = {name for name in vars(main) if not name.startswith("__")}
    assert own == {"cli", "builder"}
    with open(main.__file__) as f:
        source = f.read()
    name = PAPER_BUILDERS[paper].__name__
    assert source.rstrip().endswith(f'if __name__ == "__main__":\n    cli.main(builder.{name})')


@pytest.mark.parametrize("paper", PAPERS)
def test_each_package_has_the_same_files_with_the_same_roles(paper):
    names = {
        name.removesuffix(".py")
        for name in os.listdir(os.path.join(ROOT, paper))
        if name.endswith(".py")
    }
    assert FILES <= names, FILES - names
    assert names - FILES == EXTRAS[paper]
    module = {name: importlib.import_module(f"{paper}.{name}") for name in FILES - {"__init__"}}
    paper_builder = PAPER_BUILDERS[paper]
    assert builder_lib.paper_builder(paper) is paper_builder
    assert paper_builder.name == paper and paper_builder.module() == f"{paper}.main"
    assert paper_builder.config_class.__module__ == f"{paper}.config"
    assert paper_builder.ablations is module["ablations"].ABLATIONS
    assert paper_builder.__module__ == f"{paper}.builder"
    assert callable(module["networks"].core_state_spec)  # the recurrent state's spec
    assert callable(module["acting"].make_policy)  # the actors' policy
    assert callable(module["acting"].protocol)  # the training protocol
    if paper in MIXTURE_PAPERS:  # one name for the mixture hook of common.burn_in.advantage_policy
        etas, weights = module["acting"].behaviour_mixture(_proposals(paper, 2))
        assert etas.shape == weights.shape and etas.shape[0] == 2


def _proposals(paper: str, batch: int) -> dict:
    """The behaviour parameters of `batch` games ({name: [B, ...]}) from the paper's controller."""
    controller = cartpole_builder(paper).behaviour().make_controller(seed=0)
    games = [controller.propose() for _ in range(batch)]
    return {name: np.stack([np.asarray(g[name]) for g in games]) for name in games[0]}


@pytest.mark.parametrize("paper", PAPERS)
def test_each_builder_implements_the_protocol(paper):
    builder = cartpole_builder(paper)
    assert isinstance(builder, builder_lib.Builder)
    assert type(builder) is PAPER_BUILDERS[paper]
    assert [f.name for f in dataclasses.fields(builder)] == ["config"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        builder.config = None
    for name, signature in protocol_methods().items():
        own = inspect.signature(getattr(type(builder), name))
        assert list(own.parameters) == list(signature.parameters), (paper, name)
    pickle.loads(pickle.dumps(builder))  # its factories travel to spawned processes


def test_a_builder_without_a_piece_cannot_be_made():
    @dataclasses.dataclass(frozen=True)
    class Incomplete(builder_lib.Builder):
        config: object

        def replay(self):
            return None

    with pytest.raises(TypeError, match="abstract"):
        Incomplete(config=None)
    assert not isinstance(object(), builder_lib.Builder)


@pytest.mark.parametrize("paper", PAPERS)
def test_each_builder_makes_its_cartpole_agent_and_experiment(paper, tmp_path):
    builder = cartpole_builder(paper)
    agent = builder_lib.build_agent(builder)
    assert isinstance(agent, Agent)
    signature = agent.signature(CARTPOLE)
    steps = signature[replay.STEPS]
    assert steps["observation"].shape[1:] == (4,)
    assert set(builder.policy_extras(CARTPOLE)) <= set(steps)
    assert set(steps.get(acting.BEHAVIOUR, {})) == set(agent.behaviour_names)
    first_step = signature.get(replay.FIRST_STEP_EXTRAS, {})
    assert (acting.CORE_STATE in first_step) == (builder.core_state_spec() is not None)
    tables = [table.name for table in agent.tables(CARTPOLE)]
    assert acting.PARAMS_TABLE in tables and len(tables) == len(set(tables)) >= 3
    burn_in = paper in ("dice", "gdi", "lbc")
    assert isinstance(builder, builder_lib.BurnInBuilder) == burn_in
    if burn_in:  # the shared pieces read the paper's own config
        config = builder.config
        assert isinstance(agent.replay, patterns.SampleK)
        assert (agent.replay.burn_in, agent.replay.length) == (
            config.burn_in,
            config.sequence_length,
        )
        assert agent.replay.times_sampled == config.times_sampled
        assert set(builder.policy_extras(CARTPOLE)) == {advantage_policy.BEHAVIOUR_LOG_PROB}
    for picklable in (agent.replay, agent.make_policy, agent.behaviour):
        pickle.loads(pickle.dumps(picklable))  # what spawned actors receive
    parts = agent.make_learner(CARTPOLE)
    assert isinstance(parts, learning.LearnerParts) and parts.acting_variables
    policy = agent.make_policy(2, (4,), np.float32, 0, False)
    policy.set_weights([np.asarray(v.numpy()) for v in parts.acting_variables])

    experiment = builder_lib.build_experiment(builder, str(tmp_path))
    assert experiment.agent.replay == agent.replay
    assert experiment.actor.env == "CartPole" and builder.run_name().endswith(" CartPole")
    assert experiment.learner.name == builder.run_name()
    assert experiment.learner.frames_per_learner_step == builder.frames_per_learner_step()
    assert experiment.learner.publish_lag == builder.publish_lag()
    evaluation = builder.evaluation()
    assert (experiment.evaluator is not None) == evaluation.enabled
    if experiment.evaluator is not None:
        assert experiment.evaluator.greedy == evaluation.greedy

"""Reactor's named ablations and the CartPole choices give valid configs that change what they
say; the torso names agree with the network's, the prioritisations with the numpy model's."""

import dataclasses

import pytest

from reactor import ablations
from reactor import config as config_lib


@pytest.mark.parametrize("name", sorted(ablations.ABLATIONS))
def test_each_ablation_is_a_valid_config(name):
    overrides = ablations.ABLATIONS[name]
    config_lib.ReactorConfig(**overrides).validate()
    # It changes only fields it names, and only the paper's full agent changes none.
    changed = changed_fields(name)
    assert set(changed) <= set(overrides) and (not changed) == (name == "reactor")
    cartpole = dict(config_lib.CARTPOLE_OVERRIDES, env="CartPole", **overrides)
    config_lib.ReactorConfig(**cartpole).validate()


def changed_fields(name) -> dict:
    """The fields whose value ablation `name` changes from the default config, {field: value}."""
    default = config_lib.ReactorConfig().validate()
    ablated = config_lib.ReactorConfig(**ablations.ABLATIONS[name]).validate()
    return {
        f.name: getattr(ablated, f.name)
        for f in dataclasses.fields(ablated)
        if getattr(ablated, f.name) != getattr(default, f.name)
    }


def test_the_fig3_ablations_each_remove_one_component():
    """Fig. 3-left: the full agent is the default config (§4.1, Tables 1-2: distributional
    Retrace, beta-LOO, lazy prioritisation), and each ablation changes exactly the component it
    removes and nothing else: Reactor ND's classical Retrace critic, uniform sampling, TISLR."""
    assert changed_fields("reactor") == {}
    default = config_lib.ReactorConfig()
    assert default.distributional and default.policy_gradient == "beta_loo"
    assert default.prioritisation == "lazy"
    assert changed_fields("reactor_nd") == {"distributional": False}
    assert changed_fields("no_prioritisation") == {"prioritisation": "uniform"}
    assert changed_fields("tislr") == {"policy_gradient": "tislr"}


def test_torso_names_agree_with_the_network():
    from reactor import networks

    assert config_lib.TORSOS == networks.TORSOS


def test_frames_per_learner_step_is_the_acting_ratio():
    # §3.4: ~5 acting steps per learning step, 4 action repeats.
    assert config_lib.ReactorConfig().frames_per_learner_step == 5 * 4
    assert config_lib.ReactorConfig(env="CartPole").frames_per_learner_step == 5


def test_prioritisations_agree_with_the_numpy_model():
    from reactor import priorities

    assert config_lib.PRIORITISATIONS == priorities.PRIORITISATIONS
    assert config_lib.ReactorConfig().prioritisation == "lazy"  # App. 6.5's lazy initialisation

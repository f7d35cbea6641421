"""Reactor's named ablations and the CartPole choices give valid configs that change what they
say; the torso names agree with the network's, the prioritisations with the numpy model's."""

import pytest

from reactor import ablations
from reactor import config as config_lib


@pytest.mark.parametrize("name", sorted(ablations.ABLATIONS))
def test_each_ablation_is_a_valid_config(name):
    overrides = ablations.ABLATIONS[name]
    config = config_lib.ReactorConfig(**overrides).validate()
    for field, value in overrides.items():
        assert getattr(config, field) == value
    cartpole = dict(config_lib.CARTPOLE_OVERRIDES, env="CartPole", **overrides)
    config_lib.ReactorConfig(**cartpole).validate()


def test_the_fig3_ablations_each_remove_one_component():
    default = config_lib.ReactorConfig()
    assert ablations.ABLATIONS["reactor"] == dict(
        distributional=default.distributional,
        policy_gradient=default.policy_gradient,
        prioritisation=default.prioritisation,
    )
    assert ablations.ABLATIONS["reactor_nd"] == dict(distributional=False)
    assert ablations.ABLATIONS["no_prioritisation"] == dict(prioritisation="uniform")
    assert ablations.ABLATIONS["tislr"] == dict(policy_gradient="tislr")


def test_torso_names_agree_with_the_network():
    from reactor import networks

    assert config_lib.TORSOS == networks.TORSOS


def test_frames_per_batch_is_the_acting_ratio():
    assert config_lib.ReactorConfig().frames_per_batch == 5 * 4  # §3.4: ~5 acting steps, 4 repeats
    assert config_lib.ReactorConfig(env="CartPole").frames_per_batch == 5


def test_prioritisations_agree_with_the_numpy_model():
    from reactor import priorities

    assert config_lib.PRIORITISATIONS == priorities.PRIORITISATIONS
    assert config_lib.ReactorConfig().prioritisation == "lazy"  # issue 24: the measured default

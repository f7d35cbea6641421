"""`python -m lbc.main` rejects bad flags on one line naming the flag, before TensorFlow; every
Table 12 variant (and App. K.3's without UCB) is a valid config."""

import pytest

from tests.system_helpers import assert_one_line_error


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--env=Pongo"], "--env='Pongo' is not CartPole or an Atari game"),
        (["--pg_advantage=gae"], "--pg_advantage='gae' is not one of vtrace, retrace"),
        (["--discounts=0.99,0.99"], "--reward_shapings=('value_rescaling', 'asymmetric_log'"),
        (["--reward_shapings=h,h,h"], "--reward_shapings=('h', 'h', 'h') must be a non-empty"),
        (["--bandit_top_d=11"], "--bandit_top_d=11 exceeds the arms of an axis: (20, 10)"),
        (["--bandit_ucb_range=1.5,0.5"], "--bandit_ucb_range=(1.5, 0.5) must satisfy 0 <= low"),
        (["--warmup_steps=100000"], "--warmup_steps=100000 must be < the 97656 optimiser updates"),
        (["--aux_hidden=0"], "--aux_hidden=0 must be > 0"),  # a Dense layer of 0 units
        (
            ["--ablation=greedy"],
            "--ablation='greedy' is not one of lbc, reducing_h, reducing_h_psi, random_selection, "
            "without_ucb",
        ),
    ],
)
def test_bad_flags_fail_on_one_line_before_starting_anything(flags, message):
    assert_one_line_error("lbc.main", flags, message)


def test_every_ablation_is_a_valid_config():
    from lbc import ablations
    from lbc import config as config_lib

    sizes = {}
    for name, overrides in ablations.ABLATIONS.items():
        config = config_lib.LbcConfig(**overrides).validate()
        sizes[name] = (
            config.num_networks,
            config.bandit_num_policies,
            config.bandit_selection,
            config.bandit_ucb_range,
        )
    # Table 12: |H|, the dimension of psi and the meta-controller; App. K.3: UCB's c = 0.
    assert sizes == {
        "lbc": (3, 3, "bandits", (0.5, 1.5)),
        "reducing_h": (1, 3, "bandits", (0.5, 1.5)),
        "reducing_h_psi": (1, 1, "bandits", (0.5, 1.5)),
        "random_selection": (3, 3, "uniform", (0.5, 1.5)),
        "without_ucb": (3, 3, "bandits", (0.0, 0.0)),
    }

"""`python -m dice.main` rejects bad flags on one line naming the flag, before TensorFlow."""

import pytest

from tests.system_helpers import assert_one_line_error


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--env=Pongo"], "--env='Pongo' is not CartPole or an Atari game"),
        (["--retrace_form=lambda"], "--retrace_form='lambda' is not one of expected, sampled"),
        (
            ["--q_centering=max"],
            "--q_centering='max' is not one of policy_mean, policy_mean_grad, none",
        ),
        (["--reuse_mode=twice"], "--reuse_mode='twice' is not one of replay, repeat"),
        (["--times_sampled=0"], "--times_sampled=0 must be > 0"),
        (["--clip_c_threshold=-1"], "--clip_c_threshold=-1.0 must be >= 0"),
        (["--bandit_widths=0"], "--bandit_widths=(0,) must be a non-empty tuple of positive"),
        (["--bandit_num_candidates=60"], "--bandit_num_candidates=60 must be <= --bandit_num"),
        (["--warmup_steps=30000"], "--warmup_steps=30000 must be < the 19531 optimiser updates"),
        (["--fixed_behaviour"], "--eval_policy=best_region needs bandits that learn"),
        (
            ["--eval_policy=greedy", "--bandit_selection=uniform"],
            "--eval_policy=greedy needs bandits that learn",
        ),
        (
            ["--ablation=greedy"],
            "--ablation='greedy' is not one of dice, baseline, entropy, entropy_tau_one, random",
        ),
        (["--eval_round_episodes=0"], "--eval_round_episodes=0 must be > 0"),
    ],
)
def test_bad_flags_fail_on_one_line_before_starting_anything(flags, message):
    assert_one_line_error("dice.main", flags, message)


def test_every_ablation_is_a_valid_config():
    from dice import ablations
    from dice import config as config_lib

    for overrides in ablations.ABLATIONS.values():
        config_lib.DiceConfig(**overrides).validate()
    assert set(ablations.ABLATIONS) == {"dice", "baseline", "entropy", "entropy_tau_one", "random"}

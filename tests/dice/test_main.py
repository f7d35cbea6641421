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
    assert set(ablations.ABLATIONS) == {
        "dice",
        "baseline",
        "entropy",
        "entropy_tau_one",
        "random",
        "table_5",
    }


def test_minatar_takes_the_protocols_choice_and_table_5_restores_the_papers():
    from common.experiments import cli
    from dice import builder

    def config(env, ablation=None, **given):
        made = cli.make_config(builder.DiceBuilder, dict(env=env, **given), ablation)
        return made.learning_rate, made.batch_size, made.gradient_updates

    # Trial 9 of docs/results/minatar_protocol/dice.csv; 1M frames of items of 80 steps, each
    # trained twice: 1e6 / (8 * 80 / 2) updates at batch 8, 1e6 / (64 * 80 / 2) at Table 5's 64.
    assert config("MinAtar/Breakout-v0", total_frames=1_000_000) == (4e-3, 8, 3125)
    assert config("MinAtar/Breakout-v0", "table_5", total_frames=1_000_000) == (5e-4, 64, 390)
    # On Atari the paper's values are the defaults, and the ablation changes nothing.
    assert config("Pong")[:2] == config("Pong", "table_5")[:2] == (5e-4, 64)

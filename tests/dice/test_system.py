"""DiCE end to end on CartPole through `python -m dice.main`: real launcher, actor process,
Reverb server, learner and evaluator. Each game draws its own eta from its env's bandits and
feeds its return back; items are trained on at most twice (on average between 1 and 2 when a
batch is drawn); the bandits' state and the replay survive a resume. Learning curves live in
benchmarks/ and
docs/results/."""

import os

import numpy as np
import pytest

from tests import system_helpers
from tests.system_helpers import bandit_counts, check_games_fed_the_bandits, scalars

pytestmark = pytest.mark.slow

FLAGS = [
    "--env=CartPole",
    "--lstm_units=16",
    "--envs_per_actor=8",
    "--batch_size=8",
    "--burn_in=4",
    "--sequence_length=8",
    "--replay_capacity=256",
    "--warmup_steps=2",
    "--log_interval_s=1",
    "--eval_interval_s=1",
    "--eval_round_episodes=2",
    "--eval_episodes=4",
]
FRAMES_PER_STEP = 8 * 8 // 2  # batch x length / times sampled


def run(logdir, steps, timeout_s=240) -> str:
    return system_helpers.run_to_completion(
        logdir,
        f"--total_frames={steps * FRAMES_PER_STEP}",
        flags=FLAGS,
        module="dice.main",
        timeout_s=timeout_s,
    )


def test_dice_trains_with_per_game_eta_and_resumes_its_bandits(tmp_path):
    logdir = str(tmp_path)
    output = run(logdir, steps=20)
    first_step = system_helpers.checkpoint_step(logdir)
    assert first_step >= 20  # at least: padded items count only their real steps as frames
    logged = scalars(logdir)
    etas = logged["behaviour/eta"]  # one point per game, at its start's draw
    system_helpers.check_one_draw_per_game(etas, logdir, high=50.0)
    # Each game's mean behaviour entropy, H[softmax(eta A)] <= ln 2 with CartPole's two actions.
    entropies = logged["behaviour/entropy"]
    assert len(entropies) == len(etas) and all(0.0 <= h <= np.log(2) + 1e-6 for h in entropies)
    # Each item is trained on at most twice, and many reach their second sample.
    times = logged["replay/times_sampled"]
    assert all(1.0 <= t <= 2.0 for t in times) and max(times) > 1.2
    assert all(np.isfinite(logged["loss/total"]))
    first = bandit_counts(logdir)
    check_games_fed_the_bandits(first, logdir)
    found = system_helpers.check_instruments(logdir, output, num_actions=2)
    assert 0.0 <= found["behaviour/eta"] <= 50.0  # the arms the bandits chose, late in the run
    with open(os.path.join(logdir, "eval.csv")) as f:
        assert len(f.readlines()) - 1 >= 4  # the final evaluation, best region of the bandits
    # The evaluator logs what the bandits it loaded have learned.
    best_eta = scalars(os.path.join(logdir, "eval"))["bandits/best_eta"]
    assert best_eta and all(0.0 <= eta <= 50.0 for eta in best_eta)

    output = run(logdir, steps=40)
    assert f"resumed {logdir}/checkpoints/ckpt-{first_step} (step {first_step}" in output
    assert "Successfully loaded 4 tables" in output  # the replay came back
    assert system_helpers.checkpoint_step(logdir) >= max(40, first_step + 1)
    second = bandit_counts(logdir)
    # The bandits continued from the statistics the checkpoint kept rather than starting over.
    kept = bandit_counts(logdir, state_file=system_helpers.kept_state(logdir, first_step))
    assert (kept <= first).all() and kept.sum() > 0
    assert (second >= kept).all()  # a reset would have dropped the kept games

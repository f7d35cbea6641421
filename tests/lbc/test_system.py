"""LBC end to end on CartPole through `python -m lbc.main`: real launcher, actor process, Reverb
server, learner and evaluator. Each game draws its own psi = (tau_1..3, omega_1..3) from its env's
bandit population and feeds its return back; the three networks are trained and logged apart;
the checkpoint, the replay and the bandits' state survive a resume. Learning curves live in
benchmarks/ and
docs/results/."""

import os

import numpy as np
import pytest

from tests import system_helpers
from tests.system_helpers import check_games_fed_the_bandits, scalars

pytestmark = pytest.mark.slow

ENVS = 8
FLAGS = [
    "--env=CartPole",
    "--lstm_units=16",
    f"--envs_per_actor={ENVS}",
    "--batch_size=8",
    "--burn_in=4",
    "--sequence_length=8",
    "--replay_capacity=256",
    "--warmup_steps=2",
    system_helpers.ONE_GRAPH,
    "--log_interval_s=1",
    "--eval_interval_s=600",  # only the final evaluation: the machine has 2 cores
    "--eval_episodes=4",
]
FRAMES_PER_STEP = 8 * 8 // 2  # batch x length / times sampled


def run(logdir, steps, timeout_s=300) -> str:
    return system_helpers.run_to_completion(
        logdir,
        f"--total_frames={steps * FRAMES_PER_STEP}",
        flags=FLAGS,
        module="lbc.main",
        timeout_s=timeout_s,
    )


def games_learned(logdir, state_file: str | None = None) -> np.ndarray:
    """Games each env's bandit populations have learned from (actor 0's saved state, or the
    state in `state_file`): each of the 6 populations (tau_1..3, omega_1..3) counts every game
    once."""
    with np.load(state_file or os.path.join(logdir, "behaviour", "actor_0.npz")) as state:
        counts = np.array(
            [[state[f"{env}/selector{k}/episodes"] for k in range(6)] for env in range(ENVS)]
        )
    assert (counts == counts[:, :1]).all()
    return counts[:, 0]


def test_lbc_trains_its_population_with_per_game_psi_and_resumes(tmp_path):
    logdir = str(tmp_path)
    output = run(logdir, steps=10)
    first_step = system_helpers.checkpoint_step(logdir)
    assert first_step >= 10  # at least: padded items count only their real steps as frames
    logged = scalars(logdir)
    # One point per game: psi varies from game to game, tau_i in [0, e^4 − 1], omega on the simplex.
    taus = np.array([logged[f"behaviour/eta_{i}"] for i in range(3)])
    omegas = np.array([logged[f"behaviour/omega_{i}"] for i in range(3)])
    for draws in taus:
        system_helpers.check_one_draw_per_game(list(draws), logdir, high=np.e**4)
    np.testing.assert_allclose(omegas.sum(0), 1.0, atol=1e-5)
    # Fig. 4's behaviour entropy H[mu_psi], one mean per game, at most ln 2 on CartPole.
    entropies = np.array(logged["behaviour/entropy"])
    assert entropies.shape == taus[0].shape and ((0 <= entropies) & (entropies <= 0.6932)).all()
    # The three networks learn and are logged apart.
    for i in (1, 2, 3):
        for part in ("v", "q", "pi", "aux_inverse", "aux_forward", "total"):
            assert np.isfinite(logged[f"loss/{part}_{i}"]).all()
    times = logged["replay/times_sampled"]
    assert all(1.0 <= t <= 2.0 for t in times)
    found = system_helpers.check_instruments(logdir, output, num_actions=2)
    assert {f"optimizer/clipped_{i}" for i in (1, 2, 3)} <= set(found)
    first = games_learned(logdir)
    check_games_fed_the_bandits(first, logdir)
    with open(os.path.join(logdir, "eval.csv")) as f:
        assert len(f.readlines()) - 1 >= 4  # the final evaluation, with the bandits' behaviour
    # The evaluator logs what the bandit populations it loaded have learned (how many games
    # depends on when actor 0 last saved them: every 30 s here, and on exit).
    logged_eval = scalars(os.path.join(logdir, "eval"))
    assert logged_eval["bandits/games"]
    assert all(0.0 <= w <= 1.0 for w in logged_eval["bandits/omega1/most_pulled"])

    output = run(logdir, steps=20)
    assert f"resumed {logdir}/checkpoints/ckpt-{first_step} (step {first_step}" in output
    assert "Successfully loaded 4 tables" in output  # the replay came back
    last_step = system_helpers.checkpoint_step(logdir)
    assert last_step >= max(20, first_step + 1)
    second = games_learned(logdir)
    # The bandits continued from the statistics the checkpoint kept rather than starting over.
    kept = games_learned(logdir, system_helpers.kept_state(logdir, first_step))
    assert (kept <= first).all() and kept.sum() > 0
    assert (second >= kept).all()  # a reset would have dropped the kept games

    # The last checkpoint with psi from the arms actor 0's bandits rate best (--role=evaluate).
    frames = system_helpers.checkpoint_frames(logdir)
    output = evaluate(logdir, "--eval_policy=best_arm")
    checkpoint = f"{logdir}/checkpoints/ckpt-{last_step}"
    assert f"[evaluate] {checkpoint} (step {last_step}, {frames} frames): 4 episodes" in output
    with open(os.path.join(logdir, "evaluate", "eval.csv")) as f:
        rows = f.read().splitlines()[1:]
    assert len(rows) == 4 and {int(row.split(",")[0]) for row in rows} == {frames}
    assert (games_learned(os.path.join(logdir, "evaluate")) == second).all()  # a frozen copy
    output = evaluate(logdir, "--eval_policy=training_episodes", returncode=1)
    assert output.strip().splitlines()[-1].startswith("error: --role=evaluate: these flags")


def evaluate(logdir, *extra, returncode=0) -> str:
    process, output_path = system_helpers.run_main(
        logdir, "--role=evaluate", *extra, flags=FLAGS, module="lbc.main"
    )
    output = system_helpers.finish(process, output_path, timeout_s=120)
    assert process.returncode == returncode, output
    return output

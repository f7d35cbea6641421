"""GDI end to end on CartPole through `python -m gdi.main`: real launcher, actor process, Reverb
server, learner and evaluator. Each game draws its own lambda = (1/tau_1, 1/tau_2, eps) from its
env's bandits and feeds its return back; GDI-H3 trains two networks whose losses are both logged.
Resume (the bandits' state, every network and the replay) is the shared launcher's: the DiCE and
LBC system tests resume through it, and tests/gdi/test_learning.py checks that GDI-H3's
checkpoint holds both networks. `--role=evaluate` (the shared launcher's) is tested on GDI-H3's
run, whose evaluator has bandits of its own."""

import csv
import os

import numpy as np
import pytest

from tests import system_helpers
from tests.system_helpers import bandit_counts, check_games_fed_the_bandits, scalars

pytestmark = pytest.mark.slow

FLAGS = [
    "--env=CartPole",
    "--lstm_units=16",
    "--aux_hidden=16",
    "--envs_per_actor=8",
    "--batch_size=8",
    "--burn_in=4",
    "--sequence_length=8",
    "--replay_capacity=256",
    "--warmup_steps=2",
    system_helpers.ONE_GRAPH,
    "--log_interval_s=1",
    "--eval_interval_s=30",  # the final evaluation only (H3; I3 runs none)
    "--eval_round_episodes=2",
    "--eval_episodes=4",
]
FRAMES_PER_STEP = 8 * 8 // 2  # batch x length / times sampled


def run(logdir, variant, steps, timeout_s=240, extra=()) -> str:
    return system_helpers.run_to_completion(
        logdir,
        f"--variant={variant}",
        f"--total_frames={steps * FRAMES_PER_STEP}",
        *extra,
        flags=FLAGS,
        module="gdi.main",
        timeout_s=timeout_s,
    )


def check_lambda_varies_per_game(logged, logdir) -> None:
    for name, high in (("eta1", 50.0), ("eta2", 50.0), ("epsilon", 1.0)):
        values = logged[f"behaviour/{name}"]  # one point per game, at its start's draw
        system_helpers.check_one_draw_per_game(values, logdir, high)


def test_gdi_i3_trains_with_per_game_lambda(tmp_path):
    logdir = str(tmp_path)
    run(logdir, "i3", steps=10, extra=("--eval_interval_s=0",))
    assert (
        system_helpers.checkpoint_step(logdir) >= 10
    )  # at least: padded items count only their real steps as frames
    logged = scalars(logdir)
    check_lambda_varies_per_game(logged, logdir)
    assert "loss/v_2" not in logged  # one network
    assert logged["loss/total"] and np.all(np.isfinite(logged["loss/total"]))
    check_games_fed_the_bandits(bandit_counts(logdir), logdir)


def test_gdi_h3_trains_two_networks(tmp_path):
    logdir = str(tmp_path)
    output = run(logdir, "h3", steps=10)
    step = system_helpers.checkpoint_step(logdir)
    assert step >= 10  # at least: padded items count only their real steps as frames
    logged = scalars(logdir)
    check_lambda_varies_per_game(logged, logdir)
    for name in ("loss/v_1", "loss/v_2", "loss/q_2", "loss/inverse_dynamics_2", "loss/pi"):
        assert name in logged, name
    times = logged["replay/times_sampled"]  # "Replay 2": each item trained on at most twice
    assert all(1.0 <= t <= 2.0 for t in times)
    check_games_fed_the_bandits(bandit_counts(logdir), logdir)
    found = system_helpers.check_instruments(logdir, output, num_actions=2)
    assert {"value/error_1", "value/error_2", "behaviour/eta1", "behaviour/epsilon"} <= set(found)
    with open(f"{logdir}/eval.csv") as f:
        assert len(f.readlines()) - 1 >= 4  # the final evaluation
    # Our evaluation (docs/papers/gdi.md#departures-from-the-paper): the evaluator's environments
    # ran bandit ensembles of their own, which learned from its games (each game updates the
    # ensemble of the env that played it).
    games = evaluator_games(logdir)
    assert games >= 4

    # --role=evaluate plays the final protocol again on the last checkpoint, into evaluate/,
    # its own bandits continuing from a copy of the run's evaluator's.
    with open(f"{logdir}/eval.csv") as f:
        run_eval = f.read()
    frames = system_helpers.checkpoint_frames(logdir)
    output = evaluate(logdir)
    assert (
        f"[evaluate] {logdir}/checkpoints/ckpt-{step} (step {step}, {frames} frames): 4" in output
    )
    with open(f"{logdir}/eval.csv") as f:
        assert f.read() == run_eval  # the run's files are left as they were
    assert evaluator_games(logdir) == games
    # At least the 4 scored games: an env whose quota is met plays on until the others' are,
    # and its bandits learn from those games too (common.runtime.evaluation.evaluate), so not
    # exactly 4.
    assert evaluator_games(f"{logdir}/evaluate") >= games + 4
    with open(f"{logdir}/evaluate/eval.csv") as f:
        rows = list(csv.DictReader(f))
    # The run's final evaluation and this one are logged at the learner's frame count, which
    # counts only the real steps of padded items (CartPole's games end inside them), not at
    # the step times the frames of a full batch.
    final_frames = int(run_eval.splitlines()[-1].split(",")[0])
    assert final_frames == frames
    assert len(rows) == 4 and {int(row["frames"]) for row in rows} == {frames}
    assert all(1.0 <= float(row["episode_return"]) <= 500.0 for row in rows)
    # Flags that build another network: one line naming the checkpoint, nothing played.
    output = evaluate(logdir, "--lstm_units=32", returncode=1)
    assert (
        output.strip()
        .splitlines()[-1]
        .startswith(
            f"error: --role=evaluate: {logdir}/checkpoints/ckpt-{step} does not hold the agent these "
            "flags build"
        )
    )
    with open(f"{logdir}/evaluate/eval.csv") as f:
        assert len(f.readlines()) - 1 == 4


def evaluator_games(logdir) -> int:
    """Games the evaluator's own bandits have learned from (its saved state under `logdir`)."""
    with np.load(os.path.join(logdir, "behaviour", "evaluator.npz")) as state:
        return int(sum(state[k].sum() for k in state if k.endswith("/selector0/bandit0/counts")))


def evaluate(logdir, *extra, returncode=0) -> str:
    """`python -m gdi.main --role=evaluate` on `logdir` with GDI-H3's test flags."""
    process, output_path = system_helpers.run_main(
        logdir, "--variant=h3", "--role=evaluate", *extra, flags=FLAGS, module="gdi.main"
    )
    output = system_helpers.finish(process, output_path, timeout_s=120)
    assert process.returncode == returncode, output
    return output


def test_evaluate_without_a_checkpoint_says_so_and_writes_nothing(tmp_path):
    logdir = str(tmp_path)
    output = evaluate(logdir, returncode=1)
    assert output.strip().splitlines()[-1] == (
        f"error: --role=evaluate: no checkpoint under {logdir}/checkpoints"
    )
    assert [name for name in os.listdir(logdir) if not name.startswith("main_output_")] == []

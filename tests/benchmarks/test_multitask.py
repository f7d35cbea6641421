"""benchmarks.multitask: each game's curve read off a multi-task run at a fifth of its frames, the
experts read off the grid's curves at the same frames per game, the mean capped normalised score
by hand, and a real multi-task IMPALA run through the tool."""

import csv
import os

import numpy as np
import pytest

from benchmarks import minatar_references, minatar_runs, multitask

GAMES = multitask.GAMES


def write_multitask_run(logdir, seed, games_per_game, level):
    """A multi-task run directory as IMPALA leaves it (no checkpoint: its frames are those of the
    last episodes.csv row): game g's k-th game ends at run frames 5 * 1000 * (k + 1) + g, with
    return level(g, k)."""
    directory = os.path.join(logdir, multitask.AGENT, f"seed{seed}")
    os.makedirs(directory)
    rows = []
    for g, game in enumerate(GAMES):
        for k in range(games_per_game):
            rows.append([5 * 1000 * (k + 1) + g, level(g, k), 10, 1.0, minatar_runs.env_id(game)])
    rows.sort()
    with open(os.path.join(directory, "episodes.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["frames", "episode_return", "episode_length", "wall_time", "game"])
        writer.writerows(rows)
    return directory


def test_a_game_s_curve_is_read_at_a_fifth_of_the_run_s_frames(tmp_path):
    # Game g's k-th game ends at run frames 5,000 (k + 1) + g: at a game's 1,000 (k + 1) + g / 5
    # frames. At 200,000 frames per game the last 100 games of game 0 are k = 100..199, of the
    # others k = 99..198 (their game 199 ends just past); at 100,000, k = 0..99 and k = 0..98.
    directory = write_multitask_run(tmp_path, 3, 200, lambda g, k: g + k / 10)
    curves = multitask.game_curves(directory, 200_000)
    for g, game in enumerate(GAMES):
        points, _ = curves[game]
        assert points[-1] == 200_000 and len(points) == 100
        last = range(100, 200) if g == 0 else range(99, 199)
        assert multitask.final(curves[game], 200_000) == pytest.approx(g + np.mean(last) / 10)
        first = range(0, 100) if g == 0 else range(0, 99)
        assert multitask.final(curves[game], 100_000) == pytest.approx(g + np.mean(first) / 10)


def test_the_comparison_and_its_fitness_by_hand(tmp_path):
    references = minatar_references.read_references()
    normalisers = [minatar_references.normaliser(references, game) for game in GAMES]
    budget = 100_000
    grid = minatar_runs.curve_grid(budget)

    def at_score(score, g):
        random, reference = normalisers[g]
        return random + score * (reference - random)

    # Multi-task scores per game 0.5, 1.5 (capped to 1), 0.2, -0.1 (no floor), 0.4; the experts
    # 0.3 on every game; two seeds, the same values.
    multi_scores = [0.5, 1.5, 0.2, -0.1, 0.4]
    multi = {
        (game, seed): (grid, np.full(grid.size, at_score(multi_scores[g], g)))
        for g, game in enumerate(GAMES)
        for seed in (0, 1)
    }
    experts = {
        (multitask.EXPERT, game, seed): (grid, np.full(grid.size, at_score(0.3, g)))
        for g, game in enumerate(GAMES)
        for seed in (0, 1)
    }
    comparison = multitask.compare_agents(multi, experts, (0, 1), budget)
    np.testing.assert_allclose(comparison.scores[multitask.AGENT][0], multi_scores, atol=1e-9)
    assert multitask.fitness(comparison.scores[multitask.AGENT]) == pytest.approx(
        (0.5 + 1.0 + 0.2 - 0.1 + 0.4) / 5
    )
    assert multitask.fitness(comparison.scores[multitask.EXPERT]) == pytest.approx(0.3)
    summary = multitask.summary_markdown(comparison, "python -m benchmarks.multitask")
    assert "| multi-task (one for all) |" in summary and "0.400 [0.400, 0.400] (2 seeds)" in summary
    assert "0.300 [0.300, 0.300] (2 seeds)" in summary
    # An expert short of the frames per game is missing, not a zero.
    experts[multitask.EXPERT, "breakout", 1] = (grid[:50], np.zeros(50))
    short = multitask.compare_agents(multi, experts, (0, 1), budget)
    assert np.isnan(short.returns[multitask.EXPERT][1, GAMES.index("breakout")])
    assert "(1 seeds)" in multitask.summary_markdown(short, "")


def test_report_only_writes_the_curves_it_reads_back_without_the_runs(tmp_path):
    logdir = tmp_path / "runs"
    write_multitask_run(logdir, 0, 200, lambda g, k: g + (k % 7))
    write_multitask_run(logdir, 1, 200, lambda g, k: 2 * g)
    flags = [f"--logdir={logdir}", "--seeds=0,1", "--frames_per_game=200000", "--report_only"]
    multitask.main(flags)
    first = (logdir / "summary.md").read_text()
    assert (logdir / "multitask.png").stat().st_size > 0
    for seed in (0, 1):
        os.rename(logdir / multitask.AGENT / f"seed{seed}", tmp_path / f"moved{seed}")
    multitask.main(flags)
    assert (logdir / "summary.md").read_text() == first
    assert "| experts (one per game) | — | — | — | — | — | — |" in first


def test_bad_flags_fail_on_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as raised:
        multitask.main([f"--experts={tmp_path / 'none.csv'}"])
    assert raised.value.code == 2
    assert "--experts=" in capsys.readouterr().err
    command = multitask.run_command(4, "runs/m", 1000, ["--num_actors=1"])
    assert command[1:] == [
        "-m",
        "impala.main",
        f"--env={multitask.ENV}",
        "--envs_per_actor=130",
        "--seed=4",
        "--total_frames=5000",
        f"--logdir={os.path.join('runs/m', multitask.AGENT, 'seed4')}",
        "--num_actors=1",
    ]


@pytest.mark.slow
def test_a_real_multitask_run_reports_every_game(tmp_path, capsys):
    logdir = tmp_path / "runs"
    multitask.main(
        [
            f"--logdir={logdir}",
            "--seeds=1",  # seed 0
            "--frames_per_game=6000",
            "--",
            # One environment a game (the last --envs_per_actor wins), so that a Freeway game
            # (2,500 steps) ends within the budget; a small batch, no evaluation.
            "--envs_per_actor=5",
            "--num_actors=1",
            "--batch_size=8",
            "--eval_interval_s=0",
            "--log_interval_s=1",
        ]
    )
    assert "[multitask] 1 runs of 30,000 frames (seeds 0;" in capsys.readouterr().out
    with open(logdir / "curves.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {row["game"] for row in rows} == set(GAMES)
    assert max(int(row["frames"]) for row in rows) == 6000
    summary = (logdir / "summary.md").read_text()
    row = next(line for line in summary.splitlines() if line.startswith("| multi-task"))
    assert row.count("(1)") == len(GAMES)

"""benchmarks.sweep: Table D.1's 24 combinations (the protocol's IMPALA trials) as one grid each,
each game's best against the protocol's choice, and one real combination run through the grid."""

import csv
import os

import numpy as np
import pytest

from benchmarks import minatar_runs, protocol, sweep


def write_run(logdir, index, game, seed, budget, level):
    """A finished run (no checkpoint: its last episodes.csv row is at the budget), 100 games at
    `level`."""
    directory = minatar_runs.run_dir(sweep.combination_logdir(logdir, index), "impala", game, seed)
    os.makedirs(directory)
    with open(os.path.join(directory, "episodes.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["frames", "episode_return", "episode_length", "wall_time"])
        for k in range(100):
            writer.writerow([(k + 1) * budget // 100, level, 10, 1.0])


def test_the_combinations_are_the_protocols_impala_trials():
    assert sweep.COMBINATIONS == protocol.AGENTS["impala"][0] and len(sweep.COMBINATIONS) == 24
    assert sweep.COMBINATIONS[sweep.PROTOCOL_CHOICE] == {
        "entropy_cost": 7.13e-05,
        "learning_rate": 0.00483,
        "rmsprop_epsilon": 1e-05,
    }


def test_each_game_takes_the_best_unless_the_protocol_s_is_within_a_standard_error(
    tmp_path, capsys
):
    budget, seeds = 1000, (300, 301)
    # Breakout: combination 3 (5, 7: mean 6 ± 1) beats the protocol's 10 (4, 4) by 2 > 1: 3.
    # Asterix: combination 3 (5, 7) beats 10 (5.5, 5.5) by 0.5 <= 1: the protocol's 10.
    # Combination 5 lacks a seed on Asterix: it is not compared there.
    levels = {
        (3, "breakout"): (5.0, 7.0),
        (10, "breakout"): (4.0, 4.0),
        (3, "asterix"): (5.0, 7.0),
        (10, "asterix"): (5.5, 5.5),
        (5, "breakout"): (1.0, 1.0),
        (5, "asterix"): (9.0,),
    }
    for (index, game), values in levels.items():
        for seed, level in zip(seeds, values):
            write_run(tmp_path, index, game, seed, budget, level)
    sweep.main(
        [
            f"--logdir={tmp_path}",
            "--games=breakout,asterix",
            "--seeds=300,301",
            f"--total_frames={budget}",
            "--report_only",
        ]
    )
    summary = (tmp_path / "summary.md").read_text()
    rows = {
        line.split(" | ")[0][2:]: line for line in summary.splitlines() if line.startswith("| ")
    }
    assert rows["breakout"].startswith("| breakout | 3: 6.00 ± 1.00 (2)")
    assert rows["breakout"].endswith("| 3 |") and "10: 4.00 ± 0.00 (2)" in rows["breakout"]
    assert rows["asterix"].startswith("| asterix | 3: 6.00 ± 1.00 (2)")
    assert rows["asterix"].endswith("| 10 |")
    with open(tmp_path / "sweep.csv", newline="") as f:
        table = {int(row["combination"]): row for row in csv.DictReader(f)}
    assert sorted(table) == [3, 5, 10]
    assert float(table[5]["return_asterix"]) == 9.0 and table[3]["learning_rate"] == "5.9e-05"
    assert "[sweep] combination" not in capsys.readouterr().out  # --report_only runs nothing


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--combinations=24"], "--combinations=24: the table has trials 0-23"),
        (["--games=tetris"], "--games: 'tetris' is not one of"),
        (["--", "--learning_rate=1"], "nothing goes after --"),
    ],
)
def test_bad_flags_fail_on_one_line(flags, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as raised:
        sweep.main([f"--logdir={tmp_path / 'sweep'}", *flags])
    assert raised.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "sweep").exists()


@pytest.mark.slow
def test_a_combination_runs_as_a_grid_with_its_flags(tmp_path):
    sweep.main(
        [
            f"--logdir={tmp_path}",
            "--combinations=10",
            "--games=breakout",
            "--seeds=1",
            "--total_frames=12800",
        ]
    )
    run = minatar_runs.run_dir(sweep.combination_logdir(tmp_path, 10), "impala", "breakout", 0)
    first_line = open(os.path.join(run, "stdout.log")).readline()
    assert first_line.startswith("[impala] MinAtar/Breakout-v0:")
    result = minatar_runs.read_result(
        sweep.combination_logdir(tmp_path, 10), "impala", "breakout", 0, 12800
    )
    assert result.reached and np.isfinite(result.final)
    assert "| breakout | 10: " in (tmp_path / "summary.md").read_text()

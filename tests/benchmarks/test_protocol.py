"""benchmarks/protocol.py: the trials are the protocol's tables, and a trial's runs are scored and
chosen by the protocol's rules (docs/guides/minatar_protocol.md)."""

import csv
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from benchmarks import minatar, protocol

from benchmarks import minatar_references

from benchmarks import minatar_runs

PROTOCOL_MD = os.path.join(
    os.path.dirname(__file__), "..", "..", "docs", "guides", "minatar_protocol.md"
)


def markdown_table(section: str) -> list[list[str]]:
    """The rows of the first table after the heading `section` (cells stripped, no header)."""
    text = open(PROTOCOL_MD).read()
    body = text[text.index(section) :]
    rows = [line for line in body.splitlines() if line.startswith("| ")]
    table = []
    for line in rows[1:]:  # the header goes; the |---| line never starts with "| "
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not cells[0].isdigit():
            break
        table.append(cells)
    return table


def number(cell: str) -> float:
    return float(re.sub(r"\s*\(.*\)", "", cell))  # "5e-4 (Table 5)" -> 5e-4


@pytest.mark.parametrize(
    "agent, section, names",
    [
        ("impala", "## IMPALA", ["entropy_cost", "learning_rate", "rmsprop_epsilon"]),
        ("dice", "## DiCE", ["learning_rate", "batch_size"]),
        ("gdi_h3", "GDI-H³ (Table 6", ["learning_rate", "batch_size"]),
        ("lbc", "LBC (Table 3", ["learning_rate", "batch_size"]),
        ("reactor", "## Reactor", ["learning_rate", "acting_steps_per_learner_step"]),
    ],
)
def test_the_trials_are_the_protocols_tables(agent, section, names):
    table = markdown_table(section)
    trials, _ = protocol.AGENTS[agent]
    assert [int(row[0]) for row in table] == list(range(len(trials)))
    for row, trial in zip(table, trials):
        assert list(trial) == names
        np.testing.assert_allclose([number(c) for c in row[1:]], list(trial.values()), rtol=1e-9)


def test_a_trial_runs_the_grid_tool_on_the_tuning_games_and_seeds():
    trials, _ = protocol.AGENTS["impala"]
    command = protocol.grid_command("impala", trials[7], 7, "runs/p", parallel=2)
    assert command[1:] == [
        "-m",
        "benchmarks.minatar",
        "--agents=impala",
        "--games=breakout,space_invaders",
        "--seeds=100,101",
        "--total_frames=1000000",
        "--logdir=runs/p/impala/trial7",
        "--parallel=2",
        "--",
        "--entropy_cost=0.000125",
        "--learning_rate=0.00475",
        "--rmsprop_epsilon=0.1",
    ]
    assert protocol.grid_command("dice", protocol.AGENTS["dice"][0][5], 5, "r", 1)[-2:] == [
        "--learning_rate=0.001",
        "--batch_size=16",
    ]


def test_the_edge_rule_adds_rows_beyond_a_choice_on_the_grid_s_edge(tmp_path):
    # Once all 8 are scored: a choice at the top learning rate gets the next step up, one at the
    # smallest batch half of it, one at both gets both rows (8, then 9), one inside gets none.
    def edges(agent, best, count=8):
        iqms = {i: 0.1 for i in range(count)}
        iqms[best] = 0.5
        return protocol.edge_trials(agent, iqms)

    assert edges("dice", 2) == []
    assert edges("dice", 3) == [{"learning_rate": 8e-3, "batch_size": 64}]
    assert edges("dice", 5) == [{"learning_rate": 1e-3, "batch_size": 8}]
    assert edges("lbc", 7) == [
        {"learning_rate": 8.48e-3, "batch_size": 16},
        {"learning_rate": 4.24e-3, "batch_size": 8},
    ]
    assert edges("reactor", 5, count=6) == [
        {"learning_rate": 6.25e-3, "acting_steps_per_learner_step": 20}
    ]
    assert edges("dice", 3, count=7) == [] and edges("impala", 3, count=24) == []
    # The agent's trials read the scores from its results file; the edge rows follow the table.
    path = str(tmp_path / "dice.csv")
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(
            [["trial", "iqm"]] + [[i, 0.5 if i == 7 else 0.1] for i in range(8)]
        )
    trials = protocol.agent_trials("dice", path)
    assert trials[:8] == protocol.AGENTS["dice"][0] and trials[8:] == [
        {"learning_rate": 8e-3, "batch_size": 16},
        {"learning_rate": 4e-3, "batch_size": 8},
    ]
    assert protocol.grid_command("dice", trials[9], 9, "r", 1)[-3:] == [
        "--",
        "--learning_rate=0.004",
        "--batch_size=8",
    ]


def test_interquartile_mean_of_four_is_the_mean_of_the_middle_two():
    assert protocol.interquartile_mean([0.9, -0.2, 0.4, 0.1]) == pytest.approx(0.25)
    assert protocol.interquartile_mean([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]) == 4.5


def test_the_choice_is_the_best_score_a_tie_within_a_hundredth_to_the_lower_trial():
    assert protocol.choose({0: 0.30, 1: 0.52, 2: 0.41}) == 1
    assert protocol.choose({3: 0.515, 1: 0.52, 2: 0.41}) == 1
    assert protocol.choose({0: 0.515, 1: 0.52, 2: 0.41}) == 0  # 0.005 below the best: a tie
    assert protocol.choose({0: 0.505, 1: 0.52}) == 1  # 0.015 below: not a tie


def test_runs_short_of_the_budget_score_as_random_play():
    references = minatar_references.read_references()
    random, reference = minatar_references.normaliser(references, "breakout")
    returns = {
        ("breakout", 100): reference,
        ("breakout", 101): random,
        ("space_invaders", 100): math.nan,
    }
    scores = protocol.run_scores(returns, references)
    assert scores["breakout", 100] == pytest.approx(1.0)
    assert scores["breakout", 101] == pytest.approx(0.0)
    assert scores["space_invaders", 100] == 0.0 and scores["space_invaders", 101] == 0.0


def write_run(logdir, agent, game, seed, frames, returns):
    """A run directory as a paper's main leaves it: episodes.csv (no checkpoint, so the grid tool
    counts the frames of its last row)."""
    directory = minatar_runs.run_dir(logdir, agent, game, seed)
    os.makedirs(directory)
    with open(os.path.join(directory, "episodes.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["frames", "episode_return", "episode_length", "wall_time"])
        for k, value in enumerate(returns):
            writer.writerow([(k + 1) * frames // len(returns), value, 10, 1.0])


def test_trials_with_runs_are_scored_written_and_chosen(tmp_path, capsys):
    logdir, path = str(tmp_path / "runs"), str(tmp_path / "results" / "dice.csv")
    references = minatar_references.read_references()
    _, budget = protocol.AGENTS["dice"]
    # Trial 2: every run at the budget, 200 games each (the last 100 count); trial 5: one run
    # short of the budget (a failed run scores 0), the others higher.
    trial2, trial5 = (protocol.trial_logdir(logdir, "dice", k) for k in (2, 5))
    for game in protocol.TUNING_GAMES:
        random, reference = minatar_references.normaliser(references, game)
        for seed in protocol.TUNING_SEEDS:
            level = random + (0.2 + 0.1 * (seed - 100)) * (reference - random)
            write_run(trial2, "dice", game, seed, budget, [0.0] * 100 + [level] * 100)
            short = budget // 2 if (game, seed) == ("breakout", 100) else budget
            high = random + (0.5 + 0.1 * (seed - 100)) * (reference - random)
            write_run(trial5, "dice", game, seed, short, [high] * 200)
    # Trial 7 was stopped before its first game ended: no row, no error.
    write_run(protocol.trial_logdir(logdir, "dice", 7), "dice", "breakout", 100, budget, [])
    protocol.report("dice", logdir, path, references)  # trial 5 may still be running: no row
    assert sorted(protocol.recorded_rows(path)) == [2]
    protocol.report("dice", logdir, path, references, failed=[5])  # its grid stopped on an error
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [row["trial"] for row in rows] == ["2", "5"]
    assert rows[0]["learning_rate"] == "0.002" and rows[1]["batch_size"] == "16"
    # Trial 2: scores 0.2, 0.3, 0.2, 0.3 -> IQM 0.25; trial 5: 0, 0.6, 0.5, 0.6 -> 0.55.
    assert float(rows[0]["iqm"]) == pytest.approx(0.25, abs=1e-4)
    assert float(rows[1]["score_breakout_100"]) == 0.0 and rows[1]["return_breakout_100"] == "nan"
    assert float(rows[1]["iqm"]) == pytest.approx(0.55, abs=1e-4)
    assert "best so far trial 5" in capsys.readouterr().out


@pytest.mark.parametrize("text, message", [("0-24", "trials 0-23, not [24]"), ("a", "e.g. 0-3,7")])
def test_bad_trial_lists_name_the_flag(text, message):
    with pytest.raises(ValueError, match=re.escape(message)) as error:
        protocol.parse_trials(text, 24)
    assert str(error.value).startswith(f"--trials={text}")
    assert protocol.parse_trials("0-2,7", 24) == [0, 1, 2, 7]


def test_rows_of_trials_run_elsewhere_are_kept_and_count_in_the_choice(tmp_path, capsys):
    logdir, path = str(tmp_path / "runs"), str(tmp_path / "dice.csv")
    references = minatar_references.read_references()
    _, budget = protocol.AGENTS["dice"]
    for game in protocol.TUNING_GAMES:
        random, reference = minatar_references.normaliser(references, game)
        for seed in protocol.TUNING_SEEDS:
            level = random + 0.3 * (reference - random)
            write_run(
                protocol.trial_logdir(logdir, "dice", 1), "dice", game, seed, budget, [level] * 100
            )
    committed = (
        "trial,learning_rate,batch_size,budget\n" + "0,0.0005,64,500000,x,x,x,x,x,x,x,x,0.9000\n"
    )
    with open(path, "w") as f:
        f.write(committed)
    protocol.report("dice", logdir, path, references)
    rows = protocol.recorded_rows(path)
    assert sorted(rows) == [0, 1]
    assert rows[0][-1] == "0.9000" and float(rows[1][-1]) == pytest.approx(0.3, abs=1e-4)
    assert "best so far trial 0" in capsys.readouterr().out


def test_runs_kept_from_another_machine_are_not_run_again_and_score_as_there(tmp_path, capsys):
    # Machine A finished two of trial 3's runs; its grid's curves.csv (the real report code) was
    # kept beside the results. Machine B has no run directory for them: the kept curves count as
    # finished, are passed to the grid, and score the trial together with B's own two runs.
    references = minatar_references.read_references()
    _, budget = protocol.AGENTS["dice"]
    path = str(tmp_path / "results" / "dice.csv")
    machine_a, machine_b = str(tmp_path / "a"), str(tmp_path / "b")
    levels = {}
    for game in protocol.TUNING_GAMES:
        random, reference = minatar_references.normaliser(references, game)
        for seed in protocol.TUNING_SEEDS:
            levels[game, seed] = random + (0.2 + 0.1 * (seed - 100)) * (reference - random)
            machine = machine_a if game == "breakout" else machine_b
            trial = protocol.trial_logdir(machine, "dice", 3)
            write_run(trial, "dice", game, seed, budget, [0.0] * 100 + [levels[game, seed]] * 100)
    grid = ["--agents=dice", "--games=breakout", "--seeds=100,101", f"--total_frames={budget}"]
    minatar.main(
        [*grid, f"--logdir={protocol.trial_logdir(machine_a, 'dice', 3)}", "--report_only"]
    )
    protocol.keep_curves(machine_a, "dice", 3, path)
    kept = protocol.kept_curves(path, 3)
    assert kept == str(tmp_path / "results" / "dice" / "trial3" / "curves.csv")
    assert os.path.isfile(os.path.join(os.path.dirname(kept), "evaluations.csv"))
    capsys.readouterr()

    on_a = protocol.trial_returns(machine_a, "dice", 3)
    on_b = protocol.trial_returns(machine_b, "dice", 3, kept)
    assert on_b == pytest.approx({**on_a, **protocol.trial_returns(machine_b, "dice", 3)})
    assert on_b == pytest.approx(levels)
    protocol.report("dice", machine_b, path, references)
    (row,) = csv.DictReader(open(path))
    assert row["trial"] == "3" and float(row["iqm"]) == pytest.approx(0.25, abs=1e-4)
    command = protocol.grid_command("dice", protocol.AGENTS["dice"][0][3], 3, machine_b, 1, kept)
    assert command[command.index("--") - 1] == f"--curves_from={kept}"
    assert "--curves_from" not in " ".join(protocol.grid_command("dice", {}, 3, machine_b, 1))


def test_a_running_trial_s_curves_are_kept_as_they_change(tmp_path, monkeypatch):
    # The "grid" writes curves.csv, waits until the protocol has copied it (which it does while
    # the grid runs), rewrites it and fails: the exit status comes back, the last copy kept.
    monkeypatch.setattr(protocol, "POLL_S", 0.05)
    logdir, path = str(tmp_path / "runs"), str(tmp_path / "results" / "lbc.csv")
    written = os.path.join(protocol.trial_logdir(logdir, "lbc", 4), "curves.csv")
    kept = protocol.kept_curves(path, 4)
    grid = f"""
import os, sys, time
os.makedirs(os.path.dirname({written!r}))
open({written!r}, "w").write("first")
deadline = time.monotonic() + 60
while not (os.path.exists({kept!r}) and open({kept!r}).read() == "first"):
    if time.monotonic() > deadline:
        sys.exit(4)
    time.sleep(0.01)
open({written!r}, "w").write("second")
sys.exit(3)
"""
    status = protocol.run_keeping_curves([sys.executable, "-c", grid], logdir, "lbc", 4, path)
    assert status == 3
    assert open(kept).read() == "second"
    assert not os.path.exists(os.path.join(os.path.dirname(kept), "evaluations.csv"))


def test_a_grid_that_exits_0_without_starting_a_run_stops_the_protocol(tmp_path):
    # The grid tool once did nothing and exited 0 (its `__main__` block lost); the protocol must
    # stop on that, not score nothing and go on to the next trial.
    code = f"""
from absl import app
from benchmarks import protocol
protocol.run_keeping_curves = lambda command, *where: 0
protocol.define_flags()
app.run(protocol.main, argv=["protocol", "--agent=dice", "--trials=0-1",
        "--logdir={tmp_path / "runs"}", "--results_dir={tmp_path / "results"}"])
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 1
    assert "trial 0: the grid exited 0 but started no run" in result.stderr
    assert "trial 1" not in result.stdout + result.stderr

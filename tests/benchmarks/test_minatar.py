"""benchmarks.minatar: commands, skipping and resuming runs, failures, reports and references.

The grid's runs are tests/benchmarks/fake_minatar_trainer.py (found through PYTHONPATH), which
keeps a paper main's command line and resumes where its episodes.csv stops; the real mains are
exercised by the paper packages' tests.
"""

import csv
import dataclasses
import io
import math
import os
import pathlib
import shutil
import struct
import sys

import matplotlib.colors
import numpy as np
import pytest

from benchmarks import minatar

from benchmarks import minatar_reports

from benchmarks import minatar_statistics

from benchmarks import minatar_references

from benchmarks import minatar_runs
from common.experiments import ablation_runner, cli, compare
from common.experiments import ablation_reports
from common.experiments import builder as builder_lib

HERE = pathlib.Path(__file__).parent
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FAKE = "fake_minatar_trainer"
BUDGET = 200_000  # the fake's runs: 200 games of 1000 frames


@pytest.fixture
def fake_agents(monkeypatch):
    """Agents fast, slow and broken, run by the fake trainer."""
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    )
    monkeypatch.setitem(minatar_runs.AGENTS, "fast", minatar_runs.AgentSpec("fake", None, FAKE))
    monkeypatch.setitem(minatar_runs.AGENTS, "slow", minatar_runs.AgentSpec("fake", None, FAKE))
    monkeypatch.setitem(
        minatar_runs.AGENTS, "broken", minatar_runs.AgentSpec("fake", "broken", FAKE)
    )


def _write_csv(path: pathlib.Path, header, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def _read_csv(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _png_size(path) -> tuple[int, int]:
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR", "not a PNG file"
    return struct.unpack(">II", data[16:24])


def _brute_last_games(frames, returns, at, games=100):
    # Ground truth: the last `games` games (in frame order) that ended at or before `at`.
    ended = [r for f, r in sorted(zip(frames, returns), key=lambda x: x[0]) if f <= at]
    return np.mean(ended[-games:]) if ended else np.nan


# ---------------------------------------------------------------------------------------------
# Commands.


@pytest.mark.parametrize(
    "agent, module, ablation",
    [
        ("impala", "impala.main", []),
        ("reactor", "reactor.main", []),
        ("dice", "dice.main", []),
        ("gdi_h3", "gdi.main", ["--ablation=gdi_h3"]),
        ("gdi_i3", "gdi.main", ["--ablation=gdi_i3"]),
        ("lbc", "lbc.main", []),
    ],
)
def test_each_agent_runs_its_papers_main(agent, module, ablation):
    shared = minatar_runs.shared_arguments(
        5_000_000, ["--eval_interval_s=0", "dice:--warmup_steps=2"]
    )
    command = minatar_runs.GridRun.of(agent, "space_invaders").command(2, "runs/m", shared)
    targeted = ["--warmup_steps=2"] if agent == "dice" else []
    assert command == [
        sys.executable,
        "-m",
        module,
        *ablation,
        "--seed=2",
        f"--logdir={os.path.join('runs/m', agent, 'space_invaders', 'seed2')}",
        "--env=MinAtar/SpaceInvaders-v0",
        "--total_frames=5000000",
        "--eval_interval_s=0",
        *targeted,
    ]


def test_env_ids_have_gym_capitalisation_and_all_actions():
    assert [minatar_runs.env_id(g) for g in minatar_runs.GAMES] == [
        "MinAtar/Asterix-v0",
        "MinAtar/Breakout-v0",
        "MinAtar/Freeway-v0",
        "MinAtar/Seaquest-v0",
        "MinAtar/SpaceInvaders-v0",
    ]


def test_templates_quote_the_grid():
    same = {"impala": 5_000_000, "lbc": 5_000_000}
    assert minatar_runs.run_template("runs/m", same, ["--x=1"]) == (
        "python -m PAPER.main [--ablation=ABLATION] --seed=SEED "
        "--logdir=runs/m/AGENT/GAME/seedSEED --env=MinAtar/<Game>-v0 --total_frames=5000000 --x=1"
    )
    # An argument for one agent or paper shows as that agent's runs get it, and whose they are.
    assert minatar_runs.run_template("runs/m", same, ["impala:--publish_lag=64", "--x=1"]).endswith(
        " --total_frames=5000000 --x=1 --publish_lag=64 (impala's runs)"
    )
    assert minatar_runs.grid_command(
        ["impala", "lbc"], ["breakout"], [0, 1, 2], 5_000_000, "r", 2
    ) == (
        "python -m benchmarks.minatar --agents=impala,lbc --games=breakout --seeds=3 "
        "--total_frames=5000000 --logdir=r --parallel=2"
    )
    assert minatar_runs.grid_command(["dice"], ["freeway"], [0, 5], 10, "r", 1, ["--a=1"]).endswith(
        "--seeds=0,5 --total_frames=10 --logdir=r --parallel=1 -- --a=1"
    )
    # Budgets of their own: the template's is a placeholder, the grid's are --agent_frames.
    own = {"impala": 5_000_000, "reactor": 200_000, "lbc": 1_000_000}
    assert minatar_runs.run_template("runs/m", own, []).endswith(" --total_frames=FRAMES")
    assert minatar_runs.grid_command(
        list(own), ["breakout"], [0], 5_000_000, "r", 2, budgets=own
    ) == (
        "python -m benchmarks.minatar --agents=impala,reactor,lbc --games=breakout --seeds=1 "
        "--total_frames=5000000 --agent_frames=reactor=200000,lbc=1000000 --logdir=r --parallel=2"
    )
    assert "--agent_frames" not in minatar_runs.grid_command(
        ["impala", "lbc"], ["breakout"], [0], 5_000_000, "r", 2, budgets=same
    )


def test_agent_frames_override_the_budget_of_the_agents_named():
    args, _ = ablation_runner.parse_tool_command_line(
        [
            "--agents=impala,reactor,dice",
            "--total_frames=5e6",
            "--agent_frames=reactor=2e5,dice=1e6",
        ],
        minatar.CommandLine,
        minatar_runs.TOOL,
        "",
    )
    assert args.budgets() == {"impala": 5_000_000, "reactor": 200_000, "dice": 1_000_000}
    assert minatar_runs.frame_budgets(["impala", "lbc"], 300) == {"impala": 300, "lbc": 300}
    assert minatar_runs.frame_budgets(["impala", "lbc"], 300, ["lbc=7"]) == {
        "impala": 300,
        "lbc": 7,
    }


def _checkpoint(run: pathlib.Path, frames: int, step: int = 0) -> None:
    # common.runtime.learning.Learner's checkpoint: a frames counter under <logdir>/checkpoints.
    import tensorflow as tf

    step_variable = tf.Variable(step, dtype=tf.int64)
    checkpoint = tf.train.Checkpoint(step=step_variable, frames=tf.Variable(frames, dtype=tf.int64))
    manager = tf.train.CheckpointManager(
        checkpoint, str(run / "checkpoints"), 3, step_counter=step_variable
    )
    manager.save(checkpoint_number=step_variable)


def test_each_agents_runs_get_its_budget_and_finish_at_it(tmp_path, monkeypatch, capsys):
    commands = {}

    def run_all(command, variants, seeds, logdir, parallel, skip, **_):
        for seed in seeds:
            for variant in variants:
                if not skip(variant, seed):
                    commands[variant, seed] = command(variant, seed)

    monkeypatch.setattr(ablation_runner, "run_all", run_all)
    columns = ablation_reports.EPISODES_COLUMNS
    rows = [(t, 1.0, 1000, 1.0) for t in range(1000, 200_001, 1000)]
    for agent in ("impala", "reactor"):  # 200k frames trained
        _write_csv(tmp_path / agent / "breakout/seed0/episodes.csv", columns, rows)
    # The checkpoint's frames count, not episodes.csv's (the actors run ahead of the learner).
    _write_csv(tmp_path / "reactor/breakout/seed1/episodes.csv", columns, rows)
    _checkpoint(tmp_path / "reactor/breakout/seed1", 150_000)
    budgets = {"impala": 5_000_000, "reactor": 200_000}
    before = minatar.run_grid(
        ["impala", "reactor"], ["breakout"], [0, 1], budgets, str(tmp_path), check_flags=False
    )
    assert before == {
        ("impala/breakout", 0): 200_000,
        ("reactor/breakout", 0): 200_000,
        ("impala/breakout", 1): 0,
        ("reactor/breakout", 1): 150_000,
    }
    assert "4 runs: 1 finished (skipped), 2 to resume, 1 to start" in capsys.readouterr().out
    # reactor seed 0 reached its 200k; impala seed 0, at the same frames, resumes towards its 5M.
    assert sorted(commands) == [
        ("impala/breakout", 0),
        ("impala/breakout", 1),
        ("reactor/breakout", 1),
    ]
    for (variant, _), command in commands.items():
        budget = budgets[minatar_runs.cell_agent(variant)]
        assert [a for a in command if a.startswith("--total_frames=")] == [
            f"--total_frames={budget}"
        ]


@pytest.mark.slow
@pytest.mark.parametrize("agent", list(minatar_runs.AGENTS))
def test_each_papers_main_accepts_the_grids_flags(agent, tmp_path):
    # What the grid checks before its first run: the paper's main validates the flags and exits.
    run = minatar_runs.GridRun.of(agent, "space_invaders")
    compare.check_flags([run], 0, str(tmp_path), minatar_runs.shared_arguments(5_000_000, []))
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# Running: skip, resume, fail (the fake trainer's processes).


def _fake_run_rows(agent: str, seed: int, upto: int):
    # What the fake trainer writes up to `upto` frames.
    slope = {"fast": 20.0, "slow": 5.0}[agent]
    return [(t, slope * t / BUDGET + seed, 1000, t / 1e5) for t in range(1000, upto + 1, 1000)]


def _grid(logdir, *flags, parallel=2):
    return [
        "--agents=fast,slow",
        "--games=breakout,freeway",
        f"--total_frames={BUDGET}",
        f"--logdir={logdir}",
        f"--parallel={parallel}",
        *flags,
    ]


def _starts(logdir: pathlib.Path) -> dict[str, str]:
    return {
        str(path.parent.relative_to(logdir)): path.read_text()
        for path in sorted(logdir.glob("*/*/seed*/starts.txt"))
    }


@pytest.mark.slow
def test_grid_skips_finished_runs_and_resumes_unfinished_ones(tmp_path, fake_agents, capsys):
    columns = ablation_reports.EPISODES_COLUMNS
    _write_csv(
        tmp_path / "fast/breakout/seed0/episodes.csv", columns, _fake_run_rows("fast", 0, BUDGET)
    )
    _write_csv(
        tmp_path / "slow/freeway/seed1/episodes.csv", columns, _fake_run_rows("slow", 1, 50_000)
    )
    minatar.main(_grid(tmp_path, "--seeds=2"))
    out = capsys.readouterr().out
    assert "8 runs: 1 finished (skipped), 1 to resume, 6 to start; 2 at a time" in out
    starts = _starts(tmp_path)
    assert "fast/breakout/seed0" not in starts  # finished: skipped
    assert starts.pop("slow/freeway/seed1") == "50000\n"  # resumed where it stopped
    assert set(starts.values()) == {"0\n"} and len(starts) == 6
    # Seed-major, then game, then agent.
    started = [line.split("| started ")[1] for line in out.splitlines() if "| started " in line]
    assert started == [
        "slow/breakout seed 0",
        "fast/freeway seed 0",
        "slow/freeway seed 0",
        "fast/breakout seed 1",
        "slow/breakout seed 1",
        "fast/freeway seed 1",
        "slow/freeway seed 1",
    ]
    progress = [
        line for line in out.splitlines() if line.startswith("[minatar] ") and "ETA" in line
    ]
    assert progress[0].startswith("[minatar] 1/8 done, 1 running, 6 left | ETA ")
    assert progress[-1].startswith("[minatar] 8/8 done, 0 running, 0 left | ETA 0m00s")
    assert len(progress) == 2 * 7
    resumed = _read_csv(tmp_path / "slow/freeway/seed1/episodes.csv")
    assert [int(r["frames"]) for r in resumed] == list(range(1000, BUDGET + 1, 1000))
    # The report: the fake's last 100 games at 200k frames are t = 101k..200k: mean t = 150.5k.
    summary = (tmp_path / "summary.md").read_text()
    final = 20.0 * 150_500 / BUDGET + np.array([0.0, 1.0])
    mean, se = final.mean(), final.std(ddof=1) / math.sqrt(2)
    assert f"| fast‡ | {mean:.2f} ± {se:.2f} (2) | {mean:.2f} ± {se:.2f} (2) |" in summary
    assert "(fast 200,000, slow 200,000 frames)" in summary  # short of the published 5M
    assert "--seeds=2 --total_frames=200000" in summary
    for game in ("breakout", "freeway"):
        _png_size(tmp_path / f"{game}.png")

    # Again: everything finished, nothing starts. With a third seed: only its runs start.
    minatar.main(_grid(tmp_path, "--seeds=2"))
    assert "8 runs: 8 finished (skipped), 0 to resume, 0 to start" in capsys.readouterr().out
    assert _starts(tmp_path) == {**starts, "slow/freeway/seed1": "50000\n"}
    minatar.main(_grid(tmp_path, "--seeds=3"))
    assert "12 runs: 8 finished (skipped), 0 to resume, 4 to start" in capsys.readouterr().out
    new = {k: v for k, v in _starts(tmp_path).items() if k.endswith("seed2")}
    assert new == {
        f"{a}/{g}/seed2": "0\n" for a in ("fast", "slow") for g in ("breakout", "freeway")
    }


@pytest.mark.slow
def test_a_grid_with_agent_frames_runs_and_reports_each_agent_at_its_budget(
    tmp_path, fake_agents, capsys
):
    flags = _grid(tmp_path, "--seeds=1", "--agent_frames=fast=1e5")
    minatar.main(flags)
    assert "4 runs: 0 finished (skipped), 0 to resume, 4 to start" in capsys.readouterr().out
    for game in ("breakout", "freeway"):
        for agent, budget in (("fast", 100_000), ("slow", BUDGET)):
            rows = _read_csv(tmp_path / agent / game / "seed0/episodes.csv")
            assert int(rows[-1]["frames"]) == budget  # the fake trains to its --total_frames
    # The fake's return is slope * frames / budget: the last 100 games of fast's 100k frames are
    # 1k..100k (mean 50.5k), of slow's 200k 101k..200k (mean 150.5k).
    summary = (tmp_path / "summary.md").read_text()
    assert f"| fast‡ | {20.0 * 50_500 / 100_000:.2f} (1) | " in summary
    assert f"| slow‡ | {5.0 * 150_500 / BUDGET:.2f} (1) | " in summary
    assert "budget per run (frames): fast 100,000, slow 200,000." in summary
    assert "--total_frames=200000 --agent_frames=fast=100000 --logdir=" in summary
    assert "Short of the budget" not in summary
    # Again: every run is at its own budget, so none starts.
    minatar.main(flags)
    assert "4 runs: 4 finished (skipped), 0 to resume, 0 to start" in capsys.readouterr().out
    assert set(_starts(tmp_path).values()) == {"0\n"}


@pytest.mark.slow
def test_a_failed_run_is_named_with_its_stderr(tmp_path, fake_agents):
    budgets = {"fast": BUDGET, "broken": BUDGET}
    with pytest.raises(ablation_runner.AblationRunError) as raised:
        minatar.run_grid(["fast", "broken"], ["seaquest"], [0], budgets, str(tmp_path), parallel=2)
    message = str(raised.value)
    assert message.startswith("run failed: agent 'broken', game 'seaquest', seed 0, exit status 3")
    assert "RuntimeError: fake failure in the learner" in message
    assert str(tmp_path / "broken" / "seaquest" / "seed0" / "stderr.log") in message


def test_the_runs_finished_before_a_failure_are_in_the_reports_already(tmp_path, fake_agents):
    # One at a time, seed-major: fast's seed 0 finishes, then broken's fails. The grid stops
    # with an error, and curves.csv already holds the finished run to its budget (what a grid
    # spanning machines commits as runs finish); the summary and figures wait for the end.
    with pytest.raises(SystemExit, match="agent 'broken', game 'breakout', seed 0"):
        minatar.main(
            [
                "--agents=fast,broken",
                "--games=breakout",
                "--seeds=2",
                f"--total_frames={BUDGET}",
                f"--logdir={tmp_path}",
                "--parallel=1",
            ]
        )
    rows = _read_csv(tmp_path / "curves.csv")
    assert {(r["agent"], r["seed"]) for r in rows} == {("fast", "0")}
    finals = [float(r["return_last_100"]) for r in rows if int(r["frames"]) == BUDGET]
    assert finals == pytest.approx([20.0 * 150_500 / BUDGET])
    assert (tmp_path / "evaluations.csv").exists() and not (tmp_path / "summary.md").exists()


@pytest.mark.slow
def test_command_line_failure_exits_with_one_error_and_no_report(tmp_path, fake_agents):
    with pytest.raises(SystemExit) as raised:
        minatar.main(["--agents=broken", "--games=breakout", "--seeds=1", f"--logdir={tmp_path}"])
    assert str(raised.value).startswith(
        "error: run failed: agent 'broken', game 'breakout', seed 0"
    )
    assert not (tmp_path / "summary.md").exists()


@pytest.mark.slow
def test_a_run_that_exits_0_short_of_its_budget_is_an_error(tmp_path, fake_agents):
    budgets = {"fast": BUDGET}
    with pytest.raises(minatar_runs.GridRunError, match="exited 0 at 50,000 of 200,000 frames"):
        minatar.run_grid(
            ["fast"], ["breakout"], [0], budgets, str(tmp_path), ["--stop_at=50000"], 1
        )
    # The same command without the stop resumes it.
    minatar.run_grid(["fast"], ["breakout"], [0], budgets, str(tmp_path), parallel=1)
    assert (tmp_path / "fast/breakout/seed0/starts.txt").read_text() == "0\n50000\n"
    assert "fake training" in (tmp_path / "fast/breakout/seed0/stdout.log").read_text()
    assert (tmp_path / "fast/breakout/seed0/stdout.log").read_text().count("fake training") == 2


@pytest.mark.slow
def test_a_flag_a_paper_refuses_stops_the_grid_before_any_run(tmp_path, fake_agents, capsys):
    with pytest.raises(SystemExit) as raised:
        minatar.main(_grid(tmp_path, "--seeds=1", "--", "--bogus=1"))
    assert raised.value.code == 2
    assert "error: --agents: fast refuses its flags: error: unknown flag --bogus=1" in (
        capsys.readouterr().err
    )
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# Reading runs.


def test_last_games_curve_matches_brute_force():
    rng = np.random.default_rng(3)
    frames = np.cumsum(rng.integers(1, 50, size=400)).astype(float)
    frames[[10, 11]] = frames[12]  # games that ended together
    returns = rng.normal(size=frames.size)
    episodes = ablation_reports.Episodes(frames, returns, np.zeros_like(frames))
    at = np.array([0.0, frames[0], frames[50] + 0.5, frames[150], frames[-1], frames[-1] * 2])
    expected = [_brute_last_games(frames, returns, a) for a in at]
    np.testing.assert_allclose(minatar_runs.last_games_curve(episodes, at), expected)


def test_trained_frames_prefers_the_checkpoint(tmp_path):
    run = tmp_path / "run"
    assert minatar_runs.trained_frames(str(run)) == 0
    path = run / "episodes.csv"
    _write_csv(
        path, ablation_reports.EPISODES_COLUMNS, [(3000, 1.0, 10, 0.5), (9000, 2.0, 10, 1.0)]
    )
    assert minatar_runs.trained_frames(str(run)) == 9000
    with open(path, "a") as f:
        f.write("12000,3.0,1")  # a row being written: not counted
    assert minatar_runs.trained_frames(str(run)) == 9000
    _checkpoint(run, 7000)
    assert minatar_runs.trained_frames(str(run)) == 7000
    _checkpoint(run, 5_000_000, step=1)
    assert minatar_runs.trained_frames(str(run)) == 5_000_000  # the latest checkpoint


# ---------------------------------------------------------------------------------------------
# Reports on synthetic runs.

GAMES = ("breakout", "freeway")
REFERENCES = {  # game: (dqn, ac, random)
    "breakout": (10.0, 17.5, 0.5),
    "freeway": (50.0, 47.5, 0.1),
}


def _references(path: pathlib.Path) -> str:
    rows = []
    for game, (dqn, ac, random) in REFERENCES.items():
        rows += [
            (game, "dqn", dqn, 5_000_000, 30, "paper", ""),
            (game, "ac_lambda_0.8", ac, 5_000_000, 30, "paper", ""),
            (game, "random", random, 1_000_000, 1, "measured", ""),
        ]
    _write_csv(path, minatar_runs.REFERENCE_COLUMNS, rows)
    return str(path)


def _synthetic_run(root: pathlib.Path, agent: str, game: str, seed: int, rng, frames_to: int):
    """Irregular games up to `frames_to` frames; returns (frames, returns)."""
    n = int(rng.integers(150, 260))
    frames = np.cumsum(rng.integers(1, 2 * frames_to // n, size=n))
    frames = np.round(frames * frames_to / frames[-1]).astype(int)
    level = {"fast": 15.0, "slow": 5.0}[agent] + (20.0 if game == "freeway" else 0.0)
    returns = np.round(rng.normal(level + 5.0 * frames / frames_to, 3.0), 3)
    _write_csv(
        root / agent / game / f"seed{seed}" / "episodes.csv",
        ablation_reports.EPISODES_COLUMNS,
        [(int(f), float(r), 7, 1.0) for f, r in zip(frames, returns)],
    )
    return frames, returns


def test_reports_match_a_hand_computation(tmp_path, fake_agents):
    rng = np.random.default_rng(0)
    logdir = tmp_path / "grid"
    runs = {}
    for seed in (0, 1, 2):
        for game in GAMES:
            for agent in ("fast", "slow"):
                # slow/freeway/seed2 is short of the budget; fast/breakout/seed1 went past it (the
                # actors' frames overshoot the learner's budget: those games do not count).
                frames_to = {("slow", "freeway", 2): 60_000, ("fast", "breakout", 1): 110_000}
                upto = frames_to.get((agent, game, seed), 100_000)
                runs[agent, game, seed] = _synthetic_run(logdir, agent, game, seed, rng, upto)
    report = minatar_reports.write_reports(
        str(logdir),
        ["fast", "slow"],
        list(GAMES),
        [0, 1, 2],
        {"fast": 100_000, "slow": 100_000},
        command="python -m benchmarks.minatar ...",
        template="python -m PAPER.main ...",
        references=_references(tmp_path / "references.csv"),
    )

    # curves.csv: the mean of the last 100 games at 1000, 2000, ... frames, up to the run's.
    rows = _read_csv(report.curves_csv)
    assert list(rows[0]) == list(minatar_runs.CURVES_COLUMNS)
    for (agent, game, seed), (frames, returns) in runs.items():
        mine = [r for r in rows if (r["agent"], r["game"], r["seed"]) == (agent, game, str(seed))]
        points = [g for g in range(1000, 100_001, 1000) if g <= frames[-1] and g >= frames[0]]
        assert [int(r["frames"]) for r in mine] == points
        expected = [_brute_last_games(frames, returns, g) for g in points]
        np.testing.assert_allclose([float(r["return_last_100"]) for r in mine], expected)

    finals = {key: _brute_last_games(f, r, 100_000) for key, (f, r) in runs.items()}
    summary = pathlib.Path(report.summary_md).read_text()
    normalised = {}
    for game in GAMES:
        dqn, ac, random = REFERENCES[game]
        for agent in ("fast", "slow"):
            values = np.array([finals[agent, game, s] for s in (0, 1, 2)])
            scores = (values - random) / (max(dqn, ac) - random)
            normalised[agent, game] = scores
            np.testing.assert_allclose(report.finals(agent, game), values)
            short = "†" if (agent, game) == ("slow", "freeway") else ""
            for shown in (values, scores):
                mean, se = shown.mean(), shown.std(ddof=1) / math.sqrt(3)
                assert f"{mean:.2f} ± {se:.2f} (3){short}" in summary
    assert "† Short of the budget (frames trained): slow/freeway/seed2 (60,000)." in summary
    assert "| random policy | 0.50 | 0.10 |" in summary
    assert "budget 100,000 frames per run." in summary
    assert "that ended at or before 100,000 frames" in summary

    # IQM: the mean of the middle half of the normalised scores of the seeds that reached the
    # budget on every game (slow: seeds 0 and 1).
    for agent, seeds in (("fast", [0, 1, 2]), ("slow", [0, 1])):
        scores = np.sort(np.concatenate([normalised[agent, g][seeds] for g in GAMES]))
        cut = int(0.25 * scores.size)
        iqm = scores[cut : scores.size - cut].mean()
        aggregate = report.aggregates[agent]
        assert aggregate.seeds == tuple(seeds)
        assert aggregate.iqm == pytest.approx(iqm)
        assert aggregate.low <= aggregate.iqm <= aggregate.high
        assert aggregate.low < aggregate.high
        interval = f"{aggregate.iqm:.2f} [{aggregate.low:.2f}, {aggregate.high:.2f}]"
        row = f"| {interval} | {', '.join(map(str, seeds))} |"
        assert row in summary
    # Seeded: the same report twice gives the same interval.
    again = minatar_statistics._aggregate(
        report.results, "fast", GAMES, [0, 1, 2], report.references
    )
    assert (again.low, again.high) == (
        report.aggregates["fast"].low,
        report.aggregates["fast"].high,
    )
    for game in GAMES:
        assert _png_size(report.figure(game))[0] > 0


def test_an_iqm_of_one_seed_is_reported_without_an_interval(tmp_path, fake_agents):
    # Seed 0 reached the budget on both games, seed 1 on one: the IQM is seed 0's, and a bootstrap
    # over one run per game has nothing to resample, so no interval is printed.
    rng = np.random.default_rng(3)
    runs = {g: _synthetic_run(tmp_path, "fast", g, 0, rng, 100_000) for g in GAMES}
    _synthetic_run(tmp_path, "fast", "breakout", 1, rng, 100_000)
    report = minatar_reports.write_reports(
        str(tmp_path),
        ["fast"],
        list(GAMES),
        [0, 1],
        {"fast": 100_000},
        references=_references(tmp_path / "references.csv"),
    )
    scores = []
    for game, (frames, returns) in runs.items():
        dqn, ac, random = REFERENCES[game]
        final = _brute_last_games(frames, returns, 100_000)
        scores.append((final - random) / (max(dqn, ac) - random))
    iqm = np.mean(scores)  # two scores: the middle half is both
    assert report.aggregates["fast"].seeds == (0,)
    summary = pathlib.Path(report.summary_md).read_text()
    assert f"| {iqm:.2f} (one seed: no interval) | 0 |" in summary


def test_the_final_evaluation_table_reads_each_runs_last_evaluation_at_its_budget(
    tmp_path, fake_agents
):
    rng = np.random.default_rng(5)
    for agent in ("fast", "slow"):
        for game in GAMES:
            for seed in (0, 1):
                _synthetic_run(tmp_path, agent, game, seed, rng, 100_000)

    def evaluations(agent, game, seed, rows):
        path = tmp_path / agent / game / f"seed{seed}" / "eval.csv"
        _write_csv(path, ablation_reports.EVAL_COLUMNS, [(f, r, "nan", 1.0) for f, r in rows])

    # fast/breakout: an earlier round, then the final one (mean 3) on seed 0; seed 1's (mean 6).
    evaluations("fast", "breakout", 0, [(50_000, 9.0)] * 3 + [(100_500, r) for r in (1, 2, 3, 6)])
    evaluations("fast", "breakout", 1, [(100_200, 5.0), (100_200, 7.0)])
    # fast/freeway: seed 0's last round came before the budget, seed 1's file has no row yet.
    evaluations("fast", "freeway", 0, [(60_000, 4.0)])
    evaluations("fast", "freeway", 1, [])

    def grid_report(logdir, curves_from=()):
        return minatar_reports.write_reports(
            str(logdir),
            ["fast", "slow"],
            list(GAMES),
            [0, 1],
            {"fast": 100_000, "slow": 100_000},
            references=_references(tmp_path / "references.csv"),
            curves_from=curves_from,
        )

    report = grid_report(tmp_path)
    np.testing.assert_allclose(report.evaluations("fast", "breakout"), [3.0, 6.0])
    assert report.evaluations("fast", "freeway").size == 0
    summary = pathlib.Path(report.summary_md).read_text()
    assert "Final evaluation: the mean return of the evaluation a run plays" in summary
    se = np.std([3.0, 6.0], ddof=1) / math.sqrt(2)
    assert f"| fast‡ | 4.50 ± {se:.2f} (2) | — |" in summary  # ‡: short of 5M frames
    assert "| slow‡ | — | — |" in summary
    # A grid elsewhere that takes these runs from the curves brings their evaluations with them,
    # from the evaluations.csv beside curves.csv.
    assert minatar_runs.read_evaluations([report.curves_csv]) == {
        ("fast", "breakout", 0): 3.0,
        ("fast", "breakout", 1): 6.0,
    }
    (tmp_path / "elsewhere").mkdir()
    again = grid_report(tmp_path / "elsewhere", [report.curves_csv])
    assert all(r.elsewhere for r in again.results)
    np.testing.assert_allclose(again.evaluations("fast", "breakout"), [3.0, 6.0])
    assert f"| fast‡ | 4.50 ± {se:.2f} (2) | — |" in pathlib.Path(again.summary_md).read_text()

    # Without an evaluation anywhere the report has no such table.
    for path in tmp_path.glob("fast/*/seed*/eval.csv"):
        path.unlink()
    report = grid_report(tmp_path)
    assert "Final evaluation" not in pathlib.Path(report.summary_md).read_text()


def _key(result) -> tuple:
    return result.agent, result.game, result.seed


@pytest.mark.parametrize("budget", [100_000, minatar_runs.PUBLISHED_FRAMES])
def test_a_figure_fits_its_axis_to_the_curves_when_none_reaches_the_references_frames(
    tmp_path, fake_agents, budget
):
    # Games scoring 1 to 3 against references of 10 and 17.5: at 0.1M frames the axis fits the
    # curves and random play (0.5), and the references are named above it; a curve at the
    # references' 5M frames keeps them on the axis.
    frames = np.linspace(budget / 200, budget, 200).astype(int)
    returns = 1.0 + 2.0 * frames / budget
    _write_csv(
        tmp_path / "fast" / "breakout" / "seed0" / "episodes.csv",
        ablation_reports.EPISODES_COLUMNS,
        [(int(f), float(r), 7, 1.0) for f, r in zip(frames, returns)],
    )
    report = minatar_reports.write_reports(
        str(tmp_path),
        ["fast"],
        ["breakout"],
        [0],
        {"fast": budget},
        references=_references(tmp_path / "references.csv"),
    )
    (axes,) = minatar_reports._plot_game(report, "breakout").axes
    bottom, top = axes.get_ylim()
    labels = axes.get_legend_handles_labels()[1]
    if budget < minatar_runs.PUBLISHED_FRAMES:
        # The curve's last-100 means run from about 1 to 3; with random play, 0.5 to 3.
        assert 0.3 < bottom < 0.5 and 2.5 < top < 3.5
        assert "DQN (published, 5M frames): 10.0, above the axis" in labels
        assert "AC(λ=0.8) (published, 5M frames): 17.5, above the axis" in labels
        assert "random policy (measured): 0.5" in labels
    else:
        assert bottom < 0.5 and top > 17.5
        assert not [label for label in labels if "above the axis" in label]
    assert _png_size(report.figure("breakout"))[0] > 0


@pytest.mark.parametrize("count, beside", [(3, False), (18, True)])
def test_each_agent_has_its_own_colour_and_a_long_legend_sits_beside_the_axes(
    tmp_path, monkeypatch, count, beside
):
    # IMPALA's study has 18 agents: matplotlib's default colours repeat after ten, and a legend of
    # 18 inside the axes covered the curves.
    agents = [f"agent{i:02d}" for i in range(count)]
    frames = np.linspace(500, 100_000, 200).astype(int)
    for i, agent in enumerate(agents):
        monkeypatch.setitem(minatar_runs.AGENTS, agent, minatar_runs.AgentSpec("fake", None, FAKE))
        _write_csv(
            tmp_path / agent / "breakout" / "seed0" / "episodes.csv",
            ablation_reports.EPISODES_COLUMNS,
            [(int(f), 1.0 + i / count, 7, 1.0) for f in frames],
        )
    report = minatar_reports.write_reports(
        str(tmp_path),
        agents,
        ["breakout"],
        [0],
        dict.fromkeys(agents, 100_000),
        references=_references(tmp_path / "references.csv"),
    )
    figure = minatar_reports._plot_game(report, "breakout")
    (axes,) = figure.axes
    labels = axes.get_legend_handles_labels()[1]
    curves = [line for line, label in zip(axes.get_lines(), labels) if label.startswith("agent")]
    assert len(curves) == count
    assert len({tuple(matplotlib.colors.to_rgba(line.get_color())) for line in curves}) == count
    figure.draw_without_rendering()
    legend, plot = axes.get_legend().get_window_extent(), axes.get_window_extent()
    if beside:
        assert legend.x0 > plot.x1  # beside the axes, over no curve
    else:
        assert plot.x0 < legend.x0 < legend.x1 < plot.x1


def test_runs_finished_elsewhere_come_from_an_earlier_reports_curves(tmp_path, fake_agents):
    rng = np.random.default_rng(3)
    budgets = {"fast": 100_000, "slow": 100_000}
    references = _references(tmp_path / "references.csv")

    def report(logdir, budgets=budgets, curves_from=()):
        logdir.mkdir(exist_ok=True)
        return minatar_reports.write_reports(
            str(logdir),
            ["fast", "slow"],
            list(GAMES),
            [0, 1],
            budgets,
            None,
            None,
            references,
            curves_from,
        )

    first = tmp_path / "first"
    for seed in (0, 1):
        for game in GAMES:
            for agent in ("fast", "slow"):
                short = (agent, game, seed) == ("slow", "freeway", 1)
                _synthetic_run(first, agent, game, seed, rng, 60_000 if short else 100_000)
    original = report(first)
    # Elsewhere, one run directory of its own: it wins over the file.
    frames, returns = _synthetic_run(tmp_path / "second", "fast", "breakout", 0, rng, 100_000)
    second = report(tmp_path / "second", curves_from=[original.curves_csv])
    before, after = {_key(r): r for r in original.results}, {_key(r): r for r in second.results}
    # slow/freeway/seed1 stopped short: the file does not finish it, so it is not there.
    assert set(after) == set(before) - {("slow", "freeway", 1)}
    for key, result in after.items():
        if key == ("fast", "breakout", 0):
            assert not result.elsewhere
            assert result.final == pytest.approx(_brute_last_games(frames, returns, 100_000))
            continue
        assert result.elsewhere and result.reached and result.frames == 100_000
        # The curve's point at the budget is the final return, to the bit.
        assert result.final == before[key].final
        np.testing.assert_array_equal(result.curve_frames, before[key].curve_frames)
        np.testing.assert_array_equal(result.curve, before[key].curve)
    summary = pathlib.Path(second.summary_md).read_text()
    elsewhere = [f"{a}/{g}/seed{s}" for (a, g, s), r in after.items() if r.elsewhere]
    assert len(elsewhere) == 6
    assert (
        f"Finished elsewhere (their curves from {original.curves_csv}; no run directory here): "
        f"{', '.join(elsewhere)}."
    ) in summary
    assert "Not run yet: slow/freeway/seed1." in summary
    # The report's own curves.csv carries them on, and may stand beside the file it took them
    # from (both hold the same curves).
    third = report(tmp_path / "third", curves_from=[second.curves_csv])
    assert [(_key(r), r.final) for r in third.results] == [
        (_key(r), r.final) for r in second.results
    ]
    both = minatar_runs.read_curves([third.curves_csv, second.curves_csv])
    assert both.keys() == minatar_runs.read_curves([second.curves_csv]).keys()
    # Two files that disagree on a run: fast/breakout/seed0 ran again in the second grid.
    with pytest.raises(ValueError, match="fast/breakout/seed0 has different curves in"):
        minatar_runs.read_curves([original.curves_csv, second.curves_csv])
    # A grid of another budget takes nothing from the file.
    with pytest.raises(ValueError, match="or runs finished in"):
        report(tmp_path / "fourth", {"fast": 50_000, "slow": 50_000}, [original.curves_csv])


@pytest.mark.parametrize(
    "text, message",
    [
        ("agent,game,seed,frames\n", "columns"),
        ("agent,game,seed,frames,return_last_100\nfast,breakout,x,1000,2.0\n", "line 2"),
        ("agent,game,seed,frames,return_last_100\nfast,breakout,0,1000\n", "line 2"),
    ],
)
def test_a_bad_curves_file_is_named(text, message, tmp_path):
    path = tmp_path / "curves.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=f"{path}.*{message}"):
        minatar_runs.read_curves([str(path)])


@pytest.mark.parametrize(
    "text, message",
    [
        ("agent,game,seed\n", "columns"),
        ("agent,game,seed,evaluation\nfast,breakout,0,x\n", "line 2"),
    ],
)
def test_a_bad_evaluations_file_is_named(text, message, tmp_path):
    path = tmp_path / minatar_runs.EVALUATIONS_CSV
    path.write_text(text)
    with pytest.raises(ValueError, match=f"{path}.*{message}"):
        minatar_runs.read_evaluations([str(tmp_path / "curves.csv")])


@pytest.mark.slow
def test_a_grid_does_not_run_again_what_an_earlier_reports_curves_finished(
    tmp_path, fake_agents, capsys
):
    rng = np.random.default_rng(4)
    first = tmp_path / "first"
    for agent, game in (("fast", "breakout"), ("slow", "breakout"), ("fast", "freeway")):
        _synthetic_run(first, agent, game, 0, rng, BUDGET)
    _synthetic_run(first, "slow", "freeway", 0, rng, BUDGET // 2)  # stopped short there
    minatar.main(_grid(first, "--seeds=1", "--report_only"))
    capsys.readouterr()
    second = tmp_path / "second"
    minatar.main(_grid(second, "--seeds=1", f"--curves_from={first / 'curves.csv'}"))
    out = capsys.readouterr().out
    assert "4 runs: 3 finished (skipped; 3 of them elsewhere), 0 to resume, 1 to start" in out
    assert _starts(second) == {"slow/freeway/seed0": "0\n"}
    assert f"--curves_from={first / 'curves.csv'}" in out
    assert (
        f"Finished elsewhere (their curves from {first / 'curves.csv'}; no run directory here): "
        "fast/breakout/seed0, slow/breakout/seed0, fast/freeway/seed0."
    ) in out
    finals = {
        (r["agent"], r["game"]): float(r["return_last_100"])
        for r in _read_csv(second / "curves.csv")
        if int(r["frames"]) == BUDGET
    }
    assert finals[("slow", "freeway")] == pytest.approx(5.0 * 150_500 / BUDGET)  # run here
    assert len(finals) == 4


def test_read_result_is_against_the_agents_budget(tmp_path):
    frames, returns = _synthetic_run(
        tmp_path, "fast", "breakout", 0, np.random.default_rng(4), 150_000
    )
    reached = minatar_runs.read_result(str(tmp_path), "fast", "breakout", 0, 100_000)
    assert (reached.frames, reached.reached) == (150_000, True)
    assert reached.final == pytest.approx(_brute_last_games(frames, returns, 100_000))
    assert reached.curve_frames[-1] == 100_000 and np.all(np.diff(reached.curve_frames) == 1000)
    short = minatar_runs.read_result(str(tmp_path), "fast", "breakout", 0, 300_000)
    assert (short.frames, short.reached) == (150_000, False)
    assert short.final == pytest.approx(np.mean(returns[-100:]))  # its last games so far
    assert short.final != pytest.approx(reached.final)
    assert short.curve_frames[-1] == 150_000 and np.all(np.diff(short.curve_frames) == 3000)


def test_summary_marks_the_agents_short_of_the_published_budget(tmp_path, fake_agents):
    rng = np.random.default_rng(5)
    budgets = {"fast": 5_000_000, "slow": 100_000}
    runs = {
        (agent, game, seed): _synthetic_run(tmp_path, agent, game, seed, rng, budgets[agent])
        for seed in (0, 1)
        for game in GAMES
        for agent in budgets
    }
    report = minatar_reports.write_reports(
        str(tmp_path),
        list(budgets),
        list(GAMES),
        [0, 1],
        budgets,
        references=_references(tmp_path / "references.csv"),
    )
    for r in report.results:
        frames, returns = runs[r.agent, r.game, r.seed]
        assert r.reached
        assert r.final == pytest.approx(_brute_last_games(frames, returns, budgets[r.agent]))
    rows = _read_csv(report.curves_csv)
    for agent, budget in budgets.items():
        points = sorted({int(r["frames"]) for r in rows if r["agent"] == agent})
        assert points[-1] == budget and points[-2] == budget - budget // 100
    summary = pathlib.Path(report.summary_md).read_text()
    assert "budget per run (frames): fast 5,000,000, slow 100,000." in summary
    assert "that ended at or before its agent's budget" in summary
    lines = summary.splitlines()
    # The returns and the normalised scores, then the agents at equal frames (below).
    assert sum(line.startswith("| slow‡ | ") for line in lines) == 2
    assert sum(line.startswith("| fast | ") for line in lines) == 2 and "fast‡" not in summary
    # At equal frames: both agents at slow's 100,000 frames, fast read off its 5M curve, each
    # cell the mean ± standard error over seeds of the last 100 games then.
    for agent, name in (("fast", "fast"), ("slow", "slow‡")):
        cells = []
        for game in GAMES:
            values = np.array([_brute_last_games(*runs[agent, game, s], 100_000) for s in (0, 1)])
            values = values[np.isfinite(values)]
            mean, se = values.mean(), values.std(ddof=1) / math.sqrt(values.size)
            cells.append(f"{mean:.2f} ± {se:.2f} ({values.size})")
        assert f"| 100,000 | {name} | {' | '.join(cells)} |" in lines
    assert not any(line.startswith("| 5,000,000 |") for line in lines)  # no agent ran longer
    assert (
        "‡ Run at fewer frames than the references' 5,000,000: shorter than the published curves "
        "(slow 100,000 frames)."
    ) in summary
    assert "‡ Normalised scores and IQM of slow: at their budgets (above)" in summary
    # Still aggregated, over the seeds that reached the agent's own budget.
    assert report.aggregates["slow"].seeds == report.aggregates["fast"].seeds == (0, 1)
    assert "Short of the budget" not in summary


def _curve_run(agent, game, seed, budget, values_at, reached=True, final=None):
    """A RunResult whose curve is `values_at` {frames: value} on the agent's grid."""
    frames = np.array(sorted(values_at), dtype=float)
    return minatar_runs.RunResult(
        agent=agent,
        game=game,
        seed=seed,
        frames=budget if reached else budget // 2,
        reached=reached,
        final=values_at[budget] if final is None else final,
        curve_frames=frames,
        curve=np.array([values_at[f] for f in frames]),
    )


def test_equal_frames_reads_curves_off_the_grid_as_missing_and_the_own_budget_as_final():
    budgets = {"long": 1_000_000, "odd": 333_333, "short": 100_000}
    grid = {b: minatar_runs.curve_grid(b) for b in budgets.values()}
    results = [
        # long's grid is 10,000 apart: a point at 100,000, none at 333,333.
        _curve_run(
            "long", "breakout", s, 1_000_000, {float(f): f / 1e5 + s for f in grid[1_000_000]}
        )
        for s in (0, 1)
    ] + [
        _curve_run("odd", "breakout", 0, 333_333, {float(f): 7.0 for f in grid[333_333]}),
        # short's own row is its final returns, the one short of its budget marked.
        _curve_run("short", "breakout", 0, 100_000, {100_000.0: 4.0}),
        _curve_run("short", "breakout", 1, 100_000, {50_000.0: 1.0}, reached=False, final=2.0),
    ]
    report = minatar_statistics.GridReport(
        logdir="unused",
        agents=tuple(budgets),
        games=("breakout",),
        seeds=(0, 1),
        budgets=budgets,
        results=tuple(results),
        references={},
        aggregates={},
    )
    lines = minatar_reports._equal_frames_markdown(report)
    rows = [line for line in lines if line.startswith("| ")][1:]  # past the header
    assert rows == [
        "| 100,000 | long‡ | 1.50 ± 0.50 (2) |",  # 1 + 0 and 1 + 1 at 100,000
        "| 100,000 | odd‡ | 7.00 (1) |",  # 3,333.33 apart: 99,999.9 is within half a frame
        "| 100,000 | short‡ | 3.00 ± 1.00 (2)† |",
        "| 333,333 | long‡ | — |",
        "| 333,333 | odd‡ | 7.00 (1) |",
    ]


def test_interquartile_mean_against_numpy():
    scores = np.random.default_rng(1).normal(size=(5, 5))
    iqm, low, high = minatar_statistics.interquartile_mean(scores)
    values = np.sort(scores.ravel())
    assert iqm == pytest.approx(values[6:19].mean())  # 25 values: 6 cut at each end
    assert low < iqm < high


def test_intervals_are_reproducible_and_leave_numpys_generator_as_it_was():
    # rliable 1.2 resamples with numpy's global generator whatever random_state it is given: a
    # report's intervals differed from one run to the next until bootstrap_interval seeded it.
    scores = np.random.default_rng(1).normal(size=(3, 5))
    np.random.seed(123)
    first = minatar_statistics.interquartile_mean(scores, reps=200)
    after = np.random.random()
    np.random.seed(7)
    assert minatar_statistics.interquartile_mean(scores, reps=200) == first
    pair = [minatar_statistics.probability_of_improvement(scores, scores[::-1] - 0.1, reps=200)]
    pair += [minatar_statistics.probability_of_improvement(scores, scores[::-1] - 0.1, reps=200)]
    assert pair[0] == pair[1]
    np.random.seed(123)
    assert np.random.random() == after  # the caller's draws are untouched


def _pairwise_oracle(x, y):
    """P(X > Y) from its definition: per game, the share of (run of X, run of Y) pairs where X's
    score is higher, ties counting one half; then the mean over games."""
    per_game = [
        np.mean([(a > b) + 0.5 * (a == b) for a in x[:, g] for b in y[:, g]])
        for g in range(x.shape[1])
    ]
    return float(np.mean(per_game))


def test_probability_of_improvement_against_its_definition():
    from rliable import library as rly
    from rliable import metrics as rly_metrics

    rng = np.random.default_rng(3)
    x = rng.normal(0.3, 1.0, size=(5, 4))
    y = np.round(rng.normal(0.0, 1.0, size=(4, 4)), 0)  # ties with x are possible
    x[0, 0] = y[0, 0]  # and one for sure
    p, low, high = minatar_statistics.probability_of_improvement(x, y)
    assert p == pytest.approx(_pairwise_oracle(x, y))
    assert p == pytest.approx(rly_metrics.probability_of_improvement(x, y))  # rliable's own
    assert low <= p <= high and low < high
    assert minatar_statistics.probability_of_improvement(x, x)[0] == 0.5
    assert minatar_statistics.probability_of_improvement(x + 100, x) == (1.0, 1.0, 1.0)
    # Its interval: rliable's bootstrap of rliable's statistic on the same resamples (rliable
    # draws them from numpy's global generator, which bootstrap_interval seeds with 0).
    np.random.seed(0)
    _, intervals = rly.get_interval_estimates(
        {"pair": (x, y)},
        lambda a, b: np.array([rly_metrics.probability_of_improvement(a, b)]),
        reps=200,
    )
    assert minatar_statistics.probability_of_improvement(x, y, reps=200)[1:] == pytest.approx(
        tuple(intervals["pair"][:, 0])
    )


def test_an_orderings_verdict_and_the_seeds_that_would_resolve_it():
    def result(p, low, high, seeds=3):
        return minatar_statistics.OrderingResult("a", "b", "paper §1", p, low, high, seeds)

    assert result(0.8, 0.6, 0.95).verdict == "holds"
    assert result(0.2, 0.05, 0.4).verdict == "reversed"
    unresolved = result(0.6, 0.4, 0.8)
    assert unresolved.verdict == "unresolved"
    # Half-width 0.2 against a gap of 0.1: (0.2 / 0.1)^2 = 4 times the 3 seeds.
    assert unresolved.seeds_to_resolve() == 12
    assert result(0.5, 0.3, 0.7).seeds_to_resolve() == math.inf
    # An interval that ends at 0.5 is unresolved, and its formula gives the seeds it has (2 ·
    # (0.25 / 0.25)²): it needs more than those.
    touching = result(0.75, 0.5, 1.0, seeds=2)
    assert touching.verdict == "unresolved" and touching.seeds_to_resolve() == 3
    # One seed: the interval has collapsed onto P, which says nothing yet.
    assert result(1.0, 1.0, 1.0, seeds=1).verdict == "unresolved"
    assert result(1.0, 1.0, 1.0, seeds=2).verdict == "holds"


# Final returns by (agent, game): one per seed 0, 1, 2 (every game of a run scores it).
ABLATION_FINALS = {
    ("dice.dice", "breakout"): (5.0, 6.0, 7.0),
    ("dice.dice", "freeway"): (30.0, 31.0, 32.0),
    ("dice.random", "breakout"): (1.0, 2.0, 3.0),
    ("dice.random", "freeway"): (10.0, 11.0, 12.0),
    ("dice.baseline", "breakout"): (1.0, 2.0, 3.0),  # random's: P = 1/2
    ("dice.baseline", "freeway"): (11.0, 10.0, 12.0),  # pairs: 4.5 of 9 wins
    ("dice.entropy", "breakout"): (0.0, 0.0, 0.0),
    ("dice.entropy", "freeway"): (0.0, 0.0, 0.0),
}


def test_a_papers_ablation_grid_reports_the_orderings_it_claims(tmp_path):
    logdir = tmp_path / "grid"
    agents = ["dice.dice", "dice.random", "dice.baseline", "dice.entropy"]
    for (agent, game), finals in ABLATION_FINALS.items():
        for seed, final in enumerate(finals):
            frames = np.linspace(1_000, 100_000, 150).astype(int)
            _write_csv(
                logdir / agent / game / f"seed{seed}" / "episodes.csv",
                ablation_reports.EPISODES_COLUMNS,
                [(int(f), final, 7, 1.0) for f in frames],
            )
    report = minatar_reports.write_reports(
        str(logdir),
        agents,
        list(GAMES),
        [0, 1, 2],
        dict.fromkeys(agents, 100_000),
        references=_references(tmp_path / "references.csv"),
    )
    measured = {(r.better, r.worse): r for r in minatar_statistics.orderings(report)}
    # dice/ablations.py's three claims, all present here, in its order.
    assert list(measured) == [
        ("dice.dice", "dice.random"),
        ("dice.entropy", "dice.random"),
        ("dice.baseline", "dice.random"),
    ]
    holds, reversed_, tie = measured.values()
    assert (holds.probability, holds.low, holds.high, holds.verdict) == (1.0, 1.0, 1.0, "holds")
    assert (reversed_.probability, reversed_.verdict) == (0.0, "reversed")
    assert tie.probability == pytest.approx(0.5) and tie.verdict == "unresolved"
    assert holds.seeds == 3 and holds.source == "dice §4.3, Fig. 2"
    summary = pathlib.Path(report.summary_md).read_text()
    assert "| dice.dice > dice.random | dice §4.3, Fig. 2 | 1.00 [1.00, 1.00] | 3 | holds |" in (
        summary
    )
    assert (
        "| dice.entropy > dice.random | dice §4.3, Fig. 2 | 0.00 [0.00, 0.00] | 3 | reversed |"
        in (summary)
    )
    assert "| dice.baseline > dice.random | dice §4.3, Fig. 2 | 0.50 [" in summary
    assert "unresolved (no difference) |" in summary
    # Each run is its paper's main with the ablation.
    assert minatar_runs.GridRun.of("dice.random", "breakout").command(0, "g", [])[2:4] == [
        "dice.main",
        "--ablation=random",
    ]


@pytest.mark.parametrize("paper", minatar_runs.PAPERS)
def test_a_papers_main_is_the_variant_named_after_it(paper):
    """Where a paper's ablations name one after the paper, its config is the defaults' (so the
    grid's `reactor` stands for `reactor.reactor` in the orderings), on MinAtar and on Atari."""
    variant = minatar_runs.default_variant(paper)
    assert (variant is not None) == (paper in ("reactor", "dice", "lbc"))
    if variant is None:
        return
    paper_builder = builder_lib.paper_builder(paper)
    for env in ("MinAtar/Breakout-v0", "Pong"):
        assert cli.make_config(paper_builder, {"env": env}, variant) == cli.make_config(
            paper_builder, {"env": env}
        )


def test_a_papers_main_and_its_variants_report_the_orderings_it_claims(tmp_path):
    report = minatar_statistics.GridReport(
        str(tmp_path),
        ("reactor", "reactor.max_priority", "reactor.lazy_global"),
        ("breakout",),
        (0,),
        {},
        (),
        {},
        {
            a: minatar_statistics.Aggregate((0, 1), np.array([[s], [s + 0.1]]), s, s, s)
            for a, s in (
                ("reactor", 0.5),
                ("reactor.max_priority", 0.2),
                ("reactor.lazy_global", 0.1),
            )
        },
    )
    (measured,) = minatar_statistics.orderings(report)
    assert (measured.better, measured.worse, measured.verdict, measured.seeds) == (
        "reactor",
        "reactor.max_priority",
        "holds",
        2,
    )
    # With one seed of each, the same scores give no verdict, and the summary says why.
    one = [
        dataclasses.replace(a, seeds=(0,), scores=a.scores[:1]) for a in report.aggregates.values()
    ]
    single = dataclasses.replace(report, aggregates=dict(zip(report.aggregates, one)))
    (measured,) = minatar_statistics.orderings(single)
    assert (measured.probability, measured.verdict) == (1.0, "unresolved")
    (line,) = [
        l for l in minatar_statistics._orderings_markdown([measured]) if l.startswith("| reactor >")
    ]
    assert line.endswith("| 1 | unresolved (one seed: no interval; 2 or more give a verdict) |")


def test_a_grid_of_the_default_agents_claims_no_ordering(tmp_path):
    report = minatar_statistics.GridReport(
        str(tmp_path), ("impala", "reactor"), ("breakout",), (0,), {}, (), {}, {}
    )
    assert minatar_statistics.orderings(report) == []


def test_every_papers_orderings_name_its_ablations():
    for paper in minatar_runs.PAPERS:
        module = minatar_runs.paper_ablations(paper)
        assert module.ORDERINGS, paper
        for better, worse, source in module.ORDERINGS:
            assert {better, worse} <= set(module.ABLATIONS) and better != worse, (paper, better)
            assert source
        assert minatar_runs.agent_spec(f"{paper}.{better}") == minatar_runs.AgentSpec(paper, better)


def test_seed_mean_curve_has_a_standard_error_band():
    grid = np.array([1.0, 2.0, 3.0])
    runs = [
        minatar_runs.RunResult("a", "breakout", s, 3, True, 0.0, np.array(f), np.array(v))
        for s, (f, v) in enumerate(
            [([1, 2, 3], [1, 2, 3]), ([1, 2, 3], [3, 4, 5]), ([1, 2], [2, 9])]
        )
    ]
    mean, se, count = minatar_reports.seed_mean_curve(runs, grid)
    np.testing.assert_allclose(mean, [2.0, 5.0, 4.0])
    np.testing.assert_allclose(
        se,
        [
            np.std([1, 3, 2], ddof=1) / math.sqrt(3),
            np.std([2, 4, 9], ddof=1) / math.sqrt(3),
            np.std([3, 5], ddof=1) / math.sqrt(2),
        ],
    )
    np.testing.assert_array_equal(count, [3, 3, 2])


def test_report_only_reads_existing_runs(tmp_path, fake_agents, capsys):
    rng = np.random.default_rng(2)
    for game in minatar_runs.GAMES:
        _synthetic_run(tmp_path, "fast", game, 0, rng, 5_000_000)
    # A run that has not ended a game yet: its episodes.csv holds the header alone.
    _write_csv(
        tmp_path / "slow" / "asterix" / "seed0" / "episodes.csv",
        ablation_reports.EPISODES_COLUMNS,
        [],
    )
    minatar.main(["--report_only", "--agents=fast,slow", "--seeds=1", f"--logdir={tmp_path}"])
    out = capsys.readouterr().out
    assert "| slow | — | — | — | — | — |" in out
    assert "Not run yet: slow/asterix/seed0" in out
    assert "| fast |" in out and "| 0 |" in out  # fast's IQM over seed 0
    assert "budget 5,000,000 frames per run." in out and "‡" not in out  # the published budget
    for game in minatar_runs.GAMES:
        assert (tmp_path / f"{game}.png").exists()
    # fast at 1M frames: its final return is its last 100 games up to 1M, and it is marked.
    minatar.main(
        [
            "--report_only",
            "--agents=fast",
            "--seeds=1",
            "--agent_frames=fast=1e6",
            f"--logdir={tmp_path}",
        ]
    )
    out = capsys.readouterr().out
    assert "| fast‡ |" in out and "(fast 1,000,000 frames)" in out
    assert "--total_frames=5000000 --agent_frames=fast=1000000" in out
    with pytest.raises(SystemExit, match="no episodes.csv of the grid"):
        minatar.main(["--report_only", "--agents=slow", f"--logdir={tmp_path}"])


# ---------------------------------------------------------------------------------------------
# References and the random policy.


def test_reference_file_covers_every_game():
    references = minatar_references.read_references()
    published = {
        "asterix": (17, 19.5),
        "breakout": (10, 17.5),
        "freeway": (50, 47.5),
        "seaquest": (20.3, 15.5),
        "space_invaders": (43, 185),
    }
    assert set(references) == set(minatar_runs.GAMES)
    for game, (dqn, ac) in published.items():
        assert references[game][minatar_runs.DQN] == dqn
        assert references[game][minatar_runs.AC_LAMBDA] == ac
        random, reference = minatar_references.normaliser(references, game)
        assert reference == max(dqn, ac)
        assert 0 <= random < 0.1 * reference  # a random policy scores little
    rows = _read_csv(minatar_runs.REFERENCES_CSV)
    assert len(rows) == 15
    for row in rows:
        if row["agent"] == minatar_runs.RANDOM:
            assert (
                row["source"]
                == f"measured: python -m benchmarks.minatar --measure_random --games={row['game']}"
            )
            assert int(row["frames"]) >= 1_000_000 or "1000 games" in row["note"]
        else:
            assert "87c2bc825e0a4171040323a8164e9ecd32d14731" in row["source"]
            assert (row["frames"], row["seeds"]) == ("5000000", "30")
    seaquest = [
        row["note"] for row in rows if row["game"] == "seaquest" and row["agent"] != "random"
    ]
    assert all("oxygen-bar fix of minatar 1.0.11" in note for note in seaquest)


def test_bad_reference_files_are_named(tmp_path):
    path = tmp_path / "references.csv"
    _write_csv(path, ("game", "agent", "return"), [])
    with pytest.raises(ValueError, match="header"):
        minatar_references.read_references(str(path))
    _write_csv(path, minatar_runs.REFERENCE_COLUMNS, [("pong", "dqn", 1, 1, 1, "", "")])
    with pytest.raises(ValueError, match="game 'pong' is not one of"):
        minatar_references.read_references(str(path))
    _write_csv(path, minatar_runs.REFERENCE_COLUMNS, [("freeway", "dqn", 1, 1, 1, "", "")])
    with pytest.raises(
        ValueError, match=r"lack ac_lambda_0.8, random for freeway .*--measure_random"
    ):
        minatar_references.normaliser(minatar_references.read_references(str(path)), "freeway")


def test_random_policy_measurement(tmp_path):
    first = minatar_references.measure_random_policy("breakout", min_games=30, min_frames=10**9)
    assert first == minatar_references.measure_random_policy(
        "breakout", min_games=30, min_frames=10**9
    )
    assert first.games == 30 and first.frames > 30 and first.standard_error > 0
    # Stops at a game's end once the frames are reached: Freeway's games last 2501 frames.
    freeway = minatar_references.measure_random_policy("freeway", min_games=10**6, min_frames=5000)
    assert (freeway.games, freeway.frames) == (2, 5002)

    path = tmp_path / "references.csv"
    shutil.copy(minatar_runs.REFERENCES_CSV, path)
    before = _read_csv(path)
    minatar_references.write_random_rows([first], str(path))
    after = _read_csv(path)
    assert len(after) == len(before)
    changed = [(b, a) for b, a in zip(before, after) if b != a]
    assert len(changed) == 1 and changed[0][1]["game"] == "breakout"
    assert float(changed[0][1]["return"]) == pytest.approx(first.mean, abs=1e-4)
    assert "30 games" in changed[0][1]["note"] and "minatar 1.0.15" in changed[0][1]["note"]


# ---------------------------------------------------------------------------------------------
# Progress and the command line.


def test_progress_counts_and_eta():
    now = [0.0]
    current = {("a/breakout", 0): 0, ("b/breakout", 0): 0}
    frames = {
        ("a/breakout", 0): 0,
        ("b/breakout", 0): 400,
        ("a/breakout", 1): 1000,
        ("b/breakout", 1): 0,
    }
    out = io.StringIO()
    progress = minatar.Progress(
        frames,
        {"a": 1000, "b": 1000},
        2,
        "unused",
        clock=lambda: now[0],
        current=lambda v, s: current[v, s],
        out=out,
    )
    line = progress.start("a/breakout", 0)
    assert line.startswith("[minatar] 1/4 done, 1 running, 2 left | ETA ? (no progress yet)")
    progress.start("b/breakout", 0)
    now[0] = 10.0
    current.update({("a/breakout", 0): 100, ("b/breakout", 0): 500})
    # Each agent at its own rate so far: a 100 frames in 10 s, b 100 (400 -> 500) in 10 s, both
    # 10 frames/s. Left: a0 900, b0 500, b1 1000 frames: 240 run-seconds, 2 at a time 120 s;
    # the longest run left (b1) needs 100 s.
    assert progress.rates() == {"a": pytest.approx(10.0), "b": pytest.approx(10.0)}
    assert progress.eta()[0] == pytest.approx(120.0)
    now[0] = 50.0
    line = progress.end("a/breakout", 0, 1000)  # a: 1000 frames in 50 s, 20 frames/s
    assert line.startswith("[minatar] 2/4 done, 1 running, 1 left | ETA ")
    # b has gained nothing since: 100 frames in 50 s, 2 frames/s. Left: b0 500 and b1 1000
    # frames at b's rate: 750 run-seconds, 2 at a time 375 s, but b1 alone takes 500 s.
    assert progress.rates() == {"a": pytest.approx(20.0), "b": pytest.approx(2.0)}
    assert progress.eta()[0] == pytest.approx(500.0)
    assert "ETA 8m20s (frames/s per run: a 20, b 2) | finished a/breakout seed 0" in line
    assert out.getvalue().count("\n") == 3


def test_progress_eta_runs_each_agent_at_its_own_rate_and_the_rest_at_the_pooled_one():
    """A fast agent's finished runs do not speed up a slow agent's ETA; an agent with no progress
    yet runs at all runs' pooled rate, and the line says so."""
    now = [0.0]
    current = {("fast/breakout", 0): 0, ("slow/breakout", 0): 0}
    frames = {
        ("fast/breakout", 0): 0,
        ("slow/breakout", 0): 0,
        ("slow/breakout", 1): 0,
        ("new/breakout", 0): 0,
    }
    progress = minatar.Progress(
        frames,
        {"fast": 10_000, "slow": 1_000, "new": 2_000},
        2,
        "unused",
        clock=lambda: now[0],
        current=lambda v, s: current[v, s],
        out=io.StringIO(),
    )
    progress.start("fast/breakout", 0)
    progress.start("slow/breakout", 0)
    now[0] = 100.0
    progress.end("fast/breakout", 0, 10_000)  # 100 frames/s
    current["slow/breakout", 0] = 100  # 1 frame/s
    # slow: 900 + 1000 frames at 1 frame/s; new: 2000 frames at the pooled (10,000 + 100) /
    # (100 + 100) = 50.5 frames/s. 1900 + 39.6 run-seconds, 2 at a time 969.8 s, but slow's
    # second run alone takes 1000 s.
    seconds, basis = progress.eta()
    assert seconds == pytest.approx(1000.0)
    assert basis == "frames/s per run: fast 100, slow 1; new at all runs' 50"
    # One rate for all (the pooled 50.5 frames/s) would have said (1900 + 2000) / 50.5 / 2: 39 s.
    current["slow/breakout", 0] = 1_000
    now[0] = 200.0
    progress.end("slow/breakout", 0, 1_000)  # 1000 frames in 200 s: 5 frames/s
    assert progress.rates()["slow"] == pytest.approx(5.0)
    # slow1 1000 frames at 5 frames/s: 200 s; new 2000 at (10,000 + 1000) / 300 frames/s: 54.5 s.
    assert progress.eta()[0] == pytest.approx(200.0)


def test_progress_counts_each_run_against_its_agents_budget():
    now = [0.0]
    current = {("a/breakout", 0): 0, ("b/breakout", 0): 1000}
    frames = {
        ("a/breakout", 0): 0,
        ("b/breakout", 0): 1000,  # b's budget is 4000: 3000 left
        ("a/breakout", 1): 1000,  # a's budget is 1000: done
        ("b/breakout", 1): 4000,  # done
    }
    progress = minatar.Progress(
        frames,
        {"a": 1000, "b": 4000},
        2,
        "unused",
        clock=lambda: now[0],
        current=lambda v, s: current[v, s],
        out=io.StringIO(),
    )
    assert progress.done == {("a/breakout", 1), ("b/breakout", 1)}
    progress.start("a/breakout", 0)
    line = progress.start("b/breakout", 0)
    assert line.startswith("[minatar] 2/4 done, 2 running, 0 left")
    now[0] = 10.0
    current.update({("a/breakout", 0): 100, ("b/breakout", 0): 1100})
    # 10 frames/s per run; left 900 + 2900 frames, 2 at a time: 190 s, but b alone needs 290 s.
    assert progress.eta()[0] == pytest.approx(290.0)


def test_a_resumed_runs_rate_counts_from_its_logged_games_not_its_checkpoint():
    """The episodes.csv of a resumed run already reaches past its checkpoint (its actors played on
    after the last one): the frames it held at the start are not progress of this invocation."""
    now = [0.0]
    frames = {("a/breakout", 0): 3_000}  # the checkpoint's frames
    current = {("a/breakout", 0): 3_400}  # the last game logged before the run was stopped
    progress = minatar.Progress(
        frames,
        {"a": 10_000},
        2,
        "unused",
        clock=lambda: now[0],
        current=lambda v, s: current[v, s],
        out=io.StringIO(),
    )
    progress.start("a/breakout", 0)
    now[0] = 1.0
    assert progress.rates() == {}
    assert progress.eta() == (pytest.approx(float("nan"), nan_ok=True), "no progress yet")
    now[0] = 10.0
    current["a/breakout", 0] = 3_500  # 100 frames past the logged games in 10 s
    assert progress.rates() == {"a": pytest.approx(10.0)}
    assert progress.eta()[0] == pytest.approx(650.0)  # 6,500 frames left at 10 frames/s


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--agents=impala,ppo"], "error: --agents: 'ppo' is not one of impala, reactor, dice"),
        (["--agents=dice,dice"], "error: --agents=dice,dice names one twice"),
        (["--games=pong"], "error: --games: 'pong' is not one of asterix, breakout, freeway"),
        (["--games=all,breakout"], "error: --games=all,breakout: all stands alone"),
        (["--seeds=0"], "error: --seeds=0 must be >= 1"),
        (["--seeds=-2"], "error: --seeds=-2 must be >= 1"),
        (["--parallel=0"], "error: --parallel=0 must be >= 1"),
        (["--total_frames=0"], "error: --total_frames=0 must be > 0"),
        (["--total_frames=-5e6"], "error: --total_frames=-5000000 must be > 0"),
        (["--total_frames=1.5"], "error: --total_frames=1.5 must be an integer"),
        (["--report_only", "--measure_random"], "error: --report_only and --measure_random"),
        (["--measure_random", "--", "--x=1"], "error: --measure_random runs no agent"),
        (["--agent=impala"], "error: unknown flag --agent (did you mean --agents?)"),
        (
            ["--agent_frames=ppo=1e6"],
            "error: --agent_frames: 'ppo' is not one of --agents (impala, reactor, dice, gdi_h3, lbc)",
        ),
        (
            ["--agents=impala,dice", "--agent_frames=reactor=2e5"],
            "error: --agent_frames: 'reactor' is not one of --agents (impala, dice)",
        ),
        (["--agent_frames=reactor"], "error: --agent_frames: 'reactor' is not <agent>=<frames>"),
        (["--agent_frames=reactor=,dice=1e6"], "error: --agent_frames: 'reactor=' is not <agent>="),
        (["--agent_frames==1e6"], "error: --agent_frames: '=1e6' is not <agent>=<frames>"),
        (["--agent_frames=reactor=2e5x"], "error: --agent_frames: 'reactor=2e5x': 2e5x is not an"),
        (["--agent_frames=reactor=1.5"], "error: --agent_frames: 'reactor=1.5': 1.5 is not an"),
        (["--agent_frames=reactor=0"], "error: --agent_frames: reactor=0 must be > 0"),
        (["--agent_frames=dice=-1e6"], "error: --agent_frames: dice=-1000000 must be > 0"),
        (["--agent_frames=dice=1e6,dice=2e6"], "error: --agent_frames names dice twice"),
        (["--agents=impala.greedy"], "error: --agents: 'impala.greedy': impala has no ablation"),
        (["--agents=atari.vtrace"], "error: --agents: 'atari.vtrace' is not one of impala,"),
        (["--agents=lbc.lbc,lbc.lbc"], "error: --agents=lbc.lbc,lbc.lbc names one twice"),
        (["--curves_from=no/such.csv"], "error: --curves_from: no/such.csv: no such file"),
    ],
)
def test_bad_flags_are_one_line_and_write_nothing(flags, message, tmp_path, capsys):
    logdir = tmp_path / "grid"
    with pytest.raises(SystemExit) as raised:
        minatar.main([f"--logdir={logdir}", *flags])
    assert raised.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), lines
    assert not logdir.exists()


def test_help_lists_the_flags(capsys):
    with pytest.raises(SystemExit) as raised:
        minatar.main(["--help"])
    assert raised.value.code == 0
    out = capsys.readouterr().out
    for name in ("agents", "games", "seeds", "total_frames", "agent_frames", "logdir", "parallel"):
        assert f"--{name}:" in out
    assert "--[no]report_only:" in out and "--[no]measure_random:" in out

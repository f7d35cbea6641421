"""`common.runtime.runlog`: the console progress line of `RunLogger`; the logs cut back to a
restored checkpoint on resume (`rewind`: CSV rows and TensorBoard points, each file replaced
whole)."""

import csv
import os
import signal
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

from common.runtime import runlog

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_progress_line_counts_down_and_stops_at_the_budget(tmp_path, capsys):
    logger = runlog.RunLogger(str(tmp_path), total_frames=120_000, name="gdi-h3 Breakout")
    logger.episodes(frames=[10_000], returns=[2.0], lengths=[180], wall_time=1.0)
    logger.episodes(frames=[20_000], returns=[1.0], lengths=[150], wall_time=2.0)
    line = logger.progress(step=5, frames=60_000, fps=200.0, loss=12.3)
    assert line == (
        "[gdi-h3 Breakout] step 5 | frames 60.0K/120.0K (50.0%) | 200 fps | "
        "return 1.5 (last 2 of 2 eps) | loss 12.3 | eta 5m00s"
    )
    assert capsys.readouterr().out == line + "\n"
    # The last update overshoots the budget by part of a batch: nothing is left, not "-1d23h".
    assert logger.progress(12, 122_880, 104.0, 10.6).endswith("| eta 0m00s")
    assert logger.progress(0, 0, 0.0, float("nan")).endswith("| eta ?")


def test_games_logged_together_are_the_games_logged_one_by_one(tmp_path):
    """One call with a drain's games writes the rows and points of one call per game: the
    behaviour scalars and vector components at each game's frames, no point for a NaN."""
    frames, returns, lengths = [40, 40, 72, 96], [1.0, 0.5, 3.0, 2.0], [5, 5, 9, 12]
    behaviour = {
        "eta": np.array([0.1, 0.2, 0.3, 0.4]),
        "psi": np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]),
        "entropy": np.array([0.5, np.nan, 1.5, np.nan]),
    }
    together = runlog.RunLogger(str(tmp_path / "together"), total_frames=1000)
    together.episodes(frames, returns, lengths, 3.0, behaviour)
    together.close()
    apart = runlog.RunLogger(str(tmp_path / "apart"), total_frames=1000)
    for g in range(4):
        one = {name: values[g : g + 1] for name, values in behaviour.items()}
        apart.episodes(frames[g : g + 1], returns[g : g + 1], lengths[g : g + 1], 3.0, one)
    apart.close()

    scalars = runlog.read_scalars(str(tmp_path / "together"))
    assert scalars == runlog.read_scalars(str(tmp_path / "apart"))
    assert scalars["episode/return"] == list(zip(frames, returns))
    assert scalars["episode/length"] == list(zip(frames, lengths))
    assert scalars["behaviour/entropy"] == [(40, 0.5), (72, 1.5)]
    assert scalars["behaviour/psi_1"] == [(40, 2.0), (40, 4.0), (72, 6.0), (96, 8.0)]
    np.testing.assert_allclose([v for _, v in scalars["behaviour/eta"]], [0.1, 0.2, 0.3, 0.4])
    rows = (tmp_path / "together" / runlog.EPISODES_CSV).read_text()
    assert rows == (tmp_path / "apart" / runlog.EPISODES_CSV).read_text()
    assert rows.splitlines()[1:] == [
        "40,1.0,5,3.0",
        "40,0.5,5,3.0",
        "72,3.0,9,3.0",
        "96,2.0,12,3.0",
    ]


def test_a_multitask_run_logs_each_game_under_its_name(tmp_path):
    games = ("MinAtar/Breakout-v0", "MinAtar/Asterix-v0", "MinAtar/Seaquest-v0")
    logger = runlog.RunLogger(str(tmp_path), total_frames=1000, games=games)
    logger.episodes([40, 40, 72, 96], [1.0, 0.5, 3.0, 2.0], [5, 5, 9, 12], 3.0, tasks=[2, 0, 2, 0])
    logger.close()
    with open(tmp_path / runlog.EPISODES_CSV, newline="") as f:
        rows = list(csv.reader(f))
    assert rows == [
        [*runlog.EPISODES_HEADER, "game"],
        ["40", "1.0", "5", "3.0", "MinAtar/Seaquest-v0"],
        ["40", "0.5", "5", "3.0", "MinAtar/Breakout-v0"],
        ["72", "3.0", "9", "3.0", "MinAtar/Seaquest-v0"],
        ["96", "2.0", "12", "3.0", "MinAtar/Breakout-v0"],
    ]
    scalars = runlog.read_scalars(str(tmp_path))
    assert scalars["episode/return"] == [(40, 1.0), (40, 0.5), (72, 3.0), (96, 2.0)]
    assert scalars["episode/return/MinAtar/Seaquest-v0"] == [(40, 1.0), (72, 3.0)]
    assert scalars["episode/length/MinAtar/Breakout-v0"] == [(40, 5), (96, 12)]
    assert "episode/return/MinAtar/Asterix-v0" not in scalars  # no game of it yet
    assert all(runlog.is_game_tag(tag) for tag in scalars)
    # The progress line: each game's recent mean (Asterix has had no game yet).
    line = logger.progress(step=3, frames=100, fps=10.0, loss=1.0)
    assert (
        "| return 1.6 (last 4 of 4 eps) | Breakout 1.2 | Asterix nan | Seaquest 2.0 | loss" in line
    )
    assert not runlog.is_game_tag("episode/returns") and not runlog.is_game_tag("loss/total")
    # One game is not a multi-task run: no column, no per-game tags.
    single = runlog.RunLogger(str(tmp_path / "one"), total_frames=1000, games=games[:1])
    single.episodes([40], [1.0], [5], 3.0, tasks=[0])
    single.close()
    header = (tmp_path / "one" / runlog.EPISODES_CSV).read_text().splitlines()[0]
    assert header == ",".join(runlog.EPISODES_HEADER)


def test_format_duration():
    assert [runlog.format_duration(s) for s in (0, 75, 3660, 90_000)] == [
        "0m00s",
        "1m15s",
        "1h01m",
        "1d01h",
    ]
    assert runlog.format_duration(float("inf")) == "?"


# ------------------------------------------------------------------------------------------------
# Resuming: the logs cut back to the restored checkpoint (runlog.rewind)


def write_lines(path, lines) -> None:
    with open(path, "w", newline="") as f:
        f.write("".join(lines))


EPISODE_LINES = [
    "frames,episode_return,episode_length,wall_time\r\n",
    "100,10.0,10,1.0\r\n",
    "160,12.0,12,2.0\r\n",
    "160,12.0,12,2.0\r\n",  # two envs' games ended at the same step: both are kept
    "240,9.0,9,3.0\r\n",  # logged after the checkpoint at 160 produced frames
    "320,15.0,15,4.0\r\n",
]


def test_truncate_csv_keeps_the_rows_at_or_before_the_checkpoint(tmp_path):
    path = tmp_path / runlog.EPISODES_CSV
    write_lines(path, EPISODE_LINES + ["400,3"])  # a row its killed writer did not finish
    assert runlog.truncate_csv(str(path), 160) == 3
    assert open(path, newline="").read() == "".join(EPISODE_LINES[:4])
    assert runlog.truncate_csv(str(path), 160) == 0  # nothing past it: the file is left as is
    assert not os.path.exists(f"{path}.tmp")
    # The resumed run appends after the kept rows.
    log = runlog.CsvLog(str(path), runlog.EPISODES_HEADER)
    log.append(200, 1.0, 1, 5.0)
    log.close()
    assert open(path, newline="").read().splitlines()[-2:] == ["160,12.0,12,2.0", "200,1.0,1,5.0"]
    # No checkpoint: no row is kept; a missing file stays missing.
    assert runlog.truncate_csv(str(path), -1) == 4
    assert open(path, newline="").read() == EPISODE_LINES[0]
    assert runlog.truncate_csv(str(tmp_path / "missing.csv"), -1) == 0
    assert not os.path.exists(tmp_path / "missing.csv")


KILL_BEFORE_RENAME = """
import os, signal, sys
from common.runtime import runlog
def killed(*args):
    os.kill(os.getpid(), signal.SIGKILL)
runlog.os.replace = killed
runlog.truncate_csv(sys.argv[1], 160)
"""


def test_an_interrupted_truncation_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / runlog.EPISODES_CSV
    write_lines(path, EPISODE_LINES)
    # SIGKILLed once the new file is written, before it replaces the old one.
    child = subprocess.run(
        [sys.executable, "-c", KILL_BEFORE_RENAME, str(path)], cwd=ROOT, capture_output=True
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    assert open(path, newline="").read() == "".join(EPISODE_LINES)
    assert os.path.exists(f"{path}.tmp")  # the killed process's, complete or not

    # An exception on the way (Ctrl-C) leaves the old file and removes the temporary one.
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(runlog.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        runlog.truncate_csv(str(path), 160)
    assert open(path, newline="").read() == "".join(EPISODE_LINES)
    assert not os.path.exists(f"{path}.tmp")
    monkeypatch.undo()
    assert runlog.truncate_csv(str(path), 160) == 2  # the next start cuts it
    assert open(path, newline="").read() == "".join(EPISODE_LINES[:4])


def steps(logdir) -> dict[str, list[int]]:
    return {
        tag: [step for step, _ in points] for tag, points in runlog.read_scalars(logdir).items()
    }


def test_rewind_cuts_csv_rows_and_tensorboard_points_at_their_own_frames(tmp_path):
    """Games at the produced frames, the learner's and the evaluator's points at the learner's:
    a checkpoint at learner frames 200 whose actors had produced 260."""
    logdir = str(tmp_path)
    logger = runlog.RunLogger(logdir, total_frames=1000)
    evaluation = runlog.EvalLogger(logdir)
    for frames in (100, 200, 300):  # the learner's frames
        logger.episodes(
            [frames + 60], [1.0], [1], 1.0, behaviour={"eta": [0.5], "psi": [[1.0, 2.0]]}
        )
        logger.scalars({"loss/total": 1.0, "episode/mean_recent_return": 1.0}, frames)
        evaluation.episode(frames, 2.0, float("nan"), 1.0)
        evaluation.round(frames, [2.0], [float("nan")])
    logger.close()
    evaluation.close()
    # The writer of a killed process left a record's header and part of its data.
    events = [os.path.join(logdir, name) for name in os.listdir(logdir) if "tfevents" in name]
    with open(events[0], "ab") as f:
        f.write(struct.pack("<QI", 32, 0) + b"\x08\x01")
    before = steps(logdir)
    assert before["episode/return"] == [160, 260, 360] and before["loss/total"] == [100, 200, 300]

    dropped = runlog.rewind(logdir, frames=200, actor_frames=260)
    # 1 game x (return, length, eta, psi_0, psi_1); 2 learner scalars and 3 histograms
    # (behaviour_histogram/...) at learner frames 300; eval/return.
    assert dropped == {runlog.EPISODES_CSV: 1, runlog.EVAL_CSV: 1, "tensorboard": 5 + 5 + 1}
    after = steps(logdir)
    assert set(after) == set(before)
    for tag, points in after.items():
        limit = 260 if runlog.is_game_tag(tag) else 200
        assert points == [step for step in before[tag] if step <= limit], tag
    assert steps(os.path.join(logdir, runlog.EVAL_DIR)) == {"eval/return": [100, 200]}
    assert [name for name in os.listdir(logdir) if "tmp" in name] == []
    with open(tmp_path / runlog.EVAL_CSV) as f:
        assert [row["frames"] for row in csv.DictReader(f)] == ["100", "200"]

    # The resumed run's points follow the kept ones; a file with nothing to cut is not rewritten.
    logger = runlog.RunLogger(logdir, total_frames=1000)
    logger.episodes([270], [1.0], [1], 2.0)
    logger.close()
    assert steps(logdir)["episode/return"] == [160, 260, 270]
    assert runlog.rewind(logdir, frames=200, actor_frames=270) == {
        runlog.EPISODES_CSV: 0,
        runlog.EVAL_CSV: 0,
        "tensorboard": 0,
    }
    # Without a checkpoint nothing is kept.
    runlog.rewind(logdir, frames=-1, actor_frames=-1)
    assert steps(logdir) == {} and steps(os.path.join(logdir, runlog.EVAL_DIR)) == {}
    assert open(tmp_path / runlog.EPISODES_CSV).read().splitlines() == [
        ",".join(runlog.EPISODES_HEADER)
    ]


def test_events_files_are_read_in_the_order_they_were_written(tmp_path):
    """A process's writers end their files' names in a counter: its tenth file, written after
    its ninth in the same second, has the name that sorts first ("10" < "9"). The points come
    back in the order they were written (this ordering made CI fail once)."""
    logdir = str(tmp_path)
    for counter, frames in ((9, 100), (10, 200)):
        logger = runlog.RunLogger(logdir, total_frames=1000)
        logger.scalars({"loss/total": 1.0}, frames)
        logger.close()
        (written,) = [
            name for name in os.listdir(logdir) if "tfevents" in name and ".vm.1." not in name
        ]
        os.rename(
            tmp_path / written, tmp_path / f"events.out.tfevents.1700000000.vm.1.{counter}.v2"
        )
    assert sorted(name for name in os.listdir(logdir) if "tfevents" in name)[0].endswith(".10.v2")
    assert steps(logdir)["loss/total"] == [100, 200]
    assert runlog.rewind(logdir, frames=150, actor_frames=150)["tensorboard"] == 1
    assert steps(logdir)["loss/total"] == [100]


def test_read_points_gives_each_point_s_wall_time_step_and_value(tmp_path):
    logdir = str(tmp_path)
    logger = runlog.RunLogger(logdir, total_frames=1000)
    before = time.time()
    for frames, step in ((100, 1), (200, 2), (300, 3)):
        logger.scalars({"progress/learner_step": step, "loss/total": -step}, frames)
        time.sleep(0.05)
    logger.close()
    points = runlog.read_points(logdir, "progress/learner_step")
    assert [(step, value) for _, step, value in points] == [(100, 1.0), (200, 2.0), (300, 3.0)]
    times = [t for t, _, _ in points]
    assert before <= times[0] < times[1] < times[2] <= time.time()
    assert times[2] - times[0] >= 0.1  # the sleeps between the writes
    assert [v for _, _, v in runlog.read_points(logdir, "loss/total")] == [-1.0, -2.0, -3.0]
    assert runlog.read_points(logdir, "no/such_tag") == []

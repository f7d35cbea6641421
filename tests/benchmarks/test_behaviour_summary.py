"""benchmarks.behaviour_summary: quarter means of the behaviour scalars of real TensorBoard logs."""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from absl import app

from benchmarks import behaviour_summary


def test_quarter_means_against_their_definition():
    rng = np.random.default_rng(0)
    frames = np.sort(rng.integers(0, 1000, 200)).astype(float)
    frames[-1] = 1000.0  # F: quarters (0, 250], (250, 500], (500, 750], (750, 1000]
    values = rng.normal(size=200)
    got = behaviour_summary.quarter_means(list(zip(frames, values)))
    for k in range(4):
        inside = (frames > 250 * k) & (frames <= 250 * (k + 1))
        if k == 0:
            inside |= frames == 0
        assert got[k] == pytest.approx(values[inside].mean())
    # A point on an edge belongs to the quarter it closes; a quarter without points is nan.
    got = behaviour_summary.quarter_means([(0, 1.0), (250, 3.0), (1000, 5.0)])
    assert got[0] == 2.0 and np.isnan(got[1]) and np.isnan(got[2]) and got[3] == 5.0


def test_the_command_summarises_each_runs_behaviour_tags(tmp_path):
    logdir = str(tmp_path / "run")
    writer = tf.summary.create_file_writer(logdir)
    with writer.as_default():
        for frames in range(0, 401, 10):  # behaviour/eta = frames / 100: quarters of 0..400
            tf.summary.scalar("behaviour/eta", frames / 100, step=frames)
            tf.summary.scalar("loss/total", 1.0, step=frames)  # not a behaviour tag
        tf.summary.scalar("policy/entropy", 1.5, step=400)
    writer.close()
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.behaviour_summary", logdir],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith(f"| {logdir} |")]
    # Quarter 1 holds frames 0..100 (mean 0.5), quarter 2 110..200 (1.55), and so on.
    assert rows == [
        f"| {logdir} | `behaviour/eta` | 0.500 | 1.550 | 2.550 | 3.550 | 41 | 400 |",
        f"| {logdir} | `policy/entropy` |  |  |  | 1.500 | 1 | 400 |",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.behaviour_summary", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    assert f"{tmp_path}: no TensorBoard tag starts with" in result.stderr


def test_returns_by_against_their_definition():
    rng = np.random.default_rng(1)
    frames = np.sort(rng.integers(1, 1000, 300)).astype(float)
    frames[-1] = 1000.0  # the last quarter: frames past 750
    eta = rng.uniform(0.0, 60.0, 300)  # some past the last edge, 50
    eta[-3:] = [0.0, 10.0, 50.0]  # edges: the first bin opens at 0, the last closes at 50
    value = rng.normal(size=300)
    edges = [0.0, 10.0, 50.0]
    games, cells = behaviour_summary.returns_by(
        list(zip(frames, value)), list(zip(frames, eta)), edges
    )
    last = frames > 750
    assert games == last.sum()
    for (low, high), (mean, share), closed in zip([(0, 10), (10, 50)], cells, [False, True]):
        inside = last & (eta >= low) & ((eta <= high) if closed else (eta < high))
        assert mean == pytest.approx(value[inside].mean())
        assert share == pytest.approx(inside.sum() / last.sum())
    assert sum(share for _, share in cells) < 1  # games past 50 count in the total only
    # An empty bin has no mean; returns and parameters logged out of step are refused.
    _, cells = behaviour_summary.returns_by([(4.0, 1.0)], [(4.0, 2.0)], [5.0, 6.0])
    assert np.isnan(cells[0][0]) and cells[0][1] == 0.0
    with pytest.raises(ValueError, match="game by game"):
        behaviour_summary.returns_by([(4.0, 1.0)], [(5.0, 2.0)], [0.0, 6.0])


def test_the_command_tabulates_the_last_quarters_returns_by_a_parameter(tmp_path):
    logdir = str(tmp_path / "run")
    writer = tf.summary.create_file_writer(logdir)
    with writer.as_default():
        # As runlog logs a game: its return, then the behaviour it was played with. Frames 0..400;
        # the last quarter's games (past 300) at eta 1 return 0, at eta 5 and 9 return 2 and 4.
        for frames in range(0, 401, 10):
            eta = 1 + 4 * (frames // 10 % 3)
            tf.summary.scalar("episode/return", (eta - 1) / 2, step=frames)
            tf.summary.scalar("behaviour/eta", eta, step=frames)
    writer.close()
    command = [sys.executable, "-m", "benchmarks.behaviour_summary", logdir, "--returns_by=eta"]
    result = subprocess.run(
        [*command, "--edges=0,2,10"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    # Frames 310..400: ten games, eta 5, 9, 1, 5, 9, 1, 5, 9, 1, 5 (frames // 10 = 31..40).
    assert f"| {logdir} | 10 | 0.00 (30%) | 2.86 (70%) |" in result.stdout.splitlines()
    result = subprocess.run(
        [*command, "--edges=0,2,10", "--returns_by=epsilon"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    assert f"--returns_by=epsilon: {logdir} has no `behaviour/epsilon`" in result.stderr


@pytest.mark.parametrize("edges", [["3", "2"], ["1"], ["0", "x"], None])
def test_bin_edges_must_be_two_or_more_increasing_numbers(edges):
    with pytest.raises(app.UsageError, match="give two or more increasing numbers"):
        behaviour_summary.bin_edges(edges)
    assert behaviour_summary.bin_edges(["0", "1.5", "50"]) == [0.0, 1.5, 50.0]

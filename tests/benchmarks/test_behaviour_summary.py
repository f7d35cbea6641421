"""benchmarks.behaviour_summary: quarter means of the behaviour scalars of real TensorBoard logs."""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

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

"""A finished run's summary of its instruments (common/runtime/run_summary.py)."""

import json
import os

import pytest
import tensorflow as tf

from common.equations import instruments
from common.runtime import run_summary


def write_scalars(logdir, series: dict) -> None:
    writer = tf.summary.create_file_writer(logdir)
    with writer.as_default():
        for tag, points in series.items():
            for step, value in points:
                tf.summary.scalar(tag, value, step=step)
    writer.close()


def test_the_summary_averages_each_instrument_over_the_last_fifth_of_the_frames(tmp_path):
    logdir = str(tmp_path)
    steps = range(0, 101, 10)
    write_scalars(
        logdir,
        {
            instruments.GRAD_NORM: [(s, float(s)) for s in steps],
            instruments.CLIPPED: [(s, 1.0 if s < 90 else 0.5) for s in steps],
            f"{instruments.ENTROPY}_2": [(s, 0.25) for s in steps],  # a population's second net
            # Games are logged at the actors' frames, ahead of the learner's.
            "behaviour/eta": [(2 * s, 2.0 * s) for s in steps],
            "loss/total": [(s, 7.0) for s in steps],  # not an instrument
            "optimizer/grad_norm_clipped_share": [(s, 1.0) for s in steps],  # nor this
        },
    )
    summary = run_summary.summarize(logdir)
    # The learner's points at steps 80, 90 and 100 (the last fifth of its 100 frames), the
    # games' at 160, 180 and 200.
    assert summary == {
        instruments.GRAD_NORM: pytest.approx(90.0),
        instruments.CLIPPED: pytest.approx((1.0 + 0.5 + 0.5) / 3),
        f"{instruments.ENTROPY}_2": pytest.approx(0.25),
        "behaviour/eta": pytest.approx(180.0),
    }
    assert list(summary) == sorted(summary)
    assert run_summary.summarize(logdir, tail=1.0)[instruments.GRAD_NORM] == pytest.approx(50.0)
    assert run_summary.summarize(str(tmp_path / "empty")) == {}


def test_the_summary_file_holds_the_run_s_end_and_reads_back(tmp_path):
    logdir = str(tmp_path)
    assert run_summary.read_summary(logdir) is None
    write_scalars(
        logdir,
        {
            instruments.GRAD_NORM: [(100, 150.0)],
            instruments.CLIPPED: [(100, 0.75)],
            f"{instruments.ENTROPY}_1": [(100, 1.0)],
            f"{instruments.ENTROPY}_2": [(100, 0.5)],
        },
    )
    written = run_summary.write_summary(logdir, 100, 4.5)
    assert run_summary.read_summary(logdir) == written
    assert written["frames"] == 100 and written["mean_recent_return"] == 4.5
    assert written["instruments"][instruments.GRAD_NORM] == 150.0
    assert os.listdir(logdir).count(run_summary.SUMMARY_JSON) == 1
    assert not [f for f in os.listdir(logdir) if f.endswith(".tmp")]
    line = run_summary.describe(written)
    # The two networks' entropies are averaged on the console line.
    assert line == (
        "instruments over the last 20% of frames: grad norm 150, clipped 75%, entropy 0.75"
    )
    # A run that logged no game yet has no mean return: null, not NaN (which JSON cannot hold).
    run_summary.write_summary(logdir, 100, float("nan"))
    with open(os.path.join(logdir, run_summary.SUMMARY_JSON)) as f:
        assert json.load(f)["mean_recent_return"] is None

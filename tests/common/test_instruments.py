"""The instruments every learner logs and the run's summary of them (common/instruments.py)."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from common import instruments


@pytest.mark.parametrize("compiled", [False, True])
def test_the_clip_rescales_together_and_reports_before_after_and_whether(compiled):
    def clip(max_norm):
        gradients = [tf.constant([3.0, 0.0]), None, tf.constant([[4.0]])]
        clipped, stats = instruments.clip_by_global_norm(gradients, max_norm)
        return clipped[0], clipped[1], clipped[2], stats

    run = tf.function(clip) if compiled else clip
    first, missing, second, stats = run(1.0)
    np.testing.assert_allclose(first, [0.6, 0.0], rtol=1e-6)
    np.testing.assert_allclose(second, [[0.8]], rtol=1e-6)
    assert missing is None
    assert float(stats[instruments.GRAD_NORM]) == pytest.approx(5.0)
    assert float(stats[instruments.GRAD_NORM_CLIPPED]) == pytest.approx(1.0)
    assert float(stats[instruments.CLIPPED]) == 1.0
    for max_norm in (10.0, None, 0.0):  # a clip above the norm, or none at all
        first, _, second, stats = run(max_norm)
        np.testing.assert_allclose(first, [3.0, 0.0])
        assert float(stats[instruments.GRAD_NORM_CLIPPED]) == pytest.approx(5.0)
        assert float(stats[instruments.CLIPPED]) == 0.0


def test_the_mean_step_is_the_mean_absolute_change_over_every_parameter():
    variables = [tf.Variable([1.0, 2.0, 3.0]), tf.Variable([[0.0]])]

    @tf.function
    def update():
        before = instruments.snapshot(variables)
        variables[0].assign_add([0.5, -0.5, 0.0])
        variables[1].assign([[-2.0]])
        return instruments.mean_step(before, variables)

    # (0.5 + 0.5 + 0 + 2) / 4 parameters, measured against the values before the assignments.
    assert float(update()[instruments.MEAN_STEP]) == pytest.approx(0.75)
    np.testing.assert_allclose(variables[0].numpy(), [1.5, 1.5, 3.0])


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
    summary = instruments.summarize(logdir)
    # The learner's points at steps 80, 90 and 100 (the last fifth of its 100 frames), the
    # games' at 160, 180 and 200.
    assert summary == {
        instruments.GRAD_NORM: pytest.approx(90.0),
        instruments.CLIPPED: pytest.approx((1.0 + 0.5 + 0.5) / 3),
        f"{instruments.ENTROPY}_2": pytest.approx(0.25),
        "behaviour/eta": pytest.approx(180.0),
    }
    assert list(summary) == sorted(summary)
    assert instruments.summarize(logdir, tail=1.0)[instruments.GRAD_NORM] == pytest.approx(50.0)
    assert instruments.summarize(str(tmp_path / "empty")) == {}


def test_the_summary_file_holds_the_run_s_end_and_reads_back(tmp_path):
    logdir = str(tmp_path)
    assert instruments.read_summary(logdir) is None
    write_scalars(
        logdir,
        {
            instruments.GRAD_NORM: [(100, 150.0)],
            instruments.CLIPPED: [(100, 0.75)],
            f"{instruments.ENTROPY}_1": [(100, 1.0)],
            f"{instruments.ENTROPY}_2": [(100, 0.5)],
        },
    )
    written = instruments.write_summary(logdir, 100, 4.5)
    assert instruments.read_summary(logdir) == written
    assert written["frames"] == 100 and written["mean_recent_return"] == 4.5
    assert written["instruments"][instruments.GRAD_NORM] == 150.0
    assert os.listdir(logdir).count(instruments.SUMMARY_JSON) == 1
    assert not [f for f in os.listdir(logdir) if f.endswith(".tmp")]
    line = instruments.describe(written)
    # The two networks' entropies are averaged on the console line.
    assert line == (
        "instruments over the last 20% of frames: grad norm 150, clipped 75%, entropy 0.75"
    )
    # A run that logged no game yet has no mean return: null, not NaN (which JSON cannot hold).
    instruments.write_summary(logdir, 100, float("nan"))
    with open(os.path.join(logdir, instruments.SUMMARY_JSON)) as f:
        assert json.load(f)["mean_recent_return"] is None

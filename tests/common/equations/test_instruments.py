"""The instruments every learner logs (common/equations/instruments.py): the clip's and the
step's."""

import numpy as np
import pytest
import tensorflow as tf

from common.equations import instruments


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

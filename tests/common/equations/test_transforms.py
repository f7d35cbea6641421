"""Tests for common/equations/transforms.py against the papers' printed formulas and the worked
numbers of docs/papers/<paper>.md#worked-test-numbers."""

import numpy as np
import pytest
import tensorflow as tf

from common.settings import config
from common.equations import transforms


def _np(x):
    return np.asarray(x.numpy() if tf.is_tensor(x) else x)


# ----------------------------------------------------------------------------- IMPALA


def test_impala_t13_reward_transforms():
    # docs/papers/impala.md#worked-test-numbers (Test 13); IMPALA Fig. D.1.
    r = np.array([-10, -1, -0.5, 0, 0.5, 1, 2, 10], np.float64)
    np.testing.assert_allclose(
        _np(transforms.optimistic_asymmetric_clipping(r)),
        [-0.3, -0.228478, -0.138635, 0, 2.310586, 3.807971, 4.820138, 5.0],
        atol=1e-6,
    )
    np.testing.assert_array_equal(_np(transforms.clip_rewards(r)), [-1, -1, -0.5, 0, 0.5, 1, 1, 1])
    np.testing.assert_allclose(
        _np(transforms.soft_asymmetric_clipping(r)),
        [-1.446041, -0.296063, -0.149502, 0, 0.498340, 0.986877, 1.899745, 4.820138],
        atol=1e-6,
    )


def test_optimistic_asymmetric_clipping_matches_figure_d1_formula():
    r = np.linspace(-20, 20, 401)
    expected = 0.3 * np.minimum(np.tanh(r), 0) + 5.0 * np.maximum(np.tanh(r), 0)  # IMPALA Fig. D.1
    np.testing.assert_allclose(
        _np(transforms.optimistic_asymmetric_clipping(r)), expected, atol=1e-12
    )


def test_clip_rewards_custom_range_and_bad_range():
    clipped = transforms.clip_rewards([-3.0, 0.2, 3.0], -2.0, 0.5)
    np.testing.assert_allclose(_np(clipped), [-2, 0.2, 0.5], rtol=1e-7)
    with pytest.raises(ValueError, match="low < high"):
        transforms.clip_rewards([0.0], 1.0, -1.0)


# ----------------------------------------------------------------------------- DiCE / GDI / LBC
# shapings


def test_dice_test1_asymmetric_log_shaping():
    # docs/papers/dice.md#worked-test-numbers (Test 1); DiCE Table 5.
    r = np.array([-10, -1, -0.5, 0, 0.5, 1, 10, 100], np.float64)
    f = _np(transforms.asymmetric_log_shaping(r))
    np.testing.assert_allclose(
        f, [-2.397895, -0.693147, -0.405465, 0, 0.810930, 1.386294, 4.795791, 9.230241], atol=1e-6
    )
    # Not odd: f(1) = -2 f(-1).
    assert f[5] == pytest.approx(-2 * f[1], rel=1e-12)


def test_gdi_t3_both_shapings():
    # docs/papers/gdi.md#worked-test-numbers (Test 3); GDI Table 6.
    r = np.array([-10, -1, 0, 1, 10, 100], np.float64)
    rs1 = _np(transforms.asymmetric_log_shaping(r))
    rs2 = _np(transforms.fourth_root_shaping(r))
    np.testing.assert_allclose(
        rs1, [-2.397895, -0.693147, 0, 1.386294, 4.795791, 9.230241], atol=1e-6
    )
    np.testing.assert_allclose(
        rs2, [-0.831160, -0.190207, 0, 0.190207, 0.831160, 2.270154], atol=1e-6
    )
    dense = np.linspace(-50, 50, 1001)
    for f in (transforms.asymmetric_log_shaping, transforms.fourth_root_shaping):
        assert np.all(np.diff(_np(f(dense))) > 0)
        assert _np(f(0.0)) == 0.0
    np.testing.assert_allclose(
        _np(transforms.fourth_root_shaping(-dense)),
        -_np(transforms.fourth_root_shaping(dense)),
        atol=1e-12,
    )  # RS2 odd
    assert _np(transforms.asymmetric_log_shaping(2.0)) != -_np(
        transforms.asymmetric_log_shaping(-2.0)
    )


def test_lbc_t4_three_shapings_and_gdi_fourth_root():
    # docs/papers/lbc.md#worked-test-numbers (Test 4). RS1 is h with eps = 0.001 (Table 3), RS2 the
    # log scaling, RS3 IMPALA's clipping.
    x = np.array([-100, -10, -1, 0, 0.5, 1, 10, 100, 1000], np.float64)
    rs1 = _np(transforms.value_rescaling(x, epsilon=0.001))
    rs2 = _np(transforms.asymmetric_log_shaping(x))
    rs3 = _np(transforms.optimistic_asymmetric_clipping(x))
    fourth = _np(transforms.fourth_root_shaping(x))
    np.testing.assert_allclose(
        rs1,
        [-9.149876, -2.326625, -0.415214, 0, 0.225245, 0.415214, 2.326625, 9.149876, 31.638584],
        atol=1e-6,
    )
    np.testing.assert_allclose(
        rs2,
        [-4.615121, -2.397895, -0.693147, 0, 0.810930, 1.386294, 4.795791, 9.230241, 13.817510],
        atol=1e-6,
    )
    np.testing.assert_allclose(
        rs3,
        [-0.3, -0.2999999988, -0.228478, 0, 2.310586, 3.807971, 4.9999999794, 5.0, 5.0],
        atol=1e-6,
    )
    assert rs3[0] == -0.3 and rs3[-2] == 5.0  # tanh(+-100) = +-1 exactly in float64
    np.testing.assert_allclose(
        fourth,
        [-2.270154, -0.831160, -0.190207, 0, 0.107182, 0.190207, 0.831160, 2.270154, 5.624819],
        atol=1e-6,
    )
    positive = x > 0
    mirrored = _np(transforms.asymmetric_log_shaping(-x[positive]))
    np.testing.assert_allclose(rs2[positive], 2 * np.abs(mirrored), rtol=1e-12)
    np.testing.assert_allclose(_np(transforms.value_rescaling(-x, 0.001)), -rs1, atol=1e-12)
    wide = np.linspace(-1e3, 1e3, 2001)
    rs3_wide = _np(transforms.optimistic_asymmetric_clipping(wide))
    assert np.all(rs3_wide >= -0.3) and np.all(rs3_wide <= 5.0)


def test_shapings_match_printed_formulas_in_numpy():
    r = np.concatenate([-np.logspace(-6, 4, 50), [0.0], np.logspace(-6, 4, 50)])
    np.testing.assert_allclose(
        _np(transforms.asymmetric_log_shaping(r)),
        np.log(np.abs(r) + 1.0) * (2.0 * (r >= 0) - 1.0 * (r < 0)),
        rtol=1e-9,
        atol=0,
    )
    np.testing.assert_allclose(
        _np(transforms.fourth_root_shaping(r)),
        np.sign(r) * ((np.abs(r) + 1.0) ** 0.25 - 1.0) + 0.001 * r,
        rtol=1e-9,
        atol=1e-15,
    )


def test_integer_rewards_become_float32():
    out = transforms.asymmetric_log_shaping(np.array([-1, 0, 3], np.int32))
    assert out.dtype == tf.float32
    np.testing.assert_allclose(_np(out), [-np.log(2), 0, 2 * np.log(4)], rtol=1e-6)


# ----------------------------------------------------------------------------- value rescaling


def _h_printed(x, eps):
    return np.sign(x) * (np.sqrt(np.abs(x) + 1) - 1) + eps * x


def _h_inverse_printed(x, eps):
    # Pohlen et al. (2018), Proposition A.2.
    return np.sign(x) * (((np.sqrt(1 + 4 * eps * (np.abs(x) + 1 + eps)) - 1) / (2 * eps)) ** 2 - 1)


@pytest.mark.parametrize("eps", [1e-3, 1e-2, 0.5])
def test_value_rescaling_matches_printed_formula(eps):
    x = np.concatenate([-np.logspace(-3, 4, 40), [0.0], np.logspace(-3, 4, 40)])
    np.testing.assert_allclose(
        _np(transforms.value_rescaling(x, eps)), _h_printed(x, eps), rtol=1e-12
    )
    y = _h_printed(x, eps)
    np.testing.assert_allclose(
        _np(transforms.inverse_value_rescaling(y, eps)),
        _h_inverse_printed(y, eps),
        rtol=1e-8,
        atol=1e-12,
    )


@pytest.mark.parametrize("eps", [1e-3, 0.0, 0.1])
def test_inverse_value_rescaling_round_trip_over_wide_range(eps):
    x = np.concatenate([-np.logspace(-8, 6, 300), [0.0, -1.0, 1.0], np.logspace(-8, 6, 300)])
    round_trip = _np(transforms.inverse_value_rescaling(transforms.value_rescaling(x, eps), eps))
    np.testing.assert_allclose(round_trip, x, rtol=1e-12, atol=0)
    assert _np(transforms.value_rescaling(0.0, eps)) == 0.0
    # The other order too: h(h^-1(y)) = y.
    other_order = transforms.value_rescaling(transforms.inverse_value_rescaling(x, eps), eps)
    np.testing.assert_allclose(_np(other_order), x, rtol=1e-12, atol=0)


def test_inverse_value_rescaling_float32_keeps_relative_precision():
    x = np.array([-1e6, -123.25, -1e-6, 0.0, 3e-7, 0.5, 1e6], np.float32)
    round_trip = _np(transforms.inverse_value_rescaling(transforms.value_rescaling(x)))
    assert round_trip.dtype == np.float32
    np.testing.assert_allclose(round_trip, x, rtol=1e-5, atol=0)


def test_value_rescaling_default_epsilon_and_eps_zero_inverse():
    assert transforms.VALUE_RESCALING_EPSILON == 1e-3  # LBC Table 3 RS1
    y = np.array([-3.0, 0.0, 2.0])
    np.testing.assert_allclose(
        _np(transforms.inverse_value_rescaling(y, 0.0)),
        np.sign(y) * ((np.abs(y) + 1) ** 2 - 1),
        rtol=1e-14,
    )


def test_value_rescaling_gradients_at_zero():
    # dh/dx(0) = 1/2 + eps and dh^-1/dy(0) = 1 / (1/2 + eps) (inverse function rule).
    x = tf.constant([0.0, 3.0], tf.float64)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        h = transforms.value_rescaling(x, 1e-3)
        h_inv = transforms.inverse_value_rescaling(x, 1e-3)
    dh = _np(tape.gradient(h, x))
    dh_inv = _np(tape.gradient(h_inv, x))
    np.testing.assert_allclose(dh, [0.501, 0.5 / np.sqrt(4.0) + 1e-3], rtol=1e-12)
    y = _h_inverse_printed(3.0, 1e-3)
    np.testing.assert_allclose(
        dh_inv, [1 / 0.501, 1 / (0.5 / np.sqrt(abs(y) + 1) + 1e-3)], rtol=1e-9
    )


def test_negative_epsilon_rejected():
    with pytest.raises(ValueError, match="epsilon"):
        transforms.value_rescaling([1.0], epsilon=-0.1)
    with pytest.raises(ValueError, match="epsilon"):
        transforms.inverse_value_rescaling([1.0], epsilon=-0.1)


# ----------------------------------------------------------------------------- registry and
# compilation


def test_registry_names_and_unknown_name():
    assert transforms.reward_transform("asymmetric_log") is transforms.asymmetric_log_shaping
    assert transforms.reward_transform("fourth_root") is transforms.fourth_root_shaping
    np.testing.assert_array_equal(
        _np(transforms.reward_transform("none")([-7.0, 2.0])), [-7.0, 2.0]
    )
    with pytest.raises(ValueError, match="unknown reward transform 'log'.*allowed"):
        transforms.reward_transform("log")


def test_jit_compiled_equals_eager():
    r = tf.constant(np.linspace(-30, 30, 121), tf.float32)

    def all_transforms(x):
        return tf.stack(
            [
                transforms.clip_rewards(x),
                transforms.optimistic_asymmetric_clipping(x),
                transforms.soft_asymmetric_clipping(x),
                transforms.asymmetric_log_shaping(x),
                transforms.fourth_root_shaping(x),
                transforms.inverse_value_rescaling(transforms.value_rescaling(x)),
            ]
        )

    compiled = tf.function(all_transforms, jit_compile=True)
    np.testing.assert_allclose(_np(compiled(r)), _np(all_transforms(r)), rtol=1e-6, atol=1e-6)


def test_transform_names_are_the_light_list_configs_validate_against():
    # Configs check names against common.settings.config without importing TensorFlow; both must
    # agree.
    assert tuple(transforms.REWARD_TRANSFORMS) == config.REWARD_TRANSFORMS
    for name in config.REWARD_TRANSFORMS:
        assert transforms.reward_transform(name) is transforms.REWARD_TRANSFORMS[name]

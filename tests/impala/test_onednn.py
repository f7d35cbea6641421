"""oneDNN changes the speed, not the numbers: the IMPALA loss and its gradients on one batch
(deep network, Pong shapes), computed in a process with TensorFlow's oneDNN kernels and in one
without, agree to float32 rounding. Tolerance: rtol 1e-4 on the loss; every gradient within
1e-4 of its tensor's largest entry (different summation orders in the convolutions)."""

import os
import subprocess
import sys
import textwrap

import numpy as np

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.util import _pywrap_util_port
    from impala import config as config_lib, learning, losses, networks
    from common.equations import sequences

    config = config_lib.default_config("Pong").validate()
    net = networks.make_network(config, 6)
    net.create_variables((84, 84, 4), np.uint8)
    rng = np.random.default_rng(0)
    for v in net.variables:  # the same weights in both processes, whatever the initialisers
        v.assign(rng.normal(scale=0.05, size=v.shape).astype(np.float32))
    T, B = 5, 2
    obs = tf.constant(rng.integers(0, 255, (T + 1, B, 84, 84, 4)), tf.uint8)
    actions = tf.constant(rng.integers(0, 6, (T + 1, B)), tf.int32)
    zeros = tf.zeros((T + 1, B))
    with tf.GradientTape() as tape:
        (logits, values), _ = net.unroll(obs, actions, zeros, tf.zeros((T + 1, B), tf.bool), ())
        loss, _ = losses.impala_loss(
            losses.LossHyperparameters.from_config(config), logits[:-1], values[:-1], values[-1],
            tf.constant(rng.normal(size=(T, B, 6)), tf.float32), actions[:-1],
            tf.constant(rng.normal(size=(T, B)), tf.float32),
            sequences.discounts_from_resets(tf.zeros((T + 1, B), tf.bool), 0.99))
    grads = tape.gradient(loss, net.trainable_variables)
    np.savez(sys.argv[1], loss=loss.numpy(), *[g.numpy() for g in grads])
    print("onednn", _pywrap_util_port.IsMklEnabled())
    """
)


def run(path: str, onednn: str) -> str:
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS=onednn)
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, path], capture_output=True, text=True, env=env, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_loss_and_gradients_with_and_without_onednn_agree(tmp_path):
    on, off = str(tmp_path / "on.npz"), str(tmp_path / "off.npz")
    assert "onednn True" in run(on, "1")  # the kernels really were switched
    assert "onednn False" in run(off, "0")
    with np.load(on) as a, np.load(off) as b:
        np.testing.assert_allclose(a["loss"], b["loss"], rtol=1e-4)
        grads = [key for key in a.files if key != "loss"]
        assert len(grads) > 10
        for key in grads:
            scale = np.abs(b[key]).max()
            np.testing.assert_allclose(a[key], b[key], rtol=0, atol=1e-4 * scale + 1e-12)
        assert any(not np.array_equal(a[key], b[key]) for key in grads)  # two kernel sets ran

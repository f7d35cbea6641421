"""IMPALA config: Table G.1 defaults, validation messages, CartPole choices."""

import dataclasses

import pytest

from impala import config as config_lib


def test_defaults_are_table_g1():
    c = config_lib.ImpalaConfig()
    table_g1 = dict(
        unroll_length=20,
        batch_size=32,
        discount=0.99,
        baseline_cost=0.5,
        entropy_cost=0.01,
        rmsprop_momentum=0.0,
        rmsprop_epsilon=0.01,
        learning_rate=0.0006,
        max_grad_norm=40.0,
        lr_anneal=True,
    )
    assert {k: getattr(c, k) for k in table_g1} == table_g1
    # §5.2.2: rho_bar = c_bar = 1; §5.3.2: 200 evaluation episodes with up to 30 no-ops.
    assert (c.clip_rho_threshold, c.clip_c_threshold, c.eval_episodes, c.eval_noop_max) == (
        1.0,
        1.0,
        200,
        30,
    )
    assert c.frames_per_learner_step == 32 * 20 * 4  # Table G.1: action repetitions 4


def test_every_field_has_help():
    for f in dataclasses.fields(config_lib.ImpalaConfig):
        assert f.metadata.get("help"), f.name


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(learning_rate=-1e-3), "--learning_rate=-0.001 must be > 0"),
        (dict(num_actors=0), "--num_actors=0 must be > 0"),
        (dict(discount=1.5), "--discount=1.5 must be in"),
        (dict(correction="retrace"), "--correction='retrace' is not one of vtrace"),
        (
            dict(network="resnet"),
            "--network='resnet' is not one of deep, shallow, nature, minatar, mlp",
        ),
        (dict(queue_capacity=8), "--queue_capacity=8 must be >= --batch_size=32"),
        (
            dict(actor_precision="float16"),
            "--actor_precision='float16' is not one of float32, bfloat16",
        ),
    ],
)
def test_validate_names_the_field(overrides, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        config_lib.ImpalaConfig(**overrides).validate()


def test_cartpole_defaults_and_overrides():
    c = config_lib.default_config("CartPole", batch_size=16)
    assert (c.network, c.use_lstm, c.frames_per_step, c.batch_size) == ("mlp", False, 1, 16)
    assert config_lib.default_config("Breakout").network == "deep"

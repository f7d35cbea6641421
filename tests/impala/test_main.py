"""`python -m impala.main` rejects bad flags quickly, on one line naming the flag, with a non-zero
status, and without importing TensorFlow (the command line itself is tested in
tests/common/experiments/test_cli.py)."""

import portpicker
import pytest

from tests.system_helpers import assert_one_line_error, run_main_logging_imports


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--env=Pongo"], "--env='Pongo' is not CartPole or an Atari game"),
        (["--learning_rate=-0.1"], "--learning_rate=-0.1 must be > 0"),
        (["--num_actors=0"], "--num_actors=0 must be > 0"),
        (["--correction=retrace"], "--correction='retrace' is not one of vtrace"),
        (["--ablations=vtrace,bogus"], "--ablations: 'bogus' is not one of vtrace"),
        (["--ablation=bogus"], "--ablation='bogus' is not one of vtrace"),
        (["--seeds=0"], "--seeds=0 must be >= 1"),
        (["--role=actor"], "--role=actor needs --replay_address"),
        (["--replay=fifo"], "--replay='fifo' is not one of queue, queue_with_replay, prioritized"),
        (
            ["--replay=queue_with_replay", "--replay_fraction=1"],
            "--replay_fraction=1.0 must be in (0, 1)",
        ),
        (["--publish_lag=-1"], "--publish_lag=-1 must be >= 0"),
        (["--network=resnet"], "--network='resnet' is not one of deep"),
        (["--learning_rat=0.1"], "unknown flag --learning_rat (did you mean --learning_rate?)"),
        (["--learning_rate=fast"], "--learning_rate=fast must be a number"),
        (["--total_frames=1.5"], "--total_frames=1.5 must be an integer"),
        (["--use_lstm=maybe"], "--use_lstm=maybe must be true or false"),
        (
            ["--env=CartPole", "--seeds=2", "--role=learner", "--replay_address=localhost:1"],
            "--role=learner runs one variant with one seed",
        ),
        (["Pong"], "unexpected arguments ['Pong']"),
    ],
)
def test_bad_flags_fail_on_one_line_before_starting_anything(flags, message):
    assert_one_line_error("impala.main", flags, message)


def test_unreachable_replay_address_names_the_flag():
    address = f"localhost:{portpicker.pick_unused_port()}"
    result, messages, imported = run_main_logging_imports(
        "--role=actor", f"--replay_address={address}", "--env=CartPole"
    )
    assert result.returncode == 1
    assert any(f"--replay_address={address}" in line for line in messages), result.stderr
    assert "tensorflow" in imported  # the import check above can fail: a run imports it

"""`python -m impala.main` rejects bad flags quickly, on one line naming the flag, with a non-zero
status, and without importing TensorFlow (the command line itself is tested in
tests/common/test_cli.py)."""

import subprocess
import sys

import portpicker
import pytest

IMPORT_TIME = "import time:"


def run_main(*flags, timeout=60, module="impala.main"):
    """Runs `python -m <module>`; returns the result, its stderr lines that are not the
    interpreter's import log, and the modules it imported (`-X importtime` logs every import on
    stderr, on any CPU)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", module, *flags],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = result.stderr.splitlines()
    imported = {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith(IMPORT_TIME)}
    messages = [line for line in lines if not line.startswith(IMPORT_TIME)]
    return result, messages, imported


def assert_one_line_error(module: str, flags, message: str) -> None:
    """`python -m <module> <flags>` exits 2 with one stderr line naming `message`, before
    TensorFlow or Reverb is imported."""
    result, messages, imported = run_main(*flags, module=module)
    assert result.returncode == 2
    assert len(messages) == 1 and messages[0].startswith("error: "), messages
    assert message in messages[0], messages
    assert "absl.flags" in imported  # the import log was read
    assert not {"tensorflow", "reverb"} & imported


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
    result, messages, imported = run_main(
        "--role=actor", f"--replay_address={address}", "--env=CartPole"
    )
    assert result.returncode == 1
    assert any(f"--replay_address={address}" in line for line in messages), result.stderr
    assert "tensorflow" in imported  # the import check above can fail: a run imports it

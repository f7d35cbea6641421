"""`python -m impala.main` rejects bad flags quickly, naming the flag, with a non-zero status."""

import subprocess
import sys

import portpicker
import pytest

from impala import main as impala_main


def run_main(*flags, timeout=60):
    return subprocess.run([sys.executable, "-m", "impala.main", *flags], capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("flags, message", [
    (["--env=Pongo"], "--env='Pongo' is not CartPole or an Atari game"),
    (["--learning_rate=-0.1"], "--learning_rate=-0.1 must be > 0"),
    (["--num_actors=0"], "--num_actors=0 must be > 0"),
    (["--correction=retrace"], "--correction='retrace' is not one of vtrace"),
    (["--ablations=vtrace,bogus"], "--ablations: 'bogus' is not one of vtrace"),
    (["--ablation=bogus"], "--ablation='bogus' is not one of vtrace"),
    (["--seeds=0"], "--seeds=0 must be >= 1"),
    (["--role=actor"], "--role=actor needs --replay_address"),
    (["--network=resnet"], "--network='resnet' is not one of deep"),
])
def test_bad_flags_fail_before_starting_anything(flags, message):
    result = run_main(*flags)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    assert "oneDNN" not in result.stderr  # TensorFlow's import banner: it was never imported


def test_unreachable_replay_address_names_the_flag():
    address = f"localhost:{portpicker.pick_unused_port()}"
    result = run_main("--role=actor", f"--replay_address={address}", "--env=CartPole")
    assert result.returncode != 0
    assert f"--replay_address={address}" in result.stderr, result.stderr


def test_seeds_flag_is_a_count_or_a_list():
    assert impala_main.parse_seeds(["3"]) == [0, 1, 2]
    assert impala_main.parse_seeds(["4", "9"]) == [4, 9]
    assert impala_main.parse_seeds(None) == [0]


def test_roles_match_the_launcher():
    from common import launch
    assert impala_main.ROLES == launch.ROLES

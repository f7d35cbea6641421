"""`python -m reactor.main` rejects a bad flag of each kind on one line naming the flag, with
exit status 2, before TensorFlow or Reverb are imported."""

import pytest

from tests.system_helpers import assert_one_line_error


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--env=Pongo"], "--env='Pongo' is not CartPole or an Atari game"),
        (["--learning_rate=-1"], "--learning_rate=-1.0 must be > 0"),
        (["--learning_rate=fast"], "--learning_rate=fast must be a number"),
        (["--batch_size=2.5"], "--batch_size=2.5 must be an integer"),
        (["--distributional=maybe"], "--distributional=maybe must be true or false"),
        (
            ["--prioritisation=per"],
            "--prioritisation='per' is not one of lazy, lazy_global, max, uniform",
        ),
        (["--beta_loo_c=0.5"], "--beta_loo_c=0.5 must be >= 1"),
        (["--replay_uniform_epsilon=1"], "--replay_uniform_epsilon=1.0 must be in [0, 1)"),
        (["--clip_c_threshold=2"], "--clip_c_threshold=2.0 needs --distributional=false"),
        (["--ablation=bogus"], "--ablation='bogus' is not one of reactor, reactor_nd"),
        (["--learnin_rate=1"], "unknown flag --learnin_rate (did you mean --learning_rate?)"),
    ],
)
def test_bad_flags_fail_on_one_line_before_starting_anything(flags, message):
    assert_one_line_error("reactor.main", flags, message)

"""common/experiments/compare.py: several papers' agents on one game, seeds and budget, one table
and plot; agent names are checked before anything runs."""

import os
import subprocess
import sys

import pytest


from common.experiments import dataclass_flags
from common.experiments import compare


def test_agent_names_and_their_commands():
    run = compare.AgentRun.parse("dice.baseline")
    assert (run.paper, run.ablation) == ("dice", "baseline")
    command = run.command(3, "/runs/c", ["--env=CartPole"])
    assert command[1:] == [
        "-m",
        "dice.main",
        "--ablation=baseline",
        "--seed=3",
        "--logdir=/runs/c/dice.baseline/seed3",
        "--env=CartPole",
    ]
    assert compare.AgentRun.parse("impala").command(0, "/r", [])[3] == "--seed=0"  # no ablation
    for name, message in (
        ("alphazero", "'alphazero' is not <paper> or <paper>.<ablation>"),
        ("dice.bogus", "'bogus' is not one of dice's ablations: dice, baseline"),
    ):
        with pytest.raises(dataclass_flags.FlagError, match=message):
            compare.AgentRun.parse(name)


def test_arguments_for_one_agent_reach_only_that_agent_or_paper():
    dice, impala = compare.AgentRun.parse("dice.baseline"), compare.AgentRun.parse("impala")
    argv = [
        "--eval_interval_s=0",
        "--replay_address=host:8000",  # a flag whose value holds a colon is shared
        "dice:--warmup_steps=2",
        "dice.baseline:--bandit_num_blocks=5",
        "lbc:--warmup_steps=3",
    ]
    assert dice.arguments(argv) == [
        "--eval_interval_s=0",
        "--replay_address=host:8000",
        "--warmup_steps=2",
        "--bandit_num_blocks=5",
    ]
    assert impala.arguments(argv) == ["--eval_interval_s=0", "--replay_address=host:8000"]
    compare.check_targets([dice, impala], argv[:4])
    with pytest.raises(
        dataclass_flags.FlagError, match="'lbc' is none of the agents or papers compared"
    ):
        compare.check_targets([dice, impala], argv)


def test_every_agent_is_checked_before_the_first_run(tmp_path):
    """Pong on 120K frames: IMPALA accepts it, DiCE refuses it (Table 5's 4,000 warm-up updates
    do not fit in its 11) unless given a shorter warm-up; nothing is written by the check."""
    runs = [compare.AgentRun.parse("impala"), compare.AgentRun.parse("dice")]
    logdir = str(tmp_path / "compare")
    shared = ["--env=Pong", "--total_frames=120000"]
    with pytest.raises(
        dataclass_flags.FlagError, match=r"dice refuses its flags: error: --warmup_steps=4000"
    ):
        compare.check_flags(runs, 0, logdir, shared)
    compare.check_flags(runs, 0, logdir, [*shared, "dice:--warmup_steps=2"])
    assert not os.path.exists(logdir)
    result = subprocess.run(
        [sys.executable, "-m", "dice.main", *shared, "--warmup_steps=2", "--check_flags"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0
    assert result.stdout.startswith("[dice] flags ok, Pong: 2 actors x 80 envs")


def test_bad_flags_fail_on_one_line():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "common.experiments.compare",
            "--agents=impala,dice.x",
            "--logdir=/tmp/none",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: --agents: 'x' is not one")


@pytest.mark.slow
def test_two_papers_on_cartpole_give_one_table(tmp_path):
    logdir = str(tmp_path)
    summary = compare.compare(
        ["impala", "dice.baseline"],
        "CartPole-v1",
        [0],
        total_frames=8_000,  # DiCE: 25 updates, past its CartPole warm-up of 20
        logdir=logdir,
        argv=["--eval_interval_s=0", "--log_interval_s=1"],
    )
    assert [v.variant for v in summary.variants] == ["impala", "dice.baseline"]
    for variant in summary.variants:
        assert variant.frames.mean > 4_000 and variant.final_return.mean > 0
        assert variant.final_hns is None  # CartPole has no human score
    with open(summary.summary_md) as f:
        table = f.read()
    assert table.startswith("# Agents compared on CartPole\n")
    assert "impala" in table and "dice.baseline" in table and "python -m PAPER.main" in table
    assert os.path.getsize(summary.curves_png) > 0

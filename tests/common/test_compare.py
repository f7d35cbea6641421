"""common/compare.py: several papers' agents on one game, seeds and budget, one table and plot;
agent names are checked before anything runs."""

import os
import subprocess
import sys

import pytest

from common import cli
from common import compare


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
        with pytest.raises(cli.FlagError, match=message):
            compare.AgentRun.parse(name)


def test_bad_flags_fail_on_one_line():
    result = subprocess.run(
        [sys.executable, "-m", "common.compare", "--agents=impala,dice.x", "--logdir=/tmp/none"],
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

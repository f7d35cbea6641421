"""IMPALA's multi-task agent (§5.3) end to end: `python -m impala.main` with two MinAtar games in
--env trains one network on both through real actor, learner and evaluator processes, and logs
every game under the game it played; the papers without a multi-task agent refuse a list."""

import collections
import csv
import os

import pytest

from common.runtime import runlog
from tests.system_helpers import assert_one_line_error, run_to_completion

GAMES = ("MinAtar/Breakout-v0", "MinAtar/Seaquest-v0")


def read_rows(path: str) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_one_agent_trains_on_two_games_and_logs_each_game_by_name(tmp_path):
    logdir = str(tmp_path)
    output = run_to_completion(
        logdir,
        "--env=breakout-minatar,minatar:seaquest",
        "--num_actors=2",
        "--envs_per_actor=8",
        "--batch_size=8",
        "--total_frames=40000",
        "--eval_interval_s=600",  # the final evaluation only
        "--eval_episodes=6",
        "--log_interval_s=1",
        flags=[],
        timeout_s=400,
    )
    assert f"[impala] {','.join(GAMES)}:" in output  # the startup line names the canonical list
    episodes = read_rows(os.path.join(logdir, runlog.EPISODES_CSV))
    played = collections.Counter(row["game"] for row in episodes)
    # Each actor's 8 environments: 4 per game. A random Breakout game is ~10x shorter than
    # Seaquest's; both ended games in 40K frames (20K each).
    assert set(played) == set(GAMES), played
    assert played["MinAtar/Breakout-v0"] > played["MinAtar/Seaquest-v0"] > 0
    evaluation = read_rows(os.path.join(logdir, runlog.EVAL_CSV))
    # 6 final episodes over 6 evaluation environments (min(8, 8) rounded down to 3 per game).
    assert collections.Counter(row["game"] for row in evaluation) == {game: 3 for game in GAMES}
    scalars = runlog.read_scalars(logdir)
    for game in GAMES:
        assert scalars[f"episode/return/{game}"], game
    assert len(scalars["episode/return"]) == len(episodes)


@pytest.mark.parametrize("module", ["reactor.main", "dice.main", "gdi.main", "lbc.main"])
def test_a_paper_without_a_multitask_agent_refuses_a_list(module):
    assert_one_line_error(
        module,
        ["--env=MinAtar/Breakout-v0,MinAtar/Seaquest-v0"],
        "lists several games: this paper trains on one (a list is IMPALA's multi-task agent)",
    )


@pytest.mark.parametrize(
    "env, message",
    [
        ("breakout-minatar,MinAtar/Breakout-v0", "names MinAtar/Breakout-v0 twice"),
        ("breakout-minatar,Pong", "mixes families"),
        ("breakout-minatar,minatar:tetris", "is not a MinAtar env"),
    ],
)
def test_bad_lists_of_games_fail_on_one_line(env, message):
    assert_one_line_error("impala.main", [f"--env={env}"], message)


def test_too_few_environments_per_actor_for_the_games_fail_on_one_line():
    assert_one_line_error(
        "impala.main",
        ["--env=breakout-minatar,minatar:seaquest,minatar:asterix", "--envs_per_actor=2"],
        "--envs_per_actor=2 must be at least the 3 games of --env: every actor plays every game",
    )

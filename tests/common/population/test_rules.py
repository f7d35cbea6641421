"""App. F's rules: the mean capped score by hand, the copy margin's strictness, the perturbation's
probability, factors and independence, and the member's fitness window over episodes.csv."""

import csv
import math
import os
import random

import numpy as np
import pytest

from common.population import member, rules

REFERENCES = {"a": (0.0, 10.0), "b": (2.0, 4.0), "c": (-1.0, 1.0)}


def test_mean_capped_score_by_hand():
    # a: 5 -> 0.5; b: 7 -> 2.5, capped to 1; c: -3 -> -1, not floored.
    assert rules.mean_capped_score({"a": 5.0, "b": 7.0, "c": -3.0}, REFERENCES) == pytest.approx(
        (0.5 + 1.0 - 1.0) / 3
    )
    assert math.isnan(rules.mean_capped_score({"a": 5.0, "b": 7.0}, REFERENCES))


def test_a_copy_needs_strictly_more_than_the_margin():
    assert rules.copies(0.30, 0.36)
    assert not rules.copies(0.30, 0.35)
    assert not rules.copies(0.30, 0.34)
    assert not rules.copies(0.30, math.nan) and not rules.copies(math.nan, 0.9)
    assert rules.copies(0.30, 0.31, margin=0.0)


def test_the_other_member_is_drawn_uniformly_from_the_rest():
    rng = random.Random(3)
    draws = [rules.pick_other("m1", ["m0", "m1", "m2", "m3"], rng) for _ in range(30_000)]
    counts = {name: draws.count(name) for name in ("m0", "m1", "m2", "m3")}
    assert counts["m1"] == 0
    for name in ("m0", "m2", "m3"):
        assert counts[name] / 30_000 == pytest.approx(1 / 3, abs=0.01)
    assert rules.pick_other("m1", ["m1"], rng) is None


def test_each_adapted_value_moves_by_1_2_or_its_inverse_with_probability_0_33_independently():
    rng = random.Random(0)
    start = {"learning_rate": 1e-3, "entropy_cost": 1e-2, "seed": 7}
    n = 40_000
    ratios = np.array(
        [
            [new[k] / start[k] for k in ("learning_rate", "entropy_cost")]
            for new in (
                rules.perturb(start, ("learning_rate", "entropy_cost"), rng) for _ in range(n)
            )
        ]
    )
    assert set(np.round(ratios, 12).ravel()) == {1.0, 1.2, round(1 / 1.2, 12)}
    moved = ratios != 1.0
    assert moved.mean(axis=0) == pytest.approx([0.33, 0.33], abs=0.01)
    assert (ratios > 1.0).sum(axis=0) / moved.sum(axis=0) == pytest.approx([0.5, 0.5], abs=0.015)
    assert (moved[:, 0] & moved[:, 1]).mean() == pytest.approx(0.33**2, abs=0.01)
    assert rules.perturb(start, ("learning_rate",), rng)["seed"] == 7


def write_episodes(path, rows, with_game=True):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["frames", "episode_return", "episode_length", "wall_time"] + ["game"] * with_game
        )
        for frames, game, value in rows:
            writer.writerow([frames, value, 10, 1.0] + [game] * with_game)


def test_the_fitness_window_is_the_last_games_and_an_absent_game_takes_its_last_100(tmp_path):
    path = tmp_path / "episodes.csv"
    # 150 games of c (return -1, then 1 for the last 50), then 10 of a (return 2 then 6) and b.
    rows = [(k, "c", -1.0 if k < 100 else 1.0) for k in range(150)]
    rows += [(200 + k, "a", 2.0 if k < 5 else 6.0) for k in range(10)]
    rows += [(300 + k, "b", 3.0) for k in range(10)]
    write_episodes(path, rows)
    log = member.EpisodeLog(str(path), "unused").refresh()
    assert len(log.rows) == 170 and log.frames == 309
    # Window 20: a's 10 (mean 4 -> 0.4), b's 10 (3 -> 0.5); c absent: its last 100, 50 of -1 and
    # 50 of 1 (mean 0 -> 0.5).
    assert log.fitness(REFERENCES, 20) == pytest.approx((0.4 + 0.5 + 0.5) / 3)
    # Window 60: c's last 40 are in it (all 1 -> capped 1).
    assert log.fitness(REFERENCES, 60) == pytest.approx((0.4 + 0.5 + 1.0) / 3)


def test_a_single_game_run_s_games_are_its_game_and_a_half_written_row_is_left_out(tmp_path):
    path = tmp_path / "episodes.csv"
    write_episodes(path, [(k, "", 5.0) for k in range(5)], with_game=False)
    with open(path, "a") as f:
        f.write("6,9")  # a writer's last row, cut mid-way
    log = member.EpisodeLog(str(path), "a").refresh()
    assert [game for game, _, _ in log.rows] == ["a"] * 5 and log.frames == 4
    assert log.fitness({"a": (0.0, 10.0)}, 100) == pytest.approx(0.5)


def test_the_lineage_names_the_member_whose_run_each_start_continues(tmp_path):
    run = str(tmp_path)
    member.append_lineage(run, 0, "member00", {"learning_rate": 1e-3})
    member.append_lineage(run, 500, "member00", {"learning_rate": 1.2e-3})
    member.append_lineage(run, 900, "member03", {"learning_rate": 1e-3 / 1.2})  # copied in
    rows = member.read_lineage(run)
    assert [(r["frames"], r["member"], r["source"]) for r in rows] == [
        ("0", "member00", "member00"),
        ("500", "member00", "member00"),
        ("900", "member03", "member00"),
    ]
    assert float(rows[1]["learning_rate"]) == 1.2e-3


def test_a_refresh_reads_what_was_appended_and_a_replaced_file_anew(tmp_path):
    path = tmp_path / "episodes.csv"
    write_episodes(path, [(k, "a", 1.0) for k in range(3)])
    log = member.EpisodeLog(str(path), "a").refresh()
    with open(path, "a") as f:
        f.write("3,2.0,10,1.0,a\n4,2.0")
    assert [r for _, _, r in log.refresh().rows] == [1.0, 1.0, 1.0, 2.0]
    with open(path, "a") as f:
        f.write(",10,1.0,a\n")
    assert log.refresh().frames == 4 and len(log.rows) == 5
    replacement = tmp_path / "new.csv"  # a resumed run's cut: a new file renamed over the old
    write_episodes(replacement, [(0, "a", 7.0)])
    os.replace(replacement, path)
    assert log.refresh().rows == [("a", 0.0, 7.0)]

"""benchmarks/launcher_overhead.py's arithmetic: a rate over a window of wall time from the
learner's summaries, and the table's means and Ray / local shares."""

import math

import pytest

from benchmarks import launcher_overhead


def test_rate_uses_the_first_and_last_point_inside_the_window():
    points = [(0.0, 0.0), (10.0, 500.0), (20.0, 1500.0), (30.0, 2000.0), (40.0, 4000.0)]
    assert launcher_overhead.rate(points, 10.0, 30.0) == pytest.approx(1500.0 / 20.0)
    assert launcher_overhead.rate(points, 5.0, 35.0) == pytest.approx(1500.0 / 20.0)
    assert launcher_overhead.rate(points, 0.0, 40.0) == pytest.approx(100.0)
    assert math.isnan(launcher_overhead.rate(points, 11.0, 19.0))  # no point inside
    assert math.isnan(launcher_overhead.rate(points, 15.0, 25.0))  # one point inside


def test_table_has_each_run_each_mean_and_the_share_of_the_first_launcher():
    results = [
        dict(launcher="local", start=30.0, learner=500.0, actors=600.0),
        dict(launcher="ray", start=40.0, learner=480.0, actors=630.0),
        dict(launcher="local", start=34.0, learner=600.0, actors=700.0),
        dict(launcher="ray", start=50.0, learner=560.0, actors=610.0),
    ]
    lines = launcher_overhead.table(results, ["local", "ray"]).splitlines()
    assert lines[2:] == [
        "| local | 1 | 30 | 500 | 600 |",
        "| local | 2 | 34 | 600 | 700 |",
        "| local | mean | 32 | 550 | 650 |",
        "| ray | 1 | 40 | 480 | 630 |",
        "| ray | 2 | 50 | 560 | 610 |",
        "| ray | mean | 45 | 520 | 620 |",
        "| ray / local | | | 0.945 | 0.954 |",
    ]

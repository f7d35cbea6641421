"""benchmarks/reactor_priorities.py on a small stream: the reference forest's reported
probabilities are its mixture's, every distance is one, and the designs keep the order the
benchmark's table reports (docs/papers/reactor.md)."""

import numpy as np
import pytest

from benchmarks import reactor_priorities as bench


def test_the_forest_reports_the_probabilities_of_its_mixture():
    rng = np.random.default_rng(0)
    forest = bench.Forest(num_streams=2, epsilon=0.1)
    stream_of = np.array([0, 1] * 10)
    for key, stream in enumerate(stream_of):
        forest.trees[stream].insert(key)
    for key in (2, 3, 9, 14):  # stream 0: keys 2 and 14; stream 1: keys 3 and 9
        forest.assign(key, stream_of[key], np.nan, float(key))
    forest.evict(0, 0, np.nan)  # the oldest key leaves: the replay holds keys 1..19
    reference = bench.mixture(forest.estimates(1, 20), 0.1)
    assert reference.sum() == pytest.approx(1.0)
    for _ in range(5):
        keys, probabilities = forest.sample(rng, 1, 20, stream_of)
        np.testing.assert_allclose(probabilities, reference[keys - 1])


def test_a_small_stream_orders_the_designs_as_the_table():
    stream = bench.Stream(
        capacity=300, min_size=150, lifetimes=2, every=20, envs_per_actor=3, pull_interval=40
    )
    rows = bench.run(stream)
    share = rows.pop("unassigned share")
    points = 6  # learner steps 60, 80, ..., 160: the replay is full after 300 / 5 = 60 steps
    assert len(share) == points and 0.3 < np.mean(share) < 0.9
    means = {name: np.mean(values) for name, values in rows.items()}
    for values in rows.values():
        assert len(values) == points and all(0 <= v <= 1 for v in values)
    assert means["tree_at_insert"] < means["lazy"] < means["lazy_global"] < means["max_priority"]
    assert means["balanced tree"] < means["tree_at_insert"]  # the reference's own class

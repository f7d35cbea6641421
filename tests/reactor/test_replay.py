"""Reactor's replay pattern: the writer inserts new keys with the estimate the learner published
last (the last acting weight), read every `pull_interval` appends; the table follows the config;
a real Reverb table samples with the probabilities of the numpy model the benchmark replays."""

import numpy as np
import pytest
import tensorflow as tf

from common.replay import patterns
from common.replay import replay as common_replay
from common.replay import parameters
from common.replay import writers
from reactor import config as config_lib
from reactor import priorities
from reactor import replay


class FakeWriter:
    def __init__(self):
        self.initial_priority = 1.0
        self.priorities = []

    def append(self, step, first_step_extras=None, episode_end=None):
        self.priorities.append(self.initial_priority)


class FakeSubscriber:
    def __init__(self):
        self.published = None  # nothing published yet
        self.reads = 0

    def latest(self, timeout_ms=1000):
        self.reads += 1
        return self.published


def test_new_keys_enter_with_the_last_published_estimate():
    writer, subscriber = FakeWriter(), FakeSubscriber()
    estimated = replay.EstimatedPriorityWriter(writer, subscriber, pull_interval=3)
    for i in range(7):
        if i == 2:
            # The weights end with the estimate.
            subscriber.published = parameters.Published(5, 500, ["weights", 0.25])
        if i == 5:
            subscriber.published = parameters.Published(9, 900, ["weights", 0.75])
        estimated.append({})
    # Reads at appends 0, 3 and 6: 1.0 until the read after the first publish, and so on.
    assert subscriber.reads == 3
    assert writer.priorities == [1.0, 1.0, 1.0, 0.25, 0.25, 0.25, 0.75]
    assert estimated.initial_priority == 0.75


def test_pattern_follows_the_config():
    config = config_lib.ReactorConfig().validate()
    pattern = replay.make_pattern(config)
    assert isinstance(pattern, patterns.Prioritized)
    assert pattern.item_length == 33  # §3.4: sequences of 33 frames
    assert pattern.period == 1  # §3.3: one key per step
    assert pattern.priority_exponent == 1.0
    assert pattern.samples_per_insert == 0.8  # 4 sequences per 5 acting steps (§3.4)
    uniform = replay.make_pattern(config_lib.ReactorConfig(prioritisation="uniform"))
    assert uniform.priority_exponent == 0.0  # every priority ** 0 = 1: uniform sampling


@pytest.mark.parametrize("exponent", [1.0, 0.5])
def test_reverb_samples_with_the_probabilities_of_the_numpy_model(exponent):
    """A real Reverb table (Reactor's, small) driven through a script of two actors' inserts at
    the learner's estimate, batches of 4, priorities written back and FIFO evictions: every
    sampled item's probability, table size, stored priority and sample count are the model's
    (`reactor.priorities.ReplayModel` + `PriorityEstimates`, what the benchmark replays)."""
    capacity, epsilon = 7, 0.1
    signature = common_replay.sequence_signature({"id": tf.TensorSpec([], tf.int64)}, 1)
    table = common_replay.prioritized_table(
        patterns.EXPERIENCE_TABLE, capacity, exponent, signature, min_size=1
    )
    server = common_replay.start_server([table])
    try:
        client = common_replay.connect(common_replay.address_of(server))
        actors = [
            writers.SequenceWriter(
                client, patterns.EXPERIENCE_TABLE, 1, 1, 1, max_in_flight_items=0
            )
            for _ in range(2)
        ]
        model = priorities.ReplayModel(capacity, exponent)
        estimates = priorities.PriorityEstimates("lazy", epsilon, rate=0.5, exponent=exponent)
        rng = np.random.default_rng(0)
        times_sampled, next_id, checked, evicted = {}, 0, 0, 0

        def insert(count):
            nonlocal next_id
            for _ in range(count):
                writer = actors[next_id % 2]  # the actors take turns
                writer.initial_priority = estimates.insert_priority  # as last published
                writer.append({"id": np.array([next_id], np.int64)})  # flushed: in the table
                model.insert(next_id, estimates.insert_priority)
                next_id += 1

        insert(capacity)
        for round_ in range(12):  # keys sampled for the first time and again, at changing P
            samples = list(
                client.sample(patterns.EXPERIENCE_TABLE, num_samples=4, emit_timesteps=False)
            )
            ids = [int(s.data[0][0]) for s in samples]
            info = {
                name: np.array([getattr(s.info, name) for s in samples])
                for name in ("probability", "table_size", "priority", "times_sampled")
            }
            keys = np.array([s.info.key for s in samples], np.uint64)  # as the learner's
            np.testing.assert_allclose(info["probability"], model.probabilities(ids), rtol=1e-9)
            np.testing.assert_array_equal(info["table_size"], len(model))
            np.testing.assert_allclose(info["priority"], [model.priorities[i] for i in ids])
            for i, count in zip(ids, info["times_sampled"]):
                times_sampled[i] = times_sampled.get(i, 0) + 1
                assert count == times_sampled[i]  # Reverb counts this sample
            checked += len(ids)
            written = estimates.update(
                rng.uniform(0.1, 3.0, size=4),
                info["probability"],
                info["table_size"],
                info["times_sampled"] == 1,
            )
            if round_ % 4 == 3:  # keys sampled, then evicted before their write: both ignore it
                insert(capacity // 2)
            common_replay.update_priorities(client, patterns.EXPERIENCE_TABLE, keys, written)
            evicted += sum(i not in model.priorities for i in ids)
            model.update(ids, written)
            insert(2)
        assert checked == 48 and next_id > 3 * capacity and evicted > 0
        assert estimates.insert_priority != 1.0  # the estimate moved between inserts
        for writer in actors:
            writer.close()
    finally:
        server.stop()

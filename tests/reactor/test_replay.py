"""Reactor's replay pattern: the writer inserts new keys with the estimate the learner published
last (the last acting weight), read every `pull_interval` appends; the table follows the config."""

from common import patterns
from reactor import config as config_lib
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
            subscriber.published = (5, ["weights", 0.25])  # (step, [..., estimate])
        if i == 5:
            subscriber.published = (9, ["weights", 0.75])
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

"""Tests for common/replay/replay.py against real Reverb servers started in the tests (no fakes).

Step values encode (environment, time) so item contents can be checked exactly: field `x` of
environment e at its step t is `100 * e + t`, and the first-step extra `core` is `1000 * e + t`.
"""

import collections
import multiprocessing
import time

import numpy as np
import portpicker
import pytest
import reverb
import tensorflow as tf
import tree

from common.replay import replay

from common.replay import parameters

from common.replay import writers

STEP_SPEC = {"x": tf.TensorSpec([], tf.int32), "pair": tf.TensorSpec([2], tf.int32)}
EXTRAS_SPEC = {"core": tf.TensorSpec([3], tf.float32)}


@pytest.fixture
def serve():
    """Starts servers for a test and always stops them."""
    servers = []

    def start(*tables, **kwargs):
        server = replay.start_server(tables, **kwargs)
        servers.append(server)
        return server, replay.connect(replay.address_of(server), timeout_s=5)

    yield start
    for server in servers:
        server.stop()


def batched_step(num_envs, t):
    """One batched actor step at time t (same t in every environment)."""
    envs = np.arange(num_envs, dtype=np.int32)
    return {"x": 100 * envs + t, "pair": np.stack([envs, np.full_like(envs, t)], axis=1)}


def batched_extras(num_envs, t):
    envs = np.arange(num_envs, dtype=np.float32)
    return {"core": np.repeat((1000 * envs + t)[:, None], 3, axis=1)}


def sample_all(client, table, n):
    """n samples as (info, data) via the Python client (data unpacked as the table signature)."""
    samples = client.sample(table, n, emit_timesteps=False, unpack_as_table_signature=True)
    return [(s.info, s.data) for s in samples]


# ----------------------------------------------------------------------------------------------
# Queue pattern (IMPALA)


def test_unroll_items_overlap_by_one_step_keep_envs_apart_and_store_first_step_extras(serve):
    num_envs, unroll, steps = 3, 4, 13  # 13 steps -> unrolls starting at t = 0, 4, 8 per env
    signature = replay.sequence_signature(STEP_SPEC, unroll + 1, EXTRAS_SPEC)
    server, client = serve(replay.queue_table("queue", 100, signature))
    with writers.UnrollWriter(client, "queue", unroll, num_envs) as writer:
        for t in range(steps):
            writer.append(batched_step(num_envs, t), first_step_extras=batched_extras(num_envs, t))
        writer.flush()
    assert client.server_info()["queue"].current_size == num_envs * 3

    # The dataset ends once the queue stays empty for 500 ms: after exactly 9 items.
    dataset = replay.unroll_dataset(
        replay.address_of(server), "queue", signature, batch_size=3, rate_limiter_timeout_ms=500
    )
    batches = list(dataset)
    assert len(batches) == 3
    seen = []
    for sample in batches:
        x = sample.data["steps"]["x"].numpy()
        assert x.shape == (unroll + 1, 3)  # time-major [T+1, B]
        pair = sample.data["steps"]["pair"].numpy()
        core = sample.data["first_step_extras"]["core"].numpy()
        assert pair.shape == (unroll + 1, 3, 2) and core.shape == (3, 3)
        np.testing.assert_array_equal(sample.info.times_sampled.numpy(), 1)
        for b in range(3):
            env, start = divmod(int(x[0, b]), 100)
            np.testing.assert_array_equal(x[:, b], 100 * env + start + np.arange(unroll + 1))
            np.testing.assert_array_equal(pair[:, b, 0], env)
            np.testing.assert_array_equal(pair[:, b, 1], start + np.arange(unroll + 1))
            np.testing.assert_array_equal(core[b], 1000 * env + start)
            seen.append((env, start))
    # Starts 0, 4, 8: item k ends at t = 4k + 4, the first step of item k + 1 (overlap by one).
    assert sorted(seen) == [(e, s) for e in range(num_envs) for s in (0, 4, 8)]
    assert client.server_info()["queue"].current_size == 0  # each item sampled once, then gone


def test_unroll_writer_times_out_instead_of_blocking_on_a_full_queue(serve):
    signature = replay.sequence_signature(STEP_SPEC, 3)
    _, client = serve(replay.queue_table("queue", 1, signature))
    writer = writers.UnrollWriter(client, "queue", 2, num_envs=1, flush_timeout_ms=200)
    for t in range(3):  # completes the first unroll; the queue (size 1) accepts it
        writer.append(batched_step(1, t))
    writer.append(batched_step(1, 3))
    with pytest.raises(reverb.DeadlineExceededError):
        writer.append(batched_step(1, 4))  # second unroll: nobody samples, the queue stays full
    writer.close(timeout_ms=100)  # returns: shutdown never waits forever
    assert client.server_info()["queue"].current_size == 1


def test_a_batch_of_many_items_goes_to_reverb_in_groups_and_resumes_after_a_timeout(serve, capfd):
    """100 environments complete their unrolls in one step, into a queue that holds 40: the
    writer hands Reverb at most `MAX_UNCONFIRMED_ITEMS` unconfirmed items at a time (so Reverb
    never warns about 50 pending ones), times out while the queue is full, and its later
    flushes insert the rest: every unroll exactly once."""
    num_envs, unroll, capacity = 100, 2, 40
    assert num_envs > 50 > writers.MAX_UNCONFIRMED_ITEMS
    signature = replay.sequence_signature(STEP_SPEC, unroll + 1)
    _, client = serve(replay.queue_table("queue", capacity, signature))
    writer = writers.UnrollWriter(client, "queue", unroll, num_envs, flush_timeout_ms=300)
    writer.append(batched_step(num_envs, 0))
    writer.append(batched_step(num_envs, 1))
    with pytest.raises(reverb.DeadlineExceededError):
        writer.append(batched_step(num_envs, 2))  # completes 100 unrolls; 40 fit
    received = []
    while len(received) < num_envs:
        size = client.server_info()["queue"].current_size
        received += [data["steps"]["x"] for _, data in sample_all(client, "queue", size)]
        try:
            writer.flush()
        except reverb.DeadlineExceededError:
            continue  # the queue filled again: read it, then flush again
    writer.close()
    assert client.server_info()["queue"].current_size == 0
    envs = np.arange(num_envs)[:, None]
    np.testing.assert_array_equal(sorted(map(tuple, received)), 100 * envs + np.arange(3))
    time.sleep(0.5)  # Reverb's writer thread logs on its own
    assert "alarmingly high" not in capfd.readouterr().err


def test_writer_rejects_steps_without_the_env_axis_and_inconsistent_extras(serve):
    _, client = serve(replay.queue_table("queue", 10, replay.sequence_signature(STEP_SPEC, 3)))
    with writers.UnrollWriter(client, "queue", 2, num_envs=2) as writer:
        with pytest.raises(ValueError, match="step field x .* num_envs=2"):
            writer.append({"x": np.zeros(3, np.int32), "pair": np.zeros((2, 2), np.int32)})
        writer.append(batched_step(2, 0))
        with pytest.raises(ValueError, match="first_step_extras must be given on every append"):
            writer.append(batched_step(2, 1), first_step_extras=batched_extras(2, 1))
    with pytest.raises(ValueError, match="stride"):
        writers.SequenceWriter(client, "queue", sequence_length=3, stride=4, num_envs=1)


# ----------------------------------------------------------------------------------------------
# Prioritised sequences (Reactor)


def test_sequence_writer_inserts_one_sequence_per_stride_per_env(serve):
    num_envs, length, steps = 2, 3, 5  # stride 1: sequences start at t = 0, 1, 2
    signature = replay.sequence_signature(STEP_SPEC, length, EXTRAS_SPEC)
    _, client = serve(replay.prioritized_table("prio", 100, 1.0, signature))
    with writers.SequenceWriter(client, "prio", length, 1, num_envs, initial_priority=2.5) as w:
        for t in range(steps):
            w.append(batched_step(num_envs, t), first_step_extras=batched_extras(num_envs, t))
    assert client.server_info()["prio"].current_size == num_envs * 3
    starts = set()
    for info, data in sample_all(client, "prio", 200):
        assert info.priority == 2.5
        env, start = divmod(int(data["steps"]["x"][0]), 100)
        np.testing.assert_array_equal(data["steps"]["x"], 100 * env + start + np.arange(length))
        np.testing.assert_array_equal(data["first_step_extras"]["core"], 1000 * env + start)
        starts.add((env, start))
    assert starts == {(e, s) for e in range(num_envs) for s in range(3)}


def test_priority_updates_set_the_sampling_probabilities(serve):
    signature = replay.sequence_signature(STEP_SPEC, 2)
    server, client = serve(replay.prioritized_table("prio", 100, 0.5, signature))
    with writers.SequenceWriter(client, "prio", 2, 1, num_envs=1) as writer:
        for t in range(5):  # 4 sequences, all at the initial priority 1
            writer.append(batched_step(1, t))
    keys_by_start = {}
    for info, data in sample_all(client, "prio", 200):
        keys_by_start[int(data["steps"]["x"][0])] = info.key
        assert info.probability == pytest.approx(0.25)
    assert sorted(keys_by_start) == [0, 1, 2, 3]

    # Exponent 0.5: priorities (4, 1, 1, 0) -> weights (2, 1, 1, 0) -> P = (1/2, 1/4, 1/4, 0).
    replay.update_priorities(
        client, "prio", [keys_by_start[s] for s in range(4)], np.array([4.0, 1.0, 1.0, 0.0])
    )
    expected = {0: 0.5, 1: 0.25, 2: 0.25}
    counts = collections.Counter()
    dataset = replay.unroll_dataset(replay.address_of(server), "prio", signature, batch_size=4)
    for sample in dataset.take(100):
        starts = sample.data["steps"]["x"].numpy()[0]
        for start, probability in zip(starts, sample.info.probability.numpy()):
            assert probability == pytest.approx(expected[int(start)])  # never the priority-0 item
            counts[int(start)] += 1
    # 400 draws: item 0 is drawn ~200 times, items 1 and 2 ~100 (5 sigma bands, never flaky).
    assert 150 < counts[0] < 250 and 60 < counts[1] < 140 and 60 < counts[2] < 140


def test_update_priorities_rejects_bad_values(serve):
    signature = replay.sequence_signature(STEP_SPEC, 2)
    _, client = serve(replay.prioritized_table("prio", 10, 1.0, signature))
    with pytest.raises(ValueError, match="finite and >= 0"):
        replay.update_priorities(client, "prio", [1, 2], [1.0, -1.0])
    with pytest.raises(ValueError, match="same size"):
        replay.update_priorities(client, "prio", [1, 2], [1.0])


# ----------------------------------------------------------------------------------------------
# Sample-k sequences with burn-in (DiCE, GDI, LBC)

BURN_IN, LENGTH = 2, 3  # items of 2 + 3 + 1 = 6 steps, one every 3 steps
P = None  # a padding step in the expected layouts below


def expected_items(episode_length, env=0):
    """Hand-derived layouts (the sequence layout of docs/papers/dice.md#departures-from-the-paper):
    2 padding steps, the episode, padding at the end."""
    layouts = {
        # stream: P P 0 1 2 3 4 5 6 -> items at stream steps 0, 3, 6 (trained 2-4, 5-7, 8-10)
        7: [[P, P, 0, 1, 2, 3], [1, 2, 3, 4, 5, 6], [4, 5, 6, P, P, P]],
        # stream: P P 0 1 2 -> one item whose trained window (stream steps 2-4) holds the episode
        3: [[P, P, 0, 1, 2, P]],
        # stream: P P 0 1 2 3 -> item 0 trains on 0 1 2 and bootstraps on 3; step 3 needs item 1
        4: [[P, P, 0, 1, 2, 3], [1, 2, 3, P, P, P]],
    }
    return [[P if t is None else 100 * env + t for t in item] for item in layouts[episode_length]]


def test_burn_in_sequences_are_padded_masked_and_never_mix_episodes(serve):
    signature = replay.burn_in_signature(STEP_SPEC, BURN_IN, LENGTH, EXTRAS_SPEC)
    _, client = serve(replay.sample_k_table("seq", 100, 2, 2.0, 1, 100.0, signature))
    # env 0 plays episodes of 7 and then 3 steps; env 1 one episode of 4 steps, then 6 steps of
    # an unfinished episode, whose first item is complete (and inserted) after 4 of them.
    ends = {0: {6, 9}, 1: {3}}
    with writers.BurnInSequenceWriter(client, "seq", BURN_IN, LENGTH, num_envs=2) as writer:
        for t in range(10):
            episode_end = np.array([t in ends[0], t in ends[1]])
            writer.append(batched_step(2, t), episode_end, first_step_extras=batched_extras(2, t))

    # Episode of env 0 starting at t = 7 appears with times shifted by 7 (x = t_global).
    want = {tuple(i) for i in expected_items(7)}
    want |= {tuple(P if v is None else v + 7 for v in i) for i in expected_items(3)}
    want |= {tuple(i) for i in expected_items(4, env=1)} | {(P, P, 104, 105, 106, 107)}
    assert client.server_info()["seq"].current_size == len(want)  # (else sampling would block)
    got = {}
    samples = sample_all(client, "seq", 2 * len(want))  # k = 2 samples of every item
    for info, data in samples:
        mask = data["steps"]["mask"]
        x = data["steps"]["x"]
        assert set(np.unique(mask)) <= {0.0, 1.0}
        np.testing.assert_array_equal(x[mask == 0], 0)  # padding is zeros in every field
        np.testing.assert_array_equal(data["steps"]["pair"][mask == 0], 0)
        layout = tuple(int(v) if m else P for v, m in zip(x, mask))
        got.setdefault(layout, collections.Counter())[info.key] += 1
        # Extras: the core state at the item's first step or, when that is padding, at the
        # episode's first step; either way at the item's first real step.
        env, t = divmod(int(x[mask == 1][0]), 100)
        np.testing.assert_array_equal(data["first_step_extras"]["core"], 1000 * env + t)
    assert set(got) == want
    # Each item was sampled exactly k = 2 times (max_times_sampled), then removed from the table.
    assert all(list(c.values()) == [2] for c in got.values())
    assert client.server_info()["seq"].current_size == 0


@pytest.mark.parametrize("period", [None, 30])
def test_burn_in_items_of_varied_episodes_match_the_padded_stream_layout(serve, period):
    """Episodes of 1, 5, 80, 121, 200 and 300 steps (DiCE's burn-in 40, length 80; period 80
    and a period shorter than the burn-in): the table holds exactly the items of the documented
    layout, derived here in numpy from the padded stream, not from the writer. (The 300-step
    episode outlives the writer's padding block, which is then appended again at its end.)"""
    burn_in, length, num_envs = 40, 80, 2
    item_length = burn_in + length + 1
    stride = length if period is None else period
    episodes = {0: [1, 5, 80, 121, 200, 300], 1: [300, 200, 121, 80, 5, 1]}  # 707 steps each
    num_steps = sum(episodes[0])

    def step(env, t):
        return {"x": np.int32(1000 * env + t), "pair": np.array([env + 1, t + 1], np.int32)}

    def core(env, t):
        return {"core": np.full(3, 10000 * env + t, np.float32)}

    padding = {"x": np.int32(0), "pair": np.zeros(2, np.int32)}
    want = []
    for env, lengths in episodes.items():
        first = 0  # global time of the episode's first step
        for n in lengths:
            # The stream: burn_in padding steps, the n real steps, then padding; an item starts
            # every `stride` stream steps while its trained window (after the burn-in) holds a
            # real step. Extras: those of the item's first real step.
            stream = [None] * burn_in + list(range(first, first + n)) + [None] * item_length
            for start in range(0, n, stride):
                steps = stream[start : start + item_length]
                want.append(
                    {
                        "x": np.array(
                            [padding["x"] if t is None else step(env, t)["x"] for t in steps]
                        ),
                        "pair": np.stack(
                            [padding["pair"] if t is None else step(env, t)["pair"] for t in steps]
                        ),
                        "mask": np.array([t is not None for t in steps], np.float32),
                        "core": core(env, first + max(start - burn_in, 0))["core"],
                    }
                )
            first += n

    signature = replay.burn_in_signature(STEP_SPEC, burn_in, length, EXTRAS_SPEC)
    # Each item sampled once and then removed, so the samples are the table's items exactly.
    _, client = serve(replay.sample_k_table("seq", 1000, 1, 1.0, 1, 1e6, signature))
    ends = {env: set(np.cumsum(lengths) - 1) for env, lengths in episodes.items()}
    with writers.BurnInSequenceWriter(
        client, "seq", burn_in, length, num_envs, period=period
    ) as writer:
        for t in range(num_steps):
            batch = [step(env, t) for env in range(num_envs)]
            writer.append(
                {key: np.stack([s[key] for s in batch]) for key in padding},
                np.array([t in ends[env] for env in range(num_envs)]),
                first_step_extras={
                    "core": np.stack([core(env, t)["core"] for env in range(num_envs)])
                },
            )
    assert client.server_info()["seq"].current_size == len(want)

    def key(item):
        return tuple(np.asarray(item[k]).tobytes() for k in ("x", "pair", "mask", "core"))

    got = []
    for info, data in sample_all(client, "seq", len(want)):
        assert info.priority == 1.0
        got.append({**data["steps"], "core": data["first_step_extras"]["core"]})
        assert got[-1]["x"].dtype == np.int32 and got[-1]["mask"].dtype == np.float32
    assert collections.Counter(map(key, got)) == collections.Counter(map(key, want))
    assert client.server_info()["seq"].current_size == 0


def test_burn_in_writer_times_out_on_a_full_table_keeps_the_step_and_closes(serve):
    signature = replay.burn_in_signature(STEP_SPEC, 1, 2)
    _, client = serve(replay.queue_table("queue", 1, signature))
    writer = writers.BurnInSequenceWriter(
        client, "queue", 1, 2, num_envs=1, max_in_flight_items=0, flush_timeout_ms=200
    )
    writer.append(batched_step(1, 0), np.array([True]))  # one-step episode: one item, accepted
    with pytest.raises(reverb.DeadlineExceededError):
        writer.append(batched_step(1, 1), np.array([True]))  # the queue (size 1) is full
    with pytest.raises(reverb.DeadlineExceededError):
        writer.flush(timeout_ms=100)  # still full: every wait is bounded
    assert sample_all(client, "queue", 1)[0][1]["steps"]["x"][1] == 0  # frees the queue
    writer.flush(timeout_ms=5000)  # the kept step's item goes in once there is room
    assert sample_all(client, "queue", 1)[0][1]["steps"]["x"][1] == 1
    writer.append(batched_step(1, 2), np.array([True]))
    writer.append(batched_step(1, 3), np.array([False]))  # the queue is full again
    writer.close(timeout_ms=100)  # returns: shutdown never waits forever


def test_burn_in_writer_rejects_a_mask_field(serve):
    signature = replay.burn_in_signature(STEP_SPEC, BURN_IN, LENGTH)
    _, client = serve(replay.sample_k_table("seq", 10, 2, 2.0, 1, 10.0, signature))
    with writers.BurnInSequenceWriter(client, "seq", BURN_IN, LENGTH, num_envs=1) as writer:
        with pytest.raises(ValueError, match="must not contain a 'mask'"):
            writer.append({**batched_step(1, 0), "mask": np.ones(1, np.float32)}, np.array([False]))


# ----------------------------------------------------------------------------------------------
# Whole items and shared references write the same items

# Fields of several dtypes and shapes, like an actor's record (observation planes, flags, ints).
RICH_SPEC = {
    "obs": tf.TensorSpec([3, 2], tf.uint8),
    "reset": tf.TensorSpec([], tf.bool),
    "action": tf.TensorSpec([], tf.int32),
    "nested": {"value": tf.TensorSpec([2], tf.float32), "step": tf.TensorSpec([], tf.int64)},
}
RICH_EXTRAS = {"core": (tf.TensorSpec([4], tf.float32), tf.TensorSpec([4], tf.float32))}


def random_steps(rng, num_envs, num_steps):
    """Per-step batched records and extras of random values, every step different."""
    for _ in range(num_steps):
        yield (
            {
                "obs": rng.integers(0, 256, (num_envs, 3, 2), dtype=np.uint8),
                "reset": rng.random(num_envs) < 0.3,
                "action": rng.integers(0, 1000, num_envs, dtype=np.int32),
                "nested": {
                    "value": rng.normal(size=(num_envs, 2)).astype(np.float32),
                    "step": rng.integers(0, 2**40, num_envs, dtype=np.int64),
                },
            },
            {"core": tuple(rng.normal(size=(num_envs, 4)).astype(np.float32) for _ in range(2))},
        )


def table_items(client, table, num_items):
    """The table's items (each sampled once and removed) as a multiset of their bytes."""
    assert client.server_info()[table].current_size == num_items
    keys = collections.Counter()
    for _, data in sample_all(client, table, num_items):
        keys[tuple(np.asarray(x).tobytes() for x in tf.nest.flatten(data))] += 1
    assert client.server_info()[table].current_size == 0
    return keys


def test_whole_unrolls_equal_the_shared_reference_sequences(serve):
    """IMPALA's `UnrollWriter` (whole items) and a `SequenceWriter` of the same length and
    stride (items referencing shared steps) write the same items from the same steps, to two
    tables at once (QueueWithReplay's queue and replay)."""
    num_envs, unroll, num_steps = 3, 5, 37  # 7 unrolls per env; 2 steps left over
    signature = replay.sequence_signature(RICH_SPEC, unroll + 1, RICH_EXTRAS)
    tables = [replay.sample_k_table(name, 100, 1, 1.0, 1, 1e6, signature) for name in "abcd"]
    _, client = serve(*tables)
    whole = writers.UnrollWriter(client, ("a", "b"), unroll, num_envs)
    shared = writers.SequenceWriter(client, ("c", "d"), unroll + 1, unroll, num_envs)
    for step, extras in random_steps(np.random.default_rng(0), num_envs, num_steps):
        whole.append(step, first_step_extras=extras)
        shared.append(step, first_step_extras=extras)
    whole.close()
    shared.close()
    items = [table_items(client, name, num_envs * 7) for name in "abcd"]
    assert items[0] == items[1] == items[2] == items[3]
    assert len(items[0]) == num_envs * 7  # random values: every item differs


@pytest.mark.parametrize(
    "burn_in,length,period", [(40, 80, 80), (40, 80, 30), (3, 4, 1), (0, 5, 5)]
)
def test_whole_burn_in_items_equal_references_into_the_padded_stream(
    serve, burn_in, length, period
):
    """`BurnInSequenceWriter` (whole items gathered from rings) against the layout written the
    other way: each episode's padded stream (`burn_in` zero steps whose extras are the
    episode's first, the episode, zero steps to the last item's end) appended step by step to a
    `SequenceWriter` with the same period, whose items reference those steps. Random episode
    lengths from 1 to 3 items' worth, three environments ending their games at different steps."""
    num_envs, num_steps = 3, 700
    item_length = burn_in + length + 1
    rng = np.random.default_rng(burn_in + length + period)
    ends = rng.random((num_steps, num_envs)) < 1 / rng.integers(1, 3 * item_length, num_envs)
    ends[-1] = True  # every episode ends, so both ways insert all their items
    signature = replay.burn_in_signature(RICH_SPEC, burn_in, length, RICH_EXTRAS)
    tables = [replay.sample_k_table(name, 10_000, 1, 1.0, 1, 1e9, signature) for name in "ab"]
    _, client = serve(*tables)
    whole = writers.BurnInSequenceWriter(client, "a", burn_in, length, num_envs, period=period)
    streams = [[] for _ in range(num_envs)]  # each env's current episode: (step, extras)
    reference = []

    def write_padded(env_steps):
        """The episode's padded stream through its own SequenceWriter (one env)."""
        zero = tree.map_structure(np.zeros_like, env_steps[0][0])
        count = len(env_steps)
        stream_length = (-(-count // period) - 1) * period + item_length
        padded = [(dict(zero, mask=np.float32(0)), env_steps[0][1])] * burn_in
        padded += [(dict(s, mask=np.float32(1)), e) for s, e in env_steps]
        padded += [(dict(zero, mask=np.float32(0)), env_steps[0][1])] * (
            stream_length - len(padded)
        )
        with writers.SequenceWriter(client, "b", item_length, period, num_envs=1) as writer:
            for s, e in padded:
                writer.append(*tree.map_structure(lambda x: np.asarray(x)[None], (s, e)))
        reference.append(stream_length)

    for t, (step, extras) in enumerate(random_steps(rng, num_envs, num_steps)):
        whole.append(step, ends[t], first_step_extras=extras)
        for env in range(num_envs):
            streams[env].append(tree.map_structure(lambda x, e=env: x[e], (step, extras)))
            if ends[t, env]:
                write_padded(streams[env])
                streams[env] = []
    whole.close()
    num_items = sum((n - item_length) // period + 1 for n in reference)
    assert table_items(client, "a", num_items) == table_items(client, "b", num_items)


def test_writers_name_a_field_whose_dtype_or_shape_changes(serve):
    _, client = serve(replay.queue_table("queue", 10, replay.sequence_signature(STEP_SPEC, 3)))
    for writer in (
        writers.UnrollWriter(client, "queue", 2, num_envs=2),
        writers.SequenceWriter(client, "queue", 3, 2, num_envs=2),
        writers.BurnInSequenceWriter(client, "queue", 0, 2, num_envs=2),
    ):
        ends = np.zeros(2, bool)
        writer.append(batched_step(2, 0), episode_end=ends)
        step = batched_step(2, 1)
        with pytest.raises(
            ValueError, match=r"step field x is float64 \[\] per env; .* int32 \[\]"
        ):
            writer.append(dict(step, x=step["x"].astype(np.float64)), episode_end=ends)
        with pytest.raises(ValueError, match=r"step field pair is int32 \[3\] per env"):
            writer.append(dict(step, pair=np.zeros((2, 3), np.int32)), episode_end=ends)
        writer.close(timeout_ms=100)


# ----------------------------------------------------------------------------------------------
# Parameters, connection, checkpoints


@pytest.mark.parametrize("quantum", [1, 3, 8])
def test_trimmed_batches_keep_every_position_up_to_the_last_real_one(quantum):
    """`trimmed_length` against its definition on random batches of padded items: the burn-in,
    the trained positions up to the last that is real in some item rounded up to a multiple of
    `quantum` (at most the item's 8), then one bootstrap position; every cut position is padding."""
    burn_in, length, batch = 3, 8, 5
    rng = np.random.default_rng(quantum)
    for _ in range(50):
        mask = np.zeros((burn_in + length + 1, batch), np.float32)
        for item in range(batch):
            start = rng.integers(0, burn_in + 1)  # padding before a game's first step
            end = rng.integers(burn_in + 1, burn_in + length + 2)  # after its last real step
            mask[start:end, item] = 1.0
        last_real = max(np.flatnonzero(mask[burn_in : burn_in + length].any(axis=1)))
        kept = min(length, -(-(last_real + 1) // quantum) * quantum)
        end = int(replay.trimmed_length(tf.constant(mask), burn_in, length, quantum))
        assert end == burn_in + kept + 1
        if end < len(mask):  # what is cut, and the new bootstrap position, hold no real step
            assert not mask[end - 1 :].any()
        steps = {replay.MASK: tf.constant(mask), "reward": tf.ones((len(mask), batch, 2))}
        trimmed = replay.trim_trailing_padding(steps, burn_in, length, quantum)
        assert [x.shape[0] for x in tf.nest.flatten(trimmed)] == [end, end]


def test_params_publish_and_latest_keep_only_the_newest(serve):
    _, client = serve(parameters.params_table())
    subscriber = parameters.ParamsSubscriber(client)
    assert subscriber.latest() is None  # nothing published yet: no blocking
    publisher = parameters.ParamsPublisher(client)
    first = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1.5], np.float32)]
    publisher.publish(7, 700, first)
    second = [w + 10 for w in first]
    publisher.publish(8, 812, second)
    step, frames, weights = subscriber.latest()
    assert (step, frames, len(weights)) == (8, 812, 2)
    for got, want in zip(weights, second):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    assert client.server_info()["params"].current_size == 1
    assert subscriber.latest().step == 8  # reading does not consume the weights
    publisher.close()


def test_an_item_of_the_layout_before_frames_reads_as_nothing_published(serve):
    # A replay checkpoint of a run started before the params carried frames restores a
    # (step, weights) item; the learner's first publish replaces it.
    _, client = serve(parameters.params_table())
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        writer.append([np.int64(4), np.ones([2, 3], np.float32), np.float32(0.5)])
        writer.create_item("params", 1.0, [column[-1] for column in writer.history])
        writer.flush()
    subscriber = parameters.ParamsSubscriber(client)
    assert subscriber.latest() is None
    publisher = parameters.ParamsPublisher(client)
    publisher.publish(5, 640, [np.zeros([2, 3], np.float32)])
    assert subscriber.latest()[:2] == (5, 640)
    publisher.close()


def serve_published_params(port_queue) -> None:
    """A Reverb server process holding published weights (module-level: spawned by a test)."""
    server = replay.start_server([parameters.params_table()])
    parameters.ParamsPublisher(replay.connect(replay.address_of(server))).publish(
        3, 30, [np.ones(2)]
    )
    port_queue.put(server.port)
    server.wait()


def test_a_sample_from_a_killed_server_times_out_instead_of_hanging():
    # Reverb's own sampler retries a lost connection forever; an actor caught between the
    # params table's server_info and its sample when the launcher died hung CI for 90 minutes.
    context = multiprocessing.get_context("spawn")
    port_queue = context.Queue()
    process = context.Process(target=serve_published_params, args=(port_queue,), daemon=True)
    process.start()
    try:
        # choice: a spawned child imports TensorFlow and Reverb first: over a minute on 2 cores
        # that other tests keep busy.
        client = replay.connect(f"localhost:{port_queue.get(timeout=300)}", timeout_s=10)
        assert parameters.sample_once(client, "params", timeout_s=10).data[0] == 3  # server alive
        process.kill()
        process.join(10)
        start = time.monotonic()
        with pytest.raises(reverb.DeadlineExceededError, match="within 2.0 s"):
            parameters.sample_once(client, "params", timeout_s=2.0)
        assert time.monotonic() - start < 10
    finally:
        process.kill()


def test_connect_to_an_unreachable_address_names_the_flag_and_the_address():
    address = f"localhost:{portpicker.pick_unused_port()}"
    with pytest.raises(ConnectionError, match="--replay_address") as error:
        replay.connect(address, timeout_s=1.0)
    assert address in str(error.value) and "1.0 s" in str(error.value)


def test_checkpoint_restores_the_table(serve, tmp_path):
    signature = replay.sequence_signature(STEP_SPEC, 3)

    def table():
        return replay.sample_k_table("seq", 10, 2, 2.0, 1, 100.0, signature)

    server, client = serve(table(), checkpoint_dir=str(tmp_path))
    with writers.SequenceWriter(client, "seq", 3, 3, num_envs=2) as writer:
        for t in range(6):
            writer.append(batched_step(2, t))
    client.checkpoint()
    server.stop()

    _, restored = serve(table(), checkpoint_dir=str(tmp_path))
    assert restored.server_info()["seq"].current_size == 4
    starts = {int(data["steps"]["x"][0]) for _, data in sample_all(restored, "seq", 8)}
    assert starts == {0, 3, 100, 103}

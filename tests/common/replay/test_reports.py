"""common/replay/reports.py through a real Reverb server: the actor's one item per step that
finished games (and its heartbeats) becomes, on the learner's side, one report per game in env
order, with every produced frame counted once."""

import time

import numpy as np

from common.replay import replay, reports

NUM_ENVS, FRAMES_PER_STEP = 4, 3
NAN = float("nan")


def test_each_game_is_reported_once_and_every_frame_reaches_the_reader():
    server = replay.start_server([reports.reports_table()])
    client = replay.connect(replay.address_of(server))
    try:
        reader = reports.ReportReader(client)
        # A multi-task batch: environments 0-1 play the run's game 0, 2-3 its game 2.
        reporter = reports.Reporter(
            client, NUM_ENVS, FRAMES_PER_STEP, heartbeat_steps=3, tasks=np.array([0, 0, 2, 2])
        )
        eta = np.arange(NUM_ENVS * 2, dtype=np.float32).reshape(NUM_ENVS, 2)
        steps = [
            [NAN, 5.0, NAN, -2.0],  # two games end in one step: one item
            [NAN, NAN, NAN, NAN],
            [NAN, NAN, NAN, NAN],
            [NAN, NAN, NAN, NAN],  # three steps without a game: a heartbeat
            [1.0, NAN, NAN, NAN],
        ]
        for t, returns in enumerate(steps):
            lengths = np.array([10 + t, 20 + t, 30 + t, 40 + t])
            entropy = np.array([0.1, 0.2, 0.3, 0.4]) * (t + 1)
            reporter.step(np.array(returns), lengths, (eta,), entropy)
        reporter.heartbeat()  # the actor's last frames (none pending: nothing sent)
        reporter.close()
        received, deadline = [], time.monotonic() + 30
        while len(received) < 4 and time.monotonic() < deadline:
            received += reader.drain()
            time.sleep(0.05)
        assert client.server_info()[reports.REPORTS_TABLE].num_unique_samples == 3
    finally:
        server.stop()
    games = [r for r in received if r.is_game]
    assert [(r.episode_return, r.episode_length) for r in games] == [
        (5.0, 20),
        (-2.0, 40),
        (1.0, 14),
    ]
    assert [r.behaviour_entropy for r in games] == np.float32([0.2, 0.4, 0.5]).tolist()
    assert [r.task for r in games] == [0, 2, 0]
    np.testing.assert_array_equal([r.behaviour[0] for r in games], eta[[1, 3, 0]])
    # Frames: the first step's on its first game, three steps' on the heartbeat, the last one's
    # on the last game; a step's second game carries none.
    assert [r.frames for r in received] == [12, 0, 36, 12]
    assert sum(r.frames for r in received) == len(steps) * NUM_ENVS * FRAMES_PER_STEP
    assert not received[2].is_game and received[2].behaviour[0].shape == (2,)

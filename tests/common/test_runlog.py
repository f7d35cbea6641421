"""The console progress line of `common.runlog.RunLogger`."""

from common import runlog


def test_progress_line_counts_down_and_stops_at_the_budget(tmp_path, capsys):
    logger = runlog.RunLogger(str(tmp_path), total_frames=120_000, name="gdi-h3 Breakout")
    logger.episode(frames=10_000, episode_return=2.0, episode_length=180, wall_time=1.0)
    logger.episode(frames=20_000, episode_return=1.0, episode_length=150, wall_time=2.0)
    line = logger.progress(step=5, frames=60_000, fps=200.0, loss=12.3)
    assert line == (
        "[gdi-h3 Breakout] step 5 | frames 60.0K/120.0K (50.0%) | 200 fps | "
        "return 1.5 (last 2 of 2 eps) | loss 12.3 | eta 5m00s"
    )
    assert capsys.readouterr().out == line + "\n"
    # The last update overshoots the budget by part of a batch: nothing is left, not "-1d23h".
    assert logger.progress(12, 122_880, 104.0, 10.6).endswith("| eta 0m00s")
    assert logger.progress(0, 0, 0.0, float("nan")).endswith("| eta ?")


def test_format_duration():
    assert [runlog.format_duration(s) for s in (0, 75, 3660, 90_000)] == [
        "0m00s",
        "1m15s",
        "1h01m",
        "1d01h",
    ]
    assert runlog.format_duration(float("inf")) == "?"

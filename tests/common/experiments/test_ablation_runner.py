"""common.experiments.ablation_runner: reports from synthetic run directories, and end-to-end runs
of a tiny fake module.

The fake training module is tests/common/experiments/fake_ablation_trainer.py; it is found through
PYTHONPATH. The real training modules are exercised by the paper packages' integration tests.
"""

import csv
import os
import pathlib
import signal
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

from common.experiments import ablation_runner

from common.experiments import ablation_reports
from common.experiments.ablation_runner import AblationRunError, run_ablations
from common.experiments.ablation_reports import write_reports

HERE = pathlib.Path(__file__).parent
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _pong_hns(returns):
    # Pong in the agent57 table: random -20.7, human 14.6 (DiCE App. D, GDI Table 8).
    return 100.0 * (np.asarray(returns) + 20.7) / 35.3


def _write_csv(path: pathlib.Path, header, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def _synthetic_run(root: pathlib.Path, variant: str, seed: int, rng, with_eval: bool) -> dict:
    """A run with irregular episode lengths; returns its arrays for the ground truths."""
    n = int(rng.integers(30, 60))
    frames = np.cumsum(rng.integers(500, 3000, size=n))
    returns = np.round(rng.normal(-10 + 0.001 * frames * (2 if variant == "a" else 1), 3.0), 3)
    wall = np.round(np.linspace(1.0, 3600.0 + 60.0 * seed, n), 3)
    run_dir = root / variant / f"seed{seed}"
    _write_csv(
        run_dir / "episodes.csv",
        ablation_reports.EPISODES_COLUMNS,
        [(int(f), float(r), int(f) // 4, float(w)) for f, r, w in zip(frames, returns, wall)],
    )
    run = {"frames": frames, "returns": returns, "wall": wall}
    if with_eval:
        eval_frames = np.repeat(np.linspace(frames[-1] / 5, frames[-1], 5).astype(int), 3)
        eval_returns = np.round(rng.normal(0.0, 5.0, size=eval_frames.size), 3)
        _write_csv(
            run_dir / "eval.csv",
            ablation_reports.EVAL_COLUMNS,
            [(int(f), float(r), "", 1.0) for f, r in zip(eval_frames, eval_returns)],
        )
        run.update(eval_frames=eval_frames, eval_returns=eval_returns)
    return run


def _final(frames, returns):
    # Ground truth of the documented rule: episodes that ended in the last 10% of the run's frames.
    return np.mean(returns[frames >= 0.9 * frames.max()])


def _read_curves(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _png_size(path) -> tuple[int, int]:
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR", "not a PNG file"
    return struct.unpack(">II", data[16:24])


def test_write_reports_on_synthetic_runs(tmp_path):
    rng = np.random.default_rng(0)
    seeds = [0, 1, 2]
    runs = {
        (v, s): _synthetic_run(tmp_path, v, s, rng, with_eval=(v == "a"))
        for v in ("a", "b")
        for s in seeds
    }

    summary = write_reports(str(tmp_path), ["a", "b"], seeds, game="Pong")

    # curves.csv: every episode, in file order, with its HNS.
    rows = _read_curves(summary.curves_csv)
    assert tuple(rows[0]) == ablation_reports.CURVES_COLUMNS
    expected_rows = sum(len(r["frames"]) + len(r.get("eval_frames", [])) for r in runs.values())
    assert len(rows) == expected_rows
    for (variant, seed), run in runs.items():
        train = [
            r
            for r in rows
            if (r["variant"], r["seed"], r["source"]) == (variant, str(seed), "train")
        ]
        np.testing.assert_array_equal([float(r["frames"]) for r in train], run["frames"])
        np.testing.assert_array_equal([float(r["episode_return"]) for r in train], run["returns"])
        np.testing.assert_allclose(
            [float(r["hns"]) for r in train], _pong_hns(run["returns"]), rtol=1e-12
        )
        evals = [
            r
            for r in rows
            if (r["variant"], r["seed"], r["source"]) == (variant, str(seed), "eval")
        ]
        assert len(evals) == len(run.get("eval_frames", []))

    # Final scores: mean ± sample std over seeds, against numpy.
    md = pathlib.Path(summary.summary_md).read_text()
    assert md.startswith("# Ablation summary\n")
    assert "`agent57`" in md and "final HNS % (agent57)" in md and "last 10%" in md
    assert summary.game == "pong" and summary.normaliser == "agent57"
    for variant in ("a", "b"):
        finals = np.array(
            [_final(runs[variant, s]["frames"], runs[variant, s]["returns"]) for s in seeds]
        )
        result = summary[variant]
        assert result.seeds == tuple(seeds)
        np.testing.assert_allclose(result.final_return.per_seed, finals, rtol=1e-12)
        assert result.final_return.mean == pytest.approx(np.mean(finals))
        assert result.final_return.std == pytest.approx(np.std(finals, ddof=1))
        assert result.final_hns.mean == pytest.approx(np.mean(_pong_hns(finals)))
        assert result.final_hns.std == pytest.approx(np.std(_pong_hns(finals), ddof=1))
        assert result.frames.mean == pytest.approx(
            np.mean([runs[variant, s]["frames"][-1] for s in seeds])
        )
        assert result.wall_time.mean == pytest.approx(np.mean([3600.0 + 60.0 * s for s in seeds]))
        row = next(line for line in md.splitlines() if line.startswith(f"| {variant} |"))
        assert f"| {np.mean(finals):.2f} ± {np.std(finals, ddof=1):.2f} |" in row
        assert "| 1h01m |" in row  # mean wall time 3660 s (common.runtime.runlog.format_duration)
    eval_finals = [_final(runs["a", s]["eval_frames"], runs["a", s]["eval_returns"]) for s in seeds]
    assert summary["a"].final_eval_return.mean == pytest.approx(np.mean(eval_finals))
    assert summary["a"].final_eval_hns.std == pytest.approx(np.std(_pong_hns(eval_finals), ddof=1))
    assert summary["b"].final_eval_return is None and "| — |" in md

    width, height = _png_size(summary.curves_png)
    assert width > 0 and height > 0 and os.path.getsize(summary.curves_png) > 1000


def test_write_reports_discovers_runs_and_has_no_hns_without_game(tmp_path):
    rng = np.random.default_rng(1)
    for variant, seed in (("base", 3), ("base", 11), ("no_replay", 3)):
        _synthetic_run(tmp_path, variant, seed, rng, with_eval=False)
    (tmp_path / "notes").mkdir()  # not a variant: no seed<N>/episodes.csv
    summary = write_reports(str(tmp_path))
    assert [v.variant for v in summary.variants] == ["base", "no_replay"]
    assert summary["base"].seeds == (3, 11) and summary["no_replay"].seeds == (3,)
    assert summary.normaliser is None and summary["base"].final_hns is None
    assert all(row["hns"] == "" for row in _read_curves(summary.curves_csv))
    md = pathlib.Path(summary.summary_md).read_text()
    assert "HNS" not in md and "eval" not in md.split("|", 1)[1]
    _png_size(summary.curves_png)


def test_final_score_hand_example():
    episodes = ablation_reports.Episodes(
        frames=np.array([100.0, 500.0, 899.0, 900.0, 950.0, 1000.0]),
        returns=np.array([1.0, 2.0, 3.0, 4.0, 5.0, 9.0]),
        wall_time=np.zeros(6),
    )
    assert ablation_reports.final_score(episodes) == pytest.approx((4 + 5 + 9) / 3)  # frames >= 900


def test_smoothed_curve_matches_brute_force():
    rng = np.random.default_rng(2)
    # Frames, grid and window on multiples of 100, so that episodes fall on both window edges. Files
    # need not be sorted by frames, and several episodes may end at the same frame count.
    frames = rng.integers(0, 100, size=200) * 100.0
    episodes = ablation_reports.Episodes(frames, rng.normal(size=200), np.zeros(200))
    grid = np.arange(100.0, 12_000.0, 300.0)
    window = 700.0
    expected = []
    for g in grid:
        in_window = (frames > g - window) & (frames <= g)
        expected.append(episodes.returns[in_window].mean() if in_window.any() else np.nan)
    np.testing.assert_allclose(
        ablation_reports.smoothed_curve(episodes, grid, window), expected, rtol=1e-9
    )
    assert np.isnan(ablation_reports.smoothed_curve(episodes, np.array([-1.0]), window)).all()


def test_bad_run_files_are_named(tmp_path):
    _write_csv(tmp_path / "a" / "seed0" / "episodes.csv", ["frames", "return"], [(1, 2)])
    lacks = r"seed0/episodes.csv: header .* lacks \['episode_return', 'episode_length', 'wall_time'\]; expected"
    with pytest.raises(ValueError, match=lacks):
        write_reports(str(tmp_path))
    _write_csv(tmp_path / "a" / "seed0" / "episodes.csv", ablation_reports.EPISODES_COLUMNS, [])
    with pytest.raises(ValueError, match="has a header but no episodes"):
        write_reports(str(tmp_path))
    with pytest.raises(ValueError, match=r"no episodes.csv for \['b/seed\*'\]"):
        write_reports(str(tmp_path), ["a", "b"])
    with pytest.raises(ValueError, match=r"no episodes.csv for \['a/seed1'\]"):
        write_reports(str(tmp_path), ["a"], [0, 1])
    with pytest.raises(ValueError, match="unknown game 'Pong2'"):
        write_reports(str(tmp_path), game="Pong2")


# ---------------------------------------------------------------------------------------------------
# End to end with the fake module.


@pytest.fixture
def fake_module_on_path(monkeypatch):
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    )
    return "fake_ablation_trainer"


def test_run_ablations_end_to_end(tmp_path, fake_module_on_path):
    summary = run_ablations(
        fake_module_on_path,
        ["fast", "slow"],
        [0, 1],
        str(tmp_path),
        ["--total_frames=20000", "--eval"],
        parallel=2,
        game="pong",
    )
    # 20 episodes of 1000 frames; the last 10% of frames holds t = 18000, 19000, 20000, whose mean
    # return is slope * 19000 / 20000 + seed (fake_ablation_trainer.py).
    for variant, slope in (("fast", 20.0), ("slow", 5.0)):
        result = summary[variant]
        assert result.final_return.per_seed == pytest.approx((slope * 0.95, slope * 0.95 + 1))
        assert result.final_return.std == pytest.approx(np.std([0, 1], ddof=1))
        assert result.final_eval_return.mean == pytest.approx(2 * slope + 0.5)
        assert result.final_hns.mean == pytest.approx(
            float(np.mean(_pong_hns([slope * 0.95, slope * 0.95 + 1])))
        )
        assert result.frames.per_seed == (20000.0, 20000.0)
        for seed in (0, 1):
            run_dir = tmp_path / variant / f"seed{seed}"
            assert "fake training of" in (run_dir / "stdout.log").read_text()
    rows = _read_curves(summary.curves_csv)
    assert len(rows) == 2 * 2 * (20 + 1)
    md = pathlib.Path(summary.summary_md).read_text()
    assert "-m fake_ablation_trainer --ablation=VARIANT --seed=SEED --logdir=" in md
    assert "--total_frames=20000" in md
    _png_size(summary.curves_png)


def test_failing_variant_raises_with_variant_seed_and_stderr(tmp_path, fake_module_on_path):
    with pytest.raises(AblationRunError) as raised:
        run_ablations(fake_module_on_path, ["fast", "broken"], [7], str(tmp_path), [], parallel=2)
    message = str(raised.value)
    assert "variant 'broken', seed 7, exit status 3" in message
    assert "RuntimeError: fake failure in the learner" in message
    assert str(tmp_path / "broken" / "seed7" / "stderr.log") in message
    assert not (tmp_path / "summary.md").exists()


def test_run_all_skips_labels_reports_events_and_appends_logs(tmp_path, fake_module_on_path):
    events = []

    def run_twice():
        ablation_runner.run_all(
            lambda v, s: ablation_runner.run_command(fake_module_on_path, v, s, str(tmp_path), []),
            ["fast", "slow"],
            [0, 1],
            str(tmp_path),
            parallel=2,
            skip=lambda v, s: (v, s) == ("slow", 0),
            label=lambda v, s: f"the {v} run of seed {s}",
            on_event=lambda event, v, s: events.append((event, v, s)),
            append_logs=True,
        )

    run_twice()
    assert not (tmp_path / "slow" / "seed0").exists()
    assert [e for e in events if e[0] == "start"] == [
        ("start", "fast", 0),
        ("start", "fast", 1),
        ("start", "slow", 1),
    ]
    assert sorted(e for e in events if e[0] == "end") == [
        ("end", "fast", 0),
        ("end", "fast", 1),
        ("end", "slow", 1),
    ]
    run_twice()  # the logs of both starts are kept
    assert (tmp_path / "fast" / "seed1" / "stdout.log").read_text().count("fake training") == 2
    with pytest.raises(AblationRunError) as raised:
        ablation_runner.run_all(
            lambda v, s: ablation_runner.run_command(fake_module_on_path, v, s, str(tmp_path), []),
            ["broken"],
            [3],
            str(tmp_path),
            parallel=1,
            label=lambda v, s: f"the {v} run of seed {s}",
        )
    assert str(raised.value).startswith("run failed: the broken run of seed 3, exit status 3")

    def stop(event, variant, seed):
        if event == "end":
            raise RuntimeError("not at the budget")

    with pytest.raises(RuntimeError, match="not at the budget"):
        ablation_runner.run_all(
            lambda v, s: ablation_runner.run_command(fake_module_on_path, v, s, str(tmp_path), []),
            ["fast"],
            [5],
            str(tmp_path),
            parallel=1,
            on_event=stop,
        )


def test_run_without_episodes_csv_raises(tmp_path, fake_module_on_path):
    with pytest.raises(
        AblationRunError, match=r"variant 'silent', seed 0 exited 0 but wrote no .*episodes.csv"
    ):
        run_ablations(fake_module_on_path, ["silent"], [0], str(tmp_path), [])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"variants": ["a/b"]}, "variant names become directory names"),
        ({"variants": ["a", "a"]}, "distinct names"),
        ({"seeds": [1, 1]}, "distinct integers"),
        ({"seeds": ["0"]}, "distinct integers"),
        ({"parallel": 0}, "parallel must be an integer >= 1"),
        ({"extra_argv": "--total_frames=1"}, "extra_argv must be a list of strings"),
        ({"module": "impala/main.py"}, "dotted Python module name"),
        ({"game": "Pong2"}, "unknown game 'Pong2'"),
    ],
)
def test_bad_arguments_fail_before_any_run(tmp_path, kwargs, message):
    arguments = (
        dict(
            module="fake_ablation_trainer",
            variants=["fast"],
            seeds=[0],
            logdir=str(tmp_path),
            extra_argv=[],
        )
        | kwargs
    )
    with pytest.raises(ValueError, match=message):
        run_ablations(**arguments)
    assert list(tmp_path.iterdir()) == []


def test_command_line(tmp_path, fake_module_on_path, capsys):
    logdir = str(tmp_path)
    run = ["--module", fake_module_on_path, "--seeds=0", f"--logdir={logdir}"]
    ablation_runner.main(run + ["--variants=fast,slow", "--game=Pong", "--", "--total_frames=5000"])
    assert "| fast | 0 | 20.00 | 115.30 |" in capsys.readouterr().out  # last 10%: t = 5000 only
    ablation_runner.main(["--report_only", f"--logdir={logdir}"])
    assert "| slow | 0 | 5.00 |" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="variant 'broken', seed 0"):
        ablation_runner.main(run + ["--variants=broken"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--seeds=0,a", "--logdir=x", "--module=m", "--variants=v"],
            "error: --seeds=0,a must be a comma list of integers",
        ),
        (["--report_only"], "error: --logdir is required"),
        (
            ["--logdir=x", "--variants=v"],
            "error: --module, --variants and --seeds are required unless --report_only",
        ),
        (
            ["--logdir=x", "--report_only", "--normaliser=bogus"],
            "error: --normaliser='bogus' is not one of",
        ),
        (
            ["--logdir=x", "--report_onl"],
            "error: unknown flag --report_onl (did you mean --report_only?)",
        ),
        (["--logdir=x", "--report_only", "--total_frames=5"], "error: unknown flag --total_frames"),
    ],
)
def test_command_line_errors_are_one_line(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as raised:
        ablation_runner.main(argv)
    assert raised.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), lines


def test_command_line_help_lists_the_flags(capsys):
    with pytest.raises(SystemExit) as raised:
        ablation_runner.main(["--help"])
    assert raised.value.code == 0
    out = capsys.readouterr().out
    for name in ("module", "variants", "seeds", "logdir", "parallel", "game", "normaliser"):
        assert f"--{name}:" in out
    assert "--[no]report_only:" in out


def _alive(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has exited


def test_stopping_a_run_stops_the_processes_it_started(tmp_path):
    # A run (e.g. a launcher) with a child process of its own, as when a failing variant stops the
    # others.
    script = (
        "import subprocess, sys, time; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
        "print(child.pid, flush=True); time.sleep(120)"
    )
    process = ablation_runner._start([sys.executable, "-c", script], str(tmp_path))
    stdout = tmp_path / ablation_runner.STDOUT_LOG
    child = None
    try:
        while not stdout.read_text().strip():  # wait until the child exists
            assert process.poll() is None
            time.sleep(0.01)
        child = int(stdout.read_text())
        assert _alive(process.pid) and _alive(child)
        ablation_runner._stop([process])
        assert process.returncode == -signal.SIGTERM
        for _ in range(500):  # the child got SIGTERM too; give it a moment to exit
            if not _alive(child):
                break
            time.sleep(0.01)
        assert not _alive(child)
    finally:  # if the test failed, do not leave its processes sleeping
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)


# A run that prints its pid, then on SIGTERM writes stopped_by in its directory (argv[1]) and exits
# 0, as a real run checkpoints on SIGTERM.
_STOPPABLE_RUN = """
import os, signal, sys, time
def stop(signum, frame):
    with open(os.path.join(sys.argv[1], "stopped_by"), "w") as f:
        f.write(signal.Signals(signum).name)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print(os.getpid(), flush=True)
time.sleep(120)
"""

# A grid runner as `nohup ... &` starts it: SIGINT ignored. Two runs, both going at once.
_RUNNER = """
import signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
from common.experiments import ablation_reports, ablation_runner
logdir, run = sys.argv[1], sys.argv[2]
def command(variant, seed):
    return [sys.executable, "-c", run, ablation_reports.run_logdir(logdir, variant, seed)]
try:
    ablation_runner.run_all(command, ["a", "b"], [0], logdir, parallel=2)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


# A runner stopped while its one run starts: SIGTERM arrives after the run's process exists and
# before `run_all` has it among the runs to stop.
_RUNNER_STOPPED_AS_A_RUN_STARTS = """
import os, signal, sys, time
from common.experiments import ablation_runner
start = ablation_runner._start
def start_then_stop(*args, **kwargs):
    process = start(*args, **kwargs)
    print(process.pid, flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(1)
    return process
ablation_runner._start = start_then_stop
run = [sys.executable, "-c", "import time; time.sleep(120)"]
try:
    ablation_runner.run_all(lambda variant, seed: run, ["a"], [0], sys.argv[1], parallel=1)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_a_run_started_as_the_runner_is_stopped_is_stopped_too(tmp_path):
    # Before: the runner's handler raised inside the start, the run never joined the runs to stop
    # and trained on alone. Now the runner raises between starts.
    runner = subprocess.Popen(
        [sys.executable, "-c", _RUNNER_STOPPED_AS_A_RUN_STARTS, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = runner.communicate(timeout=60)
    pid, message = out.split()
    try:
        assert message == "interrupted" and runner.returncode == 0
        assert not _alive(int(pid))
    finally:  # if the test failed, leave nothing running
        if _alive(int(pid)):
            os.kill(int(pid), signal.SIGKILL)


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_runner_started_with_sigint_ignored_stops_its_runs_on_either_stop_signal(
    tmp_path, stop_signal
):
    # Before: SIGINT did nothing to such a runner, and SIGTERM ended it at once with its runs
    # training on alone (each leads its own session). Now either one stops the runs with SIGTERM.
    runner = subprocess.Popen(
        [sys.executable, "-c", _RUNNER, str(tmp_path), _STOPPABLE_RUN],
        stdout=subprocess.PIPE,
        text=True,
    )
    runs = [pathlib.Path(ablation_reports.run_logdir(str(tmp_path), v, 0)) for v in ("a", "b")]
    pids = []
    try:
        for _ in range(3000):  # both runs started and printed their pid (their handler is set)
            pids = [(d / ablation_runner.STDOUT_LOG) for d in runs]
            if all(p.is_file() and p.read_text().strip() for p in pids):
                break
            assert runner.poll() is None, "the runner ended before its runs started"
            time.sleep(0.01)
        pids = [int(p.read_text()) for p in pids]
        assert all(_alive(pid) for pid in pids)
        runner.send_signal(stop_signal)
        out, _ = runner.communicate(timeout=30)
        assert out.strip() == "interrupted" and runner.returncode == 0
        assert [(d / "stopped_by").read_text() for d in runs] == ["SIGTERM", "SIGTERM"]
        assert not any(_alive(pid) for pid in pids)
    finally:  # if the test failed, leave nothing running
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        for pid in pids:
            if isinstance(pid, int) and _alive(pid):
                os.kill(pid, signal.SIGKILL)

"""benchmarks.pbt: a real population on Ray Tune (three IMPALA members on MinAtar Breakout, two at a
time), whose every decision follows App. F's rules, whose copies show in the runs' lineage, and
which finishes with a member killed mid-run resumed from its checkpoint; its report by hand; its
refusals of bad flags."""

import csv
import os
import signal
import subprocess
import sys
import time

import pytest

from benchmarks import minatar_runs, pbt
from common.population import member, scheduler

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUDGET = 20_000
MEMBERS = ("member00", "member01", "member02")


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


HEADER = "[impala] MinAtar/Breakout-v0:"  # a run's first line


def kill_a_running_segment(logdir, name, process, deadline):
    """SIGKILLs the member's run once the member has reported (so there is a checkpoint to
    resume from) and a later run of it is training (its console has a progress line after its
    first line): returns the pid killed."""
    member_dir = os.path.join(logdir, pbt.MEMBERS, name)
    while time.monotonic() < deadline and process.poll() is None:
        console = ""
        if os.path.isfile(os.path.join(member_dir, member.LOG)):
            console = open(os.path.join(member_dir, member.LOG)).read()
        after_report = console.rpartition(" reports ")[2] if " reports " in console else ""
        if HEADER in after_report and "] step " in after_report.rpartition(HEADER)[2]:
            pid = int(open(os.path.join(member_dir, member.PID_FILE)).read())
            try:
                os.kill(pid, signal.SIGKILL)
                return pid
            except ProcessLookupError:
                pass  # that run ended as it was read: the next one
        time.sleep(0.2)
    raise AssertionError(f"{name} never trained again after reporting")


@pytest.mark.slow
@pytest.mark.timeout(1200)  # choice: 4-5 minutes beside two training runs, 4 times that
def test_a_population_follows_appendix_f_and_survives_a_member_killed_mid_run(tmp_path):
    logdir = str(tmp_path / "pbt")
    command = [
        sys.executable,
        "-m",
        "benchmarks.pbt",
        "--games=breakout",
        "--population=3",  # on two slots: members wait their turn
        f"--frames_per_game={BUDGET}",
        "--ready_episodes=600",
        "--burn_in_frames=0",
        "--copy_margin=-1",  # every draw copies: the copies are certain to happen
        "--concurrent=2",
        f"--logdir={logdir}",
        "--",
        "--num_actors=1",
        "--envs_per_actor=16",
    ]
    with open(tmp_path / "pbt.log", "w") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            kill_a_running_segment(logdir, "member00", process, time.monotonic() + 240)
            process.wait(timeout=1140)
        finally:
            if process.poll() is None:
                process.kill()
    log = (tmp_path / "pbt.log").read_text()
    assert process.returncode == 0, log[-3000:]

    # The killed member's trial failed once, and it and every restart resumed a checkpoint.
    error = os.path.join(logdir, pbt.EXPERIMENT, "member00", "error.txt")
    assert "exited with status -9" in open(error).read()
    for name in MEMBERS:
        run_dir = os.path.join(logdir, pbt.MEMBERS, name, member.RUN_DIR)
        assert minatar_runs.trained_frames(run_dir) >= BUDGET
        console = open(os.path.join(logdir, pbt.MEMBERS, name, member.LOG)).read()
        starts = console.count(HEADER)
        # Every start after a member's first resumes: the killed member's has three at least (its
        # first, the killed one, the one after), every other member's two (a ready point).
        assert starts >= (3 if name == "member00" else 2)
        assert console.count(" resumed ") == starts - 1
        frames = [f for _, f, _ in member.EpisodeLog(run_dir + "/episodes.csv", "x").refresh().rows]
        assert frames == sorted(frames) and frames[-1] >= BUDGET

    # Every decision is App. F's: a member drawn, copied when more than the margin fitter (here
    # -1: always), and the values it continues with its source's, each x1, x1.2 or /1.2.
    decisions = read_csv(os.path.join(logdir, scheduler.DECISIONS_CSV))
    assert len(decisions) >= 2
    for row in decisions:
        drawn = row["other"] != ""
        fitter = drawn and float(row["other_fitness"]) > float(row["fitness"]) - 1
        assert int(row["copied"]) == int(fitter)
        for name in pbt.ADAPTED:
            ratio = float(row[f"new_{name}"]) / float(row[f"from_{name}"])
            assert min(abs(ratio - r) for r in (1.0, 1.2, 1 / 1.2)) < 1e-9
    assert any(int(row["copied"]) for row in decisions)

    # A copy shows in the lineage the runs carry: the copier's start continues the other's run.
    lineages = [
        member.read_lineage(os.path.join(logdir, pbt.MEMBERS, name, member.RUN_DIR))
        for name in MEMBERS
    ]
    copies = [row for rows in lineages for row in rows if row["member"] != row["source"]]
    assert copies
    for rows in lineages:
        assert int(rows[0]["frames"]) == 0 and rows[0]["member"] == rows[0]["source"]
        for before, after in zip(rows, rows[1:]):
            assert after["source"] == before["member"]
            assert int(after["frames"]) >= int(before["frames"])

    summary = open(os.path.join(logdir, "summary.md")).read()
    assert all(f"| {name} |" in summary for name in MEMBERS)
    assert os.path.isfile(os.path.join(logdir, "population.png"))


@pytest.mark.parametrize(
    "flag, message",
    [
        ("--population=1", "--population=1 must be 2 to 24"),
        ("--population=25", "--population=25 must be 2 to 24"),
        ("--games=pong", "--games: 'pong' is not one of"),
        ("--ready_episodes=0", "--ready_episodes=0 must be > 0"),
        ("--adapted=learning_rate,momentum", "--adapted=learning_rate,momentum: each must be"),
        ("--experts=/no/such.csv", "--experts=/no/such.csv: no such file"),
    ],
)
def test_a_bad_flag_is_one_line_naming_it(tmp_path, flag, message):
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.pbt", flag, f"--logdir={tmp_path}/pbt"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not os.path.exists(tmp_path / "pbt")


def test_the_report_puts_the_best_member_beside_the_experts_by_hand(tmp_path):
    from benchmarks import minatar_references, multitask
    from tests.benchmarks.test_multitask import write_multitask_run

    references = minatar_references.read_references()
    normalisers = [minatar_references.normaliser(references, g) for g in multitask.GAMES]

    def at_score(score, g):
        low, high = normalisers[g]
        return low + score * (high - low)

    # Two members on all five games, 200 games each (run frames 5,000 (k + 1) + g: 200,000 a
    # game): member00 plays at score 0.8 on every game, member01 at 0.2.
    members = []
    for name, score in (("member00", 0.8), ("member01", 0.2)):
        run_dir = write_multitask_run(tmp_path / name, 0, 200, lambda g, k: at_score(score, g))
        lineage = [{"frames": "0", "member": name, "source": name, "learning_rate": "0.001"}]
        members.append(pbt.Member(name, run_dir, score, 1_000_004, lineage))
    # Experts: seed 200 at score 0.5 on every game, seed 201 at 1.5 (capped to 1).
    experts = tmp_path / "curves.csv"
    with open(experts, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(minatar_runs.CURVES_COLUMNS)
        for seed, score in ((200, 0.5), (201, 1.5)):
            for g, game in enumerate(multitask.GAMES):
                for frames in minatar_runs.curve_grid(200_000):
                    writer.writerow(["impala", game, seed, int(frames), at_score(score, g)])
    args = pbt.CommandLine(
        frames_per_game=200_000, experts=str(experts), logdir=str(tmp_path)
    ).validate()
    summary = pbt.summary_markdown(args, members, "the command")
    rows = [line for line in summary.splitlines() if line.startswith("| member00 |")]
    assert len(rows) == 2  # in the members' table, and beside the experts
    cells = rows[1].split(" | ")[1:]
    for g in range(len(multitask.GAMES)):  # the member's return, the experts' mean (score 1)
        mine, experts_mean = (float(v) for v in cells[g].replace("(", "").split()[:2])
        assert mine == pytest.approx(at_score(0.8, g), abs=0.006)
        assert experts_mean == pytest.approx(at_score(1.0, g), abs=0.006)
    assert cells[-1].startswith("0.800 (experts 0.750 [") and cells[-1].endswith(", 2 seeds) |")
    assert summary.index("| member00 | 0.800") < summary.index("| member01 | 0.200")
    pbt.plot(str(tmp_path / "population.png"), args, members)
    assert os.path.getsize(tmp_path / "population.png") > 10_000

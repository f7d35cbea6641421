"""One member of a population: a paper's real run (`python -m <paper>.main`), trained between ready
points as a Ray Tune function trainable (`train_member`), its run directory its checkpoint.

A member's run directory (`<root>/<member>/run`) is an ordinary logdir: the learner's checkpoints,
episodes.csv, eval.csv, TensorBoard events, and `pbt_lineage.csv` (below). The member runs the
paper's main on it with its hyperparameters (flags) and the run's whole frame budget, and watches
episodes.csv. At a ready point (App. F: `ready_episodes` more games since the segment started,
once past `burn_in_frames`) it stops the run with SIGTERM, which ends it as Ctrl-C does, with a
checkpoint and the logs cut to it; it then reports its fitness (`rules.mean_capped_score` of the
last `ready_episodes` games) with the run directory as its Tune checkpoint, and waits for the
scheduler. If the scheduler lets it go on, the next segment starts the run again from its own
checkpoint. If the scheduler copies another member into it, or changes its hyperparameters, Tune
restarts the trainable with that checkpoint and config: the run directory becomes a copy of the
checkpoint (the other member's run as it stood at its ready point, its logs included) and the run
goes on from it with the new flags. So a member's episodes.csv is always its ancestry's history,
and its curves are Fig. 6's, rebuilt through the copies.

Lineage: each (re)start appends to the run directory's `pbt_lineage.csv` the frames the run
stands at, this member, the member whose run directory it continues (the last row's member before
this one: itself, or the member it copied) and its hyperparameters. The file travels with every
copy, so the lineage of the best member at the end is the ancestry of its weights and the schedule
of its hyperparameters (Fig. F.1).

Failure: a run that dies without being asked to (a killed process, a lost node) raises, and Tune
restarts the trial from its last reported checkpoint (the population command's FailureConfig).
The run's process is tied to this one (it gets SIGTERM if the trainable's process dies), so a
trial Tune stops or kills leaves no run behind.
"""

import csv
import ctypes
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping

from common.population import rules
from common.runtime.runlog import EPISODES_CSV

RUN_DIR = "run"
LINEAGE_CSV = "pbt_lineage.csv"
LOG = "member.log"  # the runs' console output, outside the run directory: not copied
PID_FILE = "run.pid"  # the pid of the run going now


@dataclasses.dataclass(frozen=True)
class MemberSpec:
    """What every member runs; its hyperparameters and seed come from its Tune config."""

    module: str  # e.g. "impala.main"
    root: str  # members' directories: <root>/<member>/ (storage every node mounts, on a cluster)
    flags: tuple[str, ...]  # fixed flags (not --logdir, --total_frames, --seed, nor the below)
    total_frames: int
    hyperparameters: tuple[str, ...]  # the config keys passed as flags (those perturbed among them)
    references: Mapping[str, tuple[float, float]]  # game id -> (random, reference)
    ready_episodes: int = 5000  # App. F
    burn_in_frames: int = 0
    poll_s: float = 2.0  # choice: a ready point is seen within 2 s; a read costs the new rows only
    # choice: a stopped run checkpoints and shuts down in seconds; 10 minutes means it hangs
    stop_timeout_s: float = 600.0

    def command(self, config: Mapping, logdir: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            self.module,
            *self.flags,
            f"--logdir={logdir}",
            f"--total_frames={self.total_frames}",
            f"--seed={config['seed']}",
            *(f"--{name}={config[name]!r}" for name in self.hyperparameters),
        ]


class EpisodeLog:
    """The games of a run's episodes.csv: their count, last frames, and (game, frames, return)
    rows. A refresh reads only what was appended since the last one (the run appends whole
    rows), and the whole file again when it was replaced (a resumed run cuts its logs by writing
    a new file) or shrank."""

    def __init__(self, path: str, default_game: str):
        self.path, self.default_game = path, default_game
        self.rows: list[tuple[str, float, float]] = []  # (game, frames, return)
        self._inode: int | None = None
        self._offset = 0
        self._columns: list[str] = []

    def refresh(self) -> "EpisodeLog":
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self.rows, self._inode, self._offset = [], None, 0
            return self
        if stat.st_ino != self._inode or stat.st_size < self._offset:
            self.rows, self._inode, self._offset, self._columns = [], stat.st_ino, 0, []
        if stat.st_size == self._offset:
            return self
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            text = f.read().decode()
        # Up to the last newline: a row still being written is left for the next read.
        complete = text[: text.rfind("\n") + 1]
        self._offset += len(complete.encode())
        lines = complete.splitlines()
        if not self._columns and lines:
            self._columns, lines = next(csv.reader(lines[:1])), lines[1:]
        for row in csv.DictReader(lines, fieldnames=self._columns):
            if row.get("episode_return"):
                game = row.get("game") or self.default_game
                self.rows.append((game, float(row["frames"]), float(row["episode_return"])))
        return self

    @property
    def frames(self) -> float:
        return self.rows[-1][1] if self.rows else 0.0

    def fitness(self, references: Mapping[str, tuple[float, float]], window: int) -> float:
        """The mean capped score of the last `window` games, each game's return the mean of its
        games among them (a game absent from them: the mean of its last 100)."""
        recent = self.rows[-window:]
        returns = {}
        for game in references:
            values = [r for g, _, r in recent if g == game]
            if not values:
                values = [r for g, _, r in self.rows if g == game][-100:]
            if values:
                returns[game] = sum(values) / len(values)
        return rules.mean_capped_score(returns, references)


def read_lineage(run_dir: str) -> list[dict[str, str]]:
    path = os.path.join(run_dir, LINEAGE_CSV)
    if not os.path.isfile(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def append_lineage(run_dir: str, frames: float, member: str, values: Mapping[str, float]) -> None:
    """One row at a (re)start; the source is the member that wrote the run directory last."""
    rows = read_lineage(run_dir)
    source = rows[-1]["member"] if rows else member
    columns = ["frames", "member", "source", *values]
    new = not rows
    with open(os.path.join(run_dir, LINEAGE_CSV), "a", newline="") as f:
        writer = csv.writer(f)
        if new:
            writer.writerow(columns)
        writer.writerow([int(frames), member, source, *(repr(v) for v in values.values())])


def _die_with_parent() -> None:
    """In the run's process before it execs: SIGTERM when its parent thread ends (Linux)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def restore(checkpoint_dir: str | None, run_dir: str) -> None:
    """The run directory as the checkpoint holds it, or empty without one (a trial that failed
    before its first report starts over)."""
    if os.path.isdir(run_dir):
        shutil.rmtree(run_dir)
    if checkpoint_dir is None:
        os.makedirs(run_dir)
    else:
        shutil.copytree(checkpoint_dir, run_dir)


def run_segment(spec: MemberSpec, config: Mapping, member_dir: str, log: EpisodeLog) -> bool:
    """Runs the member's run to its next ready point (True) or to its frame budget (False)."""
    run_dir = os.path.join(member_dir, RUN_DIR)
    start = len(log.refresh().rows)
    with open(os.path.join(member_dir, LOG), "a") as out:
        process = subprocess.Popen(
            spec.command(config, run_dir),
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        with open(os.path.join(member_dir, PID_FILE), "w") as f:
            f.write(str(process.pid))
        stopped = False
        try:
            while process.poll() is None:
                time.sleep(spec.poll_s)
                log.refresh()
                ready = (
                    log.frames >= spec.burn_in_frames
                    and len(log.rows) - start >= spec.ready_episodes
                )
                if ready and not stopped:
                    process.send_signal(signal.SIGTERM)
                    stopped = True
                    process.wait(timeout=spec.stop_timeout_s)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    if process.returncode != 0:
        raise RuntimeError(
            f"the member's run exited with status {process.returncode} (see "
            f"{os.path.join(member_dir, LOG)})"
        )
    return stopped


def train_member(config: dict, spec: MemberSpec) -> None:
    """The Ray Tune function trainable (module docstring)."""
    from ray import tune

    context = tune.get_context()
    # choice: not Tune's trial directory, a local one it syncs to storage now and then: the run
    # is written where the population's logdir is, on every node the same.
    member_dir = os.path.join(spec.root, context.get_trial_name())
    run_dir = os.path.join(member_dir, RUN_DIR)
    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        restore(None, run_dir)
    else:
        with checkpoint.as_directory() as directory:
            restore(directory, run_dir)
    # A one-game run's episodes.csv has no game column: its games are its one reference's.
    log = EpisodeLog(os.path.join(run_dir, EPISODES_CSV), next(iter(spec.references), ""))
    append_lineage(
        run_dir,
        log.refresh().frames,
        context.get_trial_name(),
        {n: config[n] for n in spec.hyperparameters},
    )
    while True:
        ready = run_segment(spec, config, member_dir, log)
        log.refresh()
        metrics = {
            "fitness": log.fitness(spec.references, spec.ready_episodes),
            "frames": log.frames,
            "episodes": len(log.rows),
            "budget_reached": not ready,  # not "done", which Tune sets itself
        }
        _note(member_dir, f"reports {metrics}")
        tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(run_dir))
        _note(member_dir, "goes on")
        if not ready:
            return


def _note(member_dir: str, line: str) -> None:
    with open(os.path.join(member_dir, LOG), "a") as f:
        f.write(f"[pbt] {time.strftime('%H:%M:%S')} {os.path.basename(member_dir)} {line}\n")

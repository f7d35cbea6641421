"""Run logging: TensorBoard scalars, per-episode CSV files and one concise console line.

Files under a run's logdir (common.experiments.ablation_runner reads the CSVs; flushed after each
write, a row or the rows of the games logged together):
- `episodes.csv`: `frames,episode_return,episode_length,wall_time`, one row per finished game
  (raw whole-game score; `frames` = environment frames the actors had produced then;
  `wall_time` = seconds since the run started, continued across resumes);
- `eval.csv`: `frames,episode_return,hns,wall_time`, one row per evaluation episode;
- TensorBoard events in the logdir (learner) and `eval/` (evaluator), x-axis = frames
  (`read_scalars` reads them back): the per-game points (`GAME_TAGS`, `behaviour/...`) at the
  frames the actors had produced, as in episodes.csv; every other point at the learner's frames,
  as eval.csv's rows (an evaluation round is logged at the frames of the learner step whose
  weights it played).

Resuming (`rewind`): a learner that restores a checkpoint first cuts these logs back to what the
restored state has seen, so that a run killed after its checkpoint (SIGKILL, a lost host) and
resumed counts each game once and its curves never go back in frames: episodes.csv keeps the rows
at or before the checkpoint's produced frames (`actor_frames`), eval.csv the rows at or before its
learner frames, and TensorBoard the points at or before the frames their tag is counted in (the
events files are rewritten without the rest: TensorBoard itself, not only `read_scalars`, then
shows one curve; a TensorBoard already open needs a reload). Without a checkpoint nothing is kept.
Games the killed process logged after its checkpoint are lost with it: the resumed run plays on
from the checkpoint's state and logs its own. Each file is replaced whole (a complete temporary
file, then a rename), so a process killed while cutting leaves the old file; an incomplete last
CSV row or events record (a writer killed mid-write) is dropped too.

The file names, CSV headers and number formats are defined here once; TensorFlow is imported only
by the loggers that write TensorBoard events, so the ablation runner reads these names without it.
"""

import collections
import csv
import functools
import glob
import math
import os
import re
import struct
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

EPISODES_CSV = "episodes.csv"
EVAL_CSV = "eval.csv"
EPISODES_HEADER = ("frames", "episode_return", "episode_length", "wall_time")
EVAL_HEADER = ("frames", "episode_return", "hns", "wall_time")
EVAL_DIR = "eval"  # the evaluator's TensorBoard events, under the logdir
EVENTS_GLOB = "events.out.tfevents.*"
# TensorBoard tags whose step is the actors' produced frames (one point per game, as the rows of
# episodes.csv); `behaviour/<name>` too. Every other tag's step is the learner's frames.
GAME_TAGS = ("episode/return", "episode/length")
BEHAVIOUR_TAG_PREFIX = "behaviour/"


GAME_COLUMN = "game"  # episodes.csv's column of a multi-task run: the game each row played


def is_game_tag(tag: str) -> bool:
    """Whether a TensorBoard tag of the learner is logged per game, at the produced frames: the
    game tags, a multi-task run's per-game ones (`<game tag>/<game>`), and the behaviour's."""
    return tag.startswith(tuple(f"{t}/" for t in GAME_TAGS) + (BEHAVIOUR_TAG_PREFIX,)) or (
        tag in GAME_TAGS
    )


def short_game_name(game: str) -> str:
    """A game's name without its family prefix and version: "MinAtar/Breakout-v0" -> "Breakout"."""
    return re.sub(r"-v\d+$", "", game.rsplit("/", 1)[-1])


class CsvLog:
    """Appends rows to a CSV file, writing the header once; resumed runs keep appending."""

    def __init__(self, path: str, header: Sequence[str]) -> None:
        self.path = path
        self.header = tuple(header)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        is_new = not os.path.exists(path) or os.path.getsize(path) == 0
        if not is_new:
            with open(path, newline="") as f:
                found = tuple(next(csv.reader(f), ()))
            if found != self.header:
                raise ValueError(f"{path} has header {found}, expected {self.header}")
        self._file = open(path, "a", newline="")
        self._writer = csv.writer(self._file)
        if is_new:
            self._writer.writerow(self.header)
            self._file.flush()

    def append(self, *row: object) -> None:
        self.extend([row])

    def extend(self, rows: Iterable[Sequence[object]]) -> None:
        """Appends rows, then flushes once."""
        tuples = [tuple(row) for row in rows]
        for row in tuples:
            if len(row) != len(self.header):
                raise ValueError(f"row {row} does not match header {self.header}")
        self._writer.writerows(tuples)
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def format_count(x: float) -> str:
    """1234 -> '1.2K', 2.5e6 -> '2.5M'."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.1f}{unit}"
    return f"{x:.0f}"


def format_duration(seconds: float) -> str:
    """75 -> '1m15s', 3660 -> '1h01m', 90000 -> '1d01h'; '?' if not finite."""
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    days, rem = divmod(seconds, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, seconds = divmod(rem, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{seconds:02d}s"


class RunLogger:
    """TensorBoard + episodes.csv + console progress for the learner of one run."""

    def __init__(
        self,
        logdir: str,
        total_frames: int,
        name: str = "learner",
        return_window: int = 100,
        games: Sequence[str] = (),
    ) -> None:
        """`games`: a multi-task run's list (`common.environments.env_names.games`); with more
        than one, episodes.csv has a `game` column and each game its own TensorBoard tags."""
        self.logdir = logdir
        self.total_frames = total_frames
        self.name = name
        self.games = tuple(games) if len(games) > 1 else ()
        import tensorflow as tf

        self._summary = tf.summary.create_file_writer(logdir)
        header = EPISODES_HEADER + ((GAME_COLUMN,) if self.games else ())
        self._episodes = CsvLog(os.path.join(logdir, EPISODES_CSV), header)
        self._recent_returns: collections.deque = collections.deque(maxlen=return_window)
        # A multi-task run's recent returns per game, for the progress line.
        self._recent_by_game: dict[str, collections.deque] = {
            game: collections.deque(maxlen=return_window) for game in self.games
        }
        self._episode_count = 0
        # Behaviour parameters of the games since the last `scalars` call, for the histograms.
        self._behaviour_values: dict[str, list[float]] = collections.defaultdict(list)

    def episodes(
        self,
        frames: Sequence[int] | np.ndarray,
        returns: Sequence[float] | np.ndarray,
        lengths: Sequence[int] | np.ndarray,
        wall_time: float,
        behaviour: Mapping[str, np.ndarray] | None = None,
        tasks: Sequence[int] | np.ndarray | None = None,
    ) -> None:
        """Records finished games, oldest first, one entry per game in each array: a CSV row and
        a TensorBoard point each, with the behaviour parameters each was played with
        (`behaviour[name][g]`: a scalar logs `behaviour/<name>`, a vector one tag per component;
        a NaN logs no point, e.g. an entropy the policy does not report). In a multi-task run,
        `tasks[g]` is the index in `games` of the game played: its row names it, and it is also
        logged under `<game tag>/<game>`."""
        frame_array = np.asarray(frames, np.int64).reshape(-1)
        return_array = np.asarray(returns, np.float64).reshape(-1)
        length_array = np.asarray(lengths, np.int64).reshape(-1)
        if not frame_array.size:
            return
        wall_time = round(float(wall_time), 3)
        rows = zip(frame_array.tolist(), return_array.tolist(), length_array.tolist())
        task_array = np.zeros(frame_array.size, np.int64) if tasks is None else np.asarray(tasks)
        if self.games:
            names = [self.games[task] for task in task_array.tolist()]
            self._episodes.extend((*row, wall_time, name) for row, name in zip(rows, names))
            for name, episode_return in zip(names, return_array.tolist()):
                self._recent_by_game[name].append(episode_return)
        else:
            self._episodes.extend((*row, wall_time) for row in rows)
        self._recent_returns.extend(return_array.tolist())
        self._episode_count += frame_array.size
        return_tag, length_tag = GAME_TAGS
        points = {return_tag: (frame_array, return_array), length_tag: (frame_array, length_array)}
        for task, game in enumerate(self.games):
            played = task_array == task
            points[f"{return_tag}/{game}"] = (frame_array[played], return_array[played])
            points[f"{length_tag}/{game}"] = (frame_array[played], length_array[played])
        for name, values in (behaviour or {}).items():
            values = np.asarray(values, np.float64)
            columns = values.reshape(frame_array.size, -1)
            for i, column in enumerate(columns.T):
                tag = name if values.ndim == 1 else f"{name}_{i}"
                kept = ~np.isnan(column)
                points[BEHAVIOUR_TAG_PREFIX + tag] = (frame_array[kept], column[kept])
                self._behaviour_values[tag].extend(column[kept].tolist())
        self._write_points(
            {tag: (steps, values.astype(np.float32)) for tag, (steps, values) in points.items()}
        )

    @functools.cached_property
    def _write_points(self) -> Callable:
        """Writes `{tag: (steps, values)}` as one TensorBoard point per entry, in one compiled
        call: written one eager `tf.summary.scalar` at a time, MinAtar's hundreds of games a
        second took most of a learner's core."""
        import tensorflow as tf
        from tensorboard.plugins.scalar import metadata

        # What `tf.summary.scalar` writes, without the loop's name scope in the tag.
        scalar = metadata.create_summary_metadata(display_name=None, description=None)

        @tf.function(reduce_retracing=True)
        def write(points):
            with self._summary.as_default():
                for tag, (steps, values) in points.items():
                    for i in tf.range(tf.size(steps)):
                        tf.summary.write(tag, values[i], step=steps[i], metadata=scalar)

        return write

    def scalars(self, values: Mapping[str, float], frames: int) -> None:
        """Writes `values`, and one histogram per behaviour parameter of the games recorded
        since the previous call (`behaviour_histogram/<name>`: e.g. DiCE's eta per episode)."""
        import tensorflow as tf

        with self._summary.as_default(step=int(frames)):
            for key, value in values.items():
                tf.summary.scalar(key, float(value))
            for name, chosen in self._behaviour_values.items():
                if chosen:
                    tf.summary.histogram(f"behaviour_histogram/{name}", np.asarray(chosen))
        self._behaviour_values.clear()
        self._summary.flush()

    @property
    def mean_recent_return(self) -> float:
        return float(np.mean(self._recent_returns)) if self._recent_returns else float("nan")

    def progress(self, step: int, frames: int, fps: float, loss: float, extra: str = "") -> str:
        """Prints and returns one console line."""
        # The last update may overshoot the budget by part of a batch: nothing is left then.
        left = max(self.total_frames - frames, 0)
        remaining = left / fps if fps > 0 else float("inf")
        line = (
            f"[{self.name}] step {step} | frames {format_count(frames)}/"
            f"{format_count(self.total_frames)} ({100 * frames / self.total_frames:.1f}%) | "
            f"{format_count(fps)} fps | return {self.mean_recent_return:.1f} "
            f"(last {len(self._recent_returns)} of {self._episode_count} eps) | "
            + "".join(
                f"{short_game_name(game)} {np.mean(recent) if recent else float('nan'):.1f} | "
                for game, recent in self._recent_by_game.items()
            )
            + f"loss {loss:.3g}{' | ' + extra if extra else ''} | "
            f"eta {format_duration(remaining)}"
        )
        print(line, flush=True)
        return line

    def close(self) -> None:
        self._summary.flush()
        self._summary.close()
        self._episodes.close()


class EvalLogger:
    """eval.csv rows and TensorBoard scalars under `<logdir>/eval` for the evaluator."""

    def __init__(self, logdir: str, games: Sequence[str] = ()) -> None:
        """`games`: a multi-task run's list; with more than one, eval.csv has a `game` column."""
        import tensorflow as tf

        self._summary = tf.summary.create_file_writer(os.path.join(logdir, EVAL_DIR))
        self._multitask = len(games) > 1
        header = EVAL_HEADER + ((GAME_COLUMN,) if self._multitask else ())
        self._csv = CsvLog(os.path.join(logdir, EVAL_CSV), header)

    def episode(
        self, frames: int, episode_return: float, hns: float, wall_time: float, game: str = ""
    ) -> None:
        """One evaluation game; a multi-task run's row names its `game`."""
        row = (int(frames), float(episode_return), float(hns), round(float(wall_time), 3))
        self._csv.append(*row, *((game,) if self._multitask else ()))

    def scalars(self, values: Mapping[str, float], frames: int) -> None:
        import tensorflow as tf

        with self._summary.as_default(step=int(frames)):
            for key, value in values.items():
                tf.summary.scalar(key, float(value))

    def round(
        self,
        frames: int,
        returns: Sequence[float],
        hns: Sequence[float],
        games: Sequence[str] = (),
    ) -> str:
        """TensorBoard means of one evaluation round, and its console line; in a multi-task run
        (`games[i]`: the game of episode i), each game's mean return too."""
        import tensorflow as tf

        by_game: dict[str, list[float]] = {}
        if self._multitask:
            for game, value in zip(games, returns):
                by_game.setdefault(game, []).append(value)
        with self._summary.as_default(step=int(frames)):
            tf.summary.scalar("eval/return", float(np.mean(returns)))
            if np.isfinite(hns).any():
                tf.summary.scalar("eval/hns", float(np.nanmean(hns)))
            for game, values in by_game.items():
                tf.summary.scalar(f"eval/return/{game}", float(np.mean(values)))
        self._summary.flush()
        line = (
            f"[eval] frames {format_count(frames)} | {len(returns)} episodes | return "
            f"{np.mean(returns):.1f} +- {np.std(returns):.1f}"
        )
        if np.isfinite(hns).any():
            line += f" | hns {np.nanmean(hns):.1f}%"
        line += "".join(f" | {game} {np.mean(v):.1f}" for game, v in sorted(by_game.items()))
        print(line, flush=True)
        return line

    def close(self) -> None:
        self._summary.close()
        self._csv.close()


def _scalar_points(logdir: str) -> Iterator[tuple]:
    """(event, value) for every scalar value written under `logdir` (not its subdirectories), in
    the order written (an events file's incomplete last record is left out)."""
    from tensorflow.core.util import event_pb2

    for path in _events_files(logdir):
        for record in _records(path):
            event = event_pb2.Event.FromString(record)
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == "scalars":
                    yield event, value


def read_scalars(logdir: str) -> dict[str, list[tuple[int, float]]]:
    """Every TensorBoard scalar written under `logdir` (not its subdirectories): {tag: [(step,
    value), ...]} in the order written (an events file's incomplete last record is left out)."""
    import tensorflow as tf

    points: dict[str, list[tuple[int, float]]] = collections.defaultdict(list)
    for event, value in _scalar_points(logdir):
        points[value.tag].append((event.step, float(tf.make_ndarray(value.tensor))))
    return dict(points)


def read_points(logdir: str, tag: str) -> list[tuple[float, int, float]]:
    """[(wall time, step, value), ...] of scalar `tag` under `logdir`, in the order written: for
    rates over a window of wall time (the learner writes its summaries at its frames)."""
    import tensorflow as tf

    return [
        (event.wall_time, event.step, float(tf.make_ndarray(value.tensor)))
        for event, value in _scalar_points(logdir)
        if value.tag == tag
    ]


# ------------------------------------------------------------------------------------------------
# Resuming: the logs cut back to the restored checkpoint (module docstring)


def rewind(logdir: str, frames: int, actor_frames: int) -> dict[str, int]:
    """Cuts the logs of the run in `logdir` back to what a learner restored at `frames` (its own
    frame count) and `actor_frames` (the frames the actors had produced) has seen: episodes.csv
    rows and per-game TensorBoard points at or before `actor_frames`, eval.csv rows and every
    other point (learner's, evaluator's) at or before `frames`. -1 for both (no checkpoint) keeps
    nothing. Returns what was dropped: {"episodes.csv": rows, "eval.csv": rows, "tensorboard":
    points}."""
    evaluator_dir = os.path.join(logdir, EVAL_DIR)
    return {
        EPISODES_CSV: truncate_csv(os.path.join(logdir, EPISODES_CSV), actor_frames),
        EVAL_CSV: truncate_csv(os.path.join(logdir, EVAL_CSV), frames),
        "tensorboard": truncate_events(logdir, frames, actor_frames)
        + truncate_events(evaluator_dir, frames, frames),
    }


def rewind_evaluation(logdir: str, frames: int) -> None:
    """Cuts the evaluator's logs alone (eval.csv rows and its TensorBoard points) back to
    `frames`: a final evaluation stopped part-way is played again whole."""
    truncate_csv(os.path.join(logdir, EVAL_CSV), frames)
    truncate_events(os.path.join(logdir, EVAL_DIR), frames, frames)


def rows_at(path: str, frames: int) -> int:
    """The rows of a frames-first CSV log (episodes.csv, eval.csv) logged at `frames`; 0 without
    the file."""
    if not os.path.exists(path):
        return 0
    with open(path, newline="") as f:
        return sum(1 for row in list(csv.reader(f))[1:] if row and float(row[0]) == frames)


def _replace(path: str, temporary: str, write: Callable[[str], None]) -> None:
    """`write(temporary)` writes a file whole; it is flushed to disk and renamed over `path`, so
    `path` is always either the old file or the new one. The temporary file is removed on an
    exception; one a killed process left behind is overwritten the next time."""
    try:
        write(temporary)
        fd = os.open(temporary, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def truncate_csv(path: str, max_frames: float) -> int:
    """Keeps the header of the CSV log at `path` and the rows whose `frames` is at most
    `max_frames`, dropping an incomplete row (no line end: its writer was killed mid-row); the
    file is replaced whole (`_replace`) and only if a row goes. Returns the number of rows
    dropped. A missing file, or one without a `frames` column, is left alone."""
    if not os.path.exists(path):
        return 0
    with open(path, newline="") as f:
        lines = f.read().splitlines(keepends=True)
    if not lines:
        return 0
    header, rows = lines[0], lines[1:]
    fields = next(csv.reader([header]))
    if not header.endswith("\n"):  # killed while writing the header: CsvLog writes a new one
        header, rows, kept = "", [], []
    elif "frames" not in fields:
        return 0
    else:
        column = fields.index("frames")

        def frames_of(line: str) -> float:
            row = next(csv.reader([line]), [])
            if not line.endswith("\n") or len(row) != len(fields):
                return math.inf
            try:
                return float(row[column])
            except ValueError:
                return math.inf

        kept = [line for line in rows if frames_of(line) <= max_frames]
        if len(kept) == len(rows):
            return 0

    def write(temporary: str) -> None:
        with open(temporary, "w", newline="") as f:
            f.write(header)
            f.writelines(kept)

    _replace(path, f"{path}.tmp", write)
    return len(rows) - len(kept)


def _events_files(directory: str) -> list[str]:
    """The events files in `directory` in the order they were written: by the wall time of their
    first point (microseconds; the file-version record a writer starts with has whole seconds).
    Not by name: a process's writers end their names in a counter, and "10" sorts before "9"."""
    from tensorflow.core.util import event_pb2

    def written(path: str) -> float:
        start = math.inf  # an empty file goes last
        for record in _records(path):
            event = event_pb2.Event.FromString(record)
            if event.HasField("summary"):
                return event.wall_time
            start = min(start, event.wall_time)
        return start

    return sorted(glob.glob(os.path.join(directory, EVENTS_GLOB)), key=lambda p: (written(p), p))


_RECORD_HEADER = struct.Struct("<QI")  # a TFRecord: data length, its masked CRC


def _records(path: str, complete: list[bool] | None = None) -> Iterator[bytes]:
    """The records of a TFRecord (events) file in order, up to an incomplete one at its end
    (a writer killed mid-record); `complete`, if given, gets whether the file ended cleanly.
    Plain Python: ~100 times faster than iterating a `tf.data.TFRecordDataset` eagerly. The
    CRCs are not checked (a killed writer truncates a file; it does not corrupt it)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        while True:
            header = f.read(_RECORD_HEADER.size)
            if not header:
                ended = True
                break
            length = _RECORD_HEADER.unpack(header)[0] if len(header) == _RECORD_HEADER.size else -1
            if length < 0 or f.tell() + length + 4 > size:
                ended = False
                break
            data = f.read(length)
            f.read(4)  # the data's CRC
            yield data
    if complete is not None:
        complete.append(ended)


def truncate_events(directory: str, max_step: int, max_game_step: int) -> int:
    """Drops from the TensorBoard events files in `directory` (not its subdirectories) every
    point whose step is past its tag's limit: `max_game_step` for the per-game tags
    (`is_game_tag`), `max_step` for the others; and an incomplete last record. A file that
    changes is written anew under a name TensorBoard does not read (it reads every name holding
    "tfevents") and renamed over the old one (`_replace`). Returns the number of points dropped."""
    files = _events_files(directory)
    if not files:
        return 0
    from tensorflow.core.util import event_pb2

    dropped = 0
    for path in files:
        complete: list[bool] = []
        kept: list[bytes] = []
        dropped_here = 0
        for record in _records(path, complete):
            event = event_pb2.Event.FromString(record)
            if not event.HasField("summary"):
                kept.append(record)  # the file version, and anything else without a step's point
                continue
            values = [
                value
                for value in event.summary.value
                if event.step <= (max_game_step if is_game_tag(value.tag) else max_step)
            ]
            dropped_here += len(event.summary.value) - len(values)
            if len(values) == len(event.summary.value):
                kept.append(record)
            elif values:
                cut = event_pb2.Event()
                cut.CopyFrom(event)
                cut.summary.ClearField("value")
                cut.summary.value.extend(values)
                kept.append(cut.SerializeToString())
        if not dropped_here and complete[0]:
            continue
        write = functools.partial(_write_records, kept)
        _replace(path, os.path.join(directory, ".rewind.tmp"), write)
        dropped += dropped_here
    return dropped


def _write_records(records: Sequence[bytes], path: str) -> None:
    import tensorflow as tf

    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)

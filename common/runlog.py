"""Run logging: TensorBoard scalars, per-episode CSV files and one concise console line.

Files under a run's logdir (common.ablation_runner reads the CSVs; each row is flushed):
- `episodes.csv`: `frames,episode_return,episode_length,wall_time`, one row per finished game
  (raw whole-game score; `frames` = environment frames the actors had produced then;
  `wall_time` = seconds since the run started, continued across resumes);
- `eval.csv`: `frames,episode_return,hns,wall_time`, one row per evaluation episode;
- TensorBoard events in the logdir (learner) and `eval/` (evaluator), x-axis = frames
  (`read_scalars` reads them back).

The file names, CSV headers and number formats are defined here once; TensorFlow is imported only
by the loggers that write TensorBoard events, so the ablation runner reads these names without it.
"""

import collections
import csv
import math
import os
from typing import Mapping, Sequence

import numpy as np

EPISODES_CSV = "episodes.csv"
EVAL_CSV = "eval.csv"
EPISODES_HEADER = ("frames", "episode_return", "episode_length", "wall_time")
EVAL_HEADER = ("frames", "episode_return", "hns", "wall_time")


class CsvLog:
    """Appends rows to a CSV file, writing the header once; resumed runs keep appending."""

    def __init__(self, path: str, header: Sequence[str]):
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

    def append(self, *row) -> None:
        if len(row) != len(self.header):
            raise ValueError(f"row {row} does not match header {self.header}")
        self._writer.writerow(row)
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
        self, logdir: str, total_frames: int, name: str = "learner", return_window: int = 100
    ):
        self.logdir = logdir
        self.total_frames = total_frames
        self.name = name
        import tensorflow as tf

        self._summary = tf.summary.create_file_writer(logdir)
        self._episodes = CsvLog(os.path.join(logdir, EPISODES_CSV), EPISODES_HEADER)
        self._recent_returns: collections.deque = collections.deque(maxlen=return_window)
        self._episode_count = 0
        # Behaviour parameters of the games since the last `scalars` call, for the histograms.
        self._behaviour_values: dict[str, list[float]] = collections.defaultdict(list)

    def episode(
        self,
        frames: int,
        episode_return: float,
        episode_length: int,
        wall_time: float,
        behaviour: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        """Records one finished game (CSV row + TensorBoard point), with the behaviour
        parameters it was played with (TensorBoard `behaviour/<name>`; vectors per component)."""
        self._episodes.append(
            int(frames), float(episode_return), int(episode_length), round(float(wall_time), 3)
        )
        self._recent_returns.append(float(episode_return))
        self._episode_count += 1
        import tensorflow as tf

        with self._summary.as_default(step=int(frames)):
            tf.summary.scalar("episode/return", float(episode_return))
            tf.summary.scalar("episode/length", float(episode_length))
            for name, value in (behaviour or {}).items():
                value = np.asarray(value)
                if value.ndim == 0:
                    tf.summary.scalar(f"behaviour/{name}", float(value))
                    self._behaviour_values[name].append(float(value))
                else:
                    for i, component in enumerate(value.reshape(-1)):
                        tf.summary.scalar(f"behaviour/{name}_{i}", float(component))
                        self._behaviour_values[f"{name}_{i}"].append(float(component))

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
            f"loss {loss:.3g}{' | ' + extra if extra else ''} | "
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

    def __init__(self, logdir: str):
        import tensorflow as tf

        self._summary = tf.summary.create_file_writer(os.path.join(logdir, "eval"))
        self._csv = CsvLog(os.path.join(logdir, EVAL_CSV), EVAL_HEADER)

    def episode(self, frames: int, episode_return: float, hns: float, wall_time: float) -> None:
        self._csv.append(int(frames), float(episode_return), float(hns), round(float(wall_time), 3))

    def scalars(self, values: Mapping[str, float], frames: int) -> None:
        import tensorflow as tf

        with self._summary.as_default(step=int(frames)):
            for key, value in values.items():
                tf.summary.scalar(key, float(value))

    def round(self, frames: int, returns: Sequence[float], hns: Sequence[float]) -> str:
        """TensorBoard means of one evaluation round, and its console line."""
        import tensorflow as tf

        with self._summary.as_default(step=int(frames)):
            tf.summary.scalar("eval/return", float(np.mean(returns)))
            if np.isfinite(hns).any():
                tf.summary.scalar("eval/hns", float(np.nanmean(hns)))
        self._summary.flush()
        line = (
            f"[eval] frames {format_count(frames)} | {len(returns)} episodes | return "
            f"{np.mean(returns):.1f} +- {np.std(returns):.1f}"
        )
        if np.isfinite(hns).any():
            line += f" | hns {np.nanmean(hns):.1f}%"
        print(line, flush=True)
        return line

    def close(self) -> None:
        self._summary.close()
        self._csv.close()


def read_scalars(logdir: str) -> dict[str, list[tuple[int, float]]]:
    """Every TensorBoard scalar written under `logdir` (not its subdirectories): {tag: [(step,
    value), ...]} in the order written."""
    import glob

    import tensorflow as tf

    points: dict[str, list[tuple[int, float]]] = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == "scalars":
                    points[value.tag].append((event.step, float(tf.make_ndarray(value.tensor))))
    return dict(points)

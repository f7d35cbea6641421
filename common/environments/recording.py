"""Watching an agent play: the games of an evaluation recorded as animated GIFs.

`--role=evaluate --record_dir=DIR [--record_games=N]`
(`common.launchers.launch.evaluate_checkpoint`) records the first N games of the evaluation, in the
order of its returns and of eval.csv's rows (`common.runtime.evaluation.evaluate`: env 0's games,
then env 1's, ...), one GIF per game, written when the game ends (a temporary file renamed into
place) and named by `file_name`, e.g.
`impala_MinAtar-Breakout-v0_frames1200000_game01_score12.gif`.

Frames, one per agent step at `FPS` frames per second:
- MinAtar: `render_rgb` of each observation the agent acted on
  (`MINATAR_SCALE` pixels per cell), then the observation the game ended on.
- Atari: the emulator's RGB screen of each observation the agent acted on (the last raw frame
  of its action repeat, 160 x 210) where the envs are gymnasium envs with an ALE (the
  evaluator's "gym" backend, `common.runtime.evaluation.EvaluatorSettings`): each screen is kept as
  ALE palette indices (1 byte a pixel) with the palette learnt from `getScreenRGB` whenever a new
  index shows up. The screen a game ended on is gone by then (the same-step auto-reset shows the
  next game's), so an Atari GIF ends on the last screen the agent acted on. Other Atari envs
  (the C++ vector backend) give the newest grayscale frame of each observation through
  `render_rgb` (`ATARI_GRAY_SCALE`), then the one the game ended on.
- CartPole's observations are not images: `check_env` refuses it (the command line already
  does, `common.experiments.cli`).

Only the frames of the games being recorded are held, as observations (MinAtar: 10 x 10 x C
bytes a step; grayscale Atari: 84 x 84) or palette indices (Atari screens: 33.6 kB a step), and
turned into images when the game's GIF is written. Recording only reads observations and
screens: the evaluation's games and returns are those it plays without recording.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from common.environments import envs as envs_lib

from common.environments import env_names
from common.environments.env_names import env_family

# choice: 15 agent steps a second: MinAtar's games move one cell a step, and 15 Atari agent
# steps are a quarter of the emulator's 60 Hz (action repeat 4), so both play at about the pace
# a person would watch.
FPS = 15.0
# choice: render_rgb's own default, a 10 x 10 MinAtar board as 160 x 160 pixels.
MINATAR_SCALE = 16
# choice: the 84 x 84 grayscale frames (Atari without emulator screens) at twice their size.
ATARI_GRAY_SCALE = 2
# What file names keep; anything else becomes "-" (MinAtar/Breakout-v0 -> MinAtar-Breakout-v0).
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@functools.cache
def _minatar_palette(num_channels: int) -> np.ndarray:
    """[C + 1, 3] uint8: black, then one colour per channel: seaborn's "cubehelix" palette with
    C colours, the colours of MinAtar's own display (MinAtar's environment.py `display_state`)."""
    import seaborn

    colours = np.asarray(seaborn.color_palette("cubehelix", num_channels))
    return np.concatenate([np.zeros((1, 3)), np.round(colours * 255)]).astype(np.uint8)


def render_rgb(env: str, observation: np.ndarray, scale: int = 16) -> np.ndarray:
    """An observation as an RGB uint8 image, for recordings of games: [H, W, C] -> [H * scale,
    W * scale, 3], or a batch [B, H, W, C] -> [B, H * scale, W * scale, 3].

    MinAtar: a black background and one colour per channel; a cell where several channels are
    set shows the last one's colour, as MinAtar's display does (so `scale` pixels per cell, 16 by
    default). Atari: the newest frame of the stack in grey (`scale` 1 keeps 84 x 84).
    CartPole's observations are not images: ValueError."""
    if scale < 1:
        raise ValueError(f"scale must be an integer >= 1, got {scale}")
    observation = np.asarray(observation)
    family = env_family(env)
    if family == "cartpole" or observation.ndim not in (3, 4):
        raise ValueError(
            f"render_rgb draws MinAtar and Atari observations [(B,) H, W, C], got {env!r} "
            f"with shape {observation.shape}"
        )
    if family == "minatar":
        num_channels = observation.shape[-1]
        # 0 where no channel is set, else 1 + the last set channel (MinAtar's display).
        index = np.max(observation.astype(bool) * np.arange(1, num_channels + 1), axis=-1)
        image = _minatar_palette(num_channels)[index]
    else:
        image = np.repeat(observation[..., -1:].astype(np.uint8), 3, axis=-1)
    if scale > 1:
        image = np.repeat(np.repeat(image, scale, axis=-3), scale, axis=-2)
    return image


@dataclasses.dataclass(frozen=True)
class RecordSettings:
    """What `--record_dir` and `--record_games` ask for (picklable)."""

    directory: str
    games: int  # the first `games` games of the evaluation
    agent: str  # the file names' agent: the paper, "<paper>.<ablation>" with an ablation
    fps: float = FPS

    def __post_init__(self):
        if not self.directory:
            raise ValueError("record directory must not be empty")
        if self.games < 1:
            raise ValueError(f"games to record must be >= 1, got {self.games}")
        if not self.fps > 0:
            raise ValueError(f"fps must be > 0, got {self.fps}")


def agent_name(paper: str, ablation: str | None = None) -> str:
    """The agent a file name names: the paper, with its ablation as `common.experiments.compare`
    spells agents (`gdi.gdi_i3`)."""
    return paper if not ablation else f"{paper}.{ablation}"


def format_score(score: float) -> str:
    """A game's score as a file name writes it: 12, -21, 2.5 (at most 3 decimals)."""
    score = float(score)
    if score.is_integer():
        return str(int(score))
    return f"{score:.3f}".rstrip("0").rstrip(".")


def file_name(agent: str, env: str, frames: int, game: int, score: float, games: int = 1) -> str:
    """`<agent>_<env>_frames<frames>_game<game>_score<score>.gif`, only letters, digits, `.`,
    `_` and `-` (others, such as MinAtar's "/", become "-"). `game` counts from 1 in the order
    of the evaluation's returns, zero-padded to the width of `games` (at least 2 digits);
    `frames` is the checkpoint's frame count, as eval.csv writes it."""
    width = max(2, len(str(games)))
    parts = (
        _UNSAFE.sub("-", agent),
        _UNSAFE.sub("-", env),
        f"frames{int(frames)}",
        f"game{int(game):0{width}d}",
        f"score{format_score(score)}",
    )
    return "_".join(parts) + ".gif"


def frame_durations(count: int, fps: float = FPS) -> list[int]:
    """Milliseconds each of `count` frames shows: multiples of 10 (GIF delays are hundredths of a
    second), rounded cumulatively so that frame k starts at round(k / fps) to the nearest 10 ms
    (15 fps: 70, 60, 70, 70, 60, 70, ...) and the whole game lasts count / fps seconds."""
    starts = [round(k * 100.0 / fps) * 10 for k in range(count + 1)]
    return [max(10, b - a) for a, b in itertools.pairwise(starts)]


def write_gif(
    path: str, frames: Sequence[np.ndarray], fps: float = FPS, palette: np.ndarray | None = None
) -> str:
    """Writes `frames` as an animated GIF that loops, atomically (a temporary file in the same
    directory, renamed to `path`); returns `path`. Frames are [H, W, 3] uint8 RGB images, or
    [H, W] uint8 indices into `palette` ([256, 3] uint8), all of one size; frames of at most 256
    colours come back exactly. Pillow merges a frame equal to the previous one into it (one GIF
    frame showing for both durations)."""
    from PIL import Image

    if len(frames) == 0:
        raise ValueError(f"{path}: a GIF needs at least one frame")
    palette_bytes = None if palette is None else np.asarray(palette, np.uint8).tobytes()

    def image(frame: np.ndarray) -> Image.Image:
        frame = np.asarray(frame, np.uint8)
        if palette_bytes is None:
            if frame.ndim != 3 or frame.shape[-1] != 3:
                raise ValueError(f"RGB frames are [H, W, 3], got shape {frame.shape}")
            return Image.fromarray(frame, "RGB")
        if frame.ndim != 2:
            raise ValueError(f"palette frames are [H, W] indices, got shape {frame.shape}")
        picture = Image.fromarray(frame, "P")
        picture.putpalette(palette_bytes)
        return picture

    images = (image(frame) for frame in frames)  # one at a time: Pillow keeps its own copies
    first = next(images)
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(
        prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory
    )
    try:
        # mkstemp's file is private (0600); the GIF gets the mode any new file would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        with os.fdopen(handle, "wb") as output:
            first.save(
                output,
                format="GIF",
                save_all=True,
                append_images=images,
                duration=frame_durations(len(frames), fps),
                loop=0,
            )
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    return path


def check_env(env: str) -> None:
    """ValueError unless `env` is an Atari or MinAtar game (recordings are of images)."""
    if env_names.env_family(env) == "cartpole":
        raise ValueError(
            f"--record_dir needs an Atari or MinAtar env: {env}'s observations are not images"
        )


class _Screens:
    """Atari screens as ALE palette indices, with the palette learnt as indices appear."""

    def __init__(self, interfaces: list):
        self._interfaces = interfaces
        self.palette = np.zeros((256, 3), np.uint8)
        self._known = np.zeros(256, bool)

    def capture(self, i: int) -> np.ndarray:
        ale = self._interfaces[i]
        screen = ale.getScreen()
        if not self._known[screen].all():
            self.palette[screen] = ale.getScreenRGB()
            self._known[screen] = True
        return screen


class _Rendered(Sequence):
    """Stored observations rendered one at a time as `write_gif` asks for them."""

    def __init__(self, stored: list, render: Callable[[Any], np.ndarray]):
        self._stored = stored
        self._render = render

    def __len__(self) -> int:
        return len(self._stored)

    def __getitem__(self, index):
        return self._render(self._stored[index])


class GameRecorder:
    """Records the first `settings.games` games of one `common.runtime.evaluation.evaluate` call.

    `evaluate` calls `begin(quotas, observation)` after its reset and `step(result)` after each
    batched step. Game k (from 1) is the k-th of the evaluation's returns: env i's j-th game is
    number sum(quotas[:i]) + j + 1 while j < quotas[i] (later games of an env are not part of
    the evaluation). Each recorded game's GIF is written when it ends, named with its score;
    `paths` lists them in the order written."""

    def __init__(
        self,
        settings: RecordSettings,
        env_name: str,
        frames: int,
        env: envs_lib.BatchedEnv,
        log: Callable[[str], None] | None = print,
    ) -> None:
        check_env(env_name)
        self.settings = settings
        self.env_name = env_name
        self.frames = int(frames)  # the checkpoint's, for the file names
        self.paths: list[str] = []
        self._log = log
        self._minatar = env_names.env_family(env_name) == "minatar"
        emulators = getattr(env, "emulators", None)  # Atari batches of gymnasium envs
        interfaces = None if self._minatar or emulators is None else emulators()
        self._screens = None if interfaces is None else _Screens(interfaces)
        self._offsets = np.zeros(0, np.int64)
        self._quotas = np.zeros(0, np.int64)
        self._games_played = np.zeros(0, np.int64)
        self._recording: dict[int, list] = {}  # env -> the stored frames of its game

    def _game_number(self, i: int) -> int | None:
        """The evaluation's number (from 1) of env i's current game if it is recorded."""
        j = int(self._games_played[i])
        if j >= self._quotas[i]:
            return None
        number = int(self._offsets[i]) + j + 1
        return number if number <= self.settings.games else None

    def _capture(self, i: int, observation: np.ndarray):
        if self._screens is not None:
            return self._screens.capture(i)
        if self._minatar:
            return observation[i].copy()
        return observation[i][..., -1:].copy()  # the newest grayscale frame of the stack

    def _start(self, i: int, observation: np.ndarray) -> None:
        if self._game_number(i) is not None:
            self._recording[i] = [self._capture(i, observation)]

    def begin(self, quotas: Sequence[int] | np.ndarray, observation: np.ndarray) -> None:
        """The evaluation's first observations, and how many games each env contributes."""
        self._quotas = np.asarray(quotas, np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(self._quotas)[:-1]]).astype(np.int64)
        self._games_played = np.zeros(len(self._quotas), np.int64)
        self._recording = {}
        for i in range(len(self._quotas)):
            self._start(i, observation)

    def step(self, result: envs_lib.StepResult) -> None:
        """One batched step's frames; writes the GIF of each recorded game that ended."""
        ended = set(np.flatnonzero(~np.isnan(result.episode_return)).tolist())
        for i in list(self._recording):
            if i not in ended:
                self._recording[i].append(self._capture(i, result.observation))
        for i in sorted(ended):
            if i in self._recording:
                stored = self._recording.pop(i)
                if self._screens is None:  # the observation the game ended on
                    stored.append(self._capture(i, result.final_observation))
                number = self._game_number(i)
                assert number is not None  # a recorded game has one
                self._write(number, float(result.episode_return[i]), stored)
            self._games_played[i] += 1
            self._start(i, result.observation)

    def _write(self, number: int, score: float, stored: list) -> None:
        settings = self.settings
        name = file_name(settings.agent, self.env_name, self.frames, number, score, settings.games)
        path = os.path.join(settings.directory, name)
        if self._screens is not None:
            write_gif(path, stored, settings.fps, palette=self._screens.palette)
        else:
            scale = MINATAR_SCALE if self._minatar else ATARI_GRAY_SCALE
            frames = _Rendered(stored, lambda o: render_rgb(self.env_name, o, scale))
            write_gif(path, frames, settings.fps)
        self.paths.append(path)
        if self._log is not None:
            self._log(f"[record] game {number} (score {format_score(score)}): {path}")

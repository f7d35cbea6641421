"""The MinAtar grid's reference scores (`benchmarks.minatar`): the published DQN and AC(λ) returns
and the uniformly random policy, which normalise every score, and the random policy's measurement."""

import csv
import dataclasses
import importlib
import importlib.metadata
import math
import os
from collections.abc import Mapping, Sequence

import numpy as np


from benchmarks.minatar_runs import (
    AC_LAMBDA,
    DQN,
    GAMES,
    NUM_ACTIONS,
    RANDOM,
    RANDOM_MIN_FRAMES,
    RANDOM_MIN_GAMES,
    RANDOM_SEED,
    REFERENCES_CSV,
    REFERENCE_COLUMNS,
    STICKY_ACTION_PROB,
    TOOL,
)


# ---------------------------------------------------------------------------------------------
# References.


def read_references(path: str = REFERENCES_CSV) -> dict[str, dict[str, float]]:
    """{game: {agent: return}} of the reference file; ValueError naming the file on a bad one."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != REFERENCE_COLUMNS:
            raise ValueError(
                f"{path}: header {reader.fieldnames}, expected {','.join(REFERENCE_COLUMNS)}"
            )
        rows = list(reader)
    references: dict[str, dict[str, float]] = {}
    for line, row in enumerate(rows, start=2):
        if row["game"] not in GAMES:
            raise ValueError(
                f"{path}:{line}: game {row['game']!r} is not one of {', '.join(GAMES)}"
            )
        if row["agent"] in references.get(row["game"], {}):
            raise ValueError(f"{path}:{line}: a second {row['agent']} row for {row['game']}")
        try:
            value = float(row["return"])
        except (TypeError, ValueError):
            raise ValueError(f"{path}:{line}: return {row['return']!r} is not a number") from None
        references.setdefault(row["game"], {})[row["agent"]] = value
    return references


def normaliser(references: Mapping[str, Mapping[str, float]], game: str) -> tuple[float, float]:
    """(random, reference) of a game: the random policy's return and the better of the published
    DQN and AC(lambda=0.8) returns; ValueError naming what is missing."""
    known = references.get(game, {})
    missing = [name for name in (DQN, AC_LAMBDA, RANDOM) if name not in known]
    if missing:
        hint = " (python -m benchmarks.minatar --measure_random)" if RANDOM in missing else ""
        raise ValueError(f"the references lack {', '.join(missing)} for {game}{hint}")
    return known[RANDOM], max(known[DQN], known[AC_LAMBDA])


def normalise(score, random: float, reference: float):
    return (np.asarray(score, dtype=float) - random) / (reference - random)


# ---------------------------------------------------------------------------------------------
# The random policy.


@dataclasses.dataclass(frozen=True)
class RandomPolicyResult:
    game: str
    mean: float
    standard_error: float
    games: int
    frames: int


def measure_random_policy(
    game: str,
    min_games: int = RANDOM_MIN_GAMES,
    min_frames: int = RANDOM_MIN_FRAMES,
    seed: int = RANDOM_SEED,
) -> RandomPolicyResult:
    """A uniformly random policy over MinAtar's 6 actions on `game` (`minatar.Environment`,
    sticky actions 0.1, difficulty ramping; `seed` seeds the game and the actions), whole games
    until `min_games` games or `min_frames` frames, whichever comes first."""
    from minatar import Environment  # the MinAtar package (this module is benchmarks.minatar)

    env = Environment(game, sticky_action_prob=STICKY_ACTION_PROB, difficulty_ramping=True)
    env.seed(seed)
    env.reset()
    actions = np.random.default_rng(seed)
    returns: list[float] = []
    frames = 0
    game_return = 0.0
    # choice: the stopping rule is checked at the end of each game only, so no game is cut and
    # `frames` counts the frames of the games counted.
    while True:
        reward, terminal = env.act(int(actions.integers(NUM_ACTIONS)))
        frames += 1
        game_return += float(reward)
        if terminal:
            returns.append(game_return)
            game_return = 0.0
            if len(returns) >= min_games or frames >= min_frames:
                break
            env.reset()
    values = np.asarray(returns)
    standard_error = (
        float(values.std(ddof=1) / math.sqrt(values.size)) if values.size > 1 else math.nan
    )
    return RandomPolicyResult(game, float(values.mean()), standard_error, values.size, frames)


def write_random_rows(results: Sequence[RandomPolicyResult], path: str = REFERENCES_CSV) -> None:
    """Replaces the random rows of the measured games in the reference file (the others stay)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    measured = {r.game: r for r in results}
    version = importlib.metadata.version("minatar")
    new_rows = []
    for game in GAMES:
        new_rows += [row for row in rows if row["game"] == game and row["agent"] != RANDOM]
        old = [row for row in rows if row["game"] == game and row["agent"] == RANDOM]
        if game not in measured:
            new_rows += old
            continue
        result = measured[game]
        new_rows.append(
            dict(
                game=game,
                agent=RANDOM,
                **{"return": f"{result.mean:.4f}"},
                frames=str(result.frames),
                seeds="1",
                source=f"measured: python -m {TOOL} --measure_random --games={game}",
                note=(
                    f"uniform random over {NUM_ACTIONS} actions; sticky actions "
                    f"{STICKY_ACTION_PROB}; difficulty ramping; seed {RANDOM_SEED} (game and "
                    f"actions); minatar {version}; {result.games} games, {result.frames} frames; "
                    f"standard error {result.standard_error:.4f}"
                ),
            )
        )
    new_rows += [row for row in rows if row["game"] not in GAMES]
    temporary = f"{path}.tmp"
    with open(temporary, "w", newline="") as f:
        writer = csv.DictWriter(f, REFERENCE_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(new_rows)
    os.replace(temporary, path)

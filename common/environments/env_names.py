"""Environment names as people write them, and their families: CartPole, MinAtar's five games
(gym ids `MinAtar/<Game>-v<N>` and the other spellings in use) and every Atari game ale-py has a
ROM for. `canonical_env` gives the one name a config holds; `env_family` says which of the three
families a name belongs to, which decides frames per step, the protocol and the scores.

Several games written comma-separated ("MinAtar/Breakout-v0,MinAtar/Asterix-v0") name the
environments of IMPALA's multi-task agent (`common.environments.multitask`): `games` splits
them, and the functions below take such a list where it has one answer (its canonical names,
its family: the games must share one).
"""

from __future__ import annotations

import re

import ale_py.roms
from ale_py.registration import rom_id_to_name

CARTPOLE = "CartPole"  # CartPole-v1, for fast checks of the agent stack
MINATAR = "MinAtar"  # the prefix of MinAtar's gym ids, MinAtar/<Game>-v<N> (MinAtar's gym.py)
# The families `env_family` names.
FAMILIES = ("cartpole", "minatar", "atari")
# MinAtar's games: its `minatar.environments` modules, with the gym ids' capitalisation
# (MinAtar's gym.py registers `game.title().replace("_", "")`).
MINATAR_GAMES = {
    "asterix": "Asterix",
    "breakout": "Breakout",
    "freeway": "Freeway",
    "seaquest": "Seaquest",
    "space_invaders": "SpaceInvaders",
}
# v0: all 6 actions (`Environment.num_actions()`, the action space of the published learning
# curves, MinAtar README); v1: the game's minimal action set (`Environment.minimal_action_set()`),
# as MinAtar's gym.py registers them. A name without a version is v0.
MINATAR_VERSIONS = (0, 1)


ROM_IDS = ale_py.roms.get_all_rom_ids()
_ROM_BY_KEY = {rom.replace("_", ""): rom for rom in ROM_IDS}


def atari_game(env: str) -> str | None:
    """The ale-py ROM id for "Pong", "pong", "MsPacman", "ms_pacman", "ALE/MsPacman-v5" or the
    older gym ids "Pong-v4", "PongNoFrameskip-v4", "PongDeterministic-v4" (the id names the game
    only: the protocol decides frame skip and sticky actions)."""
    name = re.sub(r"-v\d+$", "", env.removeprefix("ALE/"))
    name = re.sub(r"(NoFrameskip|Deterministic)$", "", name, flags=re.IGNORECASE)
    return _ROM_BY_KEY.get(name.replace("_", "").lower())


# MinAtar names as people write them, case-insensitive: the gym ids "MinAtar/Breakout-v0"
# (MinAtar's gym.py), "minatar:breakout", "minatar-space_invaders", and gymnax's
# "Breakout-MinAtar"; each with an optional "-v0" / "-v1".
_MINATAR_FORMS = (
    re.compile(r"minatar\s*[/:_-]\s*(?P<game>[a-z_ -]+?)(?:-v(?P<version>\d+))?", re.IGNORECASE),
    re.compile(r"(?P<game>[a-z_ -]+?)[_-]minatar(?:-v(?P<version>\d+))?", re.IGNORECASE),
)
_MINATAR_BY_KEY = {game.replace("_", ""): game for game in MINATAR_GAMES}


def minatar_game(env: str) -> tuple[str, int] | None:
    """(MinAtar's module name, version) for a name that mentions MinAtar: "MinAtar/Breakout-v1"
    -> ("breakout", 1); "breakout-minatar", "Breakout-MinAtar", "minatar:breakout",
    "MinAtar/space_invaders" -> (game, 0), the version of all 6 actions. None for a name without
    "minatar"; ValueError, one line listing the games, for one with an unknown game or version."""
    if "minatar" not in env.lower():
        return None
    for form in _MINATAR_FORMS:
        match = form.fullmatch(env.strip())
        if match:
            game = _MINATAR_BY_KEY.get(re.sub(r"[_ -]", "", match["game"]).lower())
            version = int(match["version"] or 0)
            if game is not None and version in MINATAR_VERSIONS:
                return game, version
    raise ValueError(
        f"{env!r} is not a MinAtar env: the games are {', '.join(MINATAR_GAMES)}, written "
        "MinAtar/Breakout-v0 (all 6 actions), MinAtar/Breakout-v1 (the game's minimal action "
        "set), breakout-minatar or minatar:space_invaders"
    )


def games(env: str) -> tuple[str, ...]:
    """The games `env` names: one, or several written comma-separated."""
    return tuple(part.strip() for part in env.split(","))


def canonical_env(env: str) -> str | None:
    """`canonical_game` of each game of `env` (`games`), comma-separated; None if one is
    unknown; ValueError for a game named twice or a list that mixes families."""
    found = [canonical_game(game) for game in games(env)]
    names = [name for name in found if name is not None]
    if len(names) < len(found):
        return None
    if len(names) > 1:
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"{env!r} names {', '.join(twice)} twice: list each game once")
        families = {name: _family(name) for name in names}
        if len(set(families.values())) > 1:
            raise ValueError(
                f"{env!r} mixes families ({', '.join(f'{n}: {f}' for n, f in families.items())})"
                ": a multi-task agent's games are all MinAtar or all Atari"
            )
    return ",".join(names)


def canonical_game(env: str) -> str | None:
    """The one name a config holds for an env as users write it: CARTPOLE for "CartPole",
    "CartPole-v1" or "cartpole"; "MinAtar/<Game>-v<N>" (the gym id, e.g. "MinAtar/SpaceInvaders-v0")
    for any spelling `minatar_game` accepts; an Atari game's ale-py name ("Pong", "MsPacman") for
    any spelling `atari_game` accepts; None for anything else (ValueError for a name that
    mentions MinAtar but no MinAtar game). `make_env` accepts every result."""
    if re.fullmatch(r"cartpole(-v1)?", env, flags=re.IGNORECASE):
        return CARTPOLE
    minatar = minatar_game(env)
    if minatar is not None:
        game, version = minatar
        return f"{MINATAR}/{MINATAR_GAMES[game]}-v{version}"
    rom = atari_game(env)
    return None if rom is None else rom_id_to_name(rom)


def env_family(env: str) -> str:
    """The family of `env` (any spelling `canonical_env` accepts), one of FAMILIES: "cartpole",
    "minatar" or "atari". What differs by family: frames per agent step (1 on CartPole and
    MinAtar, the action repeat on Atari), the Atari protocol and backend (Atari only), and the
    human-normalised score (Atari only). ValueError for an unknown env."""
    name = canonical_env(env)
    if name is None:
        raise ValueError(f"unknown env {env!r}: use {CARTPOLE!r}, a MinAtar game or an Atari game")
    return _family(games(name)[0])


def _family(name: str) -> str:
    if name == CARTPOLE:
        return "cartpole"
    return "minatar" if name.startswith(f"{MINATAR}/") else "atari"


def is_minatar(env: str) -> bool:
    """Whether `env` is one of MinAtar's games, or a list of them (any spelling; False for an
    unknown env)."""
    try:
        return all(minatar_game(game) is not None for game in games(env))
    except ValueError:
        return False


def hns_game(env: str) -> str | None:
    """The Atari game whose human-normalised score `env` reports, None on CartPole and MinAtar
    (MinAtar's games have no human reference scores; Atari Breakout's would be wrong for them)
    and on a list of games (each game has its own)."""
    if len(games(env)) > 1:
        return None
    return canonical_env(env) if env_family(env) == "atari" else None

"""Score normalisation for Atari-57 and DMLab-30: HNS, capped HNS, HWRNS, SABER, HWRB (numpy only).

Definitions (all in percent, G = agent score; GDI Table 4, DiCE §4.2's footnote 2, IMPALA §5.3.1
and App. B):

| metric       | formula                                          | source                                  |
|--------------|--------------------------------------------------|-----------------------------------------|
| HNS          | 100 (G - random) / (human - random)              | all five papers                         |
| capped HNS   | min(100, HNS), capped above only, no floor       | IMPALA App. B (DMLab-30, PBT fitness)   |
| HWRNS        | 100 (G - random) / (world record - random)       | GDI Table 4                             |
| SABER        | min(200, HWRNS)                                  | Toromanoff et al. 2019; DiCE fn. 2, GDI |
| HWRB         | number of games with G >= world record           | GDI Table 4, LBC Tables 8-11            |

The papers do not all normalise with the same reference scores, so every reference table is a named
`Normaliser`, and every aggregate says which one it used:

* `agent57` (default): the Atari-57 table that DiCE App. D, GDI Tables 8 and 12 and LBC Tables 4 and
  8 print, with the two human scores DiCE and GDI actually used (Crazy Climber 35829.4, Time Pilot
  5229.1; docs/papers/dice.md#errata, docs/papers/gdi.md#errata). Reproduces DiCE, GDI, the IMPALA /
  Rainbow / Agent57 / MuZero / Go-Explore rows GDI recomputes, and IMPALA's own Atari medians.
* `agent57_lbc`: the same table exactly as printed (Crazy Climber 36829.4, Time Pilot 5229.2), which
  LBC's aggregates use (LBC Test 14 in docs/papers/lbc.md#worked-test-numbers).
* `reactor_noop`: Reactor Table 5 random / human, an older table that differs in 8 games; no
  records. Reproduces Reactor Table 2's medians.
* `dmlab30`: IMPALA Table B.1 DMLab-30 random / human; no records. Reproduces Table B.1 to 0.1 pp.

Game names may be written as in the papers ("chopper command", "Ms. Pac-Man", "Q*bert"), as ale-py
ids ("ChopperCommand", "chopper_command", "ALE/ChopperCommand-v5") or, for DMLab-30, as level names
with or without the "contributed/dmlab30/" prefix.
"""

import dataclasses
import functools
import re
from collections.abc import Mapping
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

# GDI Table 4, DiCE §4.2's footnote 2: SABER caps the world-record-normalised score at 200%.
SABER_CAP = 200.0
# IMPALA §5.3.1 and App. B: the mean capped HNS caps each game at 100% (above only).
HNS_CAP = 100.0

# game: (random, average human, human world record), as printed in DiCE App. D, GDI Table 8 (random,
# human) and Table 12 (record) and LBC Tables 4 and 8; the three papers print identical numbers.
# Names are the ale-py ROM ids. Random and human come from Agent57, records from Toromanoff et al.
# 2019.
_ATARI57_AS_PRINTED = {
    "alien": (227.8, 7127.8, 251916),
    "amidar": (5.8, 1719.5, 104159),
    "assault": (222.4, 742, 8647),
    "asterix": (210, 8503.3, 1000000),
    "asteroids": (719, 47388.7, 10506650),
    "atlantis": (12850, 29028.1, 10604840),
    "bank_heist": (14.2, 753.1, 82058),
    "battle_zone": (236, 37187.5, 801000),
    "beam_rider": (363.9, 16926.5, 999999),
    "berzerk": (123.7, 2630.4, 1057940),
    "bowling": (23.1, 160.7, 300),
    "boxing": (0.1, 12.1, 100),
    "breakout": (1.7, 30.5, 864),
    "centipede": (2090.9, 12017, 1301709),
    "chopper_command": (811, 7387.8, 999999),
    "crazy_climber": (10780.5, 36829.4, 219900),
    "defender": (2874.5, 18688.9, 6010500),
    "demon_attack": (152.1, 1971, 1556345),
    "double_dunk": (-18.6, -16.4, 21),
    "enduro": (0, 860.5, 9500),
    "fishing_derby": (-91.7, -38.8, 71),
    "freeway": (0, 29.6, 38),
    "frostbite": (65.2, 4334.7, 454830),
    "gopher": (257.6, 2412.5, 355040),
    "gravitar": (173, 3351.4, 162850),
    "hero": (1027, 30826.4, 1000000),
    "ice_hockey": (-11.2, 0.9, 36),
    "jamesbond": (29, 302.8, 45550),
    "kangaroo": (52, 3035, 1424600),
    "krull": (1598, 2665.5, 104100),
    "kung_fu_master": (258.5, 22736.3, 1000000),
    "montezuma_revenge": (0, 4753.3, 1219200),
    "ms_pacman": (307.3, 6951.6, 290090),
    "name_this_game": (2292.3, 8049, 25220),
    "phoenix": (761.5, 7242.6, 4014440),
    "pitfall": (-229.4, 6463.7, 114000),
    "pong": (-20.7, 14.6, 21),
    "private_eye": (24.9, 69571.3, 101800),
    "qbert": (163.9, 13455.0, 2400000),
    "riverraid": (1338.5, 17118.0, 1000000),
    "road_runner": (11.5, 7845, 2038100),
    "robotank": (2.2, 11.9, 76),
    "seaquest": (68.4, 42054.7, 999999),
    "skiing": (-17098, -4336.9, -3272),
    "solaris": (1236.3, 12326.7, 111420),
    "space_invaders": (148, 1668.7, 621535),
    "star_gunner": (664, 10250, 77400),
    "surround": (-10, 6.5, 9.6),
    "tennis": (-23.8, -8.3, 21),
    "time_pilot": (3568, 5229.2, 65300),
    "tutankham": (11.4, 167.6, 5384),
    "up_n_down": (533.4, 11693.2, 82840),
    "venture": (0, 1187.5, 38900),
    "video_pinball": (0, 17667.9, 89218328),
    "wizard_of_wor": (563.5, 4756.5, 395300),
    "yars_revenge": (3092.9, 54576.9, 15000105),
    "zaxxon": (32.5, 9173.3, 83700),
}

# The human scores DiCE and GDI used, which differ from their printed tables: only these reproduce
# their per-game HNS columns and their mean HNS (docs/papers/dice.md#errata,
# docs/papers/gdi.md#errata).
_DICE_GDI_HUMAN = {"crazy_climber": 35829.4, "time_pilot": 5229.1}

# Reactor Table 5 (30 random no-op starts) prints the older DQN-era random / human scores; they
# differ from the Agent57 table in these games only (its Crazy Climber human is 35829.4 and its Time
# Pilot human 5229.2, as in the printed Agent57 table).
_REACTOR_RANDOM_HUMAN = {
    "alien": (227.8, 7127.7),
    "asteroids": (719.1, 47388.7),
    "battle_zone": (2360.0, 37187.5),
    "crazy_climber": (10780.5, 35829.4),
    "fishing_derby": (-91.7, -38.7),
    "phoenix": (761.4, 7242.6),
    "skiing": (-17098.1, -4336.9),
    "video_pinball": (16256.9, 17667.9),
}

# level: (random, human), IMPALA Table B.1, with the official DMLab-30 level names
# (the paper prints "lasertag_three_oponents_large" and "pyschlab_*"; both spellings are accepted).
_DMLAB30_RANDOM_HUMAN = {
    "rooms_collect_good_objects_test": (0.1, 10.0),
    "rooms_exploit_deferred_effects_test": (8.5, 85.7),
    "rooms_select_nonmatching_object": (0.3, 65.9),
    "rooms_watermaze": (4.1, 54.0),
    "rooms_keys_doors_puzzle": (4.1, 53.8),
    "language_select_described_object": (-0.1, 389.5),
    "language_select_located_object": (1.9, 280.7),
    "language_execute_random_task": (-5.9, 254.1),
    "language_answer_quantitative_question": (-0.3, 184.5),
    "lasertag_one_opponent_large": (-0.2, 12.7),
    "lasertag_three_opponents_large": (-0.2, 18.6),
    "lasertag_one_opponent_small": (-0.1, 18.6),
    "lasertag_three_opponents_small": (-0.1, 31.5),
    "natlab_fixed_large_map": (2.2, 36.9),
    "natlab_varying_map_regrowth": (3.0, 24.4),
    "natlab_varying_map_randomized": (7.3, 42.4),
    "skymaze_irreversible_path_hard": (0.1, 100.0),
    "skymaze_irreversible_path_varied": (14.4, 100.0),
    "psychlab_arbitrary_visuomotor_mapping": (0.2, 58.8),
    "psychlab_continuous_recognition": (0.2, 58.3),
    "psychlab_sequential_comparison": (0.1, 39.5),
    "psychlab_visual_search": (0.1, 78.5),
    "explore_object_locations_small": (3.6, 74.5),
    "explore_object_locations_large": (4.7, 65.7),
    "explore_obstructed_goals_small": (6.8, 206.0),
    "explore_obstructed_goals_large": (2.6, 119.5),
    "explore_goal_locations_small": (7.7, 267.5),
    "explore_goal_locations_large": (3.1, 194.5),
    "explore_object_rewards_few": (2.1, 77.7),
    "explore_object_rewards_many": (2.4, 106.7),
}

# Spellings in the papers that do not reduce to a table name by dropping case and punctuation.
_KEY_ALIASES = {
    "jamesbond007": "jamesbond",  # Reactor Table 5 "James Bond 007"
    "montezumasrevenge": "montezumarevenge",  # Reactor Table 5 "Montezuma's Revenge"
    "lasertagthreeoponentslarge": "lasertagthreeopponentslarge",  # IMPALA Table B.1 typo
}


def _key(game: str) -> str:
    """Case- and punctuation-free key: 'ALE/ChopperCommand-v5', 'chopper command' -> 'choppercommand'."""
    name = game.rsplit("/", 1)[-1]  # "ALE/Pong-v5", "contributed/dmlab30/rooms_watermaze"
    name = re.sub(r"-v\d+$", "", name)  # gymnasium version suffix
    name = re.sub(r"(NoFrameskip|Deterministic)$", "", name)  # gym's "PongNoFrameskip-v4"
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    key = key.replace("pyschlab", "psychlab")  # IMPALA Table B.1 typo
    return _KEY_ALIASES.get(key, key)


@dataclasses.dataclass(frozen=True)
class Normaliser:
    """One named table of reference scores: random, human and (optionally) human world record."""

    name: str
    source: str
    random: Mapping[str, float]
    human: Mapping[str, float]
    world_record: Mapping[str, float] | None = None

    @property
    def games(self) -> tuple[str, ...]:
        return tuple(self.random)

    @functools.cached_property
    def _names_by_key(self) -> dict[str, str]:
        return {_key(name): name for name in self.random}

    def game(self, game: str) -> str:
        """The table's name for `game`, in any accepted spelling; ValueError naming it if unknown."""
        found = self._names_by_key.get(_key(game)) if isinstance(game, str) else None
        if found is None:
            raise ValueError(
                f"unknown game {game!r} for normaliser {self.name!r}; valid games are "
                f"{', '.join(self.games)} (case, spaces and punctuation are ignored, and a prefix like "
                f"'ALE/' or a suffix like '-v5' is dropped: 'chopper command', 'ChopperCommand' and "
                f"'ALE/ChopperCommand-v5' all name chopper_command)"
            )
        return found

    def record(self, game: str) -> float:
        if self.world_record is None:
            raise ValueError(
                f"normaliser {self.name!r} has no human world records, so HWRNS, SABER and HWRB are "
                f"undefined; normalisers with records: {', '.join(_with_records())}"
            )
        return self.world_record[self.game(game)]


def _atari57(name: str, source: str, human_overrides: Mapping[str, float]) -> Normaliser:
    table = {
        game: (r, human_overrides.get(game, h), wr)
        for game, (r, h, wr) in _ATARI57_AS_PRINTED.items()
    }
    return Normaliser(
        name=name,
        source=source,
        random=MappingProxyType({g: float(r) for g, (r, _, _) in table.items()}),
        human=MappingProxyType({g: float(h) for g, (_, h, _) in table.items()}),
        world_record=MappingProxyType({g: float(wr) for g, (_, _, wr) in table.items()}),
    )


def _random_human(name: str, source: str, table: Mapping[str, tuple[float, float]]) -> Normaliser:
    return Normaliser(
        name=name,
        source=source,
        random=MappingProxyType({g: float(r) for g, (r, _) in table.items()}),
        human=MappingProxyType({g: float(h) for g, (_, h) in table.items()}),
    )


NORMALISERS: Mapping[str, Normaliser] = MappingProxyType(
    {
        n.name: n
        for n in (
            _atari57(
                "agent57",
                "Agent57 random/human as used by DiCE App. D and GDI Table 8 (Crazy Climber human 35829.4, "
                "Time Pilot human 5229.1), world records of Toromanoff et al. 2019 (GDI Table 12)",
                _DICE_GDI_HUMAN,
            ),
            _atari57(
                "agent57_lbc",
                "Agent57 random/human exactly as printed and used by LBC Tables 4-7 (Crazy Climber human "
                "36829.4, Time Pilot human 5229.2), world records of Toromanoff et al. 2019 (LBC Table 8)",
                {},
            ),
            _random_human(
                "reactor_noop",
                "Reactor Table 5 random/human (30 random no-op starts); no world records",
                {
                    g: _REACTOR_RANDOM_HUMAN.get(g, (r, h))
                    for g, (r, h, _) in _ATARI57_AS_PRINTED.items()
                },
            ),
            _random_human(
                "dmlab30",
                "IMPALA Table B.1 DMLab-30 random/human; no world records",
                _DMLAB30_RANDOM_HUMAN,
            ),
        )
    }
)
# choice: DiCE's and GDI's table is the default. It reproduces DiCE, GDI and the IMPALA / Rainbow /
# Agent57 / MuZero aggregates these papers recompute, and IMPALA's own Atari medians (Table 4).
DEFAULT_NORMALISER = "agent57"


def _with_records() -> list[str]:
    return [name for name, n in NORMALISERS.items() if n.world_record is not None]


def get_normaliser(normaliser: str | Normaliser = DEFAULT_NORMALISER) -> Normaliser:
    """The `Normaliser` called `normaliser` (a `Normaliser` passes through); ValueError if unknown."""
    if isinstance(normaliser, Normaliser):
        return normaliser
    if normaliser not in NORMALISERS:
        raise ValueError(
            f"unknown normaliser {normaliser!r}; valid normalisers are {', '.join(NORMALISERS)}"
        )
    return NORMALISERS[normaliser]


def _percent_of_range(
    score: npt.ArrayLike, low: float | np.ndarray, high: float | np.ndarray
) -> float | np.ndarray:
    """100 (score - low) / (high - low): a float for a scalar score, an array for an array of scores."""
    value = 100.0 * (np.asarray(score, dtype=np.float64) - low) / (high - low)
    return float(value) if value.ndim == 0 else value


def human_normalized_score(
    game: str, score: npt.ArrayLike, normaliser: str | Normaliser = DEFAULT_NORMALISER
) -> float | np.ndarray:
    """HNS in percent, 100 (G - random) / (human - random) (GDI Table 4; IMPALA App. B).

    `score` may be a number or an array of scores (e.g. a learning curve).
    """
    table = get_normaliser(normaliser)
    name = table.game(game)
    return _percent_of_range(score, table.random[name], table.human[name])


def capped_human_normalized_score(
    game: str, score: npt.ArrayLike, normaliser: str | Normaliser = DEFAULT_NORMALISER
) -> float | np.ndarray:
    """min(100, HNS) in percent: capped above only, no floor (IMPALA App. B)."""
    return np.minimum(HNS_CAP, human_normalized_score(game, score, normaliser))


def world_record_normalized_score(
    game: str, score: npt.ArrayLike, normaliser: str | Normaliser = DEFAULT_NORMALISER
) -> float | np.ndarray:
    """HWRNS in percent, 100 (G - random) / (world record - random) (GDI Table 4)."""
    table = get_normaliser(normaliser)
    record = table.record(game)
    return _percent_of_range(score, table.random[table.game(game)], record)


def saber(
    game: str, score: npt.ArrayLike, normaliser: str | Normaliser = DEFAULT_NORMALISER
) -> float | np.ndarray:
    """SABER in percent, min(200, HWRNS) (Toromanoff et al. 2019; DiCE footnote 2; GDI Table 4)."""
    return np.minimum(SABER_CAP, world_record_normalized_score(game, score, normaliser))


def breaks_world_record(
    game: str, score: float, normaliser: str | Normaliser = DEFAULT_NORMALISER
) -> bool:
    """G >= human world record: one HWRB (GDI Table 4; LBC counts ties, e.g. Breakout 864: LBC
    Test 14 in docs/papers/lbc.md#worked-test-numbers)."""
    return bool(score >= get_normaliser(normaliser).record(game))


@dataclasses.dataclass(frozen=True)
class Summary:
    """Aggregates over the games of one agent, in percent, all computed with `normaliser`.

    Mean and median are over the games given (57 for the papers' Atari-57 numbers). The world-record
    fields are None when the normaliser has no records (reactor_noop, dmlab30).
    """

    normaliser: str
    num_games: int
    hns_mean: float
    hns_median: float
    capped_hns_mean: float
    hwrns_mean: float | None
    hwrns_median: float | None
    saber_mean: float | None
    saber_median: float | None
    hwrb: int | None

    def format(self) -> str:
        """One line that names the normaliser, e.g. for a report."""
        parts = [
            f"mean HNS {self.hns_mean:.2f}%",
            f"median HNS {self.hns_median:.2f}%",
            f"mean capped HNS {self.capped_hns_mean:.2f}%",
        ]
        if self.hwrb is not None:
            parts += [
                f"mean SABER {self.saber_mean:.2f}%",
                f"median SABER {self.saber_median:.2f}%",
                f"HWRB {self.hwrb}",
            ]
        return f"{', '.join(parts)} over {self.num_games} games (normaliser: {self.normaliser})"


def summarize(
    scores: Mapping[str, float], normaliser: str | Normaliser = DEFAULT_NORMALISER
) -> Summary:
    """Mean / median HNS, mean capped HNS, mean / median HWRNS and SABER, and HWRB over the games given.

    `scores` maps a game (any accepted spelling) to the agent's score on it. ValueError for an empty
    mapping, an unknown game, or one game given twice under different spellings.
    """
    table = get_normaliser(normaliser)
    if not scores:
        raise ValueError("summarize needs scores for at least one game, got an empty mapping")
    names = [table.game(game) for game in scores]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(
            f"games given more than once (under different spellings): {', '.join(repeated)}"
        )
    values = np.array([float(s) for s in scores.values()])
    random = np.array([table.random[n] for n in names])
    hns = _percent_of_range(values, random, np.array([table.human[n] for n in names]))
    summary = Summary(
        normaliser=table.name,
        num_games=len(names),
        hns_mean=float(np.mean(hns)),
        hns_median=float(np.median(hns)),
        capped_hns_mean=float(np.mean(np.minimum(HNS_CAP, hns))),
        hwrns_mean=None,
        hwrns_median=None,
        saber_mean=None,
        saber_median=None,
        hwrb=None,
    )
    if table.world_record is not None:
        records = np.array([table.world_record[n] for n in names])
        hwrns = _percent_of_range(values, random, records)
        summary = dataclasses.replace(
            summary,
            hwrns_mean=float(np.mean(hwrns)),
            hwrns_median=float(np.median(hwrns)),
            saber_mean=float(np.mean(np.minimum(SABER_CAP, hwrns))),
            saber_median=float(np.median(np.minimum(SABER_CAP, hwrns))),
            hwrb=int(np.sum(values >= records)),
        )
    return summary

"""IMPALA's population based training rules (App. F, Table G.1), as pure functions.

- Fitness: the mean capped normalised score (1/N) sum_g min[1, (s_g - r_g) / (h_g - r_g)] over the
  N games, s_g the member's mean return on game g, r_g and h_g the game's random and reference
  scores (human on DMLab-30 and Atari; MinAtar's best published agent here). Capped above only,
  no floor (Table B.1's 49.4% and 44.5% come out of this formula, not of one with a floor).
- Exploit: at a ready point a member picks another member uniformly at random and copies its
  weights and hyperparameters if that member's fitness is more than an absolute 0.05 higher.
- Explore: whether or not it copied, each adapted hyperparameter is multiplied, with probability
  0.33 and independently of the others, by 1.2 or 1/1.2 (equally likely: the paper's unbiased
  form, where the original PBT used 1.2 or 0.8).
"""

import math
import random
from collections.abc import Mapping, Sequence

COPY_MARGIN = 0.05  # App. F: "more than an absolute 5% higher"
PERTURB_PROBABILITY = 0.33  # App. F: "permuted with 33% probability"
PERTURB_FACTOR = 1.2  # App. F: "multiplying with either 1.2 or 1/1.2"


def mean_capped_score(returns: Mapping[str, float], references: Mapping[str, tuple]) -> float:
    """The fitness of mean returns per game, `references[game] = (random, reference)`; nan if a
    game has no return."""
    scores = []
    for game, (low, high) in references.items():
        score = (returns.get(game, math.nan) - low) / (high - low)
        scores.append(score if math.isnan(score) else min(1.0, score))  # min(1, nan) is 1
    return sum(scores) / len(scores)


def copies(own: float, other: float, margin: float = COPY_MARGIN) -> bool:
    """Whether a member of fitness `own` copies one of fitness `other` (strictly more than
    `margin` higher; a nan fitness on either side copies nothing)."""
    return other > own + margin


def pick_other(member: str, candidates: Sequence[str], rng: random.Random) -> str | None:
    """Another member, uniformly at random (None when there is none)."""
    others = sorted(c for c in candidates if c != member)
    return rng.choice(others) if others else None


def perturb(
    values: Mapping[str, float],
    names: Sequence[str],
    rng: random.Random,
    probability: float = PERTURB_PROBABILITY,
    factor: float = PERTURB_FACTOR,
) -> dict[str, float]:
    """`values` with each of `names`, independently with `probability`, multiplied by `factor`
    or 1/`factor`, equally likely; the other entries as they are."""
    new = dict(values)
    for name in names:
        if rng.random() < probability:
            new[name] = values[name] * (factor if rng.random() < 0.5 else 1.0 / factor)
    return new
